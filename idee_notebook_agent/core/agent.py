"""The agent loop: context + skills + map state → model with tools → tool calls → results → answer.

``Agent.stream`` is an async generator of events (``core.events``); every front end drives it.
Server tools run inside the loop; map tools go to the ``MapPort`` when one is given, otherwise the
turn ends with a ``tool_call`` event and ``Agent.resume`` continues it when results arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import Settings, get_settings
from ..errors import IdeeAgentError, ProviderError, ToolError
from ..llm.base import ChatRequest, TextChunk, ToolCallChunk
from ..llm.registry import ProviderRegistry
from ..toolbox.registry import ToolContext, ToolRegistry
from .conversation import AssistantMessage, Conversation, ToolCall, ToolResultMessage, UserMessage
from .events import (
    DoneEvent,
    ErrorEvent,
    Event,
    LayerEvent,
    SourcesEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
)
from .mapport import MapPort
from .prompts import build_system_prompt

log = logging.getLogger(__name__)

OnUpdate = Callable[[Conversation], Awaitable[None] | None]

CANCELLED_RESULT = {
    "success": False,
    "error": "No se ejecutó: el turno se canceló o el usuario envió otro mensaje.",
}


class Retriever(Protocol):
    """The knowledge hook: chunks for a query, each with ``content``, ``source``, ``chunk_index``."""

    async def retrieve(self, query: str, k: int) -> list[dict[str, Any]]: ...


def public_sources(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chunk metadata without the text, as the ``sources`` event and ``metadata.sources`` carry it."""
    return [{k: v for k, v in c.items() if k not in ("content", "text")} for c in chunks]


@dataclass
class ToolResultInput:
    """A result for a pending map call, as a front end reports it (CONTRACT 3.5)."""

    tool_name: str
    result: Any
    tool_call_id: str = ""
    success: bool = True


@dataclass
class AgentReply:
    """What ``Agent.ask`` returns: the text, the events, and the conversation."""

    text: str
    events: list[Event]
    conversation: Conversation
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Agent:
    """One agent core for every front end."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        tools: ToolRegistry | None = None,
        providers: ProviderRegistry | None = None,
        retriever: Retriever | None = None,
        skills: list[str] | None = None,
        max_rounds: int | None = None,
        provider: str | None = None,
        model: str | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.tools = tools or ToolRegistry.load(self.settings)
        self.providers = providers or ProviderRegistry.from_settings(self.settings)
        self.retriever = retriever if retriever is not None else _default_retriever(self.settings)
        names = (
            skills
            if skills is not None
            else [s for s in self.settings.active_skills.split(",") if s.strip()]
        )
        self.skill_names = names
        self.max_rounds = max_rounds or self.settings.max_tool_rounds
        self.provider = provider
        self.model = model
        self._started = False
        self._mcp: Any = None  # the MCP manager, when servers are configured

    # ------------------------------------------------------------------ public API
    async def stream(
        self,
        conversation: Conversation,
        text: str,
        map_state: dict[str, Any] | None = None,
        map_port: MapPort | None = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        on_update: OnUpdate | None = None,
    ) -> AsyncIterator[Event]:
        """Run one user turn and yield its events. ``api_key`` is used for this call only."""
        text = (text or "").strip()
        if not text:
            yield ErrorEvent("El mensaje está vacío.", "empty_message")
            yield DoneEvent()
            return
        await self.start()
        self._close_dangling(conversation)
        conversation.add(UserMessage(text))
        if map_state is None and map_port is not None:
            map_state = _safe_state(map_port)
        conversation.map_state = map_state
        await _notify(on_update, conversation)
        chunks = await self._retrieve(text)
        if chunks:
            yield SourcesEvent(public_sources(chunks))
        # aclosing: when our consumer stops, the inner loop (and the model stream) close now
        async with contextlib.aclosing(
            self._loop(
                conversation, chunks, map_state, map_port, provider, model, api_key, on_update
            )
        ) as events:
            async for event in events:
                yield event

    async def start(self) -> None:
        """Connect configured MCP servers once (their tools join the registry); safe to repeat.

        Later calls (one per turn) retry servers that were down, with a pause between attempts.
        """
        if self._started:
            if self._mcp is not None:
                await self._mcp.refresh()
            return
        self._started = True
        if self.settings.mcp_servers_path:
            try:
                from ..mcp.client import attach_mcp_servers
            except ImportError:
                log.warning("MCP_SERVERS_PATH está definido pero el soporte MCP no está disponible")
                return
            try:
                self._mcp = await attach_mcp_servers(self.tools, self.settings)
            except Exception:
                log.exception("No se pudieron conectar los servidores MCP; se sigue sin ellos")

    def record_results(self, conversation: Conversation, results: list[ToolResultInput]) -> bool:
        """Store results of pending map calls; return True when none is pending any more.

        An empty ``tool_call_id`` is matched to the oldest pending call of that tool (CONTRACT 14.4).
        """
        for item in results:
            match = next(
                (
                    c
                    for c in conversation.pending_calls
                    if item.tool_call_id and c.id == item.tool_call_id
                ),
                None,
            )
            if match is None:
                match = next(
                    (c for c in conversation.pending_calls if c.name == item.tool_name), None
                )
            if match is None:
                raise IdeeAgentError(
                    f"No hay ninguna llamada pendiente a '{item.tool_name}'"
                    + (f" con id '{item.tool_call_id}'." if item.tool_call_id else ".")
                )
            conversation.pending_calls.remove(match)
            conversation.add(ToolResultMessage(match.id, match.name, item.result, item.success))
        return not conversation.pending_calls

    async def resume(
        self,
        conversation: Conversation,
        results: list[ToolResultInput],
        map_port: MapPort | None = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        on_update: OnUpdate | None = None,
    ) -> AsyncIterator[Event]:
        """Continue a turn that waited for map results; the model is called when all are in."""
        done = self.record_results(conversation, results)
        await _notify(on_update, conversation)
        if not done:
            yield DoneEvent(pending=True)
            return
        chunks = await self._retrieve(conversation.last_user_text)
        map_state = _safe_state(map_port) if map_port is not None else None
        async with contextlib.aclosing(
            self._loop(
                conversation, chunks, map_state, map_port, provider, model, api_key, on_update
            )
        ) as events:
            async for event in events:
                yield event

    def ask(
        self,
        text: str,
        conversation: Conversation | None = None,
        map_port: MapPort | None = None,
        **kwargs: Any,
    ) -> AgentReply:
        """Synchronous wrapper for scripts: run one turn and collect its events."""
        conversation = conversation if conversation is not None else Conversation()

        async def collect() -> list[Event]:
            return [e async for e in self.stream(conversation, text, map_port=map_port, **kwargs)]

        events = _run_sync(collect())
        reply_text = "".join(e.text for e in events if isinstance(e, TextDelta))
        calls = [c for e in events if isinstance(e, ToolCallEvent) for c in e.calls]
        errors = [e.message for e in events if isinstance(e, ErrorEvent)]
        return AgentReply(reply_text, events, conversation, calls, errors)

    def system_prompt(
        self, chunks: list[dict[str, Any]] | None = None, map_state: dict[str, Any] | None = None
    ) -> str:
        return build_system_prompt(
            self.tools.active_skills(self.skill_names),
            chunks,
            map_state,
            max_context_chars=self.settings.rag_max_chars,
        )

    # ------------------------------------------------------------------ internals
    async def _retrieve(self, text: str) -> list[dict[str, Any]]:
        if self.retriever is None or not text:
            return []
        try:
            return list(await self.retriever.retrieve(text, self.settings.rag_top_k))
        except Exception:  # knowledge is a help, never a reason to fail the turn
            log.exception("La recuperación de contexto falló; se sigue sin contexto")
            return []

    def _close_dangling(self, conversation: Conversation) -> None:
        """Answer calls left without a result so the history stays valid for every provider."""
        for call in conversation.unanswered_calls():
            conversation.add(ToolResultMessage(call.id, call.name, CANCELLED_RESULT, False))
        conversation.pending_calls.clear()

    async def _loop(
        self,
        conversation: Conversation,
        chunks: list[dict[str, Any]],
        map_state: dict[str, Any] | None,
        map_port: MapPort | None,
        provider_name: str | None,
        model: str | None,
        api_key: str | None,
        on_update: OnUpdate | None,
    ) -> AsyncIterator[Event]:
        try:
            provider, model_id = self.providers.resolve(
                provider_name or self.provider, model or self.model, api_key
            )
        except IdeeAgentError as exc:
            yield ErrorEvent(str(exc), "configuration")
            yield DoneEvent()
            return
        sources = public_sources(chunks)
        system = self.system_prompt(chunks, map_state)
        for _round in range(self.max_rounds):
            request = ChatRequest(
                system=system,
                messages=list(conversation.messages),
                tools=self.tools.tool_list(),
                model=model_id,
                temperature=self.settings.llm_temperature,
                map_state=map_state,
            )
            text_parts: list[str] = []
            calls: list[ToolCall] = []
            saved = False
            try:
                async with contextlib.aclosing(provider.stream(request)) as stream:
                    async for chunk in stream:
                        if isinstance(chunk, TextChunk) and chunk.text:
                            text_parts.append(chunk.text)
                            yield TextDelta(chunk.text)
                        elif isinstance(chunk, ToolCallChunk):
                            calls.append(chunk.call)
                message = AssistantMessage("".join(text_parts), calls, [] if calls else sources)
                conversation.add(message)
                saved = True
            except ProviderError as exc:
                if text_parts:
                    conversation.add(AssistantMessage("".join(text_parts)))
                saved = True
                log.warning("Error del proveedor %s: %s", provider_name or provider.name, exc.code)
                await _notify(on_update, conversation)
                yield ErrorEvent(str(exc), exc.code)
                yield DoneEvent()
                return
            finally:
                if not saved and text_parts:  # cancelled or the consumer went away mid-stream
                    conversation.add(AssistantMessage("".join(text_parts)))
                    with contextlib.suppress(Exception):
                        await _notify(on_update, conversation)
            await _notify(on_update, conversation)
            if not calls:
                yield DoneEvent()
                return

            pending: list[ToolCall] = []
            try:
                for index, call in enumerate(calls):
                    async for event in self._run_call(
                        conversation, message, index, call, map_state, map_port, pending
                    ):
                        yield event
                    await _notify(on_update, conversation)
            except BaseException:
                self._close_dangling(conversation)
                with contextlib.suppress(Exception):
                    await _notify(on_update, conversation)
                raise
            if pending:
                conversation.pending_calls = pending
                await _notify(on_update, conversation)
                yield ToolCallEvent(pending, awaiting_client=True)
                yield DoneEvent(pending=True)
                return
        yield ErrorEvent(
            f"Se alcanzó el límite de {self.max_rounds} rondas de herramientas en este turno. "
            "Reformula la petición o divídela en pasos más pequeños.",
            "max_rounds",
        )
        yield DoneEvent()

    async def _run_call(
        self,
        conversation: Conversation,
        message: AssistantMessage,
        index: int,
        call: ToolCall,
        map_state: dict[str, Any] | None,
        map_port: MapPort | None,
        pending: list[ToolCall],
    ) -> AsyncIterator[Event]:
        emitted: list[Event] = []
        lock = threading.Lock()

        def emit(event: Event) -> None:
            with lock:
                emitted.append(event)

        ctx = ToolContext(self.settings, map_state, emit, conversation.id)
        problem = self.tools.check_call(call)
        problem_data: dict[str, Any] = {}
        if problem is None and self.tools.is_map_tool(call.name):
            try:
                call = self.tools.preprocess(call, ctx)
                message.tool_calls[index] = call
            except ToolError as exc:
                problem = str(exc)
                problem_data = exc.data
        if problem is not None:
            yield ToolCallEvent([call])
            result = {"success": False, "error": problem, **problem_data}
            conversation.add(ToolResultMessage(call.id, call.name, result, False))
            yield ToolResultEvent(call, result, False)
            return

        if self.tools.is_server_tool(call.name):
            yield ToolCallEvent([call])
            result, success = await self.tools.execute(call, ctx)
        elif map_port is None:
            pending.append(call)
            return
        else:
            yield ToolCallEvent([call])
            result, success = await _call_port(map_port, call)
        conversation.add(ToolResultMessage(call.id, call.name, result, success))
        for event in emitted:
            if isinstance(event, LayerEvent) and map_port is not None:
                with contextlib.suppress(Exception):
                    map_port.show_layer(event.layer)
            yield event
        yield ToolResultEvent(call, result, success)


def _default_retriever(settings: Settings) -> Retriever | None:
    """The knowledge base when one has been indexed; None otherwise (no model is loaded)."""
    try:
        from ..knowledge.retriever import default_retriever
    except ImportError:
        return None
    try:
        return default_retriever(settings)
    except Exception:
        log.exception("No se pudo abrir la base de conocimiento; se sigue sin contexto")
        return None


async def _call_port(port: MapPort, call: ToolCall) -> tuple[Any, bool]:
    if not port.supports(call.name):
        return {
            "success": False,
            "error": f"La herramienta '{call.name}' no está disponible en este mapa.",
        }, False
    try:
        result = port.call(call.name, dict(call.args))
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:  # a port must answer, but a bug there must not kill the turn
        log.exception("El mapa falló al ejecutar %s", call.name)
        return {"success": False, "error": f"Error del mapa en '{call.name}': {exc}"}, False
    success = not (isinstance(result, dict) and result.get("success") is False)
    return result, success


def _safe_state(port: MapPort) -> dict[str, Any] | None:
    try:
        return port.state()
    except Exception:
        log.exception("No se pudo leer el estado del mapa")
        return None


async def _notify(on_update: OnUpdate | None, conversation: Conversation) -> None:
    if on_update is None:
        return
    result = on_update(conversation)
    if inspect.isawaitable(result):
        await result


def _run_sync(coro: Awaitable[Any]) -> Any:
    """Run a coroutine to completion from sync code, also inside Jupyter's running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=runner, name="idee-agent-ask", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
