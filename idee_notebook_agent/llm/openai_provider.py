"""OpenAI chat completions with tools and streaming, also for any OpenAI-compatible endpoint
(Groq, Cerebras, OpenRouter, Ollama, vLLM) through ``base_url``.

The official ``openai`` SDK does the HTTP, retries with backoff (429/5xx, bounded) and SSE;
this module translates our typed conversation to the wire format, accumulates streamed
tool-call deltas into complete calls, and maps SDK errors onto ``errors.ProviderError``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from ..core.conversation import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    new_id,
)
from ..errors import ProviderError
from . import _shared
from .base import ChatRequest, Chunk, TextChunk, ToolCallChunk, UsageChunk

log = logging.getLogger(__name__)

KEYLESS_PLACEHOLDER = "sk-no-key-required"
"""Sent when a ``base_url`` needs no key (Ollama, a local vLLM): the SDK insists on one."""


class OpenAIProvider:
    """A ``ChatProvider`` over the OpenAI chat-completions API."""

    kind = "openai"

    def __init__(
        self,
        name: str = "openai",
        api_key: str | None = None,
        base_url: str | None = None,
        default_model: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.1,
    ) -> None:
        self.name = name
        self.default_model = default_model or "gpt-4o-mini"
        self.base_url = base_url or None
        self.timeout = float(timeout)
        self.max_retries = _shared.bounded_retries(max_retries)
        self.temperature = temperature
        self._key = api_key or None
        self._no_temperature: set[str] = set()
        self._clients = _shared.PerLoopClients(self._new_client, _close_client)

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIProvider(name={self.name!r}, default_model={self.default_model!r})"

    # ------------------------------------------------------------------ clients
    def _effective_key(self) -> str:
        if self._key:
            return self._key
        if self.base_url:
            return KEYLESS_PLACEHOLDER
        raise _shared.missing_key_error(self.name, self.kind)

    def _new_client(self) -> Any:
        import openai

        return openai.AsyncOpenAI(
            api_key=self._effective_key(),
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def _client(self) -> Any:
        self._effective_key()  # fail with a clear message before building anything
        return self._clients.get()

    async def aclose(self) -> None:
        await self._clients.aclose()

    # ------------------------------------------------------------------ API
    async def list_models(self) -> list[str]:
        client = self._client()
        try:
            ids = {m.id async for m in client.models.list()}
        except Exception as exc:
            raise self._map_error(exc, model="") from None
        return sorted(i for i in ids if i)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        client = self._client()
        model = request.model or self.default_model
        params: dict[str, Any] = {
            "model": model,
            "messages": to_openai_messages(request),
            "stream": True,
        }
        temperature = request.temperature if request.temperature is not None else self.temperature
        if temperature is not None and model not in self._no_temperature:
            params["temperature"] = temperature
        if request.tools:
            params["tools"] = [spec.openai_tool() for spec in request.tools]
        stream = await self._open(client, params)
        pending: dict[int, dict[str, Any]] = {}
        try:
            async for chunk in stream:
                usage = getattr(chunk, "usage", None)
                if usage is not None:
                    yield UsageChunk(
                        getattr(usage, "prompt_tokens", 0) or 0,
                        getattr(usage, "completion_tokens", 0) or 0,
                    )
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        yield TextChunk(delta.content)
                    for position, tc in enumerate(delta.tool_calls or []):
                        index = tc.index if tc.index is not None else len(pending) + position
                        slot = pending.setdefault(index, {"id": "", "name": "", "args": []})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            if tc.function.name:
                                slot["name"] += tc.function.name
                            if tc.function.arguments:
                                slot["args"].append(tc.function.arguments)
        except ProviderError:
            raise
        except Exception as exc:
            if _is_sdk_error(exc):
                raise self._map_error(exc, model) from None
            raise
        finally:
            await stream.close()  # also when the consumer stops early: no more tokens billed
        for index in sorted(pending):
            slot = pending[index]
            if not slot["name"]:
                continue
            yield ToolCallChunk(
                ToolCall(
                    name=slot["name"],
                    args=_shared.parse_tool_args("".join(slot["args"])),
                    id=slot["id"] or new_id("call_"),
                )
            )

    async def _open(self, client: Any, params: dict[str, Any]) -> Any:
        """Start the streamed request; a model that refuses ``temperature`` gets it dropped."""
        import openai

        try:
            return await client.chat.completions.create(**params)
        except openai.BadRequestError as exc:
            if "temperature" in params and _about_temperature(exc):
                log.info(
                    "El modelo %s no admite temperature; se reintenta sin ella", params["model"]
                )
                self._no_temperature.add(params["model"])
                params = {k: v for k, v in params.items() if k != "temperature"}
                try:
                    return await client.chat.completions.create(**params)
                except Exception as exc2:
                    raise self._map_error(exc2, params["model"]) from None
            raise self._map_error(exc, params["model"]) from None
        except Exception as exc:
            if _is_sdk_error(exc):
                raise self._map_error(exc, params["model"]) from None
            raise

    # ------------------------------------------------------------------ errors
    def _map_error(self, exc: BaseException, model: str) -> ProviderError:
        import openai

        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, openai.APITimeoutError):
            err: ProviderError = _shared.timeout_error(self.name, self.timeout)
        elif isinstance(exc, openai.APIConnectionError):
            err = _shared.unavailable_error(self.name)
        elif isinstance(exc, openai.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}
            code = str(body.get("code") or getattr(exc, "code", "") or "")
            err = _shared.by_status(
                self.name,
                exc.status_code,
                model=model,
                retries=self.max_retries,
                detail=_shared.scrub(body.get("message") or exc.message, self._key),
                quota=code == "insufficient_quota",
            )
        else:
            err = _shared.rejected_error(
                self.name, None, _shared.scrub(getattr(exc, "message", str(exc)), self._key)
            )
        log.warning(
            "Proveedor %s: %s (%s)",
            self.name,
            type(exc).__name__,
            getattr(err, "status_code", None) or err.code,
        )
        return err


# ---------------------------------------------------------------------- wire format
def to_openai_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """Our typed history as chat-completions messages (tool results as ``tool`` role)."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    seen_calls: set[str] = set()
    for message in request.messages:
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": message.text})
        elif isinstance(message, AssistantMessage):
            if not message.text and not message.tool_calls:
                continue
            item: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": json.dumps(call.args, ensure_ascii=False, default=str),
                        },
                    }
                    for call in message.tool_calls
                ]
                seen_calls.update(call.id for call in message.tool_calls)
            out.append(item)
        elif isinstance(message, ToolResultMessage):
            if message.call_id not in seen_calls:  # an orphan result would be a 400
                continue
            out.append(
                {"role": "tool", "tool_call_id": message.call_id, "content": message.content_text()}
            )
    return out


def _is_sdk_error(exc: BaseException) -> bool:
    import openai

    return isinstance(exc, openai.OpenAIError)


def _about_temperature(exc: Any) -> bool:
    body = exc.body if isinstance(getattr(exc, "body", None), dict) else {}
    if body.get("param") == "temperature":
        return True
    text = str(body.get("message") or getattr(exc, "message", "")).lower()
    return "temperature" in text and ("unsupported" in text or "not support" in text)


async def _close_client(client: Any) -> None:
    await client.close()
