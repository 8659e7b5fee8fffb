"""The operator's settings (`settings.py`): every variable, its default, and a bad value
refused naming the variable; nothing in the operator reads the environment at import."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

import memorystore.operator
from memorystore.operator.builders.model import Images, Monitoring, OperatorPods
from memorystore.operator.settings import (
    BACKUP_WAIT_SECONDS,
    OPERATOR_NAMESPACE,
    OPERATOR_POD_LABELS,
    POD_MONITOR_INTERVAL,
    POD_MONITOR_LABELS,
    POD_MONITORS,
    QDRANT_IMAGE,
    RESYNC_SECONDS,
    SCRAPERS,
    SERVICE_IMAGE,
    VARIABLES,
    OperatorSettings,
    SettingsError,
)

NS_ENV = OPERATOR_NAMESPACE
LABELS_ENV = OPERATOR_POD_LABELS


def test_the_defaults_are_a_run_outside_any_cluster():
    defaults = OperatorSettings.from_env({})
    assert defaults == OperatorSettings()
    assert defaults.images == Images()
    assert defaults.operator_pods is None
    assert defaults.resync_seconds == 30.0
    assert defaults.backup_wait_seconds == 600.0


def test_every_variable_is_read():
    env = {
        SERVICE_IMAGE: "reg/svc:1",
        QDRANT_IMAGE: "reg/qdrant:2",
        RESYNC_SECONDS: "2.5",
        BACKUP_WAIT_SECONDS: "20",
        OPERATOR_NAMESPACE: "memorystore-system",
        OPERATOR_POD_LABELS: '{"app": "op"}',
        POD_MONITORS: "true",
        POD_MONITOR_INTERVAL: "1m30s",
        POD_MONITOR_LABELS: '{"release": "prom"}',
        SCRAPERS: '[{"namespaceSelector": {"matchLabels": {"team": "obs"}}}]',
    }
    assert set(env) == set(VARIABLES)
    assert OperatorSettings.from_env(env) == OperatorSettings(
        images=Images(service="reg/svc:1", qdrant="reg/qdrant:2"),
        operator_pods=OperatorPods("memorystore-system", (("app", "op"),)),
        monitoring=Monitoring(
            pod_monitors=True,
            interval="1m30s",
            labels=(("release", "prom"),),
            scrapers=({"namespaceSelector": {"matchLabels": {"team": "obs"}}},),
        ),
        resync_seconds=2.5,
        backup_wait_seconds=20.0,
    )


def test_images_come_from_the_operator_environment():
    env = {SERVICE_IMAGE: "reg/svc:1", QDRANT_IMAGE: ""}
    images = OperatorSettings.from_env(env).images
    assert images.service == "reg/svc:1"
    assert images.qdrant == Images.qdrant, "unset or empty keeps the default"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({NS_ENV: "ops"}, None),
        ({NS_ENV: "ops", LABELS_ENV: "{}"}, None),
        ({NS_ENV: "ops", LABELS_ENV: "{"}, None),
        ({NS_ENV: "ops", LABELS_ENV: '{"a": 1}'}, None),
        ({NS_ENV: "", LABELS_ENV: '{"a": "1"}'}, None),
        ({NS_ENV: "ops", LABELS_ENV: '{"b":"2","a":"1"}'},
         OperatorPods("ops", (("a", "1"), ("b", "2")))),
    ],
)  # fmt: skip
def test_operator_pods_from_env(env, expected):
    assert OperatorSettings.from_env(env).operator_pods == expected


@pytest.mark.parametrize("var", [RESYNC_SECONDS, BACKUP_WAIT_SECONDS])
def test_an_empty_number_is_the_default(var):
    assert OperatorSettings.from_env({var: "  "}) == OperatorSettings()


@pytest.mark.parametrize(
    ("var", "value", "complaint"),
    [
        (RESYNC_SECONDS, "soon", "valid number"),
        (RESYNC_SECONDS, "0", "greater than 0"),
        (RESYNC_SECONDS, "-1", "greater than 0"),
        (RESYNC_SECONDS, "nan", "finite number"),
        (RESYNC_SECONDS, "inf", "finite number"),
        (BACKUP_WAIT_SECONDS, "10m", "valid number"),
        (BACKUP_WAIT_SECONDS, "-5", "greater than or equal to 0"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable_and_the_value(var, value, complaint):
    with pytest.raises(SettingsError) as info:
        OperatorSettings.from_env({var: value})
    message = str(info.value)
    assert message.startswith(f"{var}={value!r}: ")
    assert complaint in message


def test_every_bad_value_is_named_at_once():
    with pytest.raises(SettingsError) as info:
        OperatorSettings.from_env({RESYNC_SECONDS: "x", BACKUP_WAIT_SECONDS: "y"})
    assert RESYNC_SECONDS in str(info.value) and BACKUP_WAIT_SECONDS in str(info.value)


def test_a_zero_wait_gives_up_at_once():
    assert OperatorSettings.from_env({BACKUP_WAIT_SECONDS: "0"}).backup_wait_seconds == 0


def test_the_settings_are_frozen():
    config = OperatorSettings()
    with pytest.raises(ValidationError):
        config.resync_seconds = 1  # type: ignore[misc]


def _environment_reads(tree: ast.AST) -> list[ast.Attribute]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
        and node.attr in ("environ", "getenv")
    ]


def test_the_environment_is_read_only_by_the_start_up_handler():
    """Nothing reads `os.environ` at import; kopf's start-up handler reads it once, into the
    settings; and only the settings module names a variable."""
    readers = {}
    for module in pkgutil.walk_packages(memorystore.operator.__path__, "memorystore.operator."):
        path = Path(importlib.import_module(module.name).__file__ or "")
        source = path.read_text()
        for node in ast.parse(source).body:
            if _environment_reads(node):
                function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                where = node.name if function else "<import>"
                readers.setdefault(module.name, set()).add(where)
        if path.name != "settings.py":
            assert not any(f'"{var}"' in source for var in VARIABLES), path
    assert readers == {"memorystore.operator.handlers": {"configure"}}


@pytest.mark.parametrize(
    ("var", "value", "complaint"),
    [
        (POD_MONITORS, "yes", "not true or false"),
        (POD_MONITOR_INTERVAL, "often", "not a Prometheus duration"),
        (POD_MONITOR_INTERVAL, "30", "not a Prometheus duration"),
        (POD_MONITOR_LABELS, '["a"]', "not a JSON object of strings"),
        (POD_MONITOR_LABELS, '{"a": 1}', "not a JSON object of strings"),
        (SCRAPERS, "{", "not JSON"),
        (SCRAPERS, '{"podSelector": {}}', "not a JSON list"),
        (SCRAPERS, "[{}]", "[0]: a NetworkPolicy peer"),
        (SCRAPERS, '[{"podSelector": {}}, {"hostNetwork": true}]', "[1]: a NetworkPolicy peer"),
        (SCRAPERS, '[{"podSelector": "prometheus"}]', "[0]: a NetworkPolicy peer"),
    ],
)
def test_a_bad_monitoring_value_stops_the_start_naming_the_variable(var, value, complaint):
    """A bad peer would make every store's NetworkPolicy unappliable: refused at start-up."""
    with pytest.raises(SettingsError) as info:
        OperatorSettings.from_env({var: value})
    assert str(info.value).startswith(var) and complaint in str(info.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3)
    ),
    max_leaves=8,
)
PEERS = st.lists(
    st.dictionaries(
        st.sampled_from(["podSelector", "namespaceSelector", "ipBlock", "hostNetwork", ""]),
        JSON,
        max_size=3,
    ),
    max_size=3,
)


@given(st.one_of(JSON, PEERS))
def test_any_scrapers_value_is_peers_or_refused_by_name(value):
    """Generated JSON for the scrapers: accepted only as a list of peers of the three
    fields, each an object; anything else a SettingsError naming the variable, never a crash."""
    try:
        scrapers = OperatorSettings.from_env({SCRAPERS: json.dumps(value)}).monitoring.scrapers
    except SettingsError as exc:
        assert str(exc).startswith(SCRAPERS)
        return
    assert isinstance(value, list) and scrapers == tuple(value)
    for peer in scrapers:
        assert peer and set(peer) <= {"podSelector", "namespaceSelector", "ipBlock"}
        assert all(isinstance(v, dict) for v in peer.values())
