"""The agent side's ServiceKey: which key it sends and when it re-reads the mounted file."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from memorystore.config import ConfigError, SecretSource
from memorystore.middleware.client import ServiceKey


def write(path: Path, value: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(value)
    os.replace(tmp, path)


def test_a_changed_file_is_read_on_the_next_call_and_the_old_key_kept_as_fallback(tmp_path):
    path = tmp_path / "api-key"
    write(path, "k0")
    key = ServiceKey(SecretSource(file=str(path)))
    assert key.current() == "k0" and key.alternatives("k0") == []
    write(path, "k1\n")
    assert key.current() == "k1"
    assert key.alternatives("k1") == ["k0"]  # the service may not know k1 yet
    key.accepted("k0")  # the old key worked: keep both
    assert key.alternatives("k1") == ["k0"]
    key.accepted("k1")  # the new key works: forget the old one
    assert key.alternatives("k1") == []


def test_a_refused_key_makes_it_look_at_the_file_again(tmp_path):
    path = tmp_path / "api-key"
    write(path, "k0")
    key = ServiceKey(SecretSource(file=str(path)))
    path.write_text("k1")  # same inode, perhaps the same mtime tick: a 401 forces the read
    assert key.alternatives("k0") == ["k1"]
    assert key.current() == "k1"


def test_the_env_var_wins_and_never_changes(tmp_path, monkeypatch):
    path = tmp_path / "api-key"
    write(path, "from-file")
    monkeypatch.setenv("ROTATION_AGENT_KEY", "from-env")
    key = ServiceKey(SecretSource(env="ROTATION_AGENT_KEY", file=str(path)))
    write(path, "changed")
    assert key.current() == "from-env" and key.alternatives("from-env") == []


def test_an_unreadable_file_keeps_the_last_key_and_says_so_without_the_key(tmp_path, caplog):
    path = tmp_path / "api-key"
    write(path, "k0-secret")
    key = ServiceKey(SecretSource(file=str(path)))
    write(path, "")
    with caplog.at_level(logging.WARNING, logger="memorystore.middleware"):
        assert key.current() == "k0-secret"
    path.unlink()
    assert key.current() == "k0-secret"
    assert "keeping the last service key" in caplog.text and "k0-secret" not in caplog.text
    assert "k0-secret" not in repr(key)


def test_a_missing_key_at_start_is_a_config_error_naming_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"^apiKey: cannot read secret file"):
        ServiceKey(SecretSource(file=str(tmp_path / "none")))


def test_a_key_given_in_code_never_changes():
    key = ServiceKey(SecretStr("fixed"))
    assert key.current() == "fixed" and key.alternatives("fixed") == []
