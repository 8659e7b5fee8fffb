"""`memorystore serve` as a user runs it: a real process, the example config, bad configs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from memorystore.service.ops.runner import wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "memorystore"]


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "MEMORYSTORE_DATA_DIR": str(tmp_path / "data"), **extra}


def test_invalid_config_exits_at_start_naming_the_field(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiKey: {env: K}\nrecall: {threshold: 7}\n")
    result = subprocess.run(
        [*CLI, "serve", "--config", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "recall.threshold" in result.stderr and "less than or equal to 1" in result.stderr


def test_missing_secret_exits_at_start_without_leaking(tmp_path: Path):
    cfg = tmp_path / "svc.yaml"
    cfg.write_text(f"apiKey: {{env: MS_TEST_UNSET_KEY}}\ndataDir: {tmp_path / 'd'}\n")
    result = subprocess.run(
        [*CLI, "serve", "--config", str(cfg)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "apiKey: environment variable MS_TEST_UNSET_KEY is not set" in result.stderr


def test_example_config_serves_as_is(tmp_path: Path):
    port = "18765"
    proc = subprocess.Popen(
        [*CLI, "serve", "--config", str(ROOT / "examples/service.yaml")],
        env=env(tmp_path, MEMORYSTORE_PORT=port, MEMORYSTORE_API_KEY="example-key"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until_ready(f"http://127.0.0.1:{port}", proc)
        headers = {"Authorization": "Token example-key"}
        added = httpx.post(
            f"http://127.0.0.1:{port}/v3/memories/add/",
            json={"messages": [{"role": "user", "content": "hello"}], "user_id": "u"},
            headers=headers,
        )
        assert added.status_code == 200
        assert (tmp_path / "data" / "qdrant").is_dir() and (
            tmp_path / "data" / "history.db"
        ).is_file()
        assert (tmp_path / "data" / "mem0").is_dir()
    finally:
        proc.terminate()
        output = proc.communicate(timeout=60)[0]
    # uvicorn shuts down gracefully on SIGTERM, then re-raises it for the exit status
    assert proc.returncode in (0, -15), output
    assert "Application shutdown complete" in output
    assert "example-key" not in output


def test_help_teaches():
    result = subprocess.run([*CLI, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for word in ("serve", "demo", "bench", "examples:"):
        assert word in result.stdout


def test_unreachable_model_endpoint_stops_the_start(tmp_path: Path):
    cfg = tmp_path / "svc.yaml"
    cfg.write_text(
        f"apiKey: {{env: K}}\ndataDir: {tmp_path / 'd'}\n"
        "embedder: {provider: ollama, model: bge-m3, dimensions: 1024, baseUrl: 'http://127.0.0.1:9'}\n"
    )
    result = subprocess.run(
        [*CLI, "serve", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "K": "k"},
    )
    assert result.returncode == 1
    assert "memorystore serve: cannot start: ConnectionError" in result.stderr
