"""Hosts for the cross-host tests: network namespaces the test makes itself (`ip netns add`), each
joined by a veth pair to a bridge in the test's own namespace, with an address of its own on a
10.x.y.0/24 network (the bridge is .1, host k is .10+k). A process runs on a host through
`ip netns exec`; taking a host's link down partitions it from every other. Needs root (or
CAP_NET_ADMIN): where `ip netns` is not permitted, the tests that use it skip, saying why."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile

import pytest

from redis_cluster import wait_redis


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def skip_unless_netns() -> None:
    """Skips the test, with the reason, when network namespaces cannot be made here."""
    if not shutil.which("ip"):
        pytest.skip("cross-host tests need iproute2's `ip` (apt-get install iproute2)")
    probe = f"strata-probe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        pytest.skip(f"cross-host tests need `ip netns add` (root or CAP_NET_ADMIN): {made.stderr.strip()}")
    _ip("netns", "del", probe, check=False)


class Hosts:
    def __init__(self, count: int) -> None:
        skip_unless_netns()
        self.tag = f"st{os.getpid() % 100000:05d}{random.randrange(16 ** 2):02x}"  # + 3 chars: 15, the limit of a link name
        self.net = f"10.{random.randrange(100, 250)}.{random.randrange(256)}"
        self.bridge = f"{self.tag}br"
        self.count = count
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.net}.1/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for k in range(count):
                ns, outside, inside = self.ns(k), f"{self.tag}{k}a", f"{self.tag}{k}b"
                _ip("netns", "add", ns)
                _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
                _ip("link", "set", inside, "netns", ns)
                _ip("link", "set", outside, "master", self.bridge, "up")
                _ip("-n", ns, "addr", "add", f"{self.addr(k)}/24", "dev", inside)
                _ip("-n", ns, "link", "set", inside, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.stop()
            raise

    def ns(self, k: int) -> str:
        return f"{self.tag}h{k}"

    def addr(self, k: int) -> str:
        return f"{self.net}.{10 + k}"

    def prefix(self, k: int) -> list[str]:
        """The command prefix that runs a process on host k."""
        return ["ip", "netns", "exec", self.ns(k)]

    def partition(self, k: int) -> None:
        """Host k's link goes down: nothing reaches it, and it reaches nothing."""
        _ip("link", "set", f"{self.tag}{k}a", "down")

    def stop(self) -> None:
        for k in range(self.count):
            _ip("netns", "del", self.ns(k), check=False)
        _ip("link", "del", self.bridge, check=False)


class NetnsRedis:
    """A three-master Redis cluster, one master per host (port 7000), shaped like RedisCluster:
    `seeds`, `ports` (here the host indexes) and `kill`."""

    def __init__(self, hosts: Hosts, on: list[int]) -> None:
        self.hosts = hosts
        self.dir = tempfile.mkdtemp(prefix="strata-redis-")
        self.ports = list(on)
        self.procs = {}
        for k in on:
            self.procs[k] = subprocess.Popen(
                [*hosts.prefix(k), "redis-server", "--port", "7000", "--bind", hosts.addr(k), "--cluster-enabled", "yes",
                 "--cluster-config-file", f"nodes-{k}.conf", "--cluster-node-timeout", "2000",
                 "--cluster-require-full-coverage", "no", "--save", "", "--appendonly", "no", "--logfile", f"redis-{k}.log",
                 "--protected-mode", "no"],  # reached from the other hosts, on a network the test made
                cwd=self.dir)
        try:
            for k in on:
                wait_redis(lambda: self.cli(k, "PING") == "PONG")
            subprocess.run(["redis-cli", "--cluster", "create", *[f"{hosts.addr(k)}:7000" for k in on], "--cluster-replicas", "0",
                            "--cluster-yes"], check=True, capture_output=True, timeout=60)
            for k in on:
                wait_redis(lambda: "cluster_state:ok" in self.cli(k, "CLUSTER", "INFO"))
        except BaseException:
            self.stop()
            raise

    def cli(self, k: int, *args: str) -> str:
        return subprocess.run(["redis-cli", "-h", self.hosts.addr(k), "-p", "7000", *args], capture_output=True, text=True,
                              timeout=30).stdout.strip()

    @property
    def seeds(self) -> str:
        return ",".join(f"{self.hosts.addr(k)}:7000" for k in self.ports)

    def kill(self, k: int) -> None:
        proc = self.procs.pop(k, None)
        if proc:
            proc.kill()
            proc.wait()

    def stop(self) -> None:
        for k in list(self.procs):
            self.kill(k)
        shutil.rmtree(self.dir, ignore_errors=True)
