"""How an agent's memory behaves: whose it is (scope), who drives it (mode), and how it is
recalled, found and kept true. The service config (`memorystore.config`) and the agent
middleware reuse these as they are, so a setting means the same everywhere.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from memorystore.spec.base import Model

__all__ = [
    "ConsolidationSettings",
    "LexicalTokenizer",
    "Mode",
    "RecallSettings",
    "RetrievalSettings",
    "Scope",
]


class Scope(StrEnum):
    """Whose memory an agent reads and writes."""

    USER = "user"  # one memory per end user, shared by all of the tenant's agents
    AGENT = "agent"  # one memory per (end user, agent)
    PROJECT = "project"  # one memory for the whole tenant project, shared by all users


class Mode(StrEnum):
    """Who decides when memory is read and written."""

    STATIC_CONTROL = "static_control"  # the middleware recalls and writes back automatically
    AGENT_CONTROL = "agent_control"  # the model calls search_memory / add_memory tools
    BOTH = "both"


class LexicalTokenizer(StrEnum):
    """How keyword search splits text into terms (`service/retrieval/lexical.py`)."""

    MULTILINGUAL = "multilingual"
    WORD = "word"


class RecallSettings(Model):
    """How much memory is recalled and how it is packed into the model's context."""

    top_k: int = Field(8, ge=1, le=100, description="Memories considered per recall.")
    threshold: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Score floor: memories scoring below it are never injected. It is the "
        "dense similarity: with an offline embedder's language centring, unrelated memories "
        "score about 0 and relevant ones mostly 0.1-0.6, but a small model puts some "
        "relevant ones near 0.04, so the default keeps every memory that is not dissimilar "
        "and lets topK and tokenBudget bound recall; a remote embedder without centring "
        "typically wants 0.3.",
    )
    token_budget: int = Field(
        512,
        ge=0,
        le=32768,
        description="Upper bound on the tokens of recalled memory injected into one turn "
        "(whole memories only, best first).",
    )
    tool_token_budget: int = Field(
        1024,
        ge=0,
        le=32768,
        description="Upper bound on the tokens a search_memory tool call may return.",
    )
    max_memory_chars: int = Field(
        1000,
        ge=16,
        le=100_000,
        description="A single recalled memory longer than this is cut, with an ellipsis.",
    )


class RetrievalSettings(Model):
    """How the service finds memories for a query, offline (no model calls, no downloads).

    Defaults are the best configuration measured with `memorystore bench locomo`.
    """

    hybrid: bool = Field(
        True,
        description="Fuse dense search with BM25 keyword search (offline encoder; IDF from "
        "the embedded engine or the Qdrant server).",
    )
    lexical_weight: float = Field(
        1.25,
        ge=0.0,
        le=10.0,
        description="Weight of the keyword score against the dense score, when the keyword "
        "evidence is strong (the best keyword hit holds most of the query's distinctive terms).",
    )
    tokenizer: LexicalTokenizer = Field(
        LexicalTokenizer.MULTILINGUAL,
        description="Keyword tokenizer: `multilingual` segments Chinese into words "
        "and splits mixed script (e.g. 用matplotlib画图); `word` is the English word tokenizer "
        "(a run of CJK characters is one term). Changing it re-indexes the store at start-up.",
    )
    neighbour_weight: float = Field(
        0.6,
        ge=0.0,
        le=10.0,
        description="Share of the best neighbouring memory's score (the one written just "
        "before or after in the same scope) added to a memory's own: conversations spread "
        "one topic over consecutive turns.",
    )
    speaker_weight: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Added to the relevance (0 to 1) of what a speaker said (message "
        "`name`) when the query names that speaker and no other among its candidates "
        '("What did Caroline research?").',
    )
    time_weight: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Added to the relevance (0 to 1) of a memory whose day (metadata `date`, "
        "else when it was written) falls in a period the query names: a day, month or year, "
        'in English or Chinese ("in December 2023", "on 8 May", "2023年5月").',
    )
    question_weight: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="Taken from the relevance (0 to 1) of a memory that asks a question (ends "
        "in ? or ？): a question holds no answer, and the turn that answers it gains from "
        "its neighbour share.",
    )
    context: bool = Field(
        True,
        description="Index each memory written as text with its speaker (message `name`) and "
        "date (metadata `date`); embed each conversation turn (a message with a `name`, or "
        "one of a request holding both a user and an assistant message) together with the "
        "turn written just before it in the same scope. A fact written on its own is "
        "embedded alone.",
    )
    candidates: int = Field(
        100, ge=10, le=1000, description="Candidates taken from each search before fusion."
    )
    language_centering: bool = Field(
        True,
        description="Offline embedders only: take each vector's language mean out (Chinese "
        "or other, by script), so a question finds the memory that answers it across "
        "languages. Changing it re-embeds the store at start-up.",
    )

    @classmethod
    def mem0_search(cls, **fields: object) -> RetrievalSettings:
        """Every search stage after dense search off (hybrid, neighbours, cues): mem0's own
        search, with `fields` on top (the bench's baselines, tests of mem0's path)."""
        off: dict[str, object] = {
            "hybrid": False,
            "neighbour_weight": 0.0,
            "speaker_weight": 0.0,
            "time_weight": 0.0,
            "question_weight": 0.0,
        }
        return cls.model_validate({**off, **fields})


class ConsolidationSettings(Model):
    """How the service keeps a scope's memory true: no repeats, no outdated facts.

    Applies to facts (memories written on their own, an agent's add_memory, a session's
    consolidated statements); conversation turns are records of what was said and are only
    de-duplicated when identical.
    """

    deduplicate: bool = Field(
        True,
        description="A new fact that says what a kept one says (same text after "
        "normalisation, one holding the other, or a near-identical wording; never when "
        "numbers or negation differ) is not stored again: the response names the kept one "
        "(event NONE). A new fact holding an old one and more replaces it.",
    )
    supersede: bool = Field(
        True,
        description="A new fact that makes an older one outdated retires it (hidden from "
        "search and recall unless include_retired; history DELETE; the old one names its "
        "successor). With an extraction model the model judges; without one, offline rules "
        "cover where the user lives, works, their role, a named favourite, an explicit "
        "switch and a cancelled plan.",
    )
    session_idle_minutes: float = Field(
        30.0,
        ge=0.1,
        le=10080.0,
        description="A session with unconsolidated exchanges and no new one for this long is "
        "ended by the service: its exchanges are consolidated into memory.",
    )
