"""`strata route` in front of three replicas that share a real three-master Redis cluster as their
block directory: a conversation goes back to the replica that holds its prefix while others
spread, streams (SSE and WebSocket) come through unchanged, a stored response is found on the
replica that made it, a replica killed mid-load loses no request that had not begun streaming and
changes no token, a killed Redis master only costs the prefix choice, and no replica at all is a
clear 502. Each runs twice: on loopback, and across hosts (each replica and Redis master in a
network namespace of its own, tests/e2e/netns.py), where a partitioned replica is also routed
around and still answers, computing locally, on its own host."""

from __future__ import annotations

import json
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import subprocess

import httpx
import pytest
import websockets.sync.client as ws_client

from redis_cluster import RedisCluster
from netns import Hosts, NetnsRedis
from route_cluster import metric_values, normalized, route, serve

DOC = " ".join(f"d{i}" for i in range(120))


def doc(user: int) -> str:
    """A long document of its own for each user (a few hundred tokens)."""
    return f"user {user} reads: " + DOC + f" end of {user}."


def chat_body(user: int, turns: int, **extra) -> dict:
    messages = [{"role": "system", "content": doc(user)}]
    for t in range(turns):
        messages.append({"role": "user", "content": f"question {t} of user {user}"})
        if t + 1 < turns:
            messages.append({"role": "assistant", "content": f"answer {t}"})
    return {"model": "demo-qwen2-q8_0", "messages": messages, "max_tokens": 8, "temperature": 0, **extra}


def post(base: str, body: dict, path: str = "/v1/chat/completions", timeout: float = 120) -> httpx.Response:
    return httpx.post(f"{base}{path}", json=body, timeout=timeout)


class Cluster:
    """Redis masters, three replicas listing their blocks in them, and the router: on loopback, or
    each replica and master on a host of its own (network namespaces, the router outside)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.hosts = Hosts(6) if kind == "netns" else None
        self.replicas = []
        self.router = None
        try:
            self.redis = NetnsRedis(self.hosts, [3, 4, 5]) if self.hosts else RedisCluster()
            self.replicas = [self.replica(k) for k in range(3)]
            self.alive = list(self.replicas)
            self.router = route([r.base_url for r in self.replicas], ["--redis", self.redis.seeds])
        except BaseException:
            self.stop()
            raise

    def replica(self, k: int):
        # One sequence at a time: the demo model's q8_0 matmuls round differently in batches of other
        # sizes, and its random weights have near ties, so only unbatched answers are comparable token
        # for token (the kill test compares a retried request with a direct one).
        conf = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        conf.write("[scheduler]\nmax_running = 1\n")
        conf.close()
        args = ["--redis", self.redis.seeds, "--directory-ttl", "5s", "--cache-mode", "hot", "--config", conf.name]
        if not self.hosts:
            return serve(args)
        return serve(args, host=self.hosts.addr(k), prefix=self.hosts.prefix(k))

    def stop(self) -> None:
        for p in [self.router, *self.replicas]:
            if p:
                p.kill9()
        if getattr(self, "redis", None):
            self.redis.stop()
        if self.hosts:
            self.hosts.stop()


@pytest.fixture(scope="module", params=["loopback", "netns"])
def cluster(request):
    c = Cluster(request.param)
    yield c
    c.stop()


def routed(router) -> dict[str, float]:
    return {k.split('"')[1]: v for k, v in metric_values(router.base_url, "strata_route_requests_total").items()}


def test_a_conversation_returns_to_the_replica_holding_its_prefix_while_others_spread(cluster):
    replicas, router = cluster.replicas, cluster.router
    before = routed(router)
    hits_before = sum(metric_values(router.base_url, "strata_route_prefix_hits_total").values())
    users = range(6)
    first = {}
    for u in users:
        r = post(router.base_url, chat_body(u, 1))
        assert r.status_code == 200, r.text
        first[u] = r.json()
    spread = {k: v - before.get(k, 0) for k, v in routed(router).items()}
    assert sorted(spread.values()) == [2, 2, 2], f"first turns spread over the replicas: {spread}"
    time.sleep(0.5)  # the replicas publish their blocks to Redis as they cache them
    for turn in (2, 3, 4):
        for u in users:
            r = post(router.base_url, chat_body(u, turn))
            assert r.status_code == 200, r.text
            usage = r.json()["usage"]
            assert usage["prompt_tokens_details"]["cached_tokens"] >= 0.8 * usage["prompt_tokens"] - 64, (u, turn, usage)
        time.sleep(0.3)
    hits = sum(metric_values(router.base_url, "strata_route_prefix_hits_total").values()) - hits_before
    assert hits == 3 * len(users), f"every later turn went to a replica listing its prefix ({hits})"


def test_streams_pass_through_unchanged(cluster):
    replicas, router = cluster.replicas, cluster.router
    body = chat_body(40, 2, stream=True, stream_options={"include_usage": True})

    def sse(base: str) -> tuple[str, str]:
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=120) as r:
            assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
            return b"".join(r.iter_raw()).decode(), r.headers.get("x-strata-replica")

    holder = sse(router.base_url)[1]  # now cached there: the two below report the same cached tokens
    time.sleep(0.5)
    direct = sse(holder)[0]
    via_router, again = sse(router.base_url)
    assert again == holder, "the prompt's holder answers it"
    assert via_router.endswith("data: [DONE]\n\n")
    assert normalized(via_router) == normalized(direct)

    def frames(base: str) -> list[str]:
        url = base.replace("http://", "ws://") + "/v1/ws"
        with ws_client.connect(url) as ws:
            ws.send(json.dumps({"type": "request", "id": "a", "endpoint": "chat.completions", "body": chat_body(41, 1)}))
            out = []
            while not out or json.loads(out[-1])["type"] not in ("done", "error"):
                out.append(ws.recv(timeout=60))
            return out

    got = frames(router.base_url)
    assert json.loads(got[-1])["type"] == "done" and len(got) > 2, got
    assert [normalized(f) for f in got] == [normalized(f) for f in frames(replicas[0].base_url)]


def test_a_stored_response_is_found_whichever_replica_made_it(cluster):
    router = cluster.router
    ids = []
    for u in range(3):
        r = post(router.base_url, {"model": "demo-qwen2-q8_0", "input": f"hello {u}", "max_output_tokens": 4}, "/v1/responses")
        assert r.status_code == 200, r.text
        ids.append(r.json()["id"])
    for rid in ids:
        r = httpx.get(f"{router.base_url}/v1/responses/{rid}", timeout=30)
        assert r.status_code == 200 and r.json()["id"] == rid, r.text
    r = httpx.get(f"{router.base_url}/v1/responses/resp_none", timeout=30)
    assert r.status_code == 404, r.text


def test_no_request_is_lost_or_changed_when_a_replica_is_killed_mid_load(cluster):
    redis, replicas, router = cluster.redis, cluster.replicas, cluster.router
    # Each request a prompt of its own, a few tokens long answers: the demo model's random weights
    # give near ties that long greedy answers may break differently in other batches.
    prompts = [{"prompt": doc(100 + i) + DOC, "max_tokens": 12, "temperature": 0} for i in range(24)]
    with ThreadPoolExecutor(6) as pool:
        expected = list(pool.map(lambda p: post(replicas[0].base_url, p, "/v1/completions").json()["choices"][0]["text"], prompts))
    results, errors = [], []

    def one(i: int, stream: bool) -> None:
        body = {**prompts[i], "stream": stream}
        try:
            if not stream:
                r = post(router.base_url, body, "/v1/completions", timeout=300)
                results.append((i, r.status_code, r.json()["choices"][0]["text"] if r.status_code == 200 else r.text, None))
                return
            with httpx.stream("POST", f"{router.base_url}/v1/completions", json=body, timeout=300) as r:
                text = "".join(json.loads(line[6:])["choices"][0]["text"] for line in r.iter_lines()
                               if line.startswith("data: {") and json.loads(line[6:])["choices"])
                results.append((i, r.status_code, text, r.headers.get("x-strata-replica")))
        except httpx.HTTPError as e:
            errors.append((i, stream, repr(e)))

    threads = [threading.Thread(target=one, args=(i, i % 3 == 0)) for i in range(24)]
    for t in threads:
        t.start()
    # The victim: whichever replica but the first has the most requests in flight, once it has some.
    deadline = time.time() + 30
    while True:
        load = metric_values(router.base_url, "strata_route_in_flight")
        victim = max(replicas[1:], key=lambda r: load.get(f'{{replica="{r.base_url}"}}', 0))
        if load.get(f'{{replica="{victim.base_url}"}}', 0) >= 2:
            break
        assert time.time() < deadline, f"no replica but the first had requests in flight: {load}"
        time.sleep(0.01)
    victim.kill9()
    cluster.alive.remove(victim)
    for t in threads:
        t.join(300)
    for i, status, text, holder in results:
        assert status == 200, (i, text)
        assert text == expected[i], f"request {i} (via {holder}) got other tokens"
    # Only a stream the killed replica had begun may be cut; every other request completed.
    assert all(stream for _, stream, _ in errors), errors
    assert len(results) + len(errors) == 24
    assert metric_values(router.base_url, "strata_route_no_replica_total")[""] == 0
    assert metric_values(router.base_url, "strata_route_replica_failures_total")[f'{{replica="{victim.base_url}"}}'] >= 1


def test_a_killed_redis_master_leaves_routing_by_load_without_errors(cluster):
    redis, replicas, router = cluster.redis, cluster.replicas, cluster.router
    redis.kill(redis.ports[0])
    for turn in (1, 2):
        for u in range(200, 206):
            r = post(router.base_url, chat_body(u, turn))
            assert r.status_code == 200, r.text
    assert sum(metric_values(router.base_url, "strata_route_directory_failures_total").values()) > 0


def test_a_partitioned_replica_is_routed_around_and_still_computes_locally(cluster):
    if not cluster.hosts:
        pytest.skip("partitions need the hosts of the cross-host form")
    router, (reference, cut) = cluster.router, cluster.alive[:2]
    users = range(300, 304)
    for u in users:
        assert post(router.base_url, chat_body(u, 1)).status_code == 200
    expected = {u: post(reference.base_url, chat_body(u, 2)).json()["choices"][0]["message"]["content"] for u in users}
    k = cluster.replicas.index(cut)
    cluster.hosts.partition(k)
    for u in users:
        r = post(router.base_url, chat_body(u, 2))
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == expected[u], u
    # The partitioned replica reaches no Redis master: asked on its own host, it still answers,
    # computing what it does not hold itself.
    body = json.dumps(chat_body(300, 2))
    out = subprocess.run([*cluster.hosts.prefix(k), "curl", "-s", "--max-time", "120", "-H", "content-type: application/json",
                          "-d", body, f"{cut.base_url}/v1/chat/completions"], capture_output=True, text=True, timeout=150)
    assert json.loads(out.stdout)["choices"][0]["message"]["content"] == expected[300], out.stdout + out.stderr


def test_the_router_answers_502_when_no_replica_is_up():
    router = route(["http://127.0.0.1:1", "http://127.0.0.1:2"], healthy=False)
    try:
        deadline = time.time() + 10
        while httpx.get(f"{router.base_url}/health", timeout=5).status_code != 503:
            assert time.time() < deadline
            time.sleep(0.1)
        r = post(router.base_url, chat_body(1, 1))
        assert r.status_code == 502, r.text
        assert r.json()["error"]["code"] == "no_replica" and r.json()["error"]["type"] == "server_error"
        r = post(router.base_url, chat_body(1, 1, stream=True))
        assert r.status_code == 502 and r.json()["error"]["code"] == "no_replica"
    finally:
        router.stop()
