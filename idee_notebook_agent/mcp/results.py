"""MCP tool results → the JSON the model reads.

Works on the wire shape (``{"content": [...], "structuredContent": ..., "isError": ...}``) so the
SDK sessions and the seed's plain JSON-RPC servers go through the same code. Text is joined,
JSON (structured content, or a text that is JSON) is kept as data, images and audio are
summarised (the model cannot see pixels through a JSON tool result), and ``isError`` becomes a
``ToolError`` the model can read.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ..errors import ToolError

MAX_TEXT_CHARS = 20_000


def _size(data: Any) -> str:
    try:
        n = len(base64.b64decode(str(data or ""), validate=False))
    except (binascii.Error, ValueError):
        n = len(str(data or ""))
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB"


def _media_summary(item: dict[str, Any]) -> dict[str, Any]:
    kind = "imagen" if item.get("type") == "image" else "audio"
    mime = item.get("mimeType") or item.get("mime_type") or "application/octet-stream"
    return {
        "type": item.get("type"),
        "mimeType": mime,
        "summary": f"[{kind} {mime}, {_size(item.get('data'))}]",
    }


def _content_text(item: Any, media: list[dict[str, Any]]) -> str | None:
    """Text for one content item; images/audio go to ``media`` and give no text."""
    if isinstance(item, str):
        return item
    if not isinstance(item, dict):
        return json.dumps(item, ensure_ascii=False, default=str)
    kind = item.get("type")
    if kind == "text":
        return str(item.get("text", ""))
    if kind in ("image", "audio"):
        media.append(_media_summary(item))
        return None
    if kind == "resource_link":
        label = item.get("name") or item.get("title") or "recurso"
        return f"[recurso: {label} <{item.get('uri', '')}>]"
    if kind == "resource":
        res = item.get("resource") or {}
        if "text" in res:
            return str(res["text"])
        mime = res.get("mimeType") or "application/octet-stream"
        return f"[recurso {res.get('uri', '')} ({mime}, {_size(res.get('blob'))})]"
    return json.dumps(item, ensure_ascii=False, default=str)


def _parse_json(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def to_model_result(server: str, tool: str, wire: Any) -> dict[str, Any]:
    """The tool result for the model; raises ``ToolError`` when the server flagged an error."""
    if not isinstance(wire, dict):
        return {"success": True, "server": server, "data": wire}
    content = wire.get("content")
    structured = wire.get("structuredContent", wire.get("structured_content"))
    media: list[dict[str, Any]] = []
    texts: list[str] = []
    if isinstance(content, list):
        for item in content:
            text = _content_text(item, media)
            if text is not None:
                texts.append(text)
    joined = "\n".join(texts)
    if wire.get("isError") or wire.get("is_error"):
        detail = joined.strip() or "sin detalles"
        raise ToolError(
            f"La herramienta '{tool}' del servidor MCP '{server}' devolvió un error: {detail[:2000]}",
            data={"server": server},
        )
    result: dict[str, Any] = {"success": True, "server": server}
    if content is None and structured is None:
        result["data"] = {k: v for k, v in wire.items() if k not in ("_meta", "meta")}
        return result
    if structured is not None:
        result["data"] = structured
        # The SDK wraps a plain return value as {"result": value} and repeats it as text.
        duplicate = _parse_json(joined) == structured or structured == {"result": joined}
        if joined and not duplicate:
            result["text"] = joined
    elif joined:
        parsed = _parse_json(joined)
        if parsed is not None:
            result["data"] = parsed
        else:
            result["text"] = joined
    if len(result.get("text", "")) > MAX_TEXT_CHARS:
        result["text"] = result["text"][:MAX_TEXT_CHARS] + "… (recortado)"
        result["truncated"] = True
    if media:
        result["media"] = media
    return result
