"""The two reply shapes of one core (CONTRACT 14.1): classic strings for ``/api``, content blocks
(section 12) for ``/api/v2``. Rows keep the raw text; each shape renders it on the way out."""

from __future__ import annotations

import html
import json
from typing import Any

from .render import to_safe_html
from .store import ConversationRecord, MessageRecord, iso

CLASSIC = "classic"
BLOCKS = "blocks"


def conversation_out(record: ConversationRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "title": record.title,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "message_count": record.message_count,
    }


def _tool_record(message: MessageRecord) -> dict[str, Any]:
    try:
        data = json.loads(message.content)
    except json.JSONDecodeError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    return {
        "type": "tool_result",
        "tool_name": message.metadata.get("tool_name") or data.get("tool", ""),
        "content": data.get("result"),
        "success": bool(data.get("success", True)),
        "tool_call_id": message.metadata.get("tool_call_id", ""),
    }


def _blocks(message: MessageRecord) -> list[dict[str, Any]]:
    if message.role == "system":
        return [_tool_record(message)]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    calls = message.metadata.get("tool_calls") or []
    if calls and message.role == "assistant":
        blocks.append({"type": "tool_call", "toolCalls": calls})
    for layer in message.metadata.get("layers") or []:
        blocks.append({"type": "layer", "layer": layer})
    return blocks


def _classic_content(message: MessageRecord) -> str:
    if message.role == "assistant":
        return to_safe_html(message.content)
    if message.role == "system":
        return html.escape(message.content, quote=False)
    return message.content


def message_out(message: MessageRecord, shape: str) -> dict[str, Any]:
    content: Any = _blocks(message) if shape == BLOCKS else _classic_content(message)
    metadata = dict(message.metadata)
    if message.role == "assistant":
        metadata.setdefault("sources", [])
    return {
        "id": message.id,
        "role": message.role,
        "content": content,
        "created_at": iso(message.created_at),
        "metadata": metadata,
    }


def reply_out(message: MessageRecord, shape: str) -> dict[str, Any]:
    """A chat/tool-result reply: the stored message plus ``type`` (and ``tool_calls``)."""
    out = message_out(message, shape)
    calls = message.metadata.get("tool_calls") or []
    if calls:
        out["type"] = "tool_call"
        out["tool_calls"] = calls
    else:
        out["type"] = "text"
    return out


def waiting_reply(message_id: str, created_at: str, pending: int, shape: str) -> dict[str, Any]:
    """Reply to a tool-result POST while other calls of the same reply are still out (14.3)."""
    return {
        "id": message_id,
        "role": "assistant",
        "content": [] if shape == BLOCKS else "",
        "created_at": created_at,
        "metadata": {"sources": [], "pending_tool_calls": pending},
        "type": "text",
    }


__all__ = ["BLOCKS", "CLASSIC", "conversation_out", "message_out", "reply_out", "waiting_reply"]
