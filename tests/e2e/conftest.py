"""pytest setup shared by the end-to-end suites of this folder.

The `launch` fixture starts servers for a test and kills those the test left running.
A run that collects no test is a failure with a message, never a quiet exit status 5: a module
whose tests were renamed or lost must not pass as an empty CTest test.
"""

from __future__ import annotations

import sys

import pytest

from strata_server import model_path, openai_client, start_server


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
