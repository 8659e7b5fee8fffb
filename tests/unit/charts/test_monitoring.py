"""The chart's alert rules under promtool (built from its pinned Go module, like every tool
here): `promtool check rules` on the file the PrometheusRule embeds, and `promtool test rules`
on the unit tests beside this file, in which every alert fires when it should and stays
silent when it should not. That they name only exported metrics:
tests/integration/test_monitoring.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from memorystore_dev.devcluster.tools import ensure_tools
from support.paths import REPO

ALERTS = REPO / "charts" / "memorystore" / "files" / "alerts.yaml"
ALERT_TESTS = Path(__file__).parent / "alerts_test.yaml"


@pytest.fixture(scope="module")
def promtool() -> Path:
    try:
        return ensure_tools(["promtool"])["promtool"]
    except Exception as exc:  # a failed build fails these tests, it never skips them
        pytest.fail(
            f"cannot build the pinned promtool (memorystore dev tools --tools promtool): {exc}"
        )


def run(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


def test_the_rules_pass_promtool_check(promtool: Path):
    result = run(promtool, "check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    alerts = [r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    assert f"SUCCESS: {len(alerts)} rules found" in result.stdout


def test_every_alert_fires_and_stays_silent_in_promtools_unit_tests(promtool: Path):
    result = run(promtool, "test", "rules", str(ALERT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    # each alert is tested both ways: firing, and an evaluation where it must not fire
    alerts = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    tested = yaml.safe_load(ALERT_TESTS.read_text())["tests"]
    cases = [c for t in tested for c in t.get("alert_rule_test", [])]
    fired = {c["alertname"] for c in cases if c.get("exp_alerts")}
    silent = {c["alertname"] for c in cases if not c.get("exp_alerts")}
    assert fired == alerts and silent == alerts, (alerts - fired, alerts - silent)


def test_a_broken_rule_is_caught(promtool: Path, tmp_path: Path):
    """The check can fail: a rule whose expression does not parse is refused."""
    broken = yaml.safe_load(ALERTS.read_text())
    broken["groups"][0]["rules"][0]["expr"] = "memorystore_operator_store_ready =="
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(broken))
    result = run(promtool, "check", "rules", str(path))
    assert result.returncode != 0 and "parse error" in (result.stdout + result.stderr)
