"""Where the layers run (--device, model.device): /v1/models reports it, and a device the build or
the machine cannot use stops the start with a message instead of serving on the CPU unasked."""

from __future__ import annotations

import subprocess

import httpx

from strata_server import STRATA_BIN, model_path


def test_the_models_list_reports_the_cpu_device_by_default(tiny_server):
    models = httpx.get(f"{tiny_server.base_url}/v1/models", timeout=30).json()
    assert [m["device"] for m in models["data"]] == ["cpu"]
    assert "device cpu" in tiny_server.log()


def test_an_unusable_cuda_device_ends_the_start_with_a_message(launch):
    # CI builds without CUDA, and its machines have no GPU: either way the load must fail and say so.
    s = launch(["-m", model_path("tiny-qwen2-gpt2-f16"), "--device", "cuda"], healthy=False)
    assert s.wait_exit() == 1
    assert "--device cuda" in s.log()


def test_an_unknown_device_is_refused_on_the_command_line():
    r = subprocess.run([STRATA_BIN, "serve", "--port", "0", "-m", model_path("tiny-qwen2-gpt2-f16"), "--device", "tpu"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "--device: expected cpu or cuda, got 'tpu'" in r.stderr
