"""Gemini through the ``google-genai`` SDK: streaming, function calling, errors a user understands.

Tool specs go to Gemini as ``parameters_json_schema`` (JSON Schema, lightly sanitised); tool
results go back as ``functionResponse`` parts. Gemini 3 wants the ``thought_signature`` of its
function calls echoed on the next request: signatures are kept in a small per-provider cache by
call id, and a call without one (e.g. a conversation restored after a restart) gets the
documented ``skip_thought_signature_validator`` placeholder.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import threading
from collections import OrderedDict
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
from ..toolbox.specs import ToolSpec
from . import _shared
from .base import ChatRequest, Chunk, TextChunk, ToolCallChunk, UsageChunk

log = logging.getLogger(__name__)

KEYLESS_PLACEHOLDER = "no-key-required"
API_VERSION = "v1beta"
"""Function calling, JSON-Schema parameters and thought signatures are all documented on v1beta
(the SDK's default is v1); ``GOOGLE_GENAI_API_VERSION`` still overrides it."""
SKIP_SIGNATURE = b"skip_thought_signature_validator"
RETRY_STATUS_CODES = [408, 429, 500, 502, 503, 504]
EMPTY_FINISH_REASONS = {
    "SAFETY": "bloqueada por los filtros de seguridad",
    "PROHIBITED_CONTENT": "bloqueada por contenido prohibido",
    "BLOCKLIST": "bloqueada por una lista de términos",
    "SPII": "bloqueada por contener datos personales",
    "RECITATION": "detenida por recitar contenido protegido",
    "MALFORMED_FUNCTION_CALL": "una llamada a herramienta mal formada",
    "UNEXPECTED_TOOL_CALL": "una llamada a una herramienta que no existe",
}
_DROP_SCHEMA_KEYS = {"$schema", "$id", "$comment", "examples"}

# The streamed HTTP responses opened while one of our streams advances the SDK's generator, so
# that closing our stream closes the connection (the SDK's nested generators do not).
_OPEN_RESPONSES: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "idee_gemini_open_responses", default=None
)


class GeminiProvider:
    """A ``ChatProvider`` over the Gemini API (``generateContent`` / ``streamGenerateContent``)."""

    kind = "gemini"
    signature_cache_size = 4096

    def __init__(
        self,
        name: str = "gemini",
        api_key: str | None = None,
        base_url: str | None = None,
        default_model: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.1,
        *,
        retry_initial_delay: float = 1.0,
    ) -> None:
        self.name = name
        self.default_model = default_model or "gemini-2.5-flash"
        self.base_url = base_url or None
        self.timeout = float(timeout)
        self.max_retries = _shared.bounded_retries(max_retries)
        self.temperature = temperature
        self.retry_initial_delay = retry_initial_delay
        self._key = api_key or None
        self._calls: OrderedDict[str, tuple[bytes | None, bool]] = OrderedDict()
        self._calls_lock = threading.Lock()
        self._clients = _shared.PerLoopClients(self._new_client, _close_client)

    def __repr__(self) -> str:  # never show the key
        return f"GeminiProvider(name={self.name!r}, default_model={self.default_model!r})"

    # ------------------------------------------------------------------ clients
    def _effective_key(self) -> str:
        if self._key:
            return self._key
        if self.base_url:
            return KEYLESS_PLACEHOLDER
        raise _shared.missing_key_error(self.name, self.kind)

    def _new_client(self) -> Any:
        import httpx
        from google import genai
        from google.genai import types

        class TrackingClient(httpx.AsyncClient):
            async def send(self, request: Any, **kwargs: Any) -> Any:
                response = await super().send(request, **kwargs)
                opened = _OPEN_RESPONSES.get()
                if kwargs.get("stream") and opened is not None:
                    opened.append(response)
                return response

        retry = None
        if self.max_retries:
            retry = types.HttpRetryOptions(
                attempts=self.max_retries + 1,
                initial_delay=self.retry_initial_delay,
                max_delay=max(self.retry_initial_delay, 8.0),
                jitter=self.retry_initial_delay,
                http_status_codes=RETRY_STATUS_CODES,
            )
        http = TrackingClient(timeout=self.timeout, follow_redirects=True)
        options = types.HttpOptions(
            base_url=self.base_url,
            api_version=os.environ.get("GOOGLE_GENAI_API_VERSION") or API_VERSION,
            timeout=int(self.timeout * 1000),
            retry_options=retry,
            httpx_async_client=http,
        )
        return genai.Client(api_key=self._effective_key(), http_options=options), http

    def _client(self) -> Any:
        self._effective_key()
        return self._clients.get()[0]

    async def aclose(self) -> None:
        await self._clients.aclose()

    # ------------------------------------------------------------------ API
    async def list_models(self) -> list[str]:
        client = self._client()
        ids: set[str] = set()
        try:
            pager = await client.aio.models.list()
            async for model in pager:
                actions = getattr(model, "supported_actions", None)
                if actions and "generateContent" not in actions:
                    continue
                name = (model.name or "").removeprefix("models/")
                if name:
                    ids.add(name)
        except Exception as exc:
            raise self._map_error(exc, model="") from None
        return sorted(ids)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        from google.genai import types

        client = self._client()
        model = request.model or self.default_model
        temperature = request.temperature if request.temperature is not None else self.temperature
        config = types.GenerateContentConfig(
            system_instruction=request.system or None,
            temperature=temperature,
            tools=[gemini_tool(request.tools)] if request.tools else None,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        contents = self.to_contents(request, model)
        opened: list[Any] = []
        sdk_stream: Any = None
        emitted = False
        finish: str | None = None
        usage: Any = None
        try:
            sdk_stream = await client.aio.models.generate_content_stream(
                model=model, contents=contents, config=config
            )
            while True:
                token = _OPEN_RESPONSES.set(opened)
                try:
                    response = await sdk_stream.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    _OPEN_RESPONSES.reset(token)
                feedback = getattr(response, "prompt_feedback", None)
                if feedback is not None and getattr(feedback, "block_reason", None):
                    raise self._blocked(str(_enum_name(feedback.block_reason)))
                usage = getattr(response, "usage_metadata", None) or usage
                for candidate in (response.candidates or [])[:1]:
                    if candidate.finish_reason:
                        finish = _enum_name(candidate.finish_reason)
                    parts = candidate.content.parts if candidate.content else None
                    for part in parts or []:
                        if getattr(part, "thought", None):
                            continue
                        if part.function_call is not None:
                            emitted = True
                            yield ToolCallChunk(self._from_function_call(part))
                        elif part.text:
                            emitted = True
                            yield TextChunk(part.text)
        except ProviderError:
            raise
        except Exception as exc:
            if _is_sdk_error(exc):
                raise self._map_error(exc, model) from None
            raise
        finally:
            for response in opened:  # close the connection even when the consumer left early
                try:
                    await response.aclose()
                except Exception:
                    log.debug("Cierre de respuesta de Gemini fallido", exc_info=True)
            if sdk_stream is not None:
                try:
                    await sdk_stream.aclose()
                except Exception:
                    log.debug("Cierre del stream de Gemini fallido", exc_info=True)
        if not emitted and finish in EMPTY_FINISH_REASONS:
            raise self._blocked(finish)
        if usage is not None:
            yield UsageChunk(
                getattr(usage, "prompt_token_count", 0) or 0,
                getattr(usage, "candidates_token_count", 0) or 0,
            )

    # ------------------------------------------------------------------ function calls
    def _from_function_call(self, part: Any) -> ToolCall:
        fc = part.function_call
        wire_id = bool(fc.id)
        call = ToolCall(name=fc.name or "", args=_as_args(fc.args), id=fc.id or new_id("call_"))
        signature = getattr(part, "thought_signature", None)
        with self._calls_lock:
            self._calls[call.id] = (signature, wire_id)
            self._calls.move_to_end(call.id)
            while len(self._calls) > self.signature_cache_size:
                self._calls.popitem(last=False)
        return call

    def _call_meta(self, call_id: str) -> tuple[bytes | None, bool]:
        with self._calls_lock:
            return self._calls.get(call_id, (None, False))

    def to_contents(self, request: ChatRequest, model: str) -> list[Any]:
        """Our typed history as Gemini ``Content`` items (tool results as ``functionResponse``)."""
        from google.genai import types

        needs_signature = model.removeprefix("models/").startswith("gemini-3")
        contents: list[Any] = []
        last_kind = ""
        names: dict[str, str] = {}
        for message in request.messages:
            if isinstance(message, UserMessage):
                contents.append(types.Content(role="user", parts=[types.Part(text=message.text)]))
                last_kind = "user"
            elif isinstance(message, AssistantMessage):
                parts: list[Any] = []
                if message.text:
                    parts.append(types.Part(text=message.text))
                for index, call in enumerate(message.tool_calls):
                    signature, wire_id = self._call_meta(call.id)
                    if signature is None and index == 0 and needs_signature:
                        signature = SKIP_SIGNATURE
                    names[call.id] = call.name
                    parts.append(
                        types.Part(
                            function_call=types.FunctionCall(
                                name=call.name, args=call.args, id=call.id if wire_id else None
                            ),
                            thought_signature=signature,
                        )
                    )
                if parts:
                    contents.append(types.Content(role="model", parts=parts))
                    last_kind = "model"
            elif isinstance(message, ToolResultMessage):
                if message.call_id not in names:
                    continue
                _, wire_id = self._call_meta(message.call_id)
                part = types.Part(
                    function_response=types.FunctionResponse(
                        name=message.name,
                        response=json.loads(message.content_text()),
                        id=message.call_id if wire_id else None,
                    )
                )
                if last_kind == "tool":  # parallel calls answer in one turn
                    contents[-1].parts.append(part)
                else:
                    contents.append(types.Content(role="user", parts=[part]))
                last_kind = "tool"
        return contents

    # ------------------------------------------------------------------ errors
    def _blocked(self, reason: str) -> ProviderError:
        label = _shared.display_name(self.name)
        why = EMPTY_FINISH_REASONS.get(reason, f"detenida ({reason})")
        if reason in ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"):
            text = (
                f"{label} generó {why} y no dio respuesta. Vuelve a intentarlo o reformula la "
                f"petición. (EN: {label} produced an invalid tool call.)"
            )
        else:
            text = (
                f"{label} no dio respuesta: la petición fue {why}. Reformula la petición. "
                f"(EN: {label} blocked the answer: {reason}.)"
            )
        return ProviderError(text, provider=self.name)

    def _map_error(self, exc: BaseException, model: str) -> ProviderError:
        import httpx
        from google.genai import errors as genai_errors

        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, httpx.TimeoutException):
            err: ProviderError = _shared.timeout_error(self.name, self.timeout)
        elif isinstance(exc, httpx.TransportError):
            err = _shared.unavailable_error(self.name)
        elif isinstance(exc, genai_errors.APIError):
            status = int(exc.code or 0)
            reasons = _error_reasons(exc.details)
            message = str(exc.message or "")
            if "API_KEY_INVALID" in reasons or (status == 400 and "api key" in message.lower()):
                err = _shared.auth_error(self.name, status)
            else:
                err = _shared.by_status(
                    self.name,
                    status,
                    model=model,
                    retries=self.max_retries,
                    detail=_shared.scrub(message, self._key),
                )
        else:
            err = _shared.rejected_error(self.name, None, _shared.scrub(str(exc), self._key))
        log.warning(
            "Proveedor %s: %s (%s)",
            self.name,
            type(exc).__name__,
            getattr(err, "status_code", None) or err.code,
        )
        return err


# ---------------------------------------------------------------------- wire format helpers
def gemini_tool(specs: list[ToolSpec]) -> Any:
    """Our tool specs as one Gemini ``Tool`` of function declarations."""
    from google.genai import types

    return types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name=spec.name,
                description=spec.description,
                parameters_json_schema=sanitize_schema(spec.parameters),
            )
            for spec in specs
        ]
    )


def sanitize_schema(schema: Any) -> Any:
    """JSON Schema without what Gemini's ``parametersJsonSchema`` refuses or does not need:
    ``x-*`` extensions, ``$schema``/``$id``/``$comment`` and ``examples``."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _DROP_SCHEMA_KEYS or key.startswith("x-"):
                continue
            if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(
                value, dict
            ):
                out[key] = {name: sanitize_schema(sub) for name, sub in value.items()}
            else:
                out[key] = sanitize_schema(value)
        return out
    if isinstance(schema, list):
        return [sanitize_schema(item) for item in schema]
    return schema


def _as_args(args: Any) -> dict[str, Any]:
    if isinstance(args, dict):
        return dict(args)
    if args is None:
        return {}
    if isinstance(args, str):
        return _shared.parse_tool_args(args)
    return {_shared.RAW_ARGS_KEY: json.dumps(args, default=str)}


def _enum_name(value: Any) -> str:
    return str(getattr(value, "name", None) or getattr(value, "value", None) or value)


def _error_reasons(details: Any) -> set[str]:
    reasons: set[str] = set()
    error = details.get("error", details) if isinstance(details, dict) else {}
    for item in (error.get("details") if isinstance(error, dict) else None) or []:
        if isinstance(item, dict) and item.get("reason"):
            reasons.add(str(item["reason"]))
    return reasons


def _is_sdk_error(exc: BaseException) -> bool:
    import httpx
    from google.genai import errors as genai_errors

    return isinstance(exc, (genai_errors.APIError, httpx.HTTPError)) or type(
        exc
    ).__module__.startswith("google.genai")


async def _close_client(pair: tuple[Any, Any]) -> None:
    client, http = pair
    await client.aio.aclose()
    await http.aclose()
    client.close()
