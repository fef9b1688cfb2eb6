"""A provider that plays back scripted replies: for tests, benchmarks and examples.

Each reply is a list of items: a ``str`` (streamed as text, split on spaces), a ``ToolCall`` or a
``dict`` ``{"name", "args"}``, or an ``Exception`` to raise. A callable reply receives the request
and returns such a list, so a script can react to tool results like a model would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..core.conversation import ToolCall
from .base import ChatRequest, Chunk, TextChunk, ToolCallChunk

Reply = list[Any] | Callable[[ChatRequest], list[Any]]


class ScriptedProvider:
    """Plays back ``replies`` in order; after the last one, answers ``default``."""

    name = "scripted"
    default_model = "scripted-model"

    def __init__(
        self, replies: list[Reply] | None = None, *, delay: float = 0.0, default: str = ""
    ) -> None:
        self.replies: list[Reply] = list(replies or [])
        self.delay = delay
        self.default = default
        self.requests: list[ChatRequest] = []
        self.closed_streams = 0

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        reply = self.replies.pop(0) if self.replies else [self.default]
        items = reply(request) if callable(reply) else reply
        try:
            for item in items:
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, ToolCall):
                    yield ToolCallChunk(ToolCall(item.name, dict(item.args), item.id))
                elif isinstance(item, dict):
                    yield ToolCallChunk(ToolCall(item["name"], dict(item.get("args") or {})))
                else:
                    words = str(item).split(" ")
                    for i, word in enumerate(words):
                        if self.delay:
                            await asyncio.sleep(self.delay)
                        yield TextChunk(word if i == len(words) - 1 else word + " ")
        finally:
            self.closed_streams += 1

    async def list_models(self) -> list[str]:
        return [self.default_model]

    async def aclose(self) -> None:
        return None
