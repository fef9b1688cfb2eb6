"""Structural segments of documentation: Markdown and HTML cut at their headings (levels 1–3).

Markdown is parsed with markdown-it-py (headings carry their source lines, and a ``#`` inside a
code block is not taken for a heading). HTML is walked with lxml: navigation, scripts and other
page furniture are dropped, and each section keeps the source lines of the HTML it came from.
"""

from __future__ import annotations

import logging
import re

from .chunking import Segment

log = logging.getLogger(__name__)

HEADING_LEVELS = 3
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)

# ---------------------------------------------------------------------------- Markdown


def markdown_segments(text: str, levels: int = HEADING_LEVELS) -> list[Segment] | None:
    """One segment per heading (title = the heading path, e.g. ``Uso > Capas WMS``)."""
    from markdown_it import MarkdownIt

    offset = 0
    match = _FRONT_MATTER.match(text)
    body = text
    if match:  # YAML front matter would otherwise read as a setext heading
        offset = match.group(0).count("\n")
        body = text[match.end() :]
    tokens = MarkdownIt("commonmark").parse(body)
    heads: list[tuple[int, int, str]] = []  # (0-based line, level, text)
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map is not None:
            level = int(tok.tag[1])
            if level <= levels:
                inline = tokens[i + 1].content if i + 1 < len(tokens) else ""
                heads.append((tok.map[0] + offset, level, inline.strip()))
    total = text.count("\n") + 1
    if not heads:
        return None
    segments: list[Segment] = []
    if heads[0][0] > 0:
        segments.append(Segment("", 1, heads[0][0]))
    path: list[tuple[int, str]] = []
    for i, (line, level, title) in enumerate(heads):
        path = [p for p in path if p[0] < level] + [(level, title)]
        end = heads[i + 1][0] if i + 1 < len(heads) else total
        segments.append(Segment(" > ".join(t for _, t in path), line + 1, end))
    return segments


# ---------------------------------------------------------------------------- HTML

_SKIP = {
    "script",
    "style",
    "noscript",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "template",
    "svg",
    "iframe",
    "button",
}
_BLOCK = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "li",
    "ul",
    "ol",
    "pre",
    "table",
    "tr",
    "br",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "dd",
    "dt",
    "dl",
    "figure",
    "figcaption",
    "hr",
}


def html_title(html: str) -> str:
    """The page's <title> (or first <h1>), for naming a crawled page."""
    root = _parse_html(html)
    if root is None:
        return ""
    for xpath in ("//title", "//h1"):
        found = root.xpath(xpath)
        if found:
            return " ".join(found[0].text_content().split())[:200]
    return ""


def html_segments(html: str, levels: int = HEADING_LEVELS) -> list[Segment] | None:
    """Sections of an HTML page cut at h1–h3, with their text and HTML source lines."""
    from lxml import etree

    root = _parse_html(html)
    if root is None:
        return None
    main = root.xpath("//main") or root.xpath("//article") or root.xpath("//body") or [root]
    container = main[0]
    heading_tags = {f"h{i}" for i in range(1, levels + 1)}
    total = html.count("\n") + 1

    skip = set(_SKIP)
    if container.tag in ("main", "article"):
        skip -= {"header"}  # inside the content, <header> holds the page's own title

    sections: list[tuple[str, int, list[str]]] = []  # (title, first line, text parts)
    current: tuple[str, int, list[str]] = (html_title(html), container.sourceline or 1, [])
    path: list[tuple[int, str]] = []
    walker = etree.iterwalk(container, events=("start", "end"))
    for event, el in walker:
        tag = el.tag.lower().rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""
        if event == "start":
            if tag in skip or not tag:  # comments, processing instructions, page furniture
                walker.skip_subtree()
                continue
            if tag in heading_tags:
                sections.append(current)
                heading = " ".join(el.text_content().split())
                level = int(tag[1])
                path = [p for p in path if p[0] < level] + [(level, heading)]
                current = (" > ".join(t for _, t in path), el.sourceline or current[1], [])
                current[2].append("#" * level + " ")
            elif tag == "li":
                current[2].append("\n- ")
            elif tag in _BLOCK:
                current[2].append("\n")
            if el.text:
                current[2].append(el.text if _in_pre(el) else _squash(el.text))
        else:
            if tag in _BLOCK:
                current[2].append("\n")
            if el.tail and el is not container:
                current[2].append(el.tail if _in_pre(el.getparent()) else _squash(el.tail))
    sections.append(current)

    segments: list[Segment] = []
    for i, (title, first, parts) in enumerate(sections):
        text = _tidy("".join(parts))
        if not text:
            continue
        nxt = sections[i + 1][1] - 1 if i + 1 < len(sections) else total
        segments.append(Segment(title, first, max(first, nxt), text))
    return segments or None


def _parse_html(html: str):
    import lxml.html

    try:
        return lxml.html.document_fromstring(html)
    except Exception:  # empty or broken pages
        log.debug("HTML no analizable", exc_info=True)
        return None


def _in_pre(el) -> bool:
    """True inside a <pre> block, where whitespace is the content's own."""
    while el is not None:
        if isinstance(el.tag, str) and el.tag.lower() == "pre":
            return True
        el = el.getparent()
    return False


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _tidy(text: str) -> str:
    out: list[str] = []
    for raw in text.split("\n"):
        line = raw.rstrip()
        if line.startswith(" ") and not line.startswith("  "):
            line = line[1:]  # the space left by squashing, not indentation
        if not line:
            if out and out[-1] != "":
                out.append("")
            continue
        out.append(line)
    return "\n".join(out).strip()
