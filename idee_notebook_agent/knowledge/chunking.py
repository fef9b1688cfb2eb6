"""Chunking by structure: each document is cut where its own structure says (function, class,
heading), then pieces that are too long are split by size with overlap and tiny neighbours merged.

The structural splitters live in ``code_splitters`` (Python via ``ast``, JavaScript/TypeScript via
tree-sitter) and ``markup_splitters`` (Markdown via markdown-it, HTML via lxml); the size split
uses ``semantic-text-splitter``, which cuts at paragraph and sentence boundaries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

log = logging.getLogger(__name__)

MAX_CHARS = 1500
"""Longest chunk, in characters (about 400 tokens: fits the 512-token window of E5 models)."""
MIN_CHARS = 150
"""Pieces shorter than this (a bare heading, a one-line function) join a neighbour."""
OVERLAP = 150
"""Characters shared by consecutive pieces of a segment split by size."""

LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
}


def language_for(path: str) -> str:
    """Language name from a file name: a known one, else the extension, else ``text``."""
    suffix = PurePosixPath(path.split("?", 1)[0]).suffix.lower()
    if suffix in LANGUAGES:
        return LANGUAGES[suffix]
    return suffix.lstrip(".") or "text"


@dataclass
class Document:
    """A text to chunk: a file of a repository or folder, or a crawled page."""

    text: str
    source: str
    """Path relative to the source root, or the page URL."""
    language: str = ""
    title: str = ""

    def __post_init__(self) -> None:
        if not self.language:
            self.language = language_for(self.source)


@dataclass
class Segment:
    """A structural piece of a document: 1-based inclusive line range and a title.

    ``text`` is set when the piece is not a plain slice of the document's lines (HTML sections).
    """

    title: str
    line_start: int
    line_end: int
    text: str | None = None
    mergeable: bool = True


@dataclass
class Chunk:
    """What is embedded, indexed and returned to the agent."""

    content: str
    source: str
    chunk_index: int
    language: str
    title: str
    line_start: int | None = None
    line_end: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        extra = data.pop("extra")
        data.update(extra)
        return data

    def search_text(self) -> str:
        """The text embedded and BM25-indexed: where it comes from, its title, then the content."""
        head = " · ".join(p for p in (self.source, self.title) if p)
        return f"{head}\n{self.content}" if head else self.content


def chunk_document(
    doc: Document, max_chars: int = MAX_CHARS, overlap: int = OVERLAP, min_chars: int = MIN_CHARS
) -> list[Chunk]:
    """Cut one document into chunks that keep its source, line range and title."""
    text = doc.text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return []
    segments = _structural_segments(text, doc)
    default_title = doc.title or PurePosixPath(doc.source.split("?", 1)[0]).name or doc.source
    for seg in segments:
        seg.title = seg.title or default_title
    lines = text.split("\n")
    pieces = _size_split(segments, lines, max_chars, overlap)
    pieces = _merge_small(pieces, lines, max_chars, min_chars)
    chunks: list[Chunk] = []
    for seg in pieces:
        content = (seg.text if seg.text is not None else _slice(lines, seg)).strip("\n")
        if not content.strip():
            continue
        chunks.append(
            Chunk(
                content=content,
                source=doc.source,
                chunk_index=len(chunks),
                language=doc.language,
                title=seg.title,
                line_start=seg.line_start,
                line_end=seg.line_end,
            )
        )
    return chunks


def chunk_documents(
    docs: Iterable[Document], *, progress: bool = False, total: int | None = None
) -> list[Chunk]:
    """Chunk many documents, with a progress bar when asked."""
    from tqdm.auto import tqdm

    out: list[Chunk] = []
    for doc in tqdm(docs, desc="Troceando", unit="doc", total=total, disable=not progress):
        try:
            out.extend(chunk_document(doc))
        except Exception:  # one odd file must not stop a whole repository
            log.exception("No se pudo trocear %s; se omite", doc.source)
    return out


# ---------------------------------------------------------------------------- internals
def _structural_segments(text: str, doc: Document) -> list[Segment]:
    from . import code_splitters, markup_splitters

    lang = doc.language
    segments: list[Segment] | None = None
    if lang == "python":
        segments = code_splitters.python_segments(text)
    elif lang in ("javascript", "typescript", "tsx"):
        segments = code_splitters.js_segments(text, lang)
    elif lang == "markdown":
        segments = markup_splitters.markdown_segments(text)
    elif lang == "html":
        segments = markup_splitters.html_segments(text)
    if not segments:
        n = text.count("\n") + 1
        segments = [Segment(doc.title, 1, n)]
    return segments


def _slice(lines: list[str], seg: Segment) -> str:
    return "\n".join(lines[seg.line_start - 1 : seg.line_end])


def _size_split(
    segments: list[Segment], lines: list[str], max_chars: int, overlap: int
) -> list[Segment]:
    """Split segments longer than ``max_chars`` by size, with overlap, keeping line ranges."""
    out: list[Segment] = []
    splitter = None
    for seg in segments:
        text = seg.text if seg.text is not None else _slice(lines, seg)
        if len(text) <= max_chars:
            out.append(seg)
            continue
        if splitter is None:
            from semantic_text_splitter import TextSplitter

            splitter = TextSplitter((max_chars * 2 // 3, max_chars), overlap=overlap)
        parts = splitter.chunk_indices(text)
        for i, (offset, part) in enumerate(parts, start=1):
            first = seg.line_start + text.count("\n", 0, offset)
            last = first + part.count("\n")
            if seg.text is not None:  # extracted text: lines are not the document's own
                first, last = seg.line_start, seg.line_end
            title = f"{seg.title} ({i}/{len(parts)})"
            out.append(Segment(title, first, last, part, mergeable=False))
    return out


def _merge_small(
    segments: list[Segment], lines: list[str], max_chars: int, min_chars: int
) -> list[Segment]:
    """Merge neighbouring small segments so tiny functions or sections do not become noise."""
    out: list[Segment] = []
    for seg in segments:
        prev = out[-1] if out else None
        if prev is not None and prev.mergeable and seg.mergeable:
            prev_text = prev.text if prev.text is not None else _slice(lines, prev)
            seg_text = seg.text if seg.text is not None else _slice(lines, seg)
            # grow a small piece until it is big enough; fold crumbs into what came before
            small = len(prev_text) < min_chars or len(seg_text) < min_chars // 2
            if small and len(prev_text) + len(seg_text) + 2 <= max_chars:
                merged = Segment(
                    _join_titles(prev.title, seg.title),
                    prev.line_start,
                    max(prev.line_end, seg.line_end),
                )
                if prev.text is not None or seg.text is not None:
                    merged.text = f"{prev_text}\n\n{seg_text}"
                elif len(_slice(lines, merged)) > max_chars:  # a long gap between the two
                    out.append(seg)
                    continue
                out[-1] = merged
                continue
        out.append(seg)
    return out


def _join_titles(a: str, b: str) -> str:
    parts = [p for p in a.removesuffix(" …").split(" · ") if p]
    if b and b not in parts:
        parts.append(b)
    if len(parts) > 3:
        return " · ".join(parts[:3]) + " …"
    return " · ".join(parts)
