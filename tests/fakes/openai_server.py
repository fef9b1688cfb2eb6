"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, driven by the real ``openai`` SDK.

Speaks ``POST /v1/chat/completions`` (streamed SSE with ``[DONE]``, tool-call deltas split across
chunks, or a plain JSON reply) and ``GET /v1/models``; answers errors in OpenAI's error JSON
shape. Tests queue replies (``OpenAIReply``, ``openai_error(...)``) and read ``requests`` to see
what the SDK sent (headers, tool schema, messages).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from .llm_http import ErrorReply, FakeLLMServer, RecordedRequest, split_text


@dataclass
class FakeToolCall:
    """A tool call the fake model makes. ``arguments`` may be a dict or raw (even broken) text."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def argument_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass
class OpenAIReply:
    """One scripted model reply: text and/or tool calls, streamed in small pieces."""

    text: str = ""
    tool_calls: list[FakeToolCall] = field(default_factory=list)
    chunk_size: int = 4
    """Characters per text chunk and per tool-argument fragment."""
    delay: float = 0.0
    """Seconds between streamed chunks (a slow model)."""
    headers_delay: float = 0.0
    """Seconds before the response starts at all (to provoke client timeouts)."""
    interleave: bool = True
    """Stream the fragments of several tool calls interleaved, as real endpoints may."""


def openai_error(
    status: int,
    message: str | None = None,
    *,
    type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> ErrorReply:
    """An error reply in OpenAI's shape (``{"error": {message, type, param, code}}``)."""
    defaults = {
        400: ("Bad request.", "invalid_request_error", None),
        401: (
            "Incorrect API key provided. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            "invalid_api_key",
        ),
        403: ("You are not allowed to sample from this model.", "invalid_request_error", None),
        404: (
            "The model does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
        429: ("Rate limit reached for requests.", "requests", "rate_limit_exceeded"),
        500: ("The server had an error while processing your request.", "server_error", None),
        503: ("The engine is currently overloaded.", "server_error", None),
    }
    d_message, d_type, d_code = defaults.get(status, ("Error.", "api_error", None))
    body = {
        "error": {
            "message": message or d_message,
            "type": type or d_type,
            "param": param,
            "code": code if code is not None else d_code,
        }
    }
    return ErrorReply(status, body, dict(headers or {}))


class FakeOpenAIServer(FakeLLMServer):
    """The fake. ``url`` is the OpenAI-compatible base URL (ends in ``/v1``)."""

    def __init__(
        self,
        models: list[str] | None = None,
        valid_keys: set[str] | None = None,
        default_text: str = "De acuerdo.",
    ) -> None:
        super().__init__()
        self.models = list(models or ["gpt-4o-mini", "gpt-4o", "fake-model"])
        self.valid_keys = valid_keys
        """When set, a request whose bearer key is not in it gets a 401 (like the real API)."""
        self.check_models = True
        """Answer 404 ``model_not_found`` for a model not in ``models``."""
        self.default_text = default_text

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    # ------------------------------------------------------------------ views for tests
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def bearer_keys(self) -> list[str]:
        keys = []
        for r in self.requests:
            auth = r.header("authorization") or ""
            keys.append(auth[7:] if auth.lower().startswith("bearer ") else auth)
        return keys

    # ------------------------------------------------------------------ HTTP
    def handle(self, handler: BaseHTTPRequestHandler, request: RecordedRequest) -> None:
        if self.valid_keys is not None:
            auth = request.header("authorization") or ""
            key = auth[7:] if auth.lower().startswith("bearer ") else ""
            if key not in self.valid_keys:
                err = openai_error(401)
                self.send_json(handler, err.status, err.body, err.headers)
                return
        if request.method == "GET" and request.path == "/v1/models":
            self.send_json(
                handler,
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"}
                        for m in self.models
                    ],
                },
            )
            return
        if request.method == "POST" and request.path == "/v1/chat/completions":
            self._chat(handler, request)
            return
        self.send_json(
            handler,
            404,
            {"error": {"message": f"Unknown path {request.path}", "type": "invalid_request_error"}},
        )

    def _chat(self, handler: BaseHTTPRequestHandler, request: RecordedRequest) -> None:
        body = request.json or {}
        model = body.get("model", "")
        reply = self._next_reply()
        if isinstance(reply, ErrorReply):
            self.send_json(handler, reply.status, reply.body, reply.headers)
            return
        if self.check_models and model not in self.models:
            err = openai_error(
                404, f"The model `{model}` does not exist or you do not have access to it."
            )
            self.send_json(handler, err.status, err.body)
            return
        if reply is None:
            reply = OpenAIReply(text=self.default_text)
        if reply.headers_delay:
            time.sleep(reply.headers_delay)
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        if body.get("stream"):
            events = [json.dumps(c) for c in self._chunks(reply, completion_id, model)]
            events.append("[DONE]")
            self.send_sse(handler, events, delay=reply.delay)
        else:
            self.send_json(handler, 200, self._completion(reply, completion_id, model))

    @staticmethod
    def _calls_with_ids(reply: OpenAIReply) -> list[tuple[FakeToolCall, str]]:
        return [(c, c.id or f"call_{uuid.uuid4().hex[:20]}") for c in reply.tool_calls]

    def _completion(self, reply: OpenAIReply, cid: str, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.argument_text()},
                }
                for call, call_id in self._calls_with_ids(reply)
            ]
        return {
            "id": cid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _chunks(self, reply: OpenAIReply, cid: str, model: str) -> Iterator[dict[str, Any]]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        for piece in split_text(reply.text, reply.chunk_size):
            yield chunk({"content": piece})
        # Tool calls: the first delta of each call carries id, type and name; the arguments
        # follow in fragments, possibly interleaved between calls (index tells them apart).
        streams: list[list[dict[str, Any]]] = []
        for index, (call, call_id) in enumerate(self._calls_with_ids(reply)):
            deltas = [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
            ]
            for fragment in split_text(call.argument_text(), reply.chunk_size):
                deltas.append({"index": index, "function": {"arguments": fragment}})
            streams.append(deltas)
        if reply.interleave:
            while any(streams):
                for deltas in streams:
                    if deltas:
                        yield chunk({"tool_calls": [deltas.pop(0)]})
        else:
            for deltas in streams:
                for delta in deltas:
                    yield chunk({"tool_calls": [delta]})
        yield chunk({}, "tool_calls" if reply.tool_calls else "stop")


@pytest.fixture
def openai_fake() -> Iterator[FakeOpenAIServer]:
    """A running fake OpenAI server (stopped after the test)."""
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()
