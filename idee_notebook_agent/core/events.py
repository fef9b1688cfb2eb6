"""The one event vocabulary shared by the agent, the SSE server and the chat widget.

Each event's ``to_dict()`` is the JSON ``data`` of the SSE event of the same name
(CONTRACT.md section 3.8), so front ends serialise events as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .conversation import ToolCall


@dataclass
class TextDelta:
    """A piece of the assistant's answer, as the model produced it."""

    text: str
    type: ClassVar[str] = "text_delta"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "text": self.text}


@dataclass
class ToolCallEvent:
    """The model asked for tools. ``awaiting_client`` marks map calls the front end must run."""

    calls: list[ToolCall]
    awaiting_client: bool = False
    type: ClassVar[str] = "tool_call"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "toolCalls": [c.to_wire() for c in self.calls]}


@dataclass
class ToolResultEvent:
    """A tool ran (on the server, in the kernel, or on the client map)."""

    call: ToolCall
    result: Any
    success: bool = True
    type: ClassVar[str] = "tool_result"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "tool_name": self.call.name,
            "tool_call_id": self.call.id,
            "result": self.result,
            "success": self.success,
        }


@dataclass
class SourcesEvent:
    """Knowledge chunks used for this answer (each has at least ``source`` and ``chunk_index``)."""

    sources: list[dict[str, Any]]
    type: ClassVar[str] = "sources"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "sources": self.sources}


@dataclass
class LayerEvent:
    """A layer to draw, e.g. ``{"type": "geojson", "name": ..., "source": FeatureCollection}``."""

    layer: dict[str, Any]
    type: ClassVar[str] = "layer"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "layer": self.layer}


@dataclass
class ErrorEvent:
    """Something went wrong; ``message`` is for the user, ``code`` for programs."""

    message: str
    code: str = "error"
    type: ClassVar[str] = "error"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "code": self.code}


@dataclass
class DoneEvent:
    """End of a turn. ``pending`` is true when map calls wait for a front end's results."""

    pending: bool = False
    usage: dict[str, Any] = field(default_factory=dict)
    type: ClassVar[str] = "done"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type}


Event = (
    TextDelta | ToolCallEvent | ToolResultEvent | SourcesEvent | LayerEvent | ErrorEvent | DoneEvent
)

EVENT_TYPES: tuple[str, ...] = (
    "text_delta",
    "tool_call",
    "tool_result",
    "sources",
    "layer",
    "error",
    "done",
)
