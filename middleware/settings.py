"""The agent side's settings: the mounted client config, overridden by MEMORYSTORE_* toggles.

Precedence is env > mounted config > defaults, so a platform team mounts one config per
tenant and each agent Deployment tunes behaviour with env vars. Every value is validated
when the process builds its factory, and a bad one names the variable or field at fault.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import yaml
from pydantic import ValidationError

from memorystore.config import ClientConfig, ConfigError, expand_env

PREFIX = "MEMORYSTORE_"
CONFIG_PATH_VAR = f"{PREFIX}CLIENT_CONFIG"
DEFAULT_CONFIG_PATH = "/etc/memorystore/client/client.yaml"

# toggle (after the prefix) -> path of the field in ClientConfig (camelCase, as in the file)
TOGGLES: dict[str, tuple[str, ...]] = {
    "ENABLED": ("enabled",),
    "MODE": ("mode",),
    "SCOPE": ("scope",),
    "TOP_K": ("recall", "topK"),
    "THRESHOLD": ("recall", "threshold"),
    "TOKEN_BUDGET": ("recall", "tokenBudget"),
    "TOOL_TOKEN_BUDGET": ("recall", "toolTokenBudget"),
    "TOOL_RESULT_MAX_BYTES": ("toolResultMaxBytes",),
    "WRITE_PERMISSION": ("writePermission",),
    "TIMEOUT_SECONDS": ("timeoutSeconds",),
    "FAIL_OPEN": ("failOpen",),
    "CAPTURE": ("capture",),
    "CAPTURE_INFER": ("captureInfer",),
    "CAPTURE_MODE": ("captureMode",),
    "VERIFY_TLS": ("tls", "verify"),
}


class ConfigMissing(ConfigError):
    """No client config is mounted: memory is off for this process (unless strict)."""


def config_path(env: Mapping[str, str]) -> Path:
    return Path(env.get(CONFIG_PATH_VAR) or DEFAULT_CONFIG_PATH)


def load_settings(env: Mapping[str, str] | None = None) -> ClientConfig:
    """Read the mounted config, apply the toggles set in `env`, validate the result."""
    env = os.environ if env is None else env
    path = config_path(env)
    if not path.is_file():
        raise ConfigMissing(f"no client config at {path} (set {CONFIG_PATH_VAR})")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    data = expand_env(raw)
    origin: dict[tuple[str, ...], str] = {}
    for toggle, field_path in TOGGLES.items():
        value = (env.get(PREFIX + toggle) or "").strip()
        if not value:
            continue  # unset and blank mean the same: the file (or the default) decides
        node = data
        for key in field_path[:-1]:
            if node.get(key) is None:
                node[key] = {}
            node = node[key]
            if not isinstance(node, dict):
                raise ConfigError(f"{path}: {key}: expected a mapping (set by {PREFIX}{toggle})")
        node[field_path[-1]] = value
        origin[field_path] = PREFIX + toggle
    try:
        return ClientConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_name_sources(exc, origin, path)) from None


def _name_sources(exc: ValidationError, origin: dict[tuple[str, ...], str], path: Path) -> str:
    """Each problem names the env var it came from, or the field in the mounted file."""
    problems = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        var = origin.get(loc)
        if var is not None:
            problems.append(f"{var}={err.get('input')!r}: {msg}")
        else:
            problems.append(f"{path}: {'.'.join(loc)}: {msg}")
    return "; ".join(problems)
