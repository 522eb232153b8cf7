#!/usr/bin/env python3
"""Constrained decoding's cost per token: strata's grammar engine next to the xgrammar Python
package, on the same vocabulary (Gemma 3's, 262k tokens), the same 20-property JSON schema and the same
document's tokens, in one run. Also prints the schema's compile time (cold and cached) and a
decode step of the real model for scale.

    .venv/bin/python bench/grammar_mask.py [--build build] [--model M.gguf] [--decode-model M.gguf]

Needs build/bench/grammar_bench (and build/strata for the decode step). The xgrammar package is
installed on first use, without its dependencies (torch, transformers: it needs neither to compile
grammars and fill masks into a numpy array), into ~/.cache/strata/xgrammar-py; the pinned version
is the one whose C++ core strata builds.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent
XGRAMMAR = ["xgrammar==0.2.8", "apache-tvm-ffi==0.1.15.post2"]
MODELS = pathlib.Path(os.environ.get("STRATA_MODEL_DIR") or pathlib.Path.home() / ".cache" / "strata" / "models")
TARGET = pathlib.Path.home() / ".cache" / "strata" / "xgrammar-py"


def import_xgrammar():
    """The xgrammar package, installed into TARGET when missing, with stand-ins for the torch and
    transformers modules it imports at load time but does not use on this path."""
    if not (TARGET / "xgrammar").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(TARGET), *XGRAMMAR], check=True)
    sys.path.insert(0, str(TARGET))

    class Stub(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            from unittest import mock

            value = mock.MagicMock(name=f"{self.__name__}.{name}")
            setattr(self, name, value)
            return value

    for name in ["torch", "torch.nn", "torch.nn.functional", "transformers", "triton", "triton.language"]:
        sys.modules.setdefault(name, Stub(name))
    sys.modules["torch"].Tensor = type("Tensor", (), {})  # tvm_ffi checks isinstance(x, torch.Tensor)
    for cls in ["PreTrainedTokenizerBase", "PreTrainedTokenizerFast"]:
        setattr(sys.modules["transformers"], cls, type(cls, (), {}))
    import xgrammar

    return xgrammar


def read_vocab(path):
    data = pathlib.Path(path).read_bytes()
    tokens, i = [], 0
    while i < len(data):
        n = int.from_bytes(data[i : i + 4], "little")
        tokens.append(data[i + 4 : i + 4 + n])
        i += 4 + n
    return tokens


def xgrammar_figures(dump, repeat):
    import numpy as np

    xgr = import_xgrammar()
    vocab = read_vocab(dump / "vocab.bin")
    stop = [int(x) for x in (dump / "stop.txt").read_text().split()]
    schema = (dump / "schema.json").read_text()
    tokens = [int(x) for x in (dump / "tokens.txt").read_text().split()]
    info = xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=len(vocab), stop_token_ids=stop)
    compiler = xgr.GrammarCompiler(info, max_threads=8)
    t0 = time.perf_counter()
    compiled = compiler.compile_json_schema(schema, any_whitespace=False, strict_mode=True)
    compile_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    compiler.compile_json_schema(schema, any_whitespace=False, strict_mode=True)
    cached_ms = (time.perf_counter() - t0) * 1e3
    bitmask = np.full((1, (len(vocab) + 31) // 32), -1, dtype=np.int32)
    fill = []
    for _ in range(repeat):
        matcher = xgr.GrammarMatcher(compiled)
        for t in tokens:
            a = time.perf_counter()
            matcher.fill_next_token_bitmask(bitmask)
            fill.append((time.perf_counter() - a) * 1e6)
            if not matcher.accept_token(t):
                raise SystemExit(f"xgrammar refused token {t}")
    fill.sort()
    return {
        "compile_ms": compile_ms,
        "cached_compile_ms": cached_ms,
        "fill_median_us": statistics.median(fill),
        "fill_p99_us": fill[min(len(fill) - 1, round(0.99 * (len(fill) - 1)))],
    }


def decode_step_ms(strata, model):
    """Milliseconds of one decode step of one sequence (strata bench): a floor for a step of 16."""
    out = subprocess.run([str(strata), "bench", "--model", str(model), "--prompt", "64", "--gen", "32", "--json"],
                         capture_output=True, text=True, timeout=600)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            tok_s = json.loads(line).get("decode_tok_s")
            return 1e3 / tok_s if tok_s else None
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build"))
    # Gemma 3's 262k-token vocabulary (scripts/fetch-model.sh gemma3): above the ~150k of Qwen2 and Llama 3.
    ap.add_argument("--model", default=str(MODELS / "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--decode-model", default=str(MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    build = pathlib.Path(args.build)

    with tempfile.TemporaryDirectory() as tmp:
        dump = pathlib.Path(tmp)
        out = subprocess.run([str(build / "bench" / "grammar_bench"), "--model", args.model, "--dump", str(dump), "--repeat", str(args.repeat)],
                             capture_output=True, text=True, check=True)
        print(out.stdout.rsplit("{", 1)[0].rstrip())
        ours = json.loads("{" + out.stdout.rsplit("{", 1)[1])
        theirs = xgrammar_figures(dump, args.repeat)

    print()
    print(f"{'per token, ' + str(ours['vocab']) + ' tokens':<34}{'median us':>12}{'p99 us':>10}")
    print(f"{'strata (C++ xgrammar core)':<34}{ours['fill_median_us']:>12.1f}{ours['fill_p99_us']:>10.1f}")
    print(f"{'  + apply to logits + accept':<34}{ours['step_median_us']:>12.1f}{ours['step_p99_us']:>10.1f}")
    print(f"{'xgrammar Python package':<34}{theirs['fill_median_us']:>12.1f}{theirs['fill_p99_us']:>10.1f}")
    print()
    print(f"20-property schema compile: strata {ours['compile_ms']:.1f} ms (cached {ours['cached_compile_ms']:.3f} ms), "
          f"xgrammar Python {theirs['compile_ms']:.1f} ms (cached {theirs['cached_compile_ms']:.3f} ms); target <= 50 ms")
    strata = build / "strata"
    decode_model = pathlib.Path(args.decode_model)
    if strata.exists() and decode_model.exists():
        step = decode_step_ms(strata, decode_model)
        if step:
            # The output stage masks a step's sequences one after another: 16 of them at p99 each.
            share = 16 * ours["step_p99_us"] / 1e3 / step
            print(f"decode step of one sequence ({decode_model.name}): {step:.1f} ms, a floor for a step of 16; "
                  f"16 masks at p99 are {share:.2%} of it (target < 10% of a batch-16 step)")


if __name__ == "__main__":
    main()
