"""pytest setup shared by the end-to-end suites of this folder.

The `launch` fixture starts servers for a test and kills those the test left running; `tiny_server`
and `smol_server` are one server per module on the tiny shared model and on the real default model.
A run that collects no test is a failure with a message, never a quiet exit status 5: a module
whose tests were renamed or lost must not pass as an empty CTest test.
"""

from __future__ import annotations

import sys

import pytest

from strata_server import model_path, openai_client, start_default_server, start_server


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        args = " ".join(str(a) for a in session.config.args)
        sys.stderr.write(f"\nerror: no tests collected from {args}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def launch():
    """start_server for a test that starts servers of its own: any still running when the test ends
    (it failed before stopping them) is killed, and its cache directory removed unless kept."""
    started = []

    def launch(args, **kw):
        s = start_server(args, **kw)
        started.append(s)
        return s

    yield launch
    for s in started:
        if not s.finished:
            s.kill9()


@pytest.fixture(scope="module")
def tiny_server():
    """A server on the tiny Qwen2-shaped shared model (random weights, a real tokenizer), one per
    module that asks for it; SIGTERM must stop it with exit status 0."""
    s = start_server(["-m", model_path("tiny-qwen2-gpt2-f16")])
    yield s
    assert s.stop() == 0, "SIGTERM exits 0"


@pytest.fixture(scope="module")
def tiny_client(tiny_server):
    """An `openai` client of tiny_server."""
    with openai_client(tiny_server) as c:
        yield c


@pytest.fixture(scope="module")
def smol_server():
    """A server on the real default model (SmolLM2-135M-Instruct) with the prefix cache hot, one per
    module that asks for it; SIGTERM must stop it with exit status 0."""
    s = start_default_server(["--cache-mode", "hot"])
    yield s
    assert s.stop() == 0, "SIGTERM exits 0"


@pytest.fixture(scope="module")
def smol_base_url(smol_server):
    """smol_server's /v1 address, for clients that take a base URL."""
    return f"{smol_server.base_url}/v1"


@pytest.fixture(scope="module")
def smol_model_id(smol_server):
    """The model id smol_server reports at /v1/models, for clients that must name one."""
    with openai_client(smol_server) as c:
        return c.models.list().data[0].id
