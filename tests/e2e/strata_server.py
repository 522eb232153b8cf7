"""Starts the real `strata serve` on a free loopback port for a test, and stops it.

`start_server(args)` runs `STRATA_BIN serve --port 0 --cache-dir DIR ARGS...`, reads the port from
the `listening on http://127.0.0.1:PORT` log line, and returns once /health answers 200. `stop()`
sends SIGTERM and returns the exit status; `kill9()` sends SIGKILL, so the process is gone at once
whatever it was doing. The server dies with the test process too (PR_SET_PDEATHSIG), so a test run
killed from outside leaves no server behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx

STRATA_BIN = os.environ.get("STRATA_BIN", "build/asan/strata")
SHARED_DIR = os.environ.get("STRATA_SHARED_DIR", "../shared")

# How long a server may take to start, and to exit after a signal (generous: CI runs these
# tests against sanitizer builds, several times slower than a release build).
READY_TIMEOUT_S = 120.0
EXIT_TIMEOUT_S = 60.0

# Clients reach the server directly, whatever proxy the environment names.
for _var in ("NO_PROXY", "no_proxy"):
    os.environ[_var] = ",".join(filter(None, [os.environ.get(_var), "127.0.0.1", "localhost"]))

_LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
_MODEL_ID = re.compile(r"loaded .* as model '([^']*)'")
_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


# The built-in default model (scripts/fetch-model.sh puts it in model_dir()).
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# The ids requests name as `model` (a served model's file name without .gguf; any other name is a
# 404 model_not_found): the default model, `--demo`'s, and the tiny shared model most suites use.
DEFAULT_MODEL = DEFAULT_MODEL_FILE.removesuffix(".gguf")
DEMO_MODEL = "demo-qwen2-q8_0"
TINY_MODEL = "tiny-qwen2-gpt2-f16"


def served_id(path: str | os.PathLike) -> str:
    """The model id of a server started with `-m PATH`."""
    return Path(path).stem


def model_path(name: str) -> str:
    """The path of a shared model, by its file name without `.gguf`."""
    return f"{SHARED_DIR}/models/{name}.gguf"


def model_dir() -> Path:
    """Where scripts/fetch-model.sh keeps the real models."""
    if os.environ.get("STRATA_MODEL_DIR"):
        return Path(os.environ["STRATA_MODEL_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.environ["HOME"], ".cache")
    return Path(cache) / "strata" / "models"


def server_env(cache_dir: str) -> dict[str, str]:
    """The environment of a strata process under test: what it keeps under $XDG_CACHE_HOME (the
    q4_0 KV mean keys) goes into CACHE_DIR, never into the user's ~/.cache, and the real models are
    still found where scripts/fetch-model.sh put them."""
    env = dict(os.environ)
    env["STRATA_MODEL_DIR"] = str(model_dir())
    env["XDG_CACHE_HOME"] = os.path.join(cache_dir, "xdg")
    return env


def start_default_server(args: list[str] = ()) -> "Server":
    """`strata serve` with no model argument: the built-in default model, which must have been
    fetched (a clear failure otherwise)."""
    if not (model_dir() / DEFAULT_MODEL_FILE).is_file():
        raise FileNotFoundError(f"the default model is not in {model_dir()}: run scripts/fetch-model.sh")
    return start_server(args)


def openai_client(server, api_key: str = "unused", timeout: float = 300):
    """An `openai` SDK client of SERVER's /v1 that never retries (a test sees every failure)."""
    import openai
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=api_key, max_retries=0, timeout=timeout)


def _die_with_parent() -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Server:
    """One running `strata serve`, with everything it has logged so far."""

    def __init__(self, args: list[str], *, ready_timeout: float, cache_dir: str | None, healthy: bool = True) -> None:
        self._keep = cache_dir is not None
        self.cache_dir = cache_dir if cache_dir is not None else tempfile.mkdtemp(prefix="strata-e2e-")
        self._log: list[str] = []
        self._lock = threading.Lock()
        # Started from the test's main thread: PR_SET_PDEATHSIG fires when the forking thread ends.
        self._proc = subprocess.Popen(
            [STRATA_BIN, "serve", "--port", "0", "--cache-dir", self.cache_dir, *args],
            env=server_env(self.cache_dir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        self._exit: int | None = None
        try:
            self._wait_ready(time.monotonic() + ready_timeout, healthy)
        except BaseException:
            self.kill9()
            raise

    def _read_log(self) -> None:
        assert self._proc.stdout is not None
        for chunk in iter(lambda: self._proc.stdout.read1(65536), b""):
            with self._lock:
                self._log.append(chunk.decode("utf-8", errors="replace"))

    @property
    def model(self) -> str | None:
        """The id requests name as `model` (any other name is a 404 model_not_found), from the log
        line the server writes once the model is loaded; None before that."""
        found = _MODEL_ID.search(self.log())
        return found.group(1) if found else None

    def log(self) -> str:
        """Everything the server has written to stdout and stderr so far."""
        with self._lock:
            return "".join(self._log)

    def _wait_ready(self, deadline: float, healthy: bool = True) -> None:
        port = None
        while port is None:
            m = _LISTENING.search(self.log())
            if m:
                port = int(m.group(1))
            elif self._proc.poll() is not None:
                self._reader.join(5)
                raise RuntimeError(f"strata exited early (status {self._proc.returncode}):\n{self.log()}")
            elif time.monotonic() > deadline:
                raise RuntimeError(f"strata did not start:\n{self.log()}")
            else:
                time.sleep(0.05)
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        while healthy:
            try:
                if httpx.get(f"{self.base_url}/health", timeout=10).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"strata never became healthy:\n{self.log()}")
            time.sleep(0.1)

    def _finish(self, sig: int) -> int:
        if self._exit is None:
            if self._proc.poll() is None:
                self._proc.send_signal(sig)
            try:
                self._exit = self._proc.wait(EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
                raise AssertionError(f"strata still running {EXIT_TIMEOUT_S:.0f} s after signal {sig}:\n{self.log()}")
            finally:
                self._reader.join(10)
                if not self._keep:
                    shutil.rmtree(self.cache_dir, ignore_errors=True)
        return self._exit

    def wait_exit(self, timeout: float = EXIT_TIMEOUT_S) -> int:
        """Waits for the server to exit by itself (no signal), and returns its exit status."""
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"strata still running after {timeout:.0f} s:\n{self.log()}")
        return self._finish(signal.SIGTERM)

    def stop(self) -> int:
        """SIGTERM, then the exit status (negative: the signal that ended it)."""
        return self._finish(signal.SIGTERM)

    def kill9(self) -> int:
        """No goodbye: SIGKILL, then the exit status (-SIGKILL unless it had already exited)."""
        return self._finish(signal.SIGKILL)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def rss_bytes(self) -> int:
        """The server's resident memory now (VmRSS)."""
        for line in Path(f"/proc/{self._proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    @property
    def finished(self) -> bool:
        """Whether stop() or kill9() has run."""
        return self._exit is not None


def start_server(args: list[str] = (), *, ready_timeout: float = READY_TIMEOUT_S,
                 cache_dir: str | os.PathLike | None = None, healthy: bool = True) -> Server:
    """Starts `strata serve` with ARGS and returns it once /health is 200 (healthy=False: once it
    listens, which it does before it loads the model).

    cache_dir: use (and keep) this cache directory instead of a fresh one removed at stop, so that
    a test can restart a server on the same SSD tier.
    """
    if not Path(STRATA_BIN).is_file():
        raise FileNotFoundError(f"STRATA_BIN {STRATA_BIN!r} is not a file (set STRATA_BIN to the strata binary)")
    return Server(list(args), ready_timeout=ready_timeout,
                  cache_dir=None if cache_dir is None else os.fspath(cache_dir), healthy=healthy)

@contextlib.contextmanager
def configured_server(conf_text: str, args: list[str] = ()):
    """A server started with a strata.toml of CONF_TEXT (in a temporary folder) and ARGS; when the
    block ends it is stopped, and SIGTERM must have made it exit 0."""
    with tempfile.TemporaryDirectory(prefix="strata-conf-") as conf_dir:
        conf = Path(conf_dir) / "strata.toml"
        conf.write_text(conf_text)
        s = start_server(["--config", str(conf), *args])
        yield s
        assert s.stop() == 0, "SIGTERM exits 0"



def metric(text: str, name: str) -> float:
    """The value of the unlabelled Prometheus sample NAME (or NAME{labels} given in full) in TEXT."""
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"no sample {name} in /metrics"
    return float(m.group(1))


def access_line(server, request_id: str) -> str:
    """The access-log line of REQUEST_ID, waiting for it: it is written once the response is out."""
    deadline = time.monotonic() + 30
    while True:
        m = re.search(rf"\[{re.escape(request_id)}\] \S+ \S+ \d+ tokens=.*", server.log())
        if m:
            return m.group(0)
        assert time.monotonic() < deadline, f"no access line for {request_id}:\n{server.log()[-3000:]}"
        time.sleep(0.05)
