"""The config files: the example is accepted as is; every bad field is named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memorystore.config import ClientConfig, ConfigError, SecretSource, ServiceConfig, load_model
from memorystore.spec import MemoryStoreSpec
from support.paths import REPO

ROOT = REPO


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "service.yaml"
    path.write_text(text)
    return path


def test_example_service_config_is_accepted_as_is(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORYSTORE_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.delenv("MEMORYSTORE_API_KEY", raising=False)
    cfg = load_model(ServiceConfig, ROOT / "examples/service.yaml")
    assert cfg.data_dir == str(tmp_path / "d")
    assert cfg.vector_store.embedded is not None
    assert cfg.listen.port == 8765
    key = cfg.api_key.resolve("apiKey").get_secret_value()
    assert len(key) >= 32
    key_file = tmp_path / "d" / "api-key"
    assert key_file.read_text() == key
    assert key_file.stat().st_mode & 0o777 == 0o600
    # generated once, then kept
    assert cfg.api_key.resolve("apiKey").get_secret_value() == key


def test_env_key_wins_over_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORYSTORE_API_KEY", "from-env")
    src = SecretSource(env="MEMORYSTORE_API_KEY", file=str(tmp_path / "k"), generate=True)
    assert src.resolve("apiKey").get_secret_value() == "from-env"
    assert not (tmp_path / "k").exists()


@pytest.mark.parametrize(
    ("yaml_text", "needle"),
    [
        ("apiKey: {env: K}\nlisten: {port: 70000}\n", "listen.port"),
        ("apiKey: {env: K}\nvectorStore: {}\n", "vectorStore: Value error, set exactly one"),
        ("apiKey: {env: K}\nembedder: {provider: word2vec}\n", "embedder.provider"),
        ("apiKey: {env: K}\nembedder: {provider: openai}\n", "needs `model`"),
        ("apiKey: {env: K}\nembedder: {dimensions: 1024}\n", "has 384 dimensions, not 1024"),
        ("apiKey: {env: K}\nembedder: {threads: 0}\n", "embedder.threads"),
        ("apiKey: {env: K}\nrecall: {topK: 0}\n", "recall.topK"),
        ("apiKey: {env: K}\nbogus: 1\n", "bogus: Extra inputs are not permitted"),
        ("listen: {port: 1}\n", "apiKey: Field required"),
        ("apiKey: {}\n", "apiKey: Value error, set `env` or `file`"),
        ("apiKey: {env: K}\ndataDir: ${NOPE_NOT_SET}\n", "NOPE_NOT_SET is not set"),
        ("- a list\n", "expected a mapping"),
        ("apiKey: [unclosed\n", "not valid YAML"),
    ],
)
def test_invalid_service_config_names_the_field(tmp_path, yaml_text, needle):
    os.environ.pop("NOPE_NOT_SET", None)
    with pytest.raises(ConfigError) as err:
        load_model(ServiceConfig, write(tmp_path, yaml_text))
    message = str(err.value)
    assert needle.replace("Value error, ", "") in message
    assert str(tmp_path / "service.yaml") in message


def test_missing_secret_names_field_not_value(tmp_path, monkeypatch):
    monkeypatch.delenv("SVC_KEY_UNSET", raising=False)
    cfg = load_model(ServiceConfig, write(tmp_path, "apiKey: {env: SVC_KEY_UNSET}\n"))
    with pytest.raises(ConfigError, match=r"apiKey: environment variable SVC_KEY_UNSET"):
        cfg.api_key.resolve("apiKey")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        SecretSource(file=str(empty)).resolve("apiKey")


def test_secret_value_never_in_repr(monkeypatch):
    monkeypatch.setenv("SOME_KEY", "s3cr3t-value")
    secret = SecretSource(env="SOME_KEY").resolve("apiKey")
    assert "s3cr3t-value" not in repr(secret) and "s3cr3t-value" not in str(secret)


def test_client_config_and_spec_share_recall_defaults():
    client = ClientConfig(endpoint="http://svc:8765", api_key=SecretSource(file="/k"))
    spec = MemoryStoreSpec()
    assert client.recall == spec.recall
    assert spec.deletion_policy == "Retain"
    assert spec.vector_store.managed is not None and spec.history_db.sqlite is not None
    dumped = spec.model_dump(by_alias=True)
    assert "vectorStore" in dumped and "deletionPolicy" in dumped
