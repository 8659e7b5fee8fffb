"""SecretFiles: which secrets it follows, when it re-reads them, what it hands over, and
what it never shows.

Real files in a temporary directory laid out and swapped exactly as kubelet's atomic writer
does (support/kubelet_volume.py), and a fake clock for the periodic re-read. The holders
here are plain recorders; the real ones (pools, mem0's clients, Qdrant clients) are tested
in tests/integration/test_secret_rotation.py and next to their own code.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorystore.config import ConfigError, SecretSource, ServiceConfig
from memorystore.service.ops.secret_files import SecretFiles, followed_secrets
from support.kubelet_volume import KubeletVolume

FIELD = "embedder.apiKey"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Holder:
    """What holds a secret: records every value handed to it."""

    def __init__(self, value: str) -> None:
        self.values = [value]

    def __call__(self, value: str) -> None:
        self.values.append(value)

    @property
    def value(self) -> str:
        return self.values[-1]


def follow(volume: KubeletVolume, clock: Clock | None = None) -> tuple[SecretFiles, Holder]:
    files = SecretFiles(
        {FIELD: SecretSource(file=str(volume.path("api-key")))}, clock=clock or Clock()
    )
    holder = Holder(volume.path("api-key").read_text().strip())
    files.on_change(FIELD, holder)
    return files, holder


@pytest.fixture
def volume(tmp_path: Path) -> KubeletVolume:
    mount = KubeletVolume(tmp_path / "embedder-api-key")
    mount.update({"api-key": "sk-first-0001\n"})
    return mount


def messages(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(record.getMessage() for record in caplog.records)


def test_a_rotated_file_is_handed_to_its_holder_once(volume: KubeletVolume):
    files, holder = follow(volume)
    assert files.check() == [], "nothing changed yet"
    volume.update({"api-key": "sk-second-0002\n"})
    assert files.check() == [FIELD]
    assert holder.values == ["sk-first-0001", "sk-second-0002"], "trailing space cut"
    assert files.check() == [] and files.reloads == 1, "handed over once"


def test_the_same_value_in_a_new_file_is_not_handed_over_again(volume: KubeletVolume):
    files, holder = follow(volume)
    volume.update({"api-key": "sk-first-0001"})  # a new inode, the same secret
    assert files.check() == []
    assert holder.values == ["sk-first-0001"]


def test_a_change_between_start_up_and_the_holders_read_is_not_missed(volume: KubeletVolume):
    files = SecretFiles({FIELD: SecretSource(file=str(volume.path("api-key")))})
    volume.update({"api-key": "sk-second-0002"})  # after SecretFiles, before the holder reads
    holder = Holder(volume.path("api-key").read_text())
    files.on_change(FIELD, holder)
    assert files.check() == [FIELD]  # handed over again: harmless, and nothing is missed
    assert holder.value == "sk-second-0002"


@pytest.mark.parametrize(
    "breakage, reason",
    [
        ("missing", "No such file or directory"),
        ("empty", "is empty"),
        ("not UTF-8", "is not UTF-8 text"),
        ("a directory", "Is a directory"),
    ],
)
def test_a_broken_file_keeps_the_last_good_secret_and_says_why_once(
    volume: KubeletVolume, breakage: str, reason: str, caplog: pytest.LogCaptureFixture
):
    files, holder = follow(volume)
    caplog.set_level(logging.DEBUG)
    if breakage == "missing":
        volume.update({})  # kubelet removes the key's file when the Secret loses the key
    elif breakage == "empty":
        volume.update({"api-key": ""})
    elif breakage == "not UTF-8":
        volume.update({"api-key": b"\xff\xfe sk-first"})
    else:
        volume.update({})
        volume.path("api-key").mkdir()
    assert files.check() == []
    assert holder.values == ["sk-first-0001"], "the last good secret stays in use"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, messages(caplog)
    assert FIELD in warnings[0].getMessage() and reason in warnings[0].getMessage()
    assert "keeping the last good secret" in warnings[0].getMessage()
    assert files.check() == [] and len(caplog.records) == 1, "said once, not every round"
    if breakage == "a directory":
        volume.path("api-key").rmdir()
    volume.update({"api-key": "sk-third-0003"})  # mended
    assert files.check() == [FIELD]
    assert holder.value == "sk-third-0003"
    assert "sk-" not in messages(caplog), "no value in any log line"


@contextlib.contextmanager
def unprivileged() -> Iterator[None]:
    """As root, the effective user `nobody` for the block (the real user stays root, so it
    can switch back): files of mode 000 are then unreadable, as for any service user."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)


def test_an_unreadable_file_keeps_the_last_good_secret(
    volume: KubeletVolume, caplog: pytest.LogCaptureFixture
):
    files, holder = follow(volume)
    volume.update({"api-key": "sk-second-0002"})
    target = volume.path("api-key").resolve()
    target.chmod(0)
    try:
        with unprivileged():  # root reads a file of mode 000: read it as nobody instead
            assert files.check() == []
    finally:
        target.chmod(0o440)
    assert holder.values == ["sk-first-0001"]
    assert "Permission denied" in messages(caplog) and FIELD in messages(caplog)


def test_a_value_its_holder_refuses_keeps_the_last_good_one(
    volume: KubeletVolume, caplog: pytest.LogCaptureFixture
):
    files = SecretFiles({FIELD: SecretSource(file=str(volume.path("api-key")))})
    applied: list[str] = []

    def holder(value: str) -> None:
        if value.startswith("moved"):
            raise ConfigError(f"{FIELD}: the new value names another database")
        if value.startswith("broken"):
            raise RuntimeError(f"could not parse {value}")  # a message that quotes it
        applied.append(value)

    files.on_change(FIELD, holder)
    volume.update({"api-key": "moved-secret-1"})
    assert files.check() == []
    assert "names another database" in messages(caplog)
    volume.update({"api-key": "broken-secret-2"})
    assert files.check() == []
    assert "could not be applied (RuntimeError)" in messages(caplog)
    assert "secret-" not in messages(caplog), "the holder's own message is not shown"
    volume.update({"api-key": "good-secret-3"})
    assert files.check() == [FIELD]
    assert applied == ["good-secret-3"]


def test_a_rewrite_stat_does_not_see_is_read_within_the_refresh_period(tmp_path: Path):
    """Rewritten in place with the same size and modification time (a coarse-timestamp file
    system): stat cannot tell, the periodic re-read does."""
    path = tmp_path / "api-key"
    path.write_text("sk-aaaa")
    clock = Clock()
    files = SecretFiles({FIELD: SecretSource(file=str(path))}, clock=clock, refresh_seconds=60)
    holder = Holder("sk-aaaa")
    files.on_change(FIELD, holder)
    stat = path.stat()
    with path.open("r+") as fh:  # the same inode
        fh.write("sk-bbbb")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert files.check() == [], "the stat is unchanged: not read again yet"
    clock.now += 59.9
    assert files.check() == []
    clock.now += 0.2
    assert files.check() == [FIELD]
    assert holder.value == "sk-bbbb"


def test_a_field_nothing_holds_is_not_followed(volume: KubeletVolume):
    files = SecretFiles({FIELD: SecretSource(file=str(volume.path("api-key")))})
    assert files.fields == []
    files.start()  # nothing to follow: no thread
    assert files._thread is None
    files.stop()


def test_the_thread_hands_a_rotation_over_within_a_few_intervals(volume: KubeletVolume):
    files = SecretFiles({FIELD: SecretSource(file=str(volume.path("api-key")))}, interval=0.05)
    seen = threading.Event()
    files.on_change(FIELD, lambda value: seen.set())
    files.start()
    try:
        volume.update({"api-key": "sk-second-0002"})
        assert seen.wait(5), "not handed over by the polling thread"
    finally:
        files.stop()
    assert files._thread is not None and not files._thread.is_alive()


def test_followed_secrets_are_the_file_based_ones_but_the_service_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    def file(name: str) -> dict[str, str]:
        return {"file": str(tmp_path / name)}

    monkeypatch.setenv("LLM_KEY", "sk-from-the-environment")
    cfg = ServiceConfig.model_validate(
        {
            "dataDir": str(tmp_path),
            "apiKey": file("service-key"),
            "previousApiKey": {**file("previous"), "optional": True},
            "vectorStore": {"postgres": {"database": {"dsn": file("vector-dsn")}}},
            "history": {"postgres": {"dsn": file("history-dsn")}},
            "embedder": {
                "provider": "openai",
                "model": "m",
                "dimensions": 8,
                "apiKey": file("embedder-key"),
            },
            # env wins over file when set: it cannot change while the process runs
            "llm": {"provider": "openai", "model": "m", "apiKey": {"env": "LLM_KEY", **file("x")}},
        }
    )
    followed = followed_secrets(cfg)
    assert sorted(followed) == [
        "embedder.apiKey",
        "history.postgres.dsn",
        "vectorStore.postgres.database.dsn",
    ]
    assert followed["embedder.apiKey"].file == str(tmp_path / "embedder-key")
    monkeypatch.delenv("LLM_KEY")
    assert "llm.apiKey" in followed_secrets(cfg), "the variable unset: the file is read"
    server = cfg.model_copy(
        update={
            "vector_store": cfg.vector_store.model_validate(
                {"server": {"url": "http://q:6333", "apiKey": file("qdrant")}}
            ),
            "history": cfg.history.model_validate({}),
        }
    )
    assert "vectorStore.server.apiKey" in followed_secrets(server)


KEY = st.text(
    alphabet=st.characters(
        min_codepoint=33, max_codepoint=0x2FFF, exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")
    ),
    min_size=12,
    max_size=40,
)
STEP = st.one_of(
    KEY.map(lambda key: ("write", key)),
    st.sampled_from([("empty", ""), ("missing", ""), ("garbage", "")]),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=KEY, steps=st.lists(STEP, min_size=1, max_size=8))
def test_the_holder_always_has_the_last_good_value_and_no_log_shows_one(
    tmp_path_factory: pytest.TempPathFactory, first: str, steps: list[tuple[str, str]]
):
    """Any sequence of rotations and broken files: after each round the holder holds the
    last value written that could be read, and no log line holds any value written."""
    volume = KubeletVolume(tmp_path_factory.mktemp("mount"))
    volume.update({"api-key": first})
    files, holder = follow(volume)
    handler = _Recording()
    logging.getLogger().addHandler(handler)
    previous_level = logging.getLogger().level
    logging.getLogger().setLevel(logging.DEBUG)
    try:
        good = first
        for kind, key in steps:
            if kind == "write":
                volume.update({"api-key": key})
                good = key
            elif kind == "empty":
                volume.update({"api-key": "  \n"})
            elif kind == "missing":
                volume.update({})
            else:
                volume.update({"api-key": b"\x80\x81"})
            files.check()
            assert holder.value == good
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(previous_level)
    logged = "\n".join(handler.lines)
    for value in {first, *(key for kind, key in steps if kind == "write")}:
        assert value not in logged


class _Recording(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_check_is_cheap_when_nothing_changed(volume: KubeletVolume):
    """A round of stat calls, no read: printed, not asserted against a time."""
    files, _ = follow(volume)
    start = time.perf_counter()
    for _ in range(1000):
        files.check()
    per_round = (time.perf_counter() - start) / 1000 * 1e6
    print(f"\nSecretFiles.check with one file and nothing changed: {per_round:.1f} µs per round")
