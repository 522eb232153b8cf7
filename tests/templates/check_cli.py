#!/usr/bin/env python3
"""Runs `strata chat-template` on every case of ../shared/templates/expected.json.

The rendering must equal the reference byte for byte on stdout (exit 0), and a case the reference
raised on must exit 1 with exactly the template's message on stderr and nothing on stdout. All 80
cases must be there and match.

Usage: check_cli.py STRATA SHARED_DIR
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    strata, shared = sys.argv[1:3]
    expected = json.loads(Path(f"{shared}/templates/expected.json").read_text(encoding="utf-8"))
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="strata-chat-template-") as tmp:
        for name, messages in expected["conversations"].items():
            (Path(tmp) / f"{name}.json").write_text(
                json.dumps(messages, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        for template, entry in expected["templates"].items():
            for key, c in entry["cases"].items():
                parts = key.split("|")
                conversation, gen = parts[0], parts[1] if len(parts) > 1 else None
                args = [strata, "chat-template", "--template", f"{shared}/templates/{template}",
                        "--messages", str(Path(tmp) / f"{conversation}.json"), "--bos", expected["bos_token"],
                        "--eos", expected["eos_token"], "--date", expected["strftime_now"]]
                if gen == "gen":
                    args.append("--add-generation-prompt")
                r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                stderr = r.stderr.decode("utf-8", errors="replace")
                if c.get("ok"):
                    ok = r.returncode == 0 and r.stdout == c["text"].encode("utf-8")
                else:
                    ok = r.returncode == 1 and len(r.stdout) == 0 and stderr.strip() == c["error"]
                if ok:
                    passed += 1
                else:
                    failed += 1
                    print(f"{template} {key}: exit {r.returncode}, stderr {stderr[:200]}", file=sys.stderr)
    print(f"{passed} of {passed + failed} cases match")
    return 0 if failed == 0 and passed == 80 else 1


if __name__ == "__main__":
    sys.exit(main())
