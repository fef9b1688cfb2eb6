"""From a user message to planned steps: split into clauses, match rules, extract slots.

Rules come from YAML (``rules.py``); this module only knows the slot kinds (place, layer, zoom
level...). A clause no rule recognises becomes a ``fallback`` step, answered in words.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz, process

from .rules import PlannerData, Rule
from .text import Text, find_any, fold, fold_keep, normalise, phrase_tokens, strip_phrases

FALLBACK = "fallback"
QUOTES = " \"'«»“”.,;:!?¿¡"


@dataclass
class Step:
    """One thing to do, with its arguments taken from the user's words."""

    action: str
    rule: str
    clause: str
    params: dict[str, Any] = field(default_factory=dict)
    anchor_start: int = 0


@dataclass
class Parsed:
    steps: list[Step]
    lang: str


# ------------------------------------------------------------------------------ language
def detect_language(text: str, data: PlannerData) -> str:
    """``en`` when English marker words outnumber Spanish ones, else ``es`` (the default)."""
    joined = " " + " ".join(t.text for t in normalise(text).tokens) + " "
    scores = {
        lang: sum(joined.count(f" {fold(w)} ") for w in data.words(f"language.{lang}"))
        for lang in ("es", "en")
    }
    if any(ch in text for ch in "¿¡ñáéíóúÁÉÍÓÚÑ"):
        scores["es"] += 2
    return "en" if scores["en"] > scores["es"] else "es"


# ------------------------------------------------------------------------------ clauses
def _splitter(data: PlannerData) -> re.Pattern[str]:
    words = sorted({fold(w) for w in data.words("clauses.connectors") if fold(w)}, key=len)
    alternation = "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in reversed(words))
    sep = r"(?:[,;!?¿¡]|\.(?!\d))"
    conn = rf"\b(?:{alternation})\b" if alternation else r"(?!x)x"
    return re.compile(rf"\s*(?:{sep}\s*(?:{conn}\s*)*|\s(?:{conn}\s+)+)")


def _spans(text: str, pattern: re.Pattern[str]) -> tuple[list[tuple[int, int]], list[int]]:
    """Spans of the folded ``text`` between matches of ``pattern``, and the map to originals."""
    folded, index = fold_keep(text)
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in pattern.finditer(folded):
        if m.end() == m.start():
            continue
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(folded)))
    return spans, index


def _pieces(text: str, pattern: re.Pattern[str]) -> list[str]:
    """``text`` cut at every match of ``pattern`` (matched on the folded text), originals kept."""
    spans, index = _spans(text, pattern)
    return [text[index[a] : index[b - 1] + 1] if a < b else "" for a, b in spans]


def _starts_request(segment: str, data: PlannerData, rules: list[Rule]) -> bool:
    """True when ``segment`` begins a request of its own (one the planner knows, or another)."""
    step = classify(segment, data, rules)
    if step.action not in (FALLBACK, "help"):
        return step.anchor_start <= int(data.get("clauses.max_anchor_start", 3))
    text = normalise(segment)
    other = [m for m in find_any(text, data.words("clauses.other_requests")) if m.start == 0]
    return bool(other) and not find_any(text, data.words("clauses.not_new_requests"))


def split_clauses(text: str, data: PlannerData, rules: list[Rule]) -> list[str]:
    """Split at connectors ("y", "and", "luego", commas...) only where a new request starts."""
    spans, index = _spans(text, _splitter(data))

    def original(a: int, b: int) -> str:
        return text[index[a] : index[b - 1] + 1] if a < b else ""

    clauses: list[str] = []
    start, end = spans[0]
    for a, b in spans[1:]:
        segment = original(a, b)
        if segment.strip() and _starts_request(segment, data, rules):
            if original(start, end).strip():
                clauses.append(original(start, end))
            start, end = a, b
        else:
            end = b
    if original(start, end).strip():
        clauses.append(original(start, end))
    return clauses


# ------------------------------------------------------------------------------ rules
def classify(clause: str, data: PlannerData, rules: list[Rule]) -> Step:
    """The first rule (by priority) whose conditions and slot hold, else a fallback step."""
    text = normalise(clause)
    for rule in rules:
        if rule.forbid and find_any(text, rule.forbid):
            continue
        if any(not find_any(text, group) for group in rule.require):
            continue
        matches = find_any(text, rule.anchors)
        for match in matches[:3]:
            params = SLOT_PARSERS[rule.slot](text, match.start, match.end, rule, data)
            if params is not None:
                return Step(rule.action, rule.id, clause, {**rule.params, **params}, match.start)
    return Step(FALLBACK, FALLBACK, clause, {"text": clause.strip()})


PARSE_CACHE_SIZE = 256


def parse(text: str, data: PlannerData) -> Parsed:
    """Plan the steps of one user message (cached: every round of a turn re-reads the same text)."""
    cache: dict[str, Parsed] = data._derived.setdefault("parse", {})
    cached = cache.get(text)
    if cached is None:
        cached = _parse(text, data)
        if len(cache) >= PARSE_CACHE_SIZE:
            cache.clear()
        cache[text] = cached
    return copy.deepcopy(cached)


def _parse(text: str, data: PlannerData) -> Parsed:
    rules = data.rules
    lang = detect_language(text, data)
    steps: list[Step] = []
    for clause in split_clauses(text, data, rules):
        step = classify(clause, data, rules)
        if step.action == "detect" and step.params.get("place"):
            zoom = int(data.get("detectors.go_zoom", 17))
            steps.append(
                Step("goto", step.rule, clause, {"place": step.params["place"], "zoom": zoom})
            )
        steps.append(step)
    useful = [s for s in steps if s.action not in ("help", FALLBACK)]
    if useful:
        steps = [s for s in steps if s.action != "help"]
    return Parsed(steps or [Step(FALLBACK, FALLBACK, text, {"text": text})], lang)


# ------------------------------------------------------------------------------ slot helpers
def _clean(text: Text, first: int, last: int, data: PlannerData, kind: str) -> tuple[int, int]:
    leading = data.words("fillers.leading") + data.words(f"fillers.{kind}.leading")
    trailing = data.words("fillers.trailing") + data.words(f"fillers.{kind}.trailing")
    return strip_phrases(text, first, last, leading, trailing)


def _after_or_before(
    text: Text, start: int, end: int, data: PlannerData, kind: str
) -> tuple[int, int]:
    """Slot tokens after the anchor; when nothing is left there, the words before it."""
    first, last = _clean(text, end, len(text.tokens), data, kind)
    if first < last:
        return first, last
    lead = data.vocab("commands") + data.words("fillers.leading")
    first, last = strip_phrases(text, 0, start, lead, [])
    return _clean(text, first, last, data, kind)


def _number(word: str, data: PlannerData) -> int | None:
    if word.isdigit():
        return int(word)
    numbers = data.get("numbers", {}) or {}
    value = numbers.get(word)
    return int(value) if value is not None else None


def _alias(phrase: str, data: PlannerData, path: str, cutoff: float = 88.0) -> str | None:
    """The target of the alias table at ``path`` whose phrase best matches the whole ``phrase``."""
    folded = fold(phrase)
    if not folded:
        return None
    choices = data.choices(path)
    if folded in choices:
        return choices[folded]
    best = process.extractOne(folded, list(choices), scorer=fuzz.ratio, score_cutoff=cutoff)
    return choices[best[0]] if best else None


def _table_phrase(text: Text, table: dict[str, Any]) -> Any:
    """Value of the longest key of ``table`` found in ``text``, or None."""
    found = find_any(text, [str(k) for k in table])
    if not found:
        return None
    for key, value in table.items():
        if " ".join(phrase_tokens(str(key))) == found[0].phrase:
            return value
    return None


def _coords(words: list[str]) -> tuple[float, float] | None:
    if len(words) != 2:
        return None
    try:
        a, b = (float(w.replace(",", ".")) for w in words)
    except ValueError:
        return None
    if abs(a) > 90 or (abs(a) < 20 and abs(b) > 25):
        a, b = b, a
    if abs(a) > 90 or abs(b) > 180:
        return None
    return a, b


def _is_view(phrase: str, data: PlannerData) -> bool:
    return fold(phrase) in data.folded("view_words")


# ------------------------------------------------------------------------------ slots
def slot_none(text: Text, start: int, end: int, rule: Rule, data: PlannerData) -> dict | None:
    return {}


def slot_place(text: Text, start: int, end: int, rule: Rule, data: PlannerData) -> dict | None:
    """A place name (or "lat, lon"), with an optional "con zoom 15" at its end."""
    first, last = _after_or_before(text, start, end, data, "place")
    if first >= last:
        return None
    words = [t.text for t in text.tokens]
    zoom: int | None = None
    zoom_words = data.folded("zoom.words")
    for i in range(first, last):
        if words[i] in zoom_words:
            if i == first:
                return None  # "zoom a nivel 12" is not a place
            for j in range(i + 1, min(i + 3, last)):
                value = _number(words[j], data)
                if value is not None:
                    zoom = value
                    break
            first, last = _clean(text, first, i, data, "place")
            break
    if first >= last:
        return None
    coords = _coords(words[first:last])
    if coords:
        return {"place": text.span(first, last), "coords": coords, "zoom": zoom}
    if not any(ch.isalpha() for ch in text.joined(first, last)):
        return None
    if words[first] in data.folded("place.reject_first"):
        return None
    if last - first > int(data.get("place.max_words", 10)):
        return None
    articles = data.folded("place.articles")
    generic = data.folded("place.generic_nouns")
    if last - first >= 2 and words[first] in articles and words[first + 1] in generic:
        first += 1
    place = text.span(first, last).strip(QUOTES)
    if not place or _is_view(place, data):
        return None
    place = _alias(place, data, "place.aliases", cutoff=92.0) or place
    return {"place": place, "zoom": zoom}


def _layer_parts(phrase: str, data: PlannerData, translate: bool = True) -> list[str]:
    """One layer phrase, or several when it lists known layers ("la ortofoto y el catastro").

    With ``translate`` an alias (English or generic words) becomes its catalog id.
    """
    whole = _alias(phrase, data, "layers.aliases")
    if whole:
        return [whole if translate else phrase]
    words = sorted({fold(w) for w in data.words("layers.split") if fold(w).strip()}, key=len)
    alternation = "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in reversed(words))
    pattern = re.compile(rf"\s*,\s*|\s+(?:{alternation})\s+" if alternation else r"\s*,\s*")
    pieces = _pieces(phrase, pattern) if "(" not in phrase else [phrase]
    if len(pieces) < 2:
        return [phrase]
    names: list[str] = []
    for piece in pieces:
        text = normalise(piece)
        a, b = _clean(text, 0, len(text.tokens), data, "layer")
        piece = text.span(a, b).strip(QUOTES)
        if not piece:
            continue
        target = _alias(piece, data, "layers.aliases")
        if target is None and not find_any(normalise(piece), data.vocab("layer_words")):
            return [phrase]
        names.append(target if target and translate else piece)
    return list(dict.fromkeys(names)) or [phrase]


def slot_layer(text: Text, start: int, end: int, rule: Rule, data: PlannerData) -> dict | None:
    """A layer phrase as the user wrote it (the catalog resolves it), or an alias's catalog id."""
    first, last = _after_or_before(text, start, end, data, "layer")
    if first >= last:
        return None
    phrase = text.span(first, last).strip(QUOTES)
    if not phrase or _is_view(phrase, data):
        return None
    return {"phrase": phrase, "names": _layer_parts(phrase, data)}


def slot_remove(text: Text, start: int, end: int, rule: Rule, data: PlannerData) -> dict | None:
    """Which layer(s) to remove; "todas" removes every layer but the base map."""
    everything = bool(find_any(text, data.words("layers.all_words")))
    force = bool(find_any(text, data.words("layers.base_words")))
    first, last = _clean(text, end, len(text.tokens), data, "layer")
    phrase = text.span(first, last).strip(QUOTES) if first < last else ""
    names = _layer_parts(phrase, data, translate=False) if phrase and not everything else []
    return {
        "phrase": phrase,
        "names": names,
        "aliases": [_alias(n, data, "layers.aliases") for n in names],
        "all": everything,
        "force": force,
    }


def slot_topic(text: Text, start: int, end: int, rule: Rule, data: PlannerData) -> dict | None:
    """The topic of a service search, in the catalogue's Spanish when it was said in English."""
    first, last = _after_or_before(text, start, end, data, "topic")
    if first >= last:
        return None
    topic = text.span(first, last).strip(QUOTES)
    if not topic:
        return None
    topic = _alias(topic, data, "topics.aliases") or topic
    service_type = _table_phrase(text, data.get("topics.service_types", {}) or {})
    return {"query": topic, "type": str(service_type) if service_type else None}


def slot_level(text: Text, start: int, end: int, rule: Rule, data: PlannerData) -> dict | None:
    """An absolute zoom level: a number in the clause or a named level ("nivel de calle")."""
    for tok in text.tokens:
        if tok.text.isdigit():
            return {"level": int(tok.text)}
    named = _table_phrase(text, data.get("zoom.named_levels", {}) or {})
    if named is not None:
        return {"level": int(named)}
    for tok in text.tokens[end:]:
        value = _number(tok.text, data)
        if value is not None:
            return {"level": value}
    return None


def slot_zoom(text: Text, start: int, end: int, rule: Rule, data: PlannerData) -> dict | None:
    """Relative change (``delta``) or an absolute target (``level``) for zoom in/out."""
    words = [t.text for t in text.tokens]
    markers = data.folded("zoom.absolute_markers")
    units = data.folded("zoom.unit_words")
    zoom_words = data.folded("zoom.words")
    max_delta = int(data.get("zoom.max_delta", 10))
    named = _table_phrase(text, data.get("zoom.named_levels", {}) or {})
    if named is not None:
        return {"level": int(named)}
    for i, word in enumerate(words):
        value = _number(word, data)
        if value is None:
            continue
        before = words[max(0, i - 2) : i]
        after = words[i + 1 : i + 2]
        if after and after[0] in units:
            return {"delta": min(value, max_delta)}
        if word.isdigit() and before and (before[-1] in markers or before[-1] in zoom_words):
            return {"level": value}
        if word.isdigit():
            return {"delta": min(value, max_delta)}
    delta = _table_phrase(text, data.get("zoom.delta_words", {}) or {})
    if delta is not None:
        return {"delta": int(delta)}
    return {"delta": int(data.get("zoom.default_delta", 1))}


def slot_detect(text: Text, start: int, end: int, rule: Rule, data: PlannerData) -> dict | None:
    """The detector (from the rule or the object named) and an optional place to go first."""
    detectors = data.get("detectors.known", {}) or {}
    detector = rule.params.get("detector")
    obj = ""
    if not detector:
        first, last = _clean(text, end, len(text.tokens), data, "detect")
        obj = text.span(first, last)
        for name, info in detectors.items():
            if find_any(normalise(obj), [str(p) for p in (info or {}).get("phrases", [])]):
                detector = name
                break
    place = None
    if detector:
        preps = data.folded("detectors.place_prepositions")
        words = [t.text for t in text.tokens]
        for i in range(end, len(words)):
            if words[i] in preps:
                a, b = _clean(text, i + 1, len(words), data, "place")
                candidate = text.span(a, b).strip(QUOTES)
                if (
                    candidate
                    and not _is_view(candidate, data)
                    and any(c.isalpha() for c in candidate)
                ):
                    place = candidate
                break
    return {"detector": detector, "object": obj, "place": place}


SLOT_PARSERS = {
    "none": slot_none,
    "place": slot_place,
    "layer": slot_layer,
    "remove": slot_remove,
    "topic": slot_topic,
    "level": slot_level,
    "zoom": slot_zoom,
    "detect": slot_detect,
}
