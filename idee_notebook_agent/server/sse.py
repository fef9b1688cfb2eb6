"""Server-sent events exactly as the plugin parses them (CONTRACT 3.8).

Each event is ``event: <name>\\n`` + ``data: <JSON on one line>\\n`` + ``\\n``; lines end with a
bare ``\\n`` (the plugin splits on it, so no ``\\r\\n``). Frames are sent the moment the turn
yields them (no queue, no buffering). A comment line keeps the connection alive while a long tool
runs. When the client goes away the turn's task is cancelled, which closes the model's stream;
the turn saves what was said on its way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from json.encoder import encode_basestring
from typing import Any

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

log = logging.getLogger(__name__)

KEEPALIVE = b": keep-alive\n\n"
HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
"""``json.dumps(event, ensure_ascii=False, default=str)`` without building an encoder per event."""


def frame(event: dict[str, Any]) -> str:
    """One SSE event; JSON escapes newlines, so ``data`` is always one line."""
    if len(event) == 2 and event.get("type") == "text_delta" and next(iter(event)) == "type":
        text = event.get("text")
        if type(text) is str:  # the bulk of a stream: the same bytes as the general case
            data = '{"type": "text_delta", "text": ' + encode_basestring(text) + "}"
            return "event: text_delta\ndata: " + data + "\n\n"
    name = str(event.get("type", "message"))
    data = _ENCODER.encode(event)
    return f"event: {name}\ndata: {data}\n\n"


class SSEResponse(Response):
    """Streams ``events()`` as SSE from its own task, watching for the client leaving."""

    def __init__(
        self,
        events: Callable[[], AsyncIterator[dict[str, Any]]],
        *,
        keepalive_seconds: float,
        tasks: set[asyncio.Task[Any]] | None = None,
        on_error: Callable[[BaseException], dict[str, Any]] | None = None,
    ) -> None:
        self.events = events
        self.keepalive_seconds = keepalive_seconds
        self.tasks = tasks
        self.on_error = on_error
        self.status_code = 200
        self.background = None
        self.init_headers(HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lock = asyncio.Lock()
        last_sent = time.monotonic()
        closed = False

        async def emit(body: bytes) -> None:
            nonlocal last_sent
            async with lock:
                if closed:
                    return
                await send({"type": "http.response.body", "body": body, "more_body": True})
                last_sent = time.monotonic()

        async def run_turn() -> None:
            try:
                async with contextlib.aclosing(self.events()) as stream:
                    async for event in stream:
                        await emit(frame(event).encode())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("El flujo SSE falló")
                if self.on_error is not None:
                    with contextlib.suppress(Exception):  # the client may be gone already
                        await emit(frame(self.on_error(exc)).encode())
                        await emit(frame({"type": "done"}).encode())

        async def keep_alive() -> None:
            while True:
                await asyncio.sleep(self.keepalive_seconds / 2)
                if time.monotonic() - last_sent >= self.keepalive_seconds:
                    await emit(KEEPALIVE)

        async def client_gone() -> None:
            while True:
                message: Message = await receive()
                if message["type"] == "http.disconnect":
                    return

        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        turn = asyncio.create_task(run_turn(), name="idee-sse-turn")
        if self.tasks is not None:
            self.tasks.add(turn)
            turn.add_done_callback(self.tasks.discard)
        helpers = [
            asyncio.create_task(keep_alive(), name="idee-sse-keepalive"),
            asyncio.create_task(client_gone(), name="idee-sse-disconnect"),
        ]
        try:
            done, _pending = await asyncio.wait(
                [turn, helpers[1]], return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in helpers:
                task.cancel()
            if not turn.done():
                # the client went away (or the server is stopping): cancel the turn; it saves
                # what was said on its way out. Not awaited: this task may itself be cancelled.
                turn.cancel()
                closed = True
        if turn in done and not closed:
            with contextlib.suppress(OSError):
                async with lock:
                    closed = True
                    await send({"type": "http.response.body", "body": b"", "more_body": False})


__all__ = ["KEEPALIVE", "SSEResponse", "frame"]
