"""What a session keeps of the user's words without a model: their own statements.

Why a rule of its own: session consolidation stores, when no extraction model is configured,
the sentences in which the user says something about themselves, and the agent side can run
the same rule without mem0. A message is cut into sentences (`sentences.split`), a sentence
into first-person clauses ("I moved to Hangzhou, I started at X" is two facts, and one that
changes later must be retirable without the other); questions, requests without a first
person, greetings and acknowledgements (`lexicons/acknowledgements.txt`) are left out.
Assistant replies are never statements: they echo the user or answer a request.
"""

from __future__ import annotations

import re
from typing import Any

from memorystore.rules import lexicon
from memorystore.rules.sentences import split

__all__ = ["MIN_CHARS", "statements"]

# a comma that starts a new first-person clause, or "and" before a first-person contraction
_CLAUSE = re.compile(
    r"(?:\s*[,，]\s*(?:(?:and|but|so|also|plus)\s+|(?:而且|还有|另外|并且|但是?|所以|也)\s*)?"
    r"(?=(?:i|i'm|i've|i'd|we|we're|we've|my|our)\b|我)"
    r"|\s+and\s+(?=(?:i'm|i've|i'd|i'll|we're|we've)\b))",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|im|my|mine|me|myself|we|we're|we've|our|ours|us)\b|我",
    re.IGNORECASE,
)
_QUESTION_END = re.compile(r"[?？]\s*$|[吗呢么嘛]\s*[。.!！]?\s*$")
_REQUEST_START = re.compile(
    r"^(?:please\s+|pls\s+)?(?:can|could|would|will)\s+you\b|^(?:please\s+)?(?:help|show|tell|"
    r"give|draw|plot|make|write|create|explain|translate|summari[sz]e|list|find|recommend|"
    r"suggest|check|fix|generate|compute|calculate|remind)\b(?!.*\b(?:by default|always|from "
    r"now on|in future|going forward)\b)|^(?:请|麻烦|帮我|给我|你能|能不能|可以帮)",
    re.IGNORECASE,
)
_ACKS = re.compile(
    rf"^(?:{'|'.join(lexicon.tagged('acknowledgements', 'statements'))})\W*$", re.IGNORECASE
)
MIN_CHARS = 4  # shorter is no statement ("ok", "yes!")


def _clauses(sentence: str) -> list[str]:
    """The first-person clauses of a sentence; a clause without one stays with the next (it
    is context: "Forget the Japan trip, we're going to Korea instead")."""
    parts = [p for p in _CLAUSE.split(sentence) if p.strip()]
    clauses: list[str] = []
    pending = ""
    for part in parts:
        part = f"{pending}, {part}" if pending else part
        if _FIRST_PERSON.search(part) or _ACKS.match(part.strip()):
            clauses.append(part)
            pending = ""
        else:
            pending = part
    if pending:
        clauses.append(pending)
    return clauses


def statements(messages: list[dict[str, Any]]) -> list[str]:
    """The sentences (first-person clauses) of the user's messages worth keeping, in order."""
    kept: list[str] = []
    for msg in messages:
        if msg.get("role") != "user":
            continue
        sentences = split(str(msg.get("content") or ""), every_dot=True)
        for sentence in (c for s in sentences for c in _clauses(s)):
            sentence = sentence.strip()
            if len(sentence) < MIN_CHARS or _ACKS.match(sentence):
                continue
            if _QUESTION_END.search(sentence) or _REQUEST_START.match(sentence):
                continue
            if not _FIRST_PERSON.search(sentence):
                continue
            if sentence not in kept:
                kept.append(sentence)
    return kept
