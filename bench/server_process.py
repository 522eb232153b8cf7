"""What the Python model benches share: a server process they start, wait for and stop, and the
xorshift32 stream of token ids their prompts are made of (the same ids for the same seed)."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import httpx


class Xorshift32:
    """Token ids in [lo, hi) from a xorshift32 stream; reset() starts it again from the seed."""

    def __init__(self, seed: int, lo: int, hi: int):
        self.seed, self.lo, self.hi = seed, lo, hi
        self.reset()

    def reset(self) -> None:
        self.state = (self.seed & 0xFFFFFFFF) or 1

    def tokens(self, n: int) -> list[int]:
        out = []
        for _ in range(n):
            self.state = (self.state ^ (self.state << 13)) & 0xFFFFFFFF
            self.state ^= self.state >> 17
            self.state = (self.state ^ (self.state << 5)) & 0xFFFFFFFF
            out.append(self.lo + self.state % (self.hi - self.lo))
        return out


class Server:
    """A server process, stopped with SIGTERM. `ready` matches the log line that names its port (the
    match goes to `url_of`); without it the port is known (url_of(None)). Either way it is ready when
    /health answers 200; one that exits or is not ready within `timeout` seconds ends the bench."""

    def __init__(self, args: list[str], ready: re.Pattern | None, url_of, timeout: float = 600):
        self.name = os.path.basename(sys.argv[0])
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = None if ready else url_of(None)
        deadline = time.time() + timeout
        while time.time() < deadline and not (self.url and self.healthy()):
            self.log.seek(0)
            m = ready.search(self.log.read().decode(errors="replace")) if ready else None
            if m:
                self.url = url_of(m)
            if self.proc.poll() is not None:
                self.log.seek(0)
                sys.exit(f"{self.name}: {args[0]} exited:\n{self.log.read().decode(errors='replace')[-3000:]}")
            time.sleep(0.2)
        if not (self.url and self.healthy()):
            self.stop()
            sys.exit(f"{self.name}: {args[0]} did not become ready")

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=10).status_code == 200
        except httpx.TransportError:
            return False

    def memory_mib(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) in MiB."""
        fields = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
