"""Agent-side settings: mounted config, env toggles on top, errors that name the source."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorystore.config import ConfigError
from memorystore.middleware.settings import ConfigMissing, load_settings

MOUNTED = """
endpoint: http://acme-memory.tenants.svc:8765
tenant: tenants/acme
apiKey: {file: /etc/memorystore/secrets/api-key}
scope: user
mode: both
recall: {topK: 8, threshold: 0.3, tokenBudget: 512}
"""


def env_with(tmp_path: Path, text: str = MOUNTED, **toggles: str) -> dict[str, str]:
    path = tmp_path / "client.yaml"
    path.write_text(text)
    return {"MEMORYSTORE_CLIENT_CONFIG": str(path), **toggles}


def test_mounted_config_with_defaults(tmp_path):
    cfg = load_settings(env_with(tmp_path))
    assert cfg.endpoint == "http://acme-memory.tenants.svc:8765"
    assert cfg.recall.top_k == 8 and cfg.fail_open and cfg.capture and cfg.enabled
    assert cfg.write_permission == "ask"  # a human confirms add_memory unless told otherwise


def test_env_toggles_win_over_the_mounted_config(tmp_path):
    cfg = load_settings(
        env_with(
            tmp_path,
            MEMORYSTORE_ENABLED="false",
            MEMORYSTORE_MODE="agent_control",
            MEMORYSTORE_SCOPE="agent",
            MEMORYSTORE_TOP_K="3",
            MEMORYSTORE_THRESHOLD="0.5",
            MEMORYSTORE_TOKEN_BUDGET="64",
            MEMORYSTORE_TOOL_TOKEN_BUDGET="128",
            MEMORYSTORE_TOOL_RESULT_MAX_BYTES="4096",
            MEMORYSTORE_WRITE_PERMISSION="ask",
            MEMORYSTORE_TIMEOUT_SECONDS="0.5",
            MEMORYSTORE_FAIL_OPEN="no",
            MEMORYSTORE_CAPTURE="0",
            MEMORYSTORE_CAPTURE_INFER="true",
            MEMORYSTORE_VERIFY_TLS="false",
        )
    )
    assert cfg.tls.verify is False
    assert (cfg.enabled, cfg.mode, cfg.scope) == (False, "agent_control", "agent")
    assert (cfg.recall.top_k, cfg.recall.threshold, cfg.recall.token_budget) == (3, 0.5, 64)
    assert cfg.recall.tool_token_budget == 128 and cfg.tool_result_max_bytes == 4096
    assert cfg.write_permission == "ask" and cfg.timeout_seconds == 0.5
    assert (cfg.fail_open, cfg.capture, cfg.capture_infer) == (False, False, True)
    assert cfg.recall.max_memory_chars == 1000  # untouched fields keep the file's or defaults


@pytest.mark.parametrize(
    ("toggle", "value", "needle"),
    [
        ("MEMORYSTORE_TOP_K", "lots", "MEMORYSTORE_TOP_K='lots'"),
        ("MEMORYSTORE_TOP_K", "0", "greater than or equal to 1"),
        ("MEMORYSTORE_MODE", "telepathy", "MEMORYSTORE_MODE='telepathy'"),
        ("MEMORYSTORE_WRITE_PERMISSION", "maybe", "MEMORYSTORE_WRITE_PERMISSION"),
        ("MEMORYSTORE_FAIL_OPEN", "sometimes", "MEMORYSTORE_FAIL_OPEN"),
        ("MEMORYSTORE_TIMEOUT_SECONDS", "-1", "MEMORYSTORE_TIMEOUT_SECONDS"),
        ("MEMORYSTORE_VERIFY_TLS", "perhaps", "MEMORYSTORE_VERIFY_TLS='perhaps'"),
    ],
)
def test_an_invalid_toggle_names_the_variable(tmp_path, toggle, value, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        load_settings(env_with(tmp_path, **{toggle: value}))


def test_a_bad_mounted_field_names_the_file_and_field(tmp_path):
    with pytest.raises(ConfigError, match=r"client.yaml: recall.topK"):
        load_settings(env_with(tmp_path, MOUNTED.replace("topK: 8", "topK: 0")))


def test_no_mounted_config_is_its_own_error(tmp_path):
    with pytest.raises(ConfigMissing, match="MEMORYSTORE_CLIENT_CONFIG"):
        load_settings({"MEMORYSTORE_CLIENT_CONFIG": str(tmp_path / "absent.yaml")})


def test_the_operator_rendered_client_config_loads(tmp_path):
    from memorystore.operator.builders.configs import client_config, render_client_config
    from memorystore.operator.builders.model import Owner
    from memorystore.spec import MemoryStoreSpec

    owner = Owner("acme", "tenants", "uid-1", 1)
    spec = MemoryStoreSpec(scope="agent")
    text = render_client_config(owner, client_config(owner, spec, ca_cert="PEM"))
    cfg = load_settings(env_with(tmp_path, text, MEMORYSTORE_TOP_K="2"))
    assert cfg.endpoint == "https://acme-memory.tenants.svc:8765"
    assert cfg.tls.ca_file == "/etc/memorystore/client/ca.crt" and cfg.tls.verify
    assert cfg.scope == "agent" and cfg.recall.top_k == 2
    off = load_settings(env_with(tmp_path, text, MEMORYSTORE_VERIFY_TLS="false"))
    assert off.tls.verify is False and off.tls.ca_file == "/etc/memorystore/client/ca.crt"


def test_a_nested_toggle_over_an_empty_or_scalar_section(tmp_path):
    for section, works in (("recall:\n", True), ("recall: 5\n", False)):
        path = tmp_path / "client.yaml"
        path.write_text(f"endpoint: http://memory:8765\napiKey: {{env: KEY}}\n{section}")
        env = {"MEMORYSTORE_CLIENT_CONFIG": str(path), "MEMORYSTORE_TOP_K": "3"}
        if works:
            assert load_settings(env).recall.top_k == 3
        else:
            with pytest.raises(
                ConfigError, match=r"recall: expected a mapping .*MEMORYSTORE_TOP_K"
            ):
                load_settings(env)


def test_a_blank_toggle_counts_as_unset(tmp_path):
    path = tmp_path / "client.yaml"
    path.write_text("endpoint: http://memory:8765\napiKey: {env: KEY}\nenabled: false\n")
    env = {"MEMORYSTORE_CLIENT_CONFIG": str(path), "MEMORYSTORE_ENABLED": "   "}
    assert load_settings(env).enabled is False
