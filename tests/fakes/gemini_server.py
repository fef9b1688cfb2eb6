"""A fake Gemini API (generativelanguage v1beta) on 127.0.0.1, driven by the real ``google-genai`` SDK.

Speaks ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` and ``:generateContent``
(text and ``functionCall`` parts) and ``GET /v1beta/models``; errors come in Google's
``{"error": {code, message, status, details}}`` shape, and a bad key gets the real API's answer
(400 ``INVALID_ARGUMENT`` with reason ``API_KEY_INVALID``).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from .llm_http import ErrorReply, FakeLLMServer, RecordedRequest, split_text

_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


@dataclass
class FakeFunctionCall:
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    thought_signature: bytes | None = None


@dataclass
class GeminiReply:
    """One scripted model reply: text chunks, then function calls (each complete, as Gemini does)."""

    text: str = ""
    function_calls: list[FakeFunctionCall] = field(default_factory=list)
    chunk_size: int = 4
    delay: float = 0.0
    headers_delay: float = 0.0
    finish_reason: str = "STOP"


def gemini_error(
    status: int, message: str | None = None, *, reason: str | None = None
) -> ErrorReply:
    """An error reply in Google's shape."""
    messages = {
        400: "Request contains an invalid argument.",
        403: "Method doesn't allow unregistered callers (callers without established identity).",
        404: "Requested entity was not found.",
        429: "Resource has been exhausted (e.g. check quota).",
        500: "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
        503: "The model is overloaded. Please try again later.",
    }
    error: dict[str, Any] = {
        "code": status,
        "message": message or messages.get(status, "Error."),
        "status": _STATUS.get(status, "UNKNOWN"),
    }
    if reason:
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
        ]
    return ErrorReply(status, {"error": error})


BAD_KEY = gemini_error(
    400, "API key not valid. Please pass a valid API key.", reason="API_KEY_INVALID"
)

_MODEL_PATH = re.compile(r"^/v1beta/models/(?P<model>[^:/]+):(?P<method>[A-Za-z]+)$")


class FakeGeminiServer(FakeLLMServer):
    """The fake. ``url`` is the base URL for ``HttpOptions(base_url=...)``."""

    def __init__(
        self,
        models: list[str] | None = None,
        valid_keys: set[str] | None = None,
        default_text: str = "De acuerdo.",
    ) -> None:
        super().__init__()
        self.models = list(models or ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-3-pro-preview"])
        self.valid_keys = valid_keys
        self.check_models = True
        self.default_text = default_text

    @property
    def url(self) -> str:
        return self.root

    def generate_requests(self) -> list[RecordedRequest]:
        return [
            r for r in self.requests if "GenerateContent" in r.path or "generateContent" in r.path
        ]

    def api_keys(self) -> list[str | None]:
        return [r.header("x-goog-api-key") for r in self.requests]

    # ------------------------------------------------------------------ HTTP
    def handle(self, handler: BaseHTTPRequestHandler, request: RecordedRequest) -> None:
        if self.valid_keys is not None and request.header("x-goog-api-key") not in self.valid_keys:
            self.send_json(handler, BAD_KEY.status, BAD_KEY.body)
            return
        if request.method == "GET" and request.path == "/v1beta/models":
            self.send_json(
                handler,
                200,
                {
                    "models": [
                        {
                            "name": f"models/{m}",
                            "displayName": m,
                            "supportedGenerationMethods": ["generateContent", "countTokens"],
                        }
                        for m in self.models
                    ]
                    + [
                        {
                            "name": "models/text-embedding-004",
                            "supportedGenerationMethods": ["embedContent"],
                        }
                    ]
                },
            )
            return
        match = _MODEL_PATH.match(request.path)
        if request.method == "POST" and match:
            self._generate(handler, request, match["model"], match["method"])
            return
        err = gemini_error(404, f"Unknown path {request.path}")
        self.send_json(handler, err.status, err.body)

    def _generate(
        self, handler: BaseHTTPRequestHandler, request: RecordedRequest, model: str, method: str
    ) -> None:
        reply = self._next_reply()
        if isinstance(reply, ErrorReply):
            self.send_json(handler, reply.status, reply.body, reply.headers)
            return
        if self.check_models and model not in self.models:
            err = gemini_error(
                404,
                f"models/{model} is not found for API version v1beta, or is not supported for "
                "generateContent. Call ListModels to see the list of available models and their "
                "supported methods.",
            )
            self.send_json(handler, err.status, err.body)
            return
        if reply is None:
            reply = GeminiReply(text=self.default_text)
        if reply.headers_delay:
            time.sleep(reply.headers_delay)
        if method == "streamGenerateContent":
            events = [json.dumps(c) for c in self._chunks(reply, model)]
            self.send_sse(handler, events, delay=reply.delay)
        elif method == "generateContent":
            parts = ([{"text": reply.text}] if reply.text else []) + [
                self._call_part(c) for c in reply.function_calls
            ]
            self.send_json(handler, 200, self._response(parts, model, reply.finish_reason))
        else:
            err = gemini_error(404, f"Method {method} not supported by the fake")
            self.send_json(handler, err.status, err.body)

    @staticmethod
    def _call_part(call: FakeFunctionCall) -> dict[str, Any]:
        fc: dict[str, Any] = {"name": call.name, "args": call.args}
        if call.id:
            fc["id"] = call.id
        part: dict[str, Any] = {"functionCall": fc}
        if call.thought_signature:
            part["thoughtSignature"] = base64.b64encode(call.thought_signature).decode()
        return part

    @staticmethod
    def _response(parts: list[dict[str, Any]], model: str, finish: str | None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": 12,
                "candidatesTokenCount": 4,
                "totalTokenCount": 16,
            },
            "modelVersion": model,
        }

    def _chunks(self, reply: GeminiReply, model: str) -> Iterator[dict[str, Any]]:
        pieces = split_text(reply.text, reply.chunk_size)
        items: list[list[dict[str, Any]]] = [[{"text": p}] for p in pieces]
        if reply.function_calls:
            items.append([self._call_part(c) for c in reply.function_calls])
        if not items:
            items = [[{"text": ""}]]
        for index, parts in enumerate(items):
            last = index == len(items) - 1
            yield self._response(parts, model, reply.finish_reason if last else None)


@pytest.fixture
def gemini_fake() -> Iterator[FakeGeminiServer]:
    """A running fake Gemini server (stopped after the test)."""
    server = FakeGeminiServer().start()
    try:
        yield server
    finally:
        server.stop()
