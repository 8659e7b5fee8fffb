"""What the vector-store tests share: the keyword data the contract suite ranks on each store
(and the PostgreSQL tests hold PostgreSQL's scores on against the engine's)."""

from __future__ import annotations

from typing import Any

# Points for a keyword search of "pizza napoli" by user a: "both" holds both terms (one of
# them twice, in the lemmatized text), "one" holds one term in a longer text; the rest have
# no matching term, another user, or no terms at all (empty, stopwords only, no text).
KEYWORD_ROWS: dict[str, dict[str, Any]] = {
    "both": {"data": "pizza lover", "text_lemmatized": "pizza pizza napoli", "user_id": "a"},
    "one": {"data": "likes pizza and pasta and wine and cheese", "user_id": "a"},
    "none": {"data": "sushi every friday", "user_id": "a"},
    "other_user": {"data": "pizza pizza", "user_id": "b"},
    "empty": {"data": "", "user_id": "a"},
    "stopwords": {"data": "the of and", "user_id": "a"},
    "no_text": {"user_id": "a"},
}
