"""Structural segments of source code: one per top-level function or class (methods of a long
class apart), with the comments and decorators just above each definition.

Python uses the standard ``ast`` module; JavaScript and TypeScript use tree-sitter grammars
(``tree-sitter-javascript``, ``tree-sitter-typescript``). Both return ``None`` when the code does
not parse, so the caller falls back to splitting by size.
"""

from __future__ import annotations

import ast
import logging
import threading
from typing import Any

from .chunking import MAX_CHARS, Segment

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- Python


def python_segments(text: str, max_chars: int = MAX_CHARS) -> list[Segment] | None:
    """Segments of a Python module, or None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = text.split("\n")
    segments: list[Segment] = []
    run: list[int] = []  # line range of a run of plain statements (imports, constants...)
    prev_end = 0

    def flush() -> None:
        if run:
            segments.append(Segment("módulo (nivel superior)", run[0], run[1]))
            run.clear()

    for node in tree.body:
        start = _py_start(node, lines, prev_end)
        end = node.end_lineno or node.lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            flush()
            size = sum(len(line) + 1 for line in lines[start - 1 : end])
            if isinstance(node, ast.ClassDef) and size > max_chars:
                segments.extend(_py_class_members(node, lines, start, end))
            else:
                segments.append(Segment(_py_title(node), start, end))
        elif run:
            run[1] = end
        else:
            run[:] = [start, end]
        prev_end = end
    flush()
    return segments


def _py_title(node: ast.AST, owner: str = "") -> str:
    if isinstance(node, ast.ClassDef):
        return f"class {node.name}"
    name = getattr(node, "name", "")
    if owner:
        return f"{owner}.{name}"
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    return f"{prefix} {name}"


def _py_start(node: ast.AST, lines: list[str], prev_end: int) -> int:
    """First line of a definition: its decorators and the comment lines right above it."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    while start - 1 > prev_end and lines[start - 2].lstrip().startswith("#"):
        start -= 1
    return start


def _py_class_members(node: ast.ClassDef, lines: list[str], start: int, end: int) -> list[Segment]:
    """A long class: its header (up to the first method), then one segment per method."""
    out: list[Segment] = []
    methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not methods:
        return [Segment(f"class {node.name}", start, end)]
    cursor = start
    prev_end = start - 1
    for method in methods:
        m_start = _py_start(method, lines, prev_end)
        if m_start > cursor and _meaningful(lines, cursor, m_start - 1):
            out.append(Segment(f"class {node.name}", cursor, m_start - 1))
        m_end = method.end_lineno or method.lineno
        out.append(Segment(_py_title(method, node.name), m_start, m_end))
        cursor = m_end + 1
        prev_end = m_end
    if cursor <= end and _meaningful(lines, cursor, end):
        out.append(Segment(f"class {node.name}", cursor, end))
    return out


def _meaningful(lines: list[str], first: int, last: int) -> bool:
    """True when lines ``first..last`` hold more than blank lines and closing brackets."""
    return any(ch.isalnum() for line in lines[first - 1 : last] for ch in line)


# ---------------------------------------------------------------------------- JavaScript / TS

_DEFINITIONS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "internal_module": "namespace",
    "module": "namespace",
}
_FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "generator_function"}
_CLASS_VALUES = {"class"}
_MEMBERS = {
    "method_definition",
    "public_field_definition",
    "field_definition",
    "method_signature",
    "abstract_method_signature",
}

_parsers: dict[str, Any] = {}
_parsers_lock = threading.Lock()


def _parser(language: str) -> Any | None:
    """A tree-sitter parser per language (cached); None when the grammars are not installed."""
    with _parsers_lock:
        if language in _parsers:
            return _parsers[language]
        try:
            from tree_sitter import Language, Parser

            if language == "javascript":
                import tree_sitter_javascript as grammar

                lang = Language(grammar.language())
            else:
                import tree_sitter_typescript as grammar

                lang = Language(
                    grammar.language_tsx() if language == "tsx" else grammar.language_typescript()
                )
            parser: Any = Parser(lang)
        except ImportError:
            log.warning(
                "tree-sitter no está instalado: el código %s se trocea por tamaño "
                '(pip install "idee-notebook-agent[rag]")',
                language,
            )
            parser = None
        _parsers[language] = parser
        return parser


def js_segments(text: str, language: str, max_chars: int = MAX_CHARS) -> list[Segment] | None:
    """Segments of a JavaScript/TypeScript file, or None when it cannot be parsed at all."""
    parser = _parser(language)
    if parser is None:
        return None
    source = text.encode("utf-8")
    lines = text.split("\n")
    # A parser is not safe to share between threads; parsing is quick, so serialise it.
    with _parsers_lock:
        tree = parser.parse(source)
    root = tree.root_node
    segments: list[Segment] = []
    run: list[int] = []
    comment_start: int | None = None

    def flush() -> None:
        if run:
            segments.append(Segment("módulo (nivel superior)", run[0], run[1]))
            run.clear()

    for node in root.children:
        first, last = node.start_point[0] + 1, node.end_point[0] + 1
        if node.type == "comment":
            if comment_start is None:
                comment_start = first
            continue
        start = comment_start if comment_start is not None else first
        comment_start = None
        kind, name, body = _describe(node, source)
        if kind is None:
            if run:
                run[1] = last
            else:
                run[:] = [start, last]
            continue
        flush()
        title = f"{kind} {name}".strip()
        size = len(source[node.start_byte : node.end_byte])
        if kind == "class" and body is not None and size > max_chars:
            segments.extend(_js_class_members(body, name, start, last, source, lines))
        else:
            segments.append(Segment(title, start, last))
    if comment_start is not None:  # trailing comments
        last_line = root.end_point[0] + 1
        if run:
            run[1] = last_line
        else:
            run[:] = [comment_start, last_line]
    flush()
    return segments


def _text(node: Any, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _describe(node: Any, source: bytes) -> tuple[str | None, str, Any]:
    """(kind, name, class body) of a top-level statement; kind None for plain statements."""
    if node.type == "export_statement":
        inner = node.child_by_field_name("declaration") or node.child_by_field_name("value")
        if inner is None:
            return None, "", None
        kind, name, body = _describe(inner, source)
        if kind is None and inner.type in _FUNCTION_VALUES | _CLASS_VALUES:
            kind = "class" if inner.type in _CLASS_VALUES else "function"
            name, body = "default", inner.child_by_field_name("body")
        return kind, name, body
    if node.type in _DEFINITIONS:
        name_node = node.child_by_field_name("name")
        name = _text(name_node, source) if name_node is not None else ""
        body = node.child_by_field_name("body") if "class" in node.type else None
        return _DEFINITIONS[node.type], name, body
    if node.type in ("lexical_declaration", "variable_declaration"):
        for child in node.named_children:
            if child.type != "variable_declarator":
                continue
            name_node, value = child.child_by_field_name("name"), child.child_by_field_name("value")
            name = _text(name_node, source) if name_node is not None else ""
            if value is not None and value.type in _FUNCTION_VALUES:
                return "function", name, None
            if value is not None and value.type in _CLASS_VALUES:
                return "class", name, value.child_by_field_name("body")
        return None, "", None
    if node.type == "expression_statement" and node.named_children:
        expr = node.named_children[0]
        if expr.type == "assignment_expression":
            left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
            if right is not None and right.type in _FUNCTION_VALUES | _CLASS_VALUES:
                kind = "class" if right.type in _CLASS_VALUES else "function"
                body = right.child_by_field_name("body") if kind == "class" else None
                return kind, _text(left, source)[:80] if left is not None else "", body
    return None, "", None


def _js_class_members(
    body: Any, name: str, start: int, end: int, source: bytes, lines: list[str]
) -> list[Segment]:
    out: list[Segment] = []
    cursor = start
    comment_start: int | None = None
    for member in body.named_children:
        first, last = member.start_point[0] + 1, member.end_point[0] + 1
        if member.type == "comment":
            if comment_start is None:
                comment_start = first
            continue
        m_start = comment_start if comment_start is not None else first
        comment_start = None
        if member.type not in _MEMBERS:
            continue
        name_node = member.child_by_field_name("name")
        member_name = _text(name_node, source) if name_node is not None else "?"
        if m_start > cursor and _meaningful(lines, cursor, m_start - 1):
            out.append(Segment(f"class {name}", cursor, m_start - 1))
        out.append(Segment(f"{name}.{member_name}", m_start, last))
        cursor = last + 1
    if cursor <= end and _meaningful(lines, cursor, end):
        out.append(Segment(f"class {name}", cursor, end))
    return out
