"""Pure ASGI middleware (no response buffering, so SSE streams stay unbuffered).

``RequestGuard`` gives every request an id (``X-Request-ID``, also used in 5xx logs) and refuses
bodies over the size limit with 413 before the application reads them.
"""

from __future__ import annotations

import json
import random
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


def _too_large(limit: int) -> bytes:
    mb = limit / 1_000_000
    return json.dumps(
        {
            "detail": f"La petición supera el tamaño máximo de {mb:g} MB; envía menos datos. "
            "(Request body too large.)"
        },
        ensure_ascii=False,
    ).encode()


class RequestGuard:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # a log correlation id, not a secret: no need for os.urandom (a system call) per request
        request_id = f"{random.getrandbits(48):012x}"
        scope["request_id"] = request_id
        limit = self.max_body_bytes

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > limit:
                    await _reject(send_with_id, limit)
                    return

        has_length = any(name == b"content-length" for name, _ in scope.get("headers", []))
        if has_length or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send_with_id)
            return
        # chunked body without a declared length: read it here (bounded), then replay it
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # client went away before sending the body
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > limit:
                await _reject(send_with_id, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send_with_id)


async def _reject(send: Any, limit: int) -> None:
    body = _too_large(limit)
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


__all__ = ["RequestGuard"]
