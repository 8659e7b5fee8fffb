"""The agent side's toggle table (docs/agent-side.md) is the user's reference: it must match
the code it documents."""

from __future__ import annotations

import re

from pydantic import BaseModel

from memorystore.config import ClientConfig
from memorystore.middleware.settings import PREFIX, TOGGLES
from support.paths import REPO

PAGE = REPO / "docs" / "agent-side.md"
ROW = re.compile(r"^\| `(MEMORYSTORE_[A-Z_]+)` \| `([^`]*)` \|", re.MULTILINE)


def default_of(path: tuple[str, ...]) -> object:
    """The default of the ClientConfig field at `path` (camelCase, as in the mounted file)."""
    model: type[BaseModel] = ClientConfig
    value: object = None
    for key in path:
        (field,) = [f for name, f in model.model_fields.items() if (f.alias or name) == key]
        value = field.get_default(call_default_factory=True)
        model = type(value) if isinstance(value, BaseModel) else model
    return value


def test_every_toggle_is_in_the_docs_with_its_real_default():
    rows = dict(ROW.findall(PAGE.read_text()))
    assert set(rows) == {PREFIX + toggle for toggle in TOGGLES}
    for toggle, path in TOGGLES.items():
        default = default_of(path)
        shown = str(default).lower() if isinstance(default, bool) else str(default)
        assert rows[PREFIX + toggle] == shown, (
            f"{PREFIX}{toggle}: {PAGE.relative_to(REPO)} says {rows[PREFIX + toggle]}"
        )
