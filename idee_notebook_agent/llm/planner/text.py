"""Text normalisation and fuzzy phrase search for the offline planner.

Matching runs on a normalised copy (lower case, no accents, punctuation as spaces) so typos,
missing accents and capitals do not matter; every normalised position maps back to the original
text, so place names and layer titles are cut from what the user wrote, accents and case intact.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from rapidfuzz import fuzz

KEEP_IN_NUMBERS = ".,-"


@lru_cache(maxsize=16384)
def fold(text: str) -> str:
    """Lower case, accents stripped, punctuation collapsed to single spaces (cached: phrases repeat)."""
    return " ".join(normalise(text).norm.split())


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int
    proper: bool = False
    """Capitalised inside a sentence (a name such as "Retiro"): matched exactly, never fuzzily."""


@dataclass
class Text:
    """A user text and its normalised form with a position map back to the original."""

    original: str
    norm: str
    index: list[int]
    tokens: list[Token]

    def span(self, first: int, last: int) -> str:
        """Original text covered by tokens ``first``..``last - 1`` (empty when none).

        A bracket opened inside the span is closed when the original closes it right after.
        """
        if first >= last or first >= len(self.tokens):
            return ""
        start = self.index[self.tokens[first].start]
        end = self.index[self.tokens[last - 1].end - 1] + 1
        for opening, closing in ("()", "[]"):
            piece = self.original[start:end]
            if piece.count(opening) > piece.count(closing):
                close = self.original.find(closing, end)
                if close != -1 and not self.original[end:close].strip():
                    end = close + 1
        return self.original[start:end]

    def joined(self, first: int = 0, last: int | None = None) -> str:
        last = len(self.tokens) if last is None else last
        return " ".join(t.text for t in self.tokens[first:last])


def _fold_char(ch: str) -> str:
    decomposed = unicodedata.normalize("NFKD", ch.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def normalise(text: str) -> Text:
    """Normalise ``text`` keeping, for each output character, the index of its source character."""
    chars: list[str] = []
    index: list[int] = []
    n = len(text)
    for i, ch in enumerate(text):
        folded = _fold_char(ch)
        if not folded:
            continue
        for c in folded:
            if c.isalnum() or (c in KEEP_IN_NUMBERS and _in_number(text, i, c)):
                chars.append(c)
            else:
                chars.append(" ")
            index.append(min(i, n - 1))
    norm = "".join(chars)
    shouting = text.upper() == text
    tokens: list[Token] = []
    pos = 0
    for part in norm.split(" "):
        if part:
            source = index[pos]
            proper = not shouting and text[source].isupper() and not _sentence_start(text, source)
            tokens.append(Token(part, pos, pos + len(part), proper))
        pos += len(part) + 1
    return Text(text, norm, index, tokens)


def _sentence_start(text: str, i: int) -> bool:
    before = text[:i].rstrip(" \"'«“(¿¡")
    return not before or before[-1] in ".!?:;,\n"


def fold_keep(text: str) -> tuple[str, list[int]]:
    """Lower case without accents, punctuation kept, with a map back to original positions."""
    chars: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        for c in _fold_char(ch):
            chars.append(c)
            index.append(i)
    return "".join(chars), index


def _in_number(text: str, i: int, ch: str) -> bool:
    nxt = text[i + 1] if i + 1 < len(text) else ""
    prev = text[i - 1] if i > 0 else ""
    if ch == "-":
        return nxt.isdigit() and not prev.isalnum()
    return prev.isdigit() and nxt.isdigit()


@lru_cache(maxsize=4096)
def phrase_tokens(phrase: str) -> tuple[str, ...]:
    return tuple(fold(phrase).split())


def similar(word: str, phrase: str) -> float:
    """Similarity 0-100 tolerant to one typo; short phrases and first letters must match exactly."""
    if word == phrase:
        return 100.0
    if len(phrase) <= 5 or not word or word[0] != phrase[0]:
        return 0.0
    score = fuzz.ratio(word, phrase)
    threshold = 83.0 if len(phrase) <= 8 else 85.0
    return score if score >= threshold else 0.0


@dataclass(frozen=True)
class Match:
    phrase: str
    start: int
    """First token of the match."""
    end: int
    """Token after the match."""
    score: float

    @property
    def weight(self) -> int:
        return len(self.phrase)


def find_phrase(text: Text, phrase: str, start: int = 0) -> list[Match]:
    """Every place where ``phrase`` (folded) occurs in ``text`` from token ``start``.

    Words are compared one by one, so a typo is forgiven inside a long word but short words
    ("a", "de", "capa") must be exact.
    """
    wanted = phrase_tokens(phrase)
    size = len(wanted)
    if not size:
        return []
    joined = " ".join(wanted)
    tokens = text.tokens
    found: list[Match] = []
    for i in range(start, len(tokens) - size + 1):
        total = 0.0
        for token, target in zip(tokens[i : i + size], wanted, strict=True):
            if token.proper:
                score = 100.0 if token.text == target else 0.0
            else:
                score = similar(token.text, target)
            if not score:
                break
            total += score
        else:
            found.append(Match(joined, i, i + size, total / size))
    return found


def find_any(text: Text, phrases: list[str], start: int = 0) -> list[Match]:
    """All matches of any phrase, best first: longest phrase, then earliest, then closest."""
    found: list[Match] = []
    for phrase in phrases:
        found.extend(find_phrase(text, phrase, start))
    found.sort(key=lambda m: (-m.weight, m.start, -m.score))
    return found


def strip_phrases(
    text: Text, first: int, last: int, leading: list[str], trailing: list[str]
) -> tuple[int, int]:
    """Narrow tokens ``first..last`` by repeatedly removing exact leading/trailing filler phrases."""
    lead = sorted({phrase_tokens(p) for p in leading if p}, key=len, reverse=True)
    trail = sorted({phrase_tokens(p) for p in trailing if p}, key=len, reverse=True)
    words = [t.text for t in text.tokens]
    changed = True
    while changed and first < last:
        changed = False
        for p in lead:
            if p and tuple(words[first : first + len(p)]) == p and first + len(p) <= last:
                first += len(p)
                changed = True
                break
        for p in trail:
            if p and last - len(p) >= first and tuple(words[last - len(p) : last]) == p:
                last -= len(p)
                changed = True
                break
    return first, last
