"""bench/hybrid_agent.py end to end at a small size: strata with snapshots on and off, the second turn
after a restart on the same SSD cache, and a llama.cpp column from a stand-in `llama-server` that,
like the real one, names no port in its log and is ready once /health answers 200."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from strata_server import STRATA_BIN

BENCH = Path(__file__).resolve().parents[2] / "bench" / "hybrid_agent.py"

# A server with llama.cpp's /health and streamed /completion; it prints nothing.
FAKE_LLAMA_SERVER = """#!{python}
import argparse, http.server, json
p = argparse.ArgumentParser()
for flag in ["-m", "--port", "--host", "-c", "-t", "-np"]:
    p.add_argument(flag)
a = p.parse_args()

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b'{{"status":"ok"}}')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/completion" and body["stream"] and body["cache_prompt"], body
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for _ in range(body["n_predict"]):
            self.wfile.write(b'data: {{"content":"x"}}\\n\\n')

http.server.ThreadingHTTPServer((a.host, int(a.port)), Handler).serve_forever()
"""


def test_the_hybrid_agent_bench_prints_strata_on_off_llamacpp_and_the_second_turn_after_a_restart(tmp_path):
    model = tmp_path / "qwen35.gguf"
    subprocess.run([STRATA_BIN, "synth", "--arch", "qwen35", "--layers", "4", "--hidden", "64", "--heads", "2",
                    "--kv-heads", "1", "--head-dim", "32", "--ffn", "128", "--vocab", "builtin", "--ctx", "2048",
                    "--quiet", "--out", str(model)], check=True)
    fake = tmp_path / "llama-server"
    fake.write_text(FAKE_LLAMA_SERVER.format(python=sys.executable))
    fake.chmod(0o755)
    run = subprocess.run([sys.executable, str(BENCH), "--strata", STRATA_BIN, "--model", str(model),
                          "--llama-server", str(fake), "--turns", "2", "--system", "64", "--grow", "32",
                          "--gen", "4", "--long", "160", "--vocab-from", "10", "--vocab-to", "250"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert "llama.cpp" in next(line for line in lines if line.startswith("turn"))
    summary = json.loads(lines[-1])
    assert set(summary["total_ttft_ms"]) == {"snapshots on", "snapshots off", "llama.cpp"}
    # The second turn after the restart resumed from a snapshot read back from the SSD tier.
    assert summary["after_restart"]["snapshot_restores"] >= 1
