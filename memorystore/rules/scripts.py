"""The scripts the text rules tell apart, defined once: named Unicode ranges and the classes
built from them, as regular-expression class bodies (`f"[{HAN}]"`).

Why one module: "CJK" was written four ways (supersession, de-duplication, the token estimate,
the language means) plus a dozen inline classes, each a little different. Every class here is
a union of the named ranges below, and a composite says why it differs from the others.
Only assigned code points are listed (Unicode 14, the version of Python 3.11), so that an
unassigned one never counts as a letter.
"""

from __future__ import annotations

__all__ = [
    "CJK_LETTERS",
    "HALFWIDTH_KATAKANA",
    "HAN",
    "HANGUL_SYLLABLES",
    "HAN_COMPATIBILITY",
    "HAN_COMPATIBILITY_SUPPLEMENT",
    "HAN_EXTENSIONS_B_TO_G",
    "HAN_EXTENSION_A",
    "HAN_UNIFIED",
    "IDEOGRAPHIC_MARKS",
    "KANA_LETTERS",
    "TOKEN_PER_CHARACTER",
]

# --- named ranges ---------------------------------------------------------------------------
HAN_UNIFIED = "\u4e00-\u9fff"  # CJK Unified Ideographs: the common Chinese characters
HAN_EXTENSION_A = "\u3400-\u4dbf"
HAN_COMPATIBILITY = "\uf900-\ufa6d\ufa70-\ufad9"  # NFKC folds most into HAN_UNIFIED
HAN_EXTENSIONS_B_TO_G = (
    "\U00020000-\U0002a6df"  # B
    "\U0002a700-\U0002b738"  # C
    "\U0002b740-\U0002b81d"  # D
    "\U0002b820-\U0002cea1"  # E
    "\U0002ceb0-\U0002ebe0"  # F
    "\U00030000-\U0003134a"  # G
)
HAN_COMPATIBILITY_SUPPLEMENT = "\U0002f800-\U0002fa1d"
IDEOGRAPHIC_MARKS = "\u3005-\u3007"  # 々 〆 〇
KANA_LETTERS = (
    "\u3041-\u3096\u309d-\u309f"  # hiragana, its iteration marks and yori
    "\u30a1-\u30fa\u30fc-\u30ff"  # katakana, the prolonged sound mark, iteration marks, koto
)
HALFWIDTH_KATAKANA = "\uff66-\uff9f"
HANGUL_SYLLABLES = "\uac00-\ud7a3"

# --- composites -----------------------------------------------------------------------------
# Chinese characters: what makes a text Chinese for supersession and for the language means.
HAN = (
    HAN_EXTENSION_A
    + HAN_UNIFIED
    + HAN_COMPATIBILITY
    + HAN_EXTENSIONS_B_TO_G
    + HAN_COMPATIBILITY_SUPPLEMENT
)
# De-duplication reads one token per character of these (Japanese too): letters, no marks.
CJK_LETTERS = IDEOGRAPHIC_MARKS + KANA_LETTERS + HAN
# The token estimate counts one token per character of these: a tokenizer spends about one on
# each Hangul syllable and half-width katakana too, which no rule reads.
TOKEN_PER_CHARACTER = CJK_LETTERS + HANGUL_SYLLABLES + HALFWIDTH_KATAKANA
