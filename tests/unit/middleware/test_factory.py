"""Building the agent-side factory: what happens at process start, before any request."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memorystore.config import ConfigError
from memorystore.middleware import MemoryMiddlewareFactory
from memorystore.middleware.memory import idempotency_key
from memorystore.middleware.settings import ConfigMissing
from memorystore.middleware.tools import _cap_bytes


def write_config(tmp_path: Path, body: str) -> dict[str, str]:
    path = tmp_path / "client.yaml"
    path.write_text(body)
    return {"MEMORYSTORE_CLIENT_CONFIG": str(path)}


async def test_no_mounted_config_turns_memory_off_with_a_warning(tmp_path: Path, caplog):
    env = {"MEMORYSTORE_CLIENT_CONFIG": str(tmp_path / "absent.yaml")}
    with caplog.at_level(logging.WARNING, logger="memorystore.middleware"):
        factory = MemoryMiddlewareFactory.from_env(env)
    assert not factory.enabled
    assert await factory("alice", "agent", "s1") == []
    assert "agent memory is off" in caplog.text and "absent.yaml" in caplog.text


def test_no_mounted_config_in_strict_mode_fails_start_up(tmp_path: Path):
    env = {
        "MEMORYSTORE_CLIENT_CONFIG": str(tmp_path / "absent.yaml"),
        "MEMORYSTORE_FAIL_OPEN": "false",
    }
    with pytest.raises(ConfigMissing, match=r"absent\.yaml"):
        MemoryMiddlewareFactory.from_env(env)


def test_an_unreadable_service_key_fails_start_up_naming_the_field(tmp_path: Path):
    env = write_config(
        tmp_path, f"endpoint: http://memory:8765\napiKey: {{file: {tmp_path}/no-key}}\n"
    )
    with pytest.raises(ConfigError, match=r"apiKey: cannot read secret file .*no-key"):
        MemoryMiddlewareFactory.from_env(env)


def test_an_invalid_toggle_fails_start_up_naming_the_variable(tmp_path: Path):
    (tmp_path / "key").write_text("k")
    env = write_config(
        tmp_path, f"endpoint: http://memory:8765\napiKey: {{file: {tmp_path}/key}}\n"
    )
    with pytest.raises(ConfigError, match="MEMORYSTORE_TIMEOUT_SECONDS='soon'"):
        MemoryMiddlewareFactory.from_env({**env, "MEMORYSTORE_TIMEOUT_SECONDS": "soon"})


async def test_disabled_needs_no_key_and_builds_nothing(tmp_path: Path):
    env = write_config(
        tmp_path, f"endpoint: http://memory:8765\napiKey: {{file: {tmp_path}/absent}}\n"
    )
    factory = MemoryMiddlewareFactory.from_env({**env, "MEMORYSTORE_ENABLED": "false"})
    assert factory.client is None
    assert await factory("alice", "agent", "s1") == []


def test_the_idempotency_key_is_per_reply_and_never_shows_its_inputs():
    key = idempotency_key("acme", "alice", "agent", "s1", "reply-1")
    assert key == idempotency_key("acme", "alice", "agent", "s1", "reply-1")
    others = {
        idempotency_key("acme", "alice", "agent", "s1", "reply-2"),
        idempotency_key("acme", "bob", "agent", "s1", "reply-1"),
        idempotency_key("acme", "alice", "agent", "s2", "reply-1"),
        idempotency_key("other", "alice", "agent", "s1", "reply-1"),
    }
    assert key not in others and len(others) == 4
    assert "alice" not in key and len(key) <= 256


def test_tool_results_are_capped_in_bytes_on_line_boundaries():
    lines = [f"- memory number {i} about charts" for i in range(100)]
    text = "\n".join(lines)
    capped = _cap_bytes(text, 300)
    assert len(capped.encode()) <= 300
    kept = capped.split("\n")[:-1]
    assert kept == lines[: len(kept)] and kept, "whole lines, best first"
    assert capped.endswith(f"(… {100 - len(kept)} more not shown)")
    assert _cap_bytes(text, 100_000) == text
    # one memory alone over the cap (multi-byte text): cut on a character boundary
    single = _cap_bytes("- " + "深色模式" * 100, 100)
    assert len(single.encode()) <= 100 and single.endswith("…")
