"""Processes for the routing tests: `strata route` and replicas started with any command prefix
(`ip netns exec NS` for the cross-host tests), found through the address they log, plus helpers
to compare streams with the request ids and times taken out."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import threading
import time

import httpx

from strata_server import EXIT_TIMEOUT_S, READY_TIMEOUT_S, STRATA_BIN, _die_with_parent, server_env

_LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")


class Proc:
    """One strata process (serve or route) whose log is kept; ready once /health answers 200. "{dir}"
    in ARGV stands for a fresh folder of its own, removed when it ends."""

    def __init__(self, argv: list[str], *, prefix: list[str] = (), healthy: bool = True) -> None:
        self.cache_dir = tempfile.mkdtemp(prefix="strata-route-")
        self._log: list[str] = []
        self._lock = threading.Lock()
        argv = [a.replace("{dir}", self.cache_dir) for a in argv]
        self._proc = subprocess.Popen([*prefix, STRATA_BIN, *argv], env=server_env(self.cache_dir),
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()
        self.exit: int | None = None
        try:
            self._wait(time.monotonic() + READY_TIMEOUT_S, healthy)
        except BaseException:
            self.kill9()
            raise

    def _read(self) -> None:
        for chunk in iter(lambda: self._proc.stdout.read1(65536), b""):
            with self._lock:
                self._log.append(chunk.decode("utf-8", errors="replace"))

    def log(self) -> str:
        with self._lock:
            return "".join(self._log)

    def _wait(self, deadline: float, healthy: bool) -> None:
        while not (m := _LISTENING.search(self.log())):
            assert self._proc.poll() is None, f"exited early ({self._proc.returncode}):\n{self.log()}"
            assert time.monotonic() < deadline, f"did not start:\n{self.log()}"
            time.sleep(0.05)
        self.base_url = m.group(1)
        while healthy:
            try:
                if httpx.get(f"{self.base_url}/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"never healthy:\n{self.log()}"
            time.sleep(0.1)

    def _finish(self, sig: str) -> int:
        if self.exit is None:
            if self._proc.poll() is None:
                (self._proc.terminate if sig == "term" else self._proc.kill)()
            try:
                self.exit = self._proc.wait(EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self.exit = self._proc.wait()
            shutil.rmtree(self.cache_dir, ignore_errors=True)
        return self.exit

    def stop(self) -> int:
        return self._finish("term")

    def kill9(self) -> int:
        return self._finish("kill")


def serve(args: list[str], *, host: str = "127.0.0.1", prefix: list[str] = (), model: str | None = None) -> Proc:
    """A replica: `strata serve --demo` (or `--model MODEL`) on HOST, any free port, with ARGS and a
    cache folder of its own."""
    which = ["--demo"] if model is None else ["--model", model]
    return Proc(["serve", *which, "--host", host, "--port", "0", "--cache-dir", "{dir}", *args], prefix=prefix)


def route(replicas: list[str], args: list[str] = (), *, healthy: bool = True) -> Proc:
    """`strata route` on a free loopback port in front of REPLICAS."""
    argv = ["route", "--port", "0", "--health-interval", "300ms"]
    for r in replicas:
        argv += ["--replica", r]
    return Proc([*argv, *args], healthy=healthy)


def metric_values(base_url: str, name: str) -> dict[str, float]:
    """Every sample of NAME in /metrics, by its label text ('' when none)."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    return {m.group(1) or "": float(m.group(2)) for m in re.finditer(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", text, re.M)}


_VOLATILE = re.compile(r'"(id|created|created_at|system_fingerprint)":\s*("[^"]*"|\d+)')


def normalized(text: str) -> str:
    """TEXT with the values that differ between two runs of one request (ids, times) blanked."""
    return _VOLATILE.sub(lambda m: f'"{m.group(1)}":_', text)
