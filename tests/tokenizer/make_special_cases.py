#!/usr/bin/env python3
"""Writes tests/tokenizer/special_cases.json: special-looking texts per shared vocabulary and the
token ids llama.cpp's llama-tokenize gives them, with and without parse_special (no BOS/EOS).

For each vocabulary in ../shared/vocab: up to three tokens of each non-normal token type (control,
user-defined, unknown, unused, byte), the BOS/EOS/UNK/EOT/PAD tokens, up to three normal tokens
that look like markup (<...> or [...]), and a few common special strings whether the vocabulary has
them or not; each alone and between other text.

  .venv/bin/python tests/tokenizer/make_special_cases.py \
      --llama-tokenize ~/.cache/strata/llama.cpp/build/bin/llama-tokenize
"""
import argparse
import concurrent.futures
import json
import pathlib
import re
import subprocess

import gguf

TYPE_NAMES = {1: "normal", 2: "unknown", 3: "control", 4: "user_defined", 5: "unused", 6: "byte"}
COMMON = ["<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|end|>", "<pad>"]


def read_vocab(path):
    r = gguf.GGUFReader(str(path))
    f = r.fields
    toks = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8", "replace") for i in f["tokenizer.ggml.tokens"].data]
    if "tokenizer.ggml.token_type" in f:
        types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    else:
        types = [1] * len(toks)
    ids = [int(f[k].contents()) for k in f if k.startswith("tokenizer.ggml.") and k.endswith("_token_id")]
    return toks, types, ids


def pick(toks, types, ids):
    """(token text, why) pairs, each text once."""
    chosen = {}
    def add(text, why):
        if text and "\n" not in text and "\0" not in text and not text.startswith("-") and text not in chosen:
            chosen[text] = why
    for t in (2, 3, 4, 5, 6):
        of_type = [i for i, ty in enumerate(types) if ty == t]
        for i in sorted({of_type[0], of_type[len(of_type) // 2], of_type[-1]} if of_type else set()):
            add(toks[i], TYPE_NAMES[t])
    for i in ids:
        if 0 <= i < len(toks):
            add(toks[i], "metadata id " + TYPE_NAMES.get(types[i], "?"))
    looks = [i for i, ty in enumerate(types) if ty == 1 and re.fullmatch(r"<[^<>\s]+>|\[[^\[\]\s]+\]", toks[i])]
    for i in looks[:3]:
        add(toks[i], "normal, looks special")
    for s in COMMON:
        add(s, "common special string")
    return chosen


def tokenize(exe, vocab, text, parse_special):
    cmd = [exe, "-m", str(vocab), "-p", text, "--ids", "--no-bos", "--log-disable"]
    if not parse_special:
        cmd.append("--no-parse-special")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-tokenize", required=True)
    ap.add_argument("--vocab-dir", default=str(pathlib.Path(__file__).resolve().parents[2] / ".." / "shared" / "vocab"))
    ap.add_argument("--out", default=str(pathlib.Path(__file__).with_name("special_cases.json")))
    a = ap.parse_args()
    jobs = []
    for vocab in sorted(pathlib.Path(a.vocab_dir).glob("*.gguf")):
        toks, types, ids = read_vocab(vocab)
        for text, why in pick(toks, types, ids).items():
            for sample in (text, "x " + text + " y" + text + "z"):
                for parse_special in (True, False):
                    jobs.append((vocab, why, sample, parse_special))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda j: tokenize(a.llama_tokenize, j[0], j[2], j[3]), jobs))
    cases = {}
    for (vocab, why, sample, parse_special), got in zip(jobs, results):
        cases.setdefault(vocab.name, []).append({"text": sample, "parse_special": parse_special, "token": why, "ids": got})
    doc = {"about": "llama-tokenize (llama.cpp, llama-cpp-python 0.3.36) token ids without BOS/EOS; "
                    "made by tests/tokenizer/make_special_cases.py", "vocabs": cases}
    pathlib.Path(a.out).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(a.out, sum(len(v) for v in cases.values()), "cases")


if __name__ == "__main__":
    main()
