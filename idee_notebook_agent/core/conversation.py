"""Conversation model: typed messages (user, assistant with tool calls, tool results).

It serialises to and from JSON without loss, so the REST store, the kernel history and tests
all keep the same object. API keys are never part of it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def new_id(prefix: str = "") -> str:
    """A fresh id; tool call ids get a prefix so they are never empty (CONTRACT 3.5)."""
    return f"{prefix}{uuid.uuid4().hex[:24]}" if prefix else str(uuid.uuid4())


@dataclass
class ToolCall:
    """A call the model made: ``{name, args, id}`` on the wire (CONTRACT 4.2)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: new_id("call_"))

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "args": self.args, "id": self.id}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ToolCall:
        return cls(
            name=data["name"],
            args=dict(data.get("args") or {}),
            id=data.get("id") or new_id("call_"),
        )


@dataclass
class UserMessage:
    text: str
    id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=_now)
    role: str = "user"

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "id": self.id, "created_at": self.created_at, "text": self.text}


@dataclass
class AssistantMessage:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=_now)
    role: str = "assistant"

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "id": self.id,
            "created_at": self.created_at,
            "text": self.text,
            "tool_calls": [c.to_wire() for c in self.tool_calls],
            "sources": self.sources,
        }


@dataclass
class ToolResultMessage:
    call_id: str
    name: str
    result: Any
    success: bool = True
    id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=_now)
    role: str = "tool"

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "id": self.id,
            "created_at": self.created_at,
            "call_id": self.call_id,
            "name": self.name,
            "result": self.result,
            "success": self.success,
        }

    def content_text(self) -> str:
        """The JSON text the model reads (same shape as the seed: tool, result, success)."""
        return json.dumps(
            {"tool": self.name, "result": self.result, "success": self.success},
            ensure_ascii=False,
            default=str,
        )


Message = UserMessage | AssistantMessage | ToolResultMessage


def message_from_dict(data: dict[str, Any]) -> Message:
    role = data.get("role")
    if role == "user":
        return UserMessage(text=data["text"], id=data["id"], created_at=data["created_at"])
    if role == "assistant":
        return AssistantMessage(
            text=data.get("text", ""),
            tool_calls=[ToolCall.from_wire(c) for c in data.get("tool_calls", [])],
            sources=list(data.get("sources", [])),
            id=data["id"],
            created_at=data["created_at"],
        )
    if role == "tool":
        return ToolResultMessage(
            call_id=data["call_id"],
            name=data["name"],
            result=data.get("result"),
            success=bool(data.get("success", True)),
            id=data["id"],
            created_at=data["created_at"],
        )
    raise ValueError(f"Rol de mensaje desconocido: {role!r}")


@dataclass
class Conversation:
    """A chat with its messages, the last map state, and map calls waiting for results."""

    id: str = field(default_factory=new_id)
    title: str = ""
    messages: list[Message] = field(default_factory=list)
    map_state: dict[str, Any] | None = None
    pending_calls: list[ToolCall] = field(default_factory=list)
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)

    def add(self, message: Message) -> Message:
        self.messages.append(message)
        self.updated_at = _now()
        if isinstance(message, UserMessage) and not self.title:
            self.title = message.text.strip()[:100]
        return message

    @property
    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if isinstance(message, UserMessage):
                return message.text
        return ""

    def answered_call_ids(self) -> set[str]:
        return {m.call_id for m in self.messages if isinstance(m, ToolResultMessage)}

    def unanswered_calls(self) -> list[ToolCall]:
        """Calls of the model that have no result yet (used to keep the history valid)."""
        answered = self.answered_call_ids()
        return [
            call
            for m in self.messages
            if isinstance(m, AssistantMessage)
            for call in m.tool_calls
            if call.id not in answered
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "map_state": self.map_state,
            "pending_calls": [c.to_wire() for c in self.pending_calls],
            "messages": [m.to_dict() for m in self.messages],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Conversation:
        return cls(
            id=data["id"],
            title=data.get("title", ""),
            messages=[message_from_dict(m) for m in data.get("messages", [])],
            map_state=data.get("map_state"),
            pending_calls=[ToolCall.from_wire(c) for c in data.get("pending_calls", [])],
            created_at=data.get("created_at") or _now(),
            updated_at=data.get("updated_at") or _now(),
        )

    @classmethod
    def from_json(cls, text: str) -> Conversation:
        return cls.from_dict(json.loads(text))
