"""Python values as PostgreSQL stores them, keeping what the embedded engine distinguishes.

Why: the PostgreSQL store must answer exactly like qdrant-edge, and jsonb alone would not
(1.0 and 1 collapse, NUL is refused, strings are not words or datetimes). So a payload is
written as JSON that keeps a float a float, with two shadows beside it that SQL cannot
compute: the ids of each string's words (what `contains` matches) and the UTC microseconds
of each string the engine reads as a datetime (what datetime ranges compare).
"""

from __future__ import annotations

import functools
import json
import math
import re
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import qdrant_edge as qe

from memorystore.service.stores.protocol import Payload, PointId

__all__ = [
    "datetime_micros",
    "payload_json",
    "point_uuid",
    "shown_micros",
    "times_of",
    "vector_literal",
    "word_ids",
    "words_of",
]


def point_uuid(value: PointId) -> str:
    """A point id as PostgreSQL's canonical UUID text; ValueError like the engine's when it
    is not a UUID."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ValueError(f"failed to parse {value} as UUID") from None


def vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def payload_json(value: Any) -> str:
    """JSON for jsonb that keeps what the engine distinguishes: a float always has a decimal
    point (jsonb would store 1e16 as 10000000000000000, an integer to the filters), integers
    beyond u64 become floats (the engine keeps a double), NaN and infinities are refused
    with the engine's message."""
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"'{type(key).__name__}' object is not an instance of 'str'")
            items.append(f"{_json_string(key)}:{payload_json(item)}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(payload_json(item) for item in value) + "]"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value) if -(2**63) <= value < 2**64 else _json_float(float(value))
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return _json_string(value)
    raise TypeError(f"'{type(value).__name__}' object cannot be stored in a payload")


def _json_float(value: float) -> str:
    if not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        raise ValueError(f"failed to convert {shown} into payload number type")
    text = repr(value)
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
    return text if "." in text else text + ".0"


def _json_string(text: str) -> str:
    if "\x00" in text:
        raise ValueError("PostgreSQL cannot store the NUL character (\\u0000) in a payload")
    return json.dumps(text)


def _shadow(value: Any, leaf: Callable[[str], Any]) -> Any:
    """`value` with every string replaced by leaf(string) and everything else by None,
    pruned where nothing is left (arrays keep their positions for index paths)."""
    if isinstance(value, str):
        return leaf(value)
    if isinstance(value, dict):
        kept = {k: s for k, v in value.items() if (s := _shadow(v, leaf)) is not None}
        return kept or None
    if isinstance(value, list | tuple):
        items = [_shadow(v, leaf) for v in value]
        return items if any(item is not None for item in items) else None
    return None


@functools.cache
def _word_encoder() -> qe.Bm25:
    """The engine's word tokenizer as its text match uses it without a full-text index:
    split at every non-alphanumeric character, lowercased, no stemming, no stopwords
    (checked against the engine's MatchText on fuzzed Unicode:
    tests/unit/service/stores/pgvector/test_translation.py)."""
    return qe.Bm25(
        qe.Bm25Config(
            tokenizer=qe.TokenizerType.Word,
            lowercase=True,
            stopwords=qe.StopwordsSet(languages=set(), custom=set()),
            stemmer=qe.DisabledStemmer(),
        )
    )


def word_ids(text: str) -> list[str]:
    """The ids of a text's words (the engine's hashes), as sorted decimal strings."""
    return sorted({str(i) for i in _word_encoder().embed_query(text).indices})


def _word_ids(text: str) -> str | None:
    return " ".join(word_ids(text)) or None


def words_of(payload: Payload) -> Payload:
    """The payload's shadow of words: every string as its words' ids (space-separated)."""
    words: Payload = _shadow(payload, _word_ids) or {}
    return words


def times_of(payload: Payload) -> Payload:
    """The payload's shadow of datetimes: every string the engine reads as one, in UTC
    microseconds."""
    times: Payload = _shadow(payload, datetime_micros) or {}
    return times


_SHOWN_DATETIME_RE = re.compile(
    r"^([+-]?\d+)-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d+))? UTC$"
)


def datetime_micros(text: str) -> int | None:
    """UTC microseconds of a string the engine reads as a datetime, else None.

    Parsed by the engine itself (its range bound, the same parser as for payload values),
    which accepts more than ISO 8601 (' 2024-1-5', '2024-01-15 10:00', '+002024-01-15') and
    keeps microseconds.
    """
    try:
        shown = qe.RangeDateTime(gte=text).gte
    except ValueError:
        return None
    return shown_micros(shown) if shown is not None else None


def shown_micros(shown: str) -> int:
    """Microseconds since 1970 of the engine's datetime text ('2024-01-15 08:00:00.5 UTC')."""
    found = _SHOWN_DATETIME_RE.match(shown)
    if found is None:
        raise RuntimeError(f"unexpected datetime from qdrant-edge: {shown!r}")
    year, month, day, hour, minute, second = (int(found.group(i)) for i in range(1, 7))
    micros = int((found.group(7) or "0")[:6].ljust(6, "0"))
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    return seconds * 1_000_000 + micros


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar, any year (H. Hinnant)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468
