"""Answers to the planner's own questions: "la segunda", "1", "PNOA-MA" after a list of options.

The planner is stateless, so the options are read back from the previous turn's last tool
result: catalog candidates of an ambiguous ``addLayer`` or the services of ``searchIdeeService``.
"""

from __future__ import annotations

from typing import Any

from rapidfuzz import fuzz, process

from ...core.conversation import Message, ToolResultMessage, UserMessage
from .parse import Step
from .rules import PlannerData
from .text import fold, normalise, phrase_tokens


def previous_options(messages: list[Message], last_user: int) -> tuple[str, list[dict]] | None:
    """``("layer"|"service", options)`` offered at the end of the turn before ``last_user``."""
    for message in reversed(messages[:last_user]):
        if isinstance(message, UserMessage):
            return None
        if isinstance(message, ToolResultMessage):
            result = message.result if isinstance(message.result, dict) else {}
            if message.name == "addLayer" and not message.success:
                options = [c for c in result.get("candidates") or [] if isinstance(c, dict)]
                return ("layer", options) if options else None
            if message.name == "searchIdeeService":
                options = [s for s in result.get("services") or [] if isinstance(s, dict)]
                return ("service", options) if options else None
            return None
    return None


def _label(option: dict[str, Any]) -> str:
    return str(option.get("title") or option.get("name") or option.get("id") or "")


def pick(text: str, options: list[dict[str, Any]], data: PlannerData) -> int | None:
    """Index of the option the user chose, or None when the text is not a choice."""
    fillers = {phrase_tokens(w) for w in data.words("selection.fillers")}
    words = [t.text for t in normalise(text).tokens]
    kept: list[str] = []
    i = 0
    while i < len(words):
        for size in (3, 2, 1):
            if tuple(words[i : i + size]) in fillers:
                i += size
                break
        else:
            kept.append(words[i])
            i += 1
    if not kept:
        return None
    ordinals = {fold(str(k)): int(v) for k, v in (data.get("selection.ordinals", {}) or {}).items()}
    numbers = {fold(str(k)): int(v) for k, v in (data.get("numbers", {}) or {}).items()}
    if len(kept) == 1:
        word = kept[0].rstrip("ºªo") if kept[0][:1].isdigit() else kept[0]
        value = int(word) if word.isdigit() else ordinals.get(word, numbers.get(word))
        if value is not None:
            if value == -1:
                return len(options) - 1
            if 1 <= value <= len(options):
                return value - 1
            return None
    labels = {}
    for i, option in enumerate(options):
        for key in (_label(option), str(option.get("id") or "")):
            if key:
                labels.setdefault(fold(key), i)
    query = " ".join(kept)
    best = process.extractOne(query, list(labels), scorer=fuzz.WRatio, score_cutoff=86)
    return labels[best[0]] if best else None


def selection_step(kind: str, option: dict[str, Any], text: str) -> Step:
    if kind == "layer":
        name = str(option.get("id") or option.get("title") or option.get("name"))
        return Step("add_layer", "followup", text, {"names": [name], "phrase": name})
    return Step("add_service", "followup", text, {"service": option})
