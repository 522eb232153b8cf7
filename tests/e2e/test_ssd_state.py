"""The SSD tier's state through the real server, and cache directories that cannot be one.

/health names the tier's state ("on" in tiered mode, "off" in hot mode) and /metrics carries it as
strata_ssd_state (1 on, 0 off, 2 degraded). `--cache-dir ''` and a cache directory that is a
regular file stop `strata serve` at start with an error that names the setting (and the path),
instead of putting the demo model and the SSD tier's files in the working directory.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest

from strata_server import STRATA_BIN, metric, model_path

pytestmark = pytest.mark.timeout(300)

MODEL = model_path("tiny-llama-spm-f16")


def _serve_until_exit(cache_dir: str, cwd: Path) -> subprocess.CompletedProcess:
    """Runs `strata serve` that is expected to refuse to start; returns how it exited."""
    return subprocess.run(
        [str(Path(STRATA_BIN).resolve()), "serve", "--port", "0", "--cache-dir", cache_dir, "--demo"],
        cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )


def test_an_empty_cache_dir_is_an_error_at_start_not_the_working_directory():
    with tempfile.TemporaryDirectory(prefix="strata-e2e-cwd-") as cwd:
        done = _serve_until_exit("", Path(cwd))
        assert done.returncode != 0, f"started with --cache-dir '':\n{done.stdout}{done.stderr}"
        assert "cache.dir" in done.stderr, done.stderr
        assert list(Path(cwd).iterdir()) == [], "files were written to the working directory"


def test_a_cache_dir_that_is_a_regular_file_is_an_error_naming_it():
    with tempfile.TemporaryDirectory(prefix="strata-e2e-cwd-") as cwd:
        file = Path(cwd) / "not-a-dir"
        file.write_text("x")
        done = _serve_until_exit(str(file), Path(cwd))
        assert done.returncode != 0, f"started with a file as cache dir:\n{done.stdout}{done.stderr}"
        assert str(file) in done.stderr, done.stderr
        assert "not a directory" in done.stderr, done.stderr
        assert file.read_text() == "x"


@pytest.mark.parametrize("mode, state, gauge", [("tiered", "on", 1.0), ("hot", "off", 0.0)])
def test_health_and_metrics_show_the_ssd_tier_state(launch, mode, state, gauge):
    s = launch(["-m", MODEL, "--cache-mode", mode])
    health = httpx.get(f"{s.base_url}/health", timeout=60)
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "ssd": state}
    text = httpx.get(f"{s.base_url}/metrics", timeout=60).text
    assert metric(text, "strata_ssd_state") == gauge
    if mode == "tiered":
        assert metric(text, "strata_ssd_blocks_lost_total") == 0
    assert s.stop() == 0, "SIGTERM exits 0"
