"""The provider interface: typed request in, a stream of text and tool-call chunks out.

Providers translate our typed conversation (``core.conversation``) into their wire format and
map their errors onto ``errors.ProviderError`` subclasses with messages a user understands.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..core.conversation import Message, ToolCall
from ..toolbox.specs import ToolSpec


@dataclass
class ChatRequest:
    """Everything a provider needs for one model call."""

    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    model: str | None = None
    temperature: float = 0.1
    map_state: dict[str, Any] | None = None
    """The view in degrees, for providers that reason without a network model (offline)."""


@dataclass
class TextChunk:
    text: str


@dataclass
class ToolCallChunk:
    call: ToolCall


@dataclass
class UsageChunk:
    input_tokens: int = 0
    output_tokens: int = 0


Chunk = TextChunk | ToolCallChunk | UsageChunk


@runtime_checkable
class ChatProvider(Protocol):
    """A model endpoint. ``stream`` yields chunks; tool calls are yielded complete."""

    name: str
    default_model: str | None

    def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]: ...

    async def list_models(self) -> list[str]:
        """Model ids the key can use (also how a key is tested)."""
        ...

    async def aclose(self) -> None: ...
