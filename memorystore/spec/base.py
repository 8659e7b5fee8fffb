"""The base of every API model: what makes a field of the MemoryStore API look and behave
like a Kubernetes field (camelCase on the wire, unknown fields refused), in one place.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = [
    "Model",
]


class Model(BaseModel):
    """Base for every API model: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=True,
    )
