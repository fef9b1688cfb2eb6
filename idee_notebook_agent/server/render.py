"""Safe HTML for the classic plugin, which injects ``content`` with ``innerHTML`` (CONTRACT 1.5).

Everything is escaped; only line breaks, links (Markdown or bare http/https URLs), ``**bold**``
and ```code``` become tags we write ourselves, so no HTML from the model or a tool gets through.
"""

from __future__ import annotations

import html
import re

_LINK = re.compile(r"\[([^\]\n]{1,300})\]\((https?://[^\s)<>\"']+)\)|(https?://[^\s<>\"']+)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_CODE = re.compile(r"`([^`\n]+)`")
_TRAILING = ".,;:!?)]}"


def _anchor(url: str, label: str) -> str:
    href = html.escape(url, quote=True)
    return f'<a href="{href}" target="_blank" rel="noopener noreferrer">{html.escape(label)}</a>'


def _plain(text: str) -> str:
    out = html.escape(text, quote=True)
    out = _CODE.sub(r"<code>\1</code>", out)
    out = _BOLD.sub(r"<strong>\1</strong>", out)
    return out.replace("\r\n", "\n").replace("\n", "<br>")


def to_safe_html(text: str) -> str:
    """Escape ``text`` and render the little formatting the chat bubbles need."""
    if not text:
        return ""
    parts: list[str] = []
    pos = 0
    for match in _LINK.finditer(text):
        parts.append(_plain(text[pos : match.start()]))
        if match.group(2):
            parts.append(_anchor(match.group(2), match.group(1)))
            pos = match.end()
            continue
        url = match.group(3)
        trimmed = url.rstrip(_TRAILING)
        parts.append(_anchor(trimmed, trimmed))
        pos = match.start() + len(trimmed)
    parts.append(_plain(text[pos:]))
    return "".join(parts)


__all__ = ["to_safe_html"]
