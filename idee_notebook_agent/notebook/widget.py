"""The chat panel: an anywidget whose front end (``widget_js/chat.js``) talks to the agent.

Protocol (STYLE.md, lonboard habits): the browser sends custom messages routed on ``type``
(``user_message``, ``stop``, ``new_conversation``, ``select_conversation``, ``select_provider``,
``test_key``, ``clear_key``, ``set_language``); the kernel streams ``text_delta`` and the other
agent events back as custom messages, and keeps the rendered history in the synced ``messages``
trait so a re-render or a second view shows it. Handlers only submit work to the ``AgentRunner``
thread and return, so the kernel stays free and Stop arrives while a turn runs.

API keys arrive as a custom message and live only in kernel memory (never in a synced trait that
JupyterLab could save into the .ipynb), and are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anywidget
import traitlets
from pydantic import SecretStr

from ..core.conversation import AssistantMessage, Conversation, ToolResultMessage, UserMessage
from ..core.events import (
    ErrorEvent,
    Event,
    LayerEvent,
    SourcesEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
)
from ..resources import data_path
from .detections import DetectionStore, is_detection_layer
from .runner import AgentRunner

log = logging.getLogger(__name__)

KeyTester = Callable[[Any, str, str], Any]
Listener = Callable[[Event], None]

_WIDGET_JS = data_path("widget_js")
_CLIP = 4000
_WARNED_TOOLS: set[str] = set()  # map-side specs the notebook cannot run, logged once per process
_WARNED_LOCK = threading.Lock()

TEXTS = {
    "es": {
        "stopped": "Respuesta detenida. Lo dicho hasta ahora se conserva.",
        "internal": "Error inesperado en el asistente: {error}. La conversación se conserva; "
        "vuelve a intentarlo.",
        "unknown_provider": "Proveedor '{name}' no encontrado. Disponibles: {names}.",
        "unknown_conversation": "No existe la conversación '{id}' en este kernel.",
        "detections": "{count} detecciones de '{name}' guardadas en chat.detections.",
        "key_missing": "Escribe la clave y elige un proveedor antes de probarla.",
        "key_saved": "Clave válida: se usará para '{name}' mientras el kernel esté activo.",
        "key_cleared": "Clave olvidada para '{name}'.",
    },
    "en": {
        "stopped": "Reply stopped. What was said so far is kept.",
        "internal": "Unexpected assistant error: {error}. The conversation is kept; try again.",
        "unknown_provider": "Provider '{name}' not found. Available: {names}.",
        "unknown_conversation": "There is no conversation '{id}' in this kernel.",
        "detections": "{count} detections from '{name}' stored in chat.detections.",
        "key_missing": "Type the key and choose a provider before testing it.",
        "key_saved": "Valid key: it will be used for '{name}' while the kernel runs.",
        "key_cleared": "Key forgotten for '{name}'.",
    },
}


@dataclass
class Turn:
    """One user message being answered: its events, its answer text, and how it ended."""

    text: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    conversation_id: str = ""
    events: list[Event] = field(default_factory=list)
    stopped: bool = False
    cancel_requested: bool = False
    finished: threading.Event = field(default_factory=threading.Event)
    listener: Listener | None = None
    task: asyncio.Task[Any] | None = None
    future: Any = None

    @property
    def answer(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def errors(self) -> list[str]:
        return [e.message for e in self.events if isinstance(e, ErrorEvent)]

    @property
    def done(self) -> bool:
        return self.finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the turn ends; False when ``timeout`` passed first."""
        return self.finished.wait(timeout)


class ChatWidget(anywidget.AnyWidget):
    """Chat with the IDEE map agent inside JupyterLab; acts on ``map_port`` (a map) if given."""

    _esm = _WIDGET_JS / "chat.js"
    _css = _WIDGET_JS / "chat.css"

    messages = traitlets.List(traitlets.Dict()).tag(sync=True)
    """list[dict]: the rendered history of the current conversation (user, assistant, notice)."""
    status = traitlets.Unicode("idle").tag(sync=True)
    """str: ``"idle"`` or ``"running"`` (a turn streams; Stop is enabled)."""
    conversation_id = traitlets.Unicode("").tag(sync=True)
    """str: id of the conversation shown."""
    conversations = traitlets.List(traitlets.Dict()).tag(sync=True)
    """list[dict]: this kernel's conversations, newest first (id, title, updated_at, count)."""
    providers = traitlets.List(traitlets.Dict()).tag(sync=True)
    """list[dict]: selectable providers as ``GET /providers/`` lists them (never keys or URLs)."""
    provider = traitlets.Unicode("").tag(sync=True)
    """str: selected provider name."""
    model = traitlets.Unicode("").tag(sync=True)
    """str: selected model id ("" = the provider's default)."""
    keys_set = traitlets.List(traitlets.Unicode()).tag(sync=True)
    """list[str]: providers that have a user key in kernel memory (names only, never keys)."""
    key_status = traitlets.Dict().tag(sync=True)
    """dict: outcome of the last key test: provider, valid, message, models."""
    language = traitlets.Unicode("es").tag(sync=True)
    """str: UI language, ``"es"`` (default) or ``"en"``."""
    height = traitlets.Unicode("560px").tag(sync=True)
    """str: CSS height of the panel (MapChat sets the map's height)."""
    width = traitlets.Unicode("380px").tag(sync=True)
    """str: initial CSS width of the panel (the user can drag its edge to resize it)."""

    def __init__(
        self,
        agent: Any = None,
        map_port: Any = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        language: str | None = None,
        key_tester: KeyTester | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if agent is None:
            from ..core.agent import Agent

            agent = Agent()
        if map_port is None:
            from ..core.headless_map import HeadlessMapPort

            map_port = HeadlessMapPort()
        self.agent = agent
        self.port = map_port
        self.runner = AgentRunner()
        self.detection_store = DetectionStore()
        self._key_tester = key_tester
        self._lock = threading.RLock()
        self._conversations: dict[str, Conversation] = {}
        self._notices: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self._keys: dict[str, SecretStr] = {}
        self._turn: Turn | None = None
        self._dirty: dict[str, Conversation] = {}
        self._finalizer = weakref.finalize(self, self.runner.stop, 2.0)
        language = language or getattr(getattr(agent, "settings", None), "language", "es")
        self.language = language if language in TEXTS else "es"
        self.refresh_providers()
        self.select_provider(provider or agent.provider, model or agent.model)
        self.new_conversation()
        self.on_msg(self._on_front_message)
        self._warn_unsupported_tools()

    # ------------------------------------------------------------------ public API
    @property
    def conversation(self) -> Conversation:
        return self._conversations[self.conversation_id]

    @property
    def detections(self) -> Any:
        """Every detection run seen so far as a GeoDataFrame (EPSG:4326); ``to_file`` exports it."""
        return self.detection_store.to_geodataframe()

    @property
    def running(self) -> bool:
        return self._turn is not None

    @property
    def current_turn(self) -> Turn | None:
        return self._turn

    def history(self) -> list[Conversation]:
        """This kernel's conversations, oldest first."""
        return list(self._conversations.values())

    def submit(
        self,
        text: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        listener: Listener | None = None,
    ) -> Turn:
        """Start answering ``text`` on the runner thread and return at once.

        A turn still running is cancelled first (its partial answer is kept). ``provider`` and
        ``model`` override the selection for this turn only.
        """
        turn = Turn(text=str(text or ""), listener=listener)
        with self._lock:
            previous = self._turn
            self._turn = turn
            conversation = self.conversation
            turn.conversation_id = conversation.id
            self.status = "running"
        if provider:
            provider_name, model_id = provider, model
        else:
            provider_name, model_id = self.provider or None, model or self.model or None
        api_key = self._key_for(provider_name)
        turn.future = self.runner.submit(
            self._run_turn(turn, conversation, previous, provider_name, model_id, api_key)
        )
        return turn

    def ask(self, text: str, *, timeout: float | None = None, **kwargs: Any) -> Turn:
        """Submit ``text`` and wait for the turn to end (scripts, the magic, tests)."""
        turn = self.submit(text, **kwargs)
        if not turn.wait(timeout):
            raise TimeoutError(f"El turno no terminó en {timeout} s.")
        return turn

    def stop(self, wait: float | None = None) -> bool:
        """Cancel the running turn: the model's stream is closed and the partial answer kept."""
        turn = self._turn
        if turn is None:
            return False
        self.runner.call_soon(self._cancel_turn, turn)
        if wait:
            turn.wait(wait)
        return True

    def new_conversation(self) -> Conversation:
        """Start an empty conversation (a running turn is stopped first) and show it."""
        self.stop()
        conversation = Conversation()
        with self._lock:
            self._conversations[conversation.id] = conversation
            self.conversation_id = conversation.id
        self._refresh(conversation)
        return conversation

    def select_conversation(self, conversation_id: str) -> Conversation:
        """Show an earlier conversation of this kernel; the next message continues it."""
        if conversation_id not in self._conversations:
            raise KeyError(self._t("unknown_conversation", id=conversation_id))
        if conversation_id != self.conversation_id:
            self.stop()
        with self._lock:
            self.conversation_id = conversation_id
        conversation = self._conversations[conversation_id]
        self._refresh(conversation)
        return conversation

    def select_provider(self, provider: str | None, model: str | None = None) -> None:
        """Choose the provider (and model) for the next turns; raises for an unknown name."""
        registry = self.agent.providers
        cfg = registry.get_config(provider or None)  # ConfigurationError names the options
        self.provider = cfg.name
        self.model = model or cfg.model_default or ""

    def refresh_providers(self) -> None:
        """Re-read the provider list (e.g. after ``agent.providers.register_instance``)."""
        self.providers = self.agent.providers.public()

    def set_api_key(self, provider: str, api_key: str | None) -> None:
        """Keep a user key for ``provider`` in kernel memory only (``None`` forgets it)."""
        name = self.agent.providers.get_config(provider).name
        with self._lock:
            if api_key:
                self._keys[name.lower()] = SecretStr(api_key.strip())
            else:
                self._keys.pop(name.lower(), None)
            self.keys_set = sorted(
                c.name
                for c in self.agent.providers.configs.values()
                if c.name.lower() in self._keys
            )

    def test_key(self, provider: str, api_key: str) -> Any:
        """Check ``api_key`` against the provider's model list; keep it only when valid."""
        return self.runner.submit(self._check_key(provider, api_key))

    def close(self) -> None:
        """Stop any turn, end the runner thread and close the widget."""
        if getattr(self, "_turn", None) is not None:
            self.stop(wait=5)
        runner = getattr(self, "runner", None)
        if runner is not None:
            runner.stop()
        super().close()

    # ------------------------------------------------------------------ front-end messages
    def _on_front_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """Route a browser message; never blocks (work goes to the runner thread)."""
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        try:
            if kind == "user_message":
                self.submit(str(content.get("text") or ""))
            elif kind == "stop":
                self.stop()
            elif kind == "new_conversation":
                self.new_conversation()
            elif kind == "select_conversation":
                self.select_conversation(str(content.get("id") or ""))
            elif kind == "select_provider":
                self.select_provider(content.get("provider"), content.get("model") or None)
            elif kind == "test_key":
                provider = str(content.get("provider") or self.provider)
                key = str(content.get("api_key") or "").strip()
                if not key or not provider:
                    self._set_key_status(provider, False, self._t("key_missing"))
                else:
                    self.test_key(provider, key)
            elif kind == "clear_key":
                provider = str(content.get("provider") or self.provider)
                self.set_api_key(provider, None)
                self._set_key_status(provider, False, self._t("key_cleared", name=provider))
            elif kind == "set_language":
                lang = str(content.get("language") or "es")
                self.language = lang if lang in TEXTS else "es"
            else:
                log.debug("Mensaje del chat desconocido: %r", kind)
        except Exception as exc:  # bad input must not raise in the kernel: show it in the chat
            log.info("Mensaje del chat rechazado (%s): %s", kind, exc)
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            self._add_notice(self.conversation, "error", str(message), "bad_request")
            self._refresh(self.conversation)

    # ------------------------------------------------------------------ the turn (runner thread)
    async def _run_turn(
        self,
        turn: Turn,
        conversation: Conversation,
        previous: Turn | None,
        provider: str | None,
        model: str | None,
        api_key: str | None,
    ) -> None:
        turn.task = asyncio.current_task()
        kwargs = {"provider": provider, "model": model, "api_key": api_key}
        try:
            if turn.cancel_requested:
                raise asyncio.CancelledError
            if previous is not None and previous.task is not None and not previous.task.done():
                previous.task.cancel()
                await asyncio.wait([previous.task])
            self._emit(
                {"type": "turn_start", "turn_id": turn.id, "conversation_id": conversation.id},
                flush=True,
            )
            stream = self.agent.stream(
                conversation, turn.text, map_port=self.port, on_update=self._defer_refresh, **kwargs
            )
            # with a map port every map call is answered inside the turn (unsupported ones
            # with "not available"), so the turn never waits for a front end
            async with contextlib.aclosing(stream) as events:
                async for event in events:
                    self._handle_event(turn, conversation, event)
        except asyncio.CancelledError:
            turn.stopped = True
            self._add_notice(conversation, "info", self._t("stopped"), "stopped")
            raise
        except Exception as exc:  # the chat shows errors, never tracebacks
            log.exception("El turno del chat falló")
            error = ErrorEvent(self._t("internal", error=exc), "internal")
            self._handle_event(turn, conversation, error)
        finally:
            with self._lock:
                if self._turn is turn:
                    self._turn = None
                    self.status = "idle"
            self._refresh(conversation)
            self._emit(
                {"type": "turn_end", "turn_id": turn.id, "stopped": turn.stopped}, flush=True
            )
            turn.finished.set()

    def _cancel_turn(self, turn: Turn) -> None:
        """Runs on the runner thread, so it sees the task exactly as the loop does."""
        if turn.task is None:
            turn.cancel_requested = True  # not started yet: it stops as soon as it starts
        elif not turn.task.done():
            turn.task.cancel()

    def _handle_event(self, turn: Turn, conversation: Conversation, event: Event) -> None:
        turn.events.append(event)
        if isinstance(event, TextDelta):
            self._emit(event.to_dict(), flush=True)
        elif isinstance(event, LayerEvent):
            layer = event.layer
            summary = {k: v for k, v in layer.items() if k not in ("source", "data")}
            self._emit({"type": "layer", "layer": summary})
            if is_detection_layer(layer):
                count = self.detection_store.add_layer(layer)
                name = layer.get("name", "")
                self._add_notice(
                    conversation, "info", self._t("detections", count=count, name=name), "layer"
                )
        elif isinstance(event, ErrorEvent):
            self._add_notice(conversation, "error", event.message, event.code)
            self._emit(event.to_dict())
            self._refresh(conversation)
        elif isinstance(event, (ToolCallEvent, ToolResultEvent, SourcesEvent)):
            self._emit(_clip_event(event.to_dict()))
        else:
            self._emit(event.to_dict())
        if turn.listener is not None:
            try:
                turn.listener(event)
            except Exception:
                log.exception("Un oyente del turno falló")

    # ------------------------------------------------------------------ keys (runner thread)
    async def _check_key(self, provider: str, api_key: str) -> dict[str, Any]:
        registry = self.agent.providers
        try:
            name = registry.get_config(provider).name
        except Exception as exc:
            result: dict[str, Any] = {"valid": False, "error": str(exc)}
            self._set_key_status(provider, False, str(exc))
            return result
        try:
            tester = self._key_tester or _default_key_tester()
            result = tester(registry, name, api_key)
            if inspect.isawaitable(result):
                result = await result
            result = dict(result or {})
        except Exception as exc:
            result = {"valid": False, "error": f"No se pudo probar la clave: {exc}"}
        valid = bool(result.get("valid"))
        if valid:
            self.set_api_key(name, api_key)
            message = self._t("key_saved", name=name)
        else:
            message = str(result.get("error") or "Clave no válida.")
        models = [str(m) for m in (result.get("models") or [])][:200]
        self._set_key_status(name, valid, message, models)
        public = {"valid": valid, "models": models} if valid else {"valid": False, "error": message}
        self._emit({"type": "key_test", "provider": name, **public})
        return public

    def _key_for(self, provider: str | None) -> str | None:
        if not provider:
            return None
        secret = self._keys.get(provider.lower())
        return secret.get_secret_value() if secret is not None else None

    def _set_key_status(
        self, provider: str, valid: bool, message: str, models: list[str] | None = None
    ) -> None:
        self.key_status = {
            "provider": provider,
            "valid": valid,
            "message": message,
            "models": list(models or []),
        }

    # ------------------------------------------------------------------ view model
    def _defer_refresh(self, conversation: Conversation) -> None:
        """The agent's ``on_update``: publish at the loop's next pause, coalescing steps.

        The map tool then runs before the history is serialised (the user sees the map move
        sooner); any text delta flushes first, so the browser never sees them out of order.
        """
        with self._lock:
            first = not self._dirty
            self._dirty[conversation.id] = conversation
        if first:
            self.runner.call_soon(self._flush)

    def _flush(self) -> None:
        with self._lock:
            dirty = list(self._dirty.values())
            self._dirty.clear()
        for conversation in dirty:
            self._refresh(conversation)

    def _refresh(self, conversation: Conversation) -> None:
        """Publish the conversation (if shown) and the history list in one comm message."""
        with self._lock, self.hold_sync():
            self._dirty.pop(conversation.id, None)
            running = self._turn is not None and self._turn.conversation_id == conversation.id
            if conversation.id == self.conversation_id:
                self.messages = self._view(conversation, running)
            self.conversations = [
                {
                    "id": c.id,
                    "title": c.title,
                    "updated_at": c.updated_at,
                    "count": sum(1 for m in c.messages if isinstance(m, UserMessage)),
                }
                for c in sorted(
                    self._conversations.values(), key=lambda c: c.updated_at, reverse=True
                )
            ]

    def _view(self, conversation: Conversation, running: bool) -> list[dict[str, Any]]:
        results = {m.call_id: m for m in conversation.messages if isinstance(m, ToolResultMessage)}
        notices = sorted(self._notices.get(conversation.id, []), key=lambda n: n[0])
        items: list[dict[str, Any]] = []
        pending = iter(notices)
        nxt = next(pending, None)
        for index, message in enumerate(conversation.messages):
            while nxt is not None and nxt[0] <= index:
                items.append(nxt[1])
                nxt = next(pending, None)
            if isinstance(message, UserMessage):
                items.append({"kind": "user", "id": message.id, "text": message.text})
            elif isinstance(message, AssistantMessage):
                calls = []
                for call in message.tool_calls:
                    result = results.get(call.id)
                    if result is not None:
                        status = "done" if result.success else "failed"
                    else:
                        status = "running" if running else "cancelled"
                    calls.append(
                        {
                            "id": call.id,
                            "name": call.name,
                            "summary": _summary(call.args),
                            "args": _clip(call.args),
                            "status": status,
                            "result": _clip(result.result) if result is not None else "",
                        }
                    )
                items.append(
                    {
                        "kind": "assistant",
                        "id": message.id,
                        "text": message.text,
                        "calls": calls,
                        "sources": list(message.sources),
                    }
                )
        while nxt is not None:
            items.append(nxt[1])
            nxt = next(pending, None)
        return items

    def _add_notice(self, conversation: Conversation, level: str, text: str, code: str) -> None:
        notice = {
            "kind": "notice",
            "id": uuid.uuid4().hex[:12],
            "level": level,
            "code": code,
            "text": text,
        }
        with self._lock:
            self._notices.setdefault(conversation.id, []).append(
                (len(conversation.messages), notice)
            )

    # ------------------------------------------------------------------ helpers
    def _emit(self, content: dict[str, Any], flush: bool = False) -> None:
        if flush and self._dirty:
            self._flush()
        try:
            if self.comm is not None:
                self.send(content)
        except Exception:  # a closed comm must not break a turn
            log.debug("No se pudo enviar al navegador", exc_info=True)

    def _t(self, key: str, **values: Any) -> str:
        table = TEXTS.get(self.language, TEXTS["es"])
        return table[key].format(**values)

    def _warn_unsupported_tools(self) -> None:
        for name in self.agent.tools.map_tool_names:
            if self.port.supports(name):
                continue
            with _WARNED_LOCK:
                if name in _WARNED_TOOLS:
                    continue
                _WARNED_TOOLS.add(name)
            log.warning(
                "La herramienta de mapa '%s' no se puede ejecutar en el notebook; si el modelo la "
                "llama se le responderá que no está disponible (registra una con "
                "LeafletMapPort.register_tool).",
                name,
            )


def _default_key_tester() -> KeyTester:
    try:
        from ..llm.keytest import test_api_key
    except ImportError:
        return _list_models_key_test
    return test_api_key


async def _list_models_key_test(registry: Any, provider: str, api_key: str) -> dict[str, Any]:
    """Fallback key check: ask the provider for its model list with that key."""
    cfg = registry.get_config(provider)
    if cfg.kind in ("offline", "scripted"):
        return {"valid": False, "error": f"El proveedor '{cfg.name}' no usa clave de API."}
    try:
        client, _model = registry.resolve(cfg.name, None, api_key)
        models = await client.list_models()
    except Exception as exc:
        return {"valid": False, "error": str(exc)}
    return {"valid": True, "models": sorted({str(m) for m in models})}


def _clip(value: Any, limit: int = _CLIP) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _summary(args: dict[str, Any], limit: int = 90) -> str:
    parts = []
    for key, value in (args or {}).items():
        shown = value if isinstance(value, (int, float, bool)) else str(value)
        if isinstance(shown, str) and len(shown) > 40:
            shown = shown[:39] + "…"
        parts.append(f"{key}={shown}")
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_event(data: dict[str, Any]) -> dict[str, Any]:
    """Events as the browser gets them: large arguments and results shortened."""
    if data.get("type") == "tool_result":
        return {**data, "result": _clip(data.get("result"))}
    if data.get("type") == "tool_call":
        calls = [{**c, "args": _clip(c.get("args"))} for c in data.get("toolCalls", [])]
        return {**data, "toolCalls": calls}
    return data


__all__ = ["ChatWidget", "Turn"]
