"""The service's KeyRing: which keys it accepts, when it re-reads their files, and how.

Real files in a temporary directory, rewritten the way kubelet updates a mounted Secret
(a new file swapped in under the same name), and a fake clock so every timing rule is
exact: a miss re-reads at most once a second, and the keys are re-read every 10 s anyway.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from memorystore.config import ConfigError, SecretSource, ServiceConfig
from memorystore.service.ops import auth
from memorystore.service.ops.auth import KeyRing


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, value: str) -> None:
    """Replace the file atomically, as kubelet's atomic writer does (a new inode)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(value)
    os.replace(tmp, path)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    current, previous = tmp_path / "api-key", tmp_path / "previous-api-key"
    write(current, "key-new\n")
    write(previous, "key-old")
    return current, previous


def ring(current: Path, previous: Path | None, clock: Clock) -> KeyRing:
    return KeyRing(
        SecretSource(file=str(current)),
        SecretSource(file=str(previous), optional=True) if previous else None,
        clock=clock,
    )


def test_accepts_the_current_and_the_previous_key_and_nothing_else(keys):
    clock = Clock()
    r = ring(*keys, clock)
    assert r.size == 2
    assert r.check("key-new") and r.check("key-old")
    for wrong in ("", "key", "key-new ", "KEY-NEW", "key-new\x00", "key-older", "ключ"):
        assert not r.check(wrong), wrong


def test_a_rotated_current_key_is_accepted_once_its_file_changes(keys):
    current, previous = keys
    clock = Clock()
    r = ring(current, previous, clock)
    write(current, "key-newer")
    write(previous, "key-new")
    clock.now += 0.5  # a miss re-reads at most once a second
    assert not r.check("key-newer")
    clock.now += 0.5
    assert r.check("key-newer")
    assert r.check("key-new")  # now the previous key
    assert not r.check("key-old")  # rotated out of both files


def test_a_removed_previous_key_stops_working_within_the_refresh_period(keys):
    current, previous = keys
    clock = Clock()
    r = ring(current, previous, clock)
    previous.unlink()  # the operator removed it at the end of the grace period
    clock.now += 9.9
    assert r.check("key-old")  # not re-read yet: it matched, so no miss reload either
    clock.now += 0.1
    assert not r.check("key-old")
    assert r.check("key-new") and r.size == 1


def test_a_previous_key_that_appears_later_is_picked_up(tmp_path, keys):
    current, previous = keys
    previous.unlink()
    clock = Clock()
    r = ring(current, previous, clock)
    assert r.size == 1 and not r.check("key-old")
    write(previous, "key-old")
    clock.now += 1
    assert r.check("key-old")


def test_misses_cannot_make_it_read_the_files_more_than_once_a_second(keys, monkeypatch):
    clock = Clock()
    r = ring(*keys, clock)
    reads = []
    original = SecretSource.read

    def counted(self: SecretSource, field: str):
        reads.append(field)
        return original(self, field)

    monkeypatch.setattr(SecretSource, "read", counted)
    for _ in range(100):
        assert not r.check("guess")
    assert reads == []  # the start-up read was less than a second ago
    clock.now += 1
    for _ in range(100):
        assert not r.check("guess")
    assert reads == ["apiKey", "previousApiKey"]  # one reload for the lot


def test_every_key_is_compared_in_constant_time_without_stopping_at_a_match(keys, monkeypatch):
    clock = Clock()
    r = ring(*keys, clock)
    calls: list[tuple[bytes, bytes]] = []
    real = auth.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    assert r.check("key-new")
    assert calls == [(b"key-new", b"key-new"), (b"key-new", b"key-old")]
    calls.clear()
    assert r.check("key-old")
    assert calls == [(b"key-old", b"key-new"), (b"key-old", b"key-old")]


def test_a_missing_or_empty_current_key_fails_start_up_naming_the_field(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=r"^apiKey: cannot read secret file .*nope"):
        KeyRing(SecretSource(file=str(missing)))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match=r"^apiKey: secret file .*empty is empty"):
        KeyRing(SecretSource(file=str(empty)))


def test_a_broken_current_file_at_runtime_keeps_the_last_good_key(keys, caplog):
    current, previous = keys
    clock = Clock()
    r = ring(current, previous, clock)
    write(current, "")
    clock.now += 10
    with caplog.at_level(logging.WARNING, logger="memorystore.service"):
        assert r.check("key-new")
    current.unlink()
    clock.now += 10
    assert r.check("key-new")
    assert "keeping the last service key" in caplog.text
    assert "key-new" not in caplog.text and "key-old" not in caplog.text


def test_reload_logs_what_changed_but_never_a_key(keys, caplog):
    current, previous = keys
    clock = Clock()
    r = ring(current, previous, clock)
    write(current, "key-newer")
    clock.now += 10
    with caplog.at_level(logging.INFO, logger="memorystore.service"):
        assert r.check("key-newer")
    assert "current key changed" in caplog.text
    for key in ("key-newer", "key-new", "key-old"):
        assert key not in caplog.text


def test_a_generated_local_key_is_never_regenerated_by_a_reload(tmp_path):
    path = tmp_path / "local" / "api-key"
    clock = Clock()
    r = KeyRing(SecretSource(file=str(path), generate=True), clock=clock)
    key = path.read_text()
    assert r.check(key)
    path.unlink()
    clock.now += 10
    assert r.check(key)  # kept, and no new file appeared behind the operator's back
    assert not path.exists()


# --- the config side ------------------------------------------------------------------------


def test_secret_source_optional_reads_absent_as_none(tmp_path, monkeypatch):
    monkeypatch.delenv("ROTATION_TEST_KEY", raising=False)
    assert SecretSource(file=str(tmp_path / "x"), optional=True).read("f") is None
    (tmp_path / "empty").write_text("  ")
    assert SecretSource(file=str(tmp_path / "empty"), optional=True).read("f") is None
    assert SecretSource(env="ROTATION_TEST_KEY", optional=True).read("f") is None
    with pytest.raises(ConfigError, match=r"^f: secret file .*x is missing or empty"):
        SecretSource(file=str(tmp_path / "x"), optional=True).resolve("f")
    # a file that exists but cannot be read is a broken mount, not an absent key
    (tmp_path / "dir").mkdir()
    with pytest.raises(ConfigError, match=r"^f: cannot read secret file"):
        SecretSource(file=str(tmp_path / "dir"), optional=True).read("f")


def test_optional_and_generate_exclude_each_other():
    with pytest.raises(ValidationError, match="`generate` and `optional` exclude each other"):
        SecretSource(file="/x", generate=True, optional=True)


def test_the_previous_key_is_always_optional_and_never_generated():
    cfg = ServiceConfig.model_validate(
        {"apiKey": {"file": "/k/api-key"}, "previousApiKey": {"file": "/k/previous-api-key"}}
    )
    assert cfg.previous_api_key is not None and cfg.previous_api_key.optional
    with pytest.raises(ValidationError, match="previousApiKey: `generate` is for apiKey only"):
        ServiceConfig.model_validate(
            {
                "apiKey": {"file": "/k/api-key"},
                "previousApiKey": {"file": "/k/previous-api-key", "generate": True},
            }
        )
