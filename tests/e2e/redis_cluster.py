"""A real Redis cluster of three masters for a test: redis-server --cluster-enabled yes on three
free loopback ports in a temporary directory, joined with redis-cli --cluster create. Without full
slot coverage required, so that the masters left answer for their slots when one dies."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time

import pytest


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port() -> int:
    """A free loopback port whose cluster bus port (port + 10000) is free and valid too."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 <= 65535 and _free(port + 10000):
            return port


def cli(port: int, *args: str) -> str:
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=30).stdout.strip()


def wait_redis(ready, timeout: float = 20) -> None:
    """Waits until ready() is true: a Redis server came up, or its cluster formed."""
    end = time.time() + timeout
    while not ready():
        assert time.time() < end, "redis did not come up"
        time.sleep(0.05)


class RedisCluster:
    def __init__(self, masters: int = 3) -> None:
        if not shutil.which("redis-server") or not shutil.which("redis-cli"):
            pytest.skip("redis-server and redis-cli are not installed (scripts/install-deps.sh)")
        self.dir = tempfile.mkdtemp(prefix="strata-redis-")
        self.ports = [free_port() for _ in range(masters)]
        self.procs = {}
        for p in self.ports:
            self.procs[p] = subprocess.Popen(
                ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", f"nodes-{p}.conf", "--cluster-node-timeout", "2000",
                 "--cluster-require-full-coverage", "no", "--save", "", "--appendonly", "no",
                 "--logfile", f"redis-{p}.log"], cwd=self.dir)
        try:
            for p in self.ports:
                wait_redis(lambda: cli(p, "PING") == "PONG")
            subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
                            "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=60)
            for p in self.ports:
                wait_redis(lambda: "cluster_state:ok" in cli(p, "CLUSTER", "INFO"))
        except BaseException:
            self.stop()  # no server outlives a cluster that did not come up
            raise

    @property
    def seeds(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def keys(self, port: int, pattern: str = "strata:kv:*") -> list[str]:
        out = cli(port, "--scan", "--pattern", pattern)
        return [k for k in out.splitlines() if k]

    def kill(self, port: int) -> None:
        proc = self.procs.pop(port, None)
        if proc:
            proc.kill()
            proc.wait()

    def stop(self) -> None:
        for p in list(self.procs):
            self.kill(p)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def redis_cluster():
    c = RedisCluster()
    yield c
    c.stop()
