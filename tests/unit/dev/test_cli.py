"""`memorystore bench …` hands each benchmark exactly the arguments its entry point takes.

The entry points are imported only when a bench runs, so a keyword one of them lost (e.g.
`tiers` passed to the consistency bench, which has no tiers) fails only there: here every
bench command is parsed with its defaults and its call is bound to the real signature.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

from memorystore.cli import build_parser

# what a command cannot run without
REQUIRED = {"locomo": ["--data", "locomo10.json"]}
BENCHES = {
    "service": ("memorystore_dev.bench.service", "run_service_bench"),
    "agent": ("memorystore_dev.bench.agent", "run_agent_bench"),
    "locomo": ("memorystore_dev.bench.locomo", "run_locomo_bench"),
    "multilingual": ("memorystore_dev.bench.multilingual", "run_multilingual_bench"),
    "consistency": ("memorystore_dev.bench.consistency", "run_consistency_bench"),
    "backup": ("memorystore_dev.bench.backup", "run_backup_bench"),
    "migrate": ("memorystore_dev.bench.migrate", "run_migrate_bench"),
    "pg-lexical": ("memorystore_dev.bench.pg_lexical", "run_pg_lexical_bench"),
    "rules": ("memorystore_dev.bench.rules", "run_rules_bench"),
    "operator": ("memorystore_dev.bench.operator", "run_operator_bench"),
}


def test_every_bench_command_is_covered_here():
    bench = build_parser().parse_args(["bench", "rules"])  # the bench group parses
    assert bench.func.__name__ == "_bench_rules"
    usage = _bench_names()
    assert usage == set(BENCHES), usage ^ set(BENCHES)


def _bench_names() -> set[str]:
    import argparse

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    (benches,) = [
        a for a in commands.choices["bench"]._actions if isinstance(a, argparse._SubParsersAction)
    ]
    return set(benches.choices)


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_each_bench_command_binds_to_its_entry_point(name: str, monkeypatch):
    module_name, function = BENCHES[name]
    module = importlib.import_module(module_name)
    real = inspect.signature(getattr(module, function))
    calls: list[dict[str, Any]] = []

    def fake(*args: Any, **kwargs: Any) -> int:
        real.bind(*args, **kwargs)  # a TypeError names the argument it does not take
        calls.append(kwargs)
        return 0

    monkeypatch.setattr(module, function, fake)
    args = build_parser().parse_args(["bench", name, *REQUIRED.get(name, [])])
    assert args.func(args) == 0
    assert len(calls) == 1


@pytest.mark.parametrize("name", ["locomo", "multilingual"])
def test_configs_help_names_every_retrieval_config(name: str):
    """The help is written out (the bench modules load only when a bench runs): it must
    list exactly the configs the bench has."""
    import argparse

    module = importlib.import_module(BENCHES[name][0])
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    (benches,) = [
        a for a in commands.choices["bench"]._actions if isinstance(a, argparse._SubParsersAction)
    ]
    (configs,) = [a for a in benches.choices[name]._actions if a.dest == "configs"]
    listed = configs.help.removeprefix("comma-separated subset of ").split(" ")[0].split(",")
    assert listed == list(module.CONFIGS)
