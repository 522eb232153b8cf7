"""A recurrent hybrid model (qwen35: Gated DeltaNet layers) is refused by `strata serve` with an
error that names the reason, while `strata logits` runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from strata_server import STRATA_BIN

SYNTH = ["--arch", "qwen35", "--layers", "4", "--hidden", "64", "--heads", "2", "--kv-heads", "1", "--head-dim", "32",
         "--ffn", "128", "--vocab", "builtin", "--ctx", "512", "--quiet"]


def synth_qwen35(tmp_path: Path) -> Path:
    out = tmp_path / "qwen35.gguf"
    subprocess.run([STRATA_BIN, "synth", *SYNTH, "--out", str(out)], check=True, timeout=120)
    return out


def test_serve_refuses_a_recurrent_hybrid_and_says_why(tmp_path: Path):
    model = synth_qwen35(tmp_path)
    res = subprocess.run([STRATA_BIN, "serve", "--port", "0", "--cache-dir", str(tmp_path / "cache"), "--model", str(model)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    assert "recurrent (Gated DeltaNet) layers" in res.stderr + res.stdout
    assert "strata serve does not run yet" in res.stderr + res.stdout


def test_logits_runs_a_recurrent_hybrid(tmp_path: Path):
    model = synth_qwen35(tmp_path)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello there, how are you?\n", encoding="utf-8")
    out = tmp_path / "out.json"
    subprocess.run([STRATA_BIN, "logits", "--model", str(model), "--prompts", str(prompts), "--top", "5", "--greedy", "4",
                    "--threads", "2", "--out", str(out)], check=True, timeout=120)
    dump = json.loads(out.read_text(encoding="utf-8"))
    case = dump["cases"][0]
    assert len(case["positions"]) == len(case["tokens"]) > 5
    assert len(case["greedy"]) == 4
