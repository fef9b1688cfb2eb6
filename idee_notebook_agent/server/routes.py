"""The REST/SSE endpoints of CONTRACT.md section 3, built once per base path and profile.

``/api`` answers the classic plugin (string ``content``, classic tool names); ``/api/v2`` answers
the current plugin (content blocks, our tool names). Every path ends with ``/``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from typing import Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse, Response

from .http_errors import NOT_FOUND, ApiError
from .profiles import Profile
from .schemas import (
    MAX_MESSAGE_CHARS,
    ByIdsBody,
    ChatBody,
    ConfigOut,
    ConversationOut,
    ConversationPage,
    CreateConversationBody,
    ErrorOut,
    KeyTestBody,
    KeyTestOut,
    MessageOut,
    ProviderOut,
    ReplyOut,
    ToolResultBody,
)
from .serializers import conversation_out, message_out
from .service import ConversationService
from .sse import SSEResponse
from .turns import INTERNAL_ERROR

log = logging.getLogger(__name__)

PAGE_SIZE = 50
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Datos no válidos (con errores por campo)."},
    404: {"model": ErrorOut, "description": "Conversación no encontrada."},
}


def client_id(request: Request) -> str:
    """Who owns a conversation for the per-client limit: ``X-Client-Id`` or the client address.

    The two kinds are namespaced, so a header cannot name someone else's address.
    """
    given = request.headers.get("x-client-id", "").strip()
    if given:
        return "id:" + given[:120]
    return "ip:" + request.client.host if request.client else ""


def conversation_uuid(value: str) -> str:
    """Ids are UUIDs (CONTRACT 2); anything else is a plain 404, as the original server does."""
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise ApiError(404, NOT_FOUND) from None


def build_router(service: ConversationService, profile: Profile, *, keepalive: float) -> APIRouter:
    router = APIRouter()
    shape = profile.shape
    tag = f"API {profile.name}"

    @router.get("/providers/", response_model=list[ProviderOut], tags=[tag])
    async def providers() -> JSONResponse:
        """Providers and models to choose from (never keys or URLs)."""
        return JSONResponse(service.agent.providers.public())

    @router.post("/test-key/", response_model=KeyTestOut, tags=[tag])
    async def test_key(body: KeyTestBody | None = Body(None)) -> JSONResponse:
        """Check a user's API key against the provider (the plugin reads only valid/error)."""
        api_key = ((body.api_key if body else None) or "").strip()
        provider = ((body.provider if body else None) or "").strip()
        if not api_key:
            return JSONResponse({"valid": False, "error": "API key es requerida"}, 400)
        if not provider:
            return JSONResponse({"valid": False, "error": "Nombre del proveedor es requerido"}, 400)
        registry = service.agent.providers
        try:
            registry.get_config(provider)
        except Exception:
            names = ", ".join(registry.names())
            return JSONResponse(
                {
                    "valid": False,
                    "error": f"Proveedor '{provider}' no encontrado. Disponibles: {names}",
                }
            )
        return JSONResponse(await _test_key(registry, provider, api_key))

    @router.post(
        "/conversations/",
        status_code=201,
        response_model=ConversationOut,
        tags=[tag],
        responses=ERRORS,
    )
    async def create_conversation(
        request: Request, body: CreateConversationBody | None = Body(None)
    ) -> JSONResponse:
        record = await service.create(client_id(request), (body.title if body else None) or "")
        return JSONResponse(conversation_out(record), 201)

    @router.get("/conversations/", response_model=ConversationPage, tags=[tag], responses=ERRORS)
    async def list_conversations(request: Request, page: str | None = None) -> JSONResponse:
        try:
            number = int(page) if page not in (None, "") else 1
        except ValueError:
            number = 0
        count, records = await service.db(
            service.store.list_page, (max(number, 1) - 1) * PAGE_SIZE, PAGE_SIZE
        )
        if number < 1 or (number > 1 and not records):
            raise ApiError(404, "Página no válida. (Invalid page.)")

        def link(n: int) -> str:
            return str(request.url.include_query_params(page=n))

        return JSONResponse(
            {
                "count": count,
                "next": link(number + 1) if number * PAGE_SIZE < count else None,
                "previous": link(number - 1) if number > 1 else None,
                "results": [conversation_out(r) for r in records],
            }
        )

    @router.post(
        "/conversations/by-ids/", response_model=list[ConversationOut], tags=[tag], responses=ERRORS
    )
    async def conversations_by_ids(body: ByIdsBody) -> JSONResponse:
        """Conversations the plugin remembers (unknown ids are simply left out)."""
        ids: list[str] = []
        for value in body.ids:
            try:
                ids.append(str(uuid.UUID(str(value))))
            except ValueError:
                continue
        records = await service.db(service.store.get_many, ids)
        return JSONResponse([conversation_out(r) for r in records])

    @router.get("/conversation-config/", response_model=ConfigOut, tags=[tag])
    async def conversation_config() -> JSONResponse:
        s = service.settings
        return JSONResponse(
            {
                "ttl_hours": s.conversation_ttl_hours,
                "max_per_client": s.conversation_max_per_client,
                "cleanup_interval_seconds": s.conversation_cleanup_interval_seconds,
                "max_message_chars": MAX_MESSAGE_CHARS,
            }
        )

    @router.get(
        "/conversations/{conversation_id}/",
        response_model=ConversationOut,
        tags=[tag],
        responses=ERRORS,
    )
    async def get_conversation(conversation_id: str) -> JSONResponse:
        record = await service.require(conversation_uuid(conversation_id))
        return JSONResponse(conversation_out(record))

    @router.delete(
        "/conversations/{conversation_id}/", status_code=204, tags=[tag], responses=ERRORS
    )
    async def delete_conversation(conversation_id: str) -> Response:
        key = conversation_uuid(conversation_id)
        if not await service.db(service.store.delete, key):
            await service.require(key)  # raises the 404
        return Response(status_code=204)

    @router.get(
        "/conversations/{conversation_id}/messages/",
        response_model=list[MessageOut],
        tags=[tag],
        responses=ERRORS,
    )
    async def list_messages(conversation_id: str) -> JSONResponse:
        key = conversation_uuid(conversation_id)
        await service.require(key)
        rows = await service.db(service.store.messages, key)
        return JSONResponse([message_out(r, shape) for r in rows])

    @router.post(
        "/conversations/{conversation_id}/chat/",
        status_code=201,
        response_model=ReplyOut,
        tags=[tag],
        responses={
            **ERRORS,
            200: {
                "description": "Con stream=true: eventos SSE text_delta, tool_call, sources, "
                "layer, error, done.",
                "content": {"text/event-stream": {}},
            },
        },
    )
    async def chat(conversation_id: str, body: ChatBody) -> Response:
        """Send a user message; JSON reply (201) or, with ``stream: true``, an SSE stream."""
        key = conversation_uuid(conversation_id)
        service.check_provider(body.provider)
        if not body.stream:
            return JSONResponse(await service.chat_reply(key, body, profile), 201)
        loaded = await service.preload(key)  # 404 before the stream starts

        def on_error(exc: BaseException) -> dict[str, Any]:
            if isinstance(exc, ApiError):
                return {"type": "error", "message": exc.detail, "code": "not_found"}
            return {"type": "error", "message": INTERNAL_ERROR, "code": "internal"}

        return SSEResponse(
            lambda: service.chat_events(key, body, profile, loaded),
            keepalive_seconds=keepalive,
            tasks=service.tasks,
            on_error=on_error,
        )

    @router.post(
        "/conversations/{conversation_id}/tool-result/",
        status_code=201,
        response_model=ReplyOut,
        tags=[tag],
        responses={**ERRORS, 409: {"model": ErrorOut, "description": "Ninguna llamada pendiente."}},
    )
    async def tool_result(conversation_id: str, body: ToolResultBody) -> JSONResponse:
        """Result of one map call; the reply may carry the next ``tool_calls`` (CONTRACT 14.3)."""
        key = conversation_uuid(conversation_id)
        service.check_provider(body.provider)
        return JSONResponse(await service.tool_result(key, body, profile), 201)

    return router


async def _test_key(registry: Any, provider: str, api_key: str) -> dict[str, Any]:
    """Delegate to ``llm.keytest``; errors are answered in the body (the plugin ignores status)."""
    try:
        from ..llm.keytest import test_api_key
    except ImportError:
        test_api_key = None
    try:
        if test_api_key is None:
            client, _model = registry.resolve(provider, None, api_key)
            models = sorted(set(await client.list_models()))
            return {"valid": True, "provider": registry.get_config(provider).name, "models": models}
        if inspect.iscoroutinefunction(test_api_key):
            result = await test_api_key(registry, provider, api_key)
        else:
            result = await asyncio.to_thread(test_api_key, registry, provider, api_key)
            if inspect.isawaitable(result):
                result = await result
    except Exception as exc:  # the message is the provider's, never the key
        log.info("La prueba de clave para %s falló: %s", provider, type(exc).__name__)
        return {"valid": False, "error": _redact(str(exc) or type(exc).__name__, api_key)}
    if not isinstance(result, dict):
        return {"valid": False, "error": "Respuesta inesperada al probar la clave."}
    if isinstance(result.get("error"), str):
        result = {**result, "error": _redact(result["error"], api_key)}
    return result


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


__all__ = ["build_router", "client_id", "conversation_uuid"]
