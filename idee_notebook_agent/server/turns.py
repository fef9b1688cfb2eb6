"""One HTTP turn: drive the agent's event stream, translate map calls, persist what was said.

The runner yields the events a front end sees (CONTRACT 3.8): ``text_delta``, ``tool_call`` (only
the map calls the plugin must run, in its profile), ``sources``, ``layer``, ``error``, ``done``.
Server-tool ``tool_call``/``tool_result`` events stay inside: the plugin neither runs nor shows
them, and results such as GeoJSON can be large; their names go to ``metadata.server_tool_calls``.
Calls the plugin cannot run (e.g. a WMTS layer on the classic plugin) are answered to the model
here, and the turn goes on. The assistant message is saved at the end, or with what was said so
far when the client goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.agent import ToolResultInput
from ..core.conversation import AssistantMessage, Conversation, ToolCall, UserMessage, new_id
from ..core.events import (
    DoneEvent,
    ErrorEvent,
    Event,
    LayerEvent,
    SourcesEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
)
from .profiles import Profile, SentCall
from .store import MessageRecord, NewMessage

if TYPE_CHECKING:
    from .service import ConversationService

log = logging.getLogger(__name__)

DEFAULT_TOOL_TEXT = "Ejecutando acción en el mapa..."
SAVE_EVERY = 1.0
"""Seconds between intermediate saves of a long turn (steps of short turns are saved at the end)."""
INTERNAL_ERROR = (
    "Error interno del servidor durante el turno; la conversación se ha guardado y puedes "
    "seguir. (Internal server error.)"
)


@dataclass
class TurnState:
    """A conversation loaded under its lock: agent state plus the profile's bookkeeping."""

    conversation_id: str
    conversation: Conversation
    pstate: dict[str, Any] = field(default_factory=dict)


class TurnRunner:
    def __init__(
        self,
        service: ConversationService,
        state: TurnState,
        profile: Profile,
        *,
        provider: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        begin_saved: bool = False,
    ) -> None:
        self.service = service
        self.state = state
        self.profile = profile
        self.provider = provider
        self.model = model
        self._api_key = api_key
        self._begun = begin_saved
        self._saved_users = {
            m.id for m in state.conversation.messages if isinstance(m, UserMessage)
        }
        self.text_parts: list[str] = []
        self.sources: list[dict[str, Any]] = []
        self.layers: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.client_calls: list[dict[str, Any]] = []
        self.server_calls: list[dict[str, Any]] = []
        self.reply: MessageRecord | None = None
        self.completed = False
        self._last_save = time.monotonic() if begin_saved else float("-inf")

    # ------------------------------------------------------------------ agent hooks
    def agent_kwargs(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "api_key": self._api_key,
            "on_update": self.on_update,
        }

    async def on_update(self, conversation: Conversation) -> None:
        """Save the agent's state as the turn goes: at once when a user message arrives (before
        the model is called), then at most every ``SAVE_EVERY`` seconds; the end of the turn
        always saves. Each saved state is one the agent can resume from."""
        fresh = [
            m
            for m in conversation.messages
            if isinstance(m, UserMessage) and m.id not in self._saved_users
        ]
        if not fresh and (
            _final_answer(conversation) or time.monotonic() - self._last_save < SAVE_EVERY
        ):
            return
        rows = [NewMessage(m.id, "user", m.text, {}) for m in fresh]
        turn = None if self._begun else "begin"
        await self.service.save(
            self.state.conversation_id,
            state=conversation.to_json(),
            profile_state=self.state.pstate,
            title=conversation.title,
            messages=rows,
            turn=turn,
        )
        self._last_save = time.monotonic()
        self._begun = True
        self._saved_users.update(m.id for m in fresh)

    # ------------------------------------------------------------------ the turn
    async def run(self, stream: AsyncIterator[Event]) -> AsyncIterator[dict[str, Any]]:
        """Yield wire events; the last one is ``done``. ``self.reply`` holds the saved message."""
        agent = self.service.agent
        rounds = 0
        try:
            try:
                while True:
                    local: list[ToolResultInput] = []
                    async with contextlib.aclosing(stream) as events:
                        async for event in events:
                            out = self._handle(event, local)
                            if out is not None:
                                yield out
                    if local and not self.client_calls:
                        rounds += 1
                        if rounds > agent.max_rounds:
                            error = ErrorEvent(
                                "El modelo insiste en herramientas que este visor no admite; "
                                "reformula la petición.",
                                "max_rounds",
                            ).to_dict()
                            self.errors.append(error)
                            yield error
                            break
                        stream = agent.resume(self.state.conversation, local, **self.agent_kwargs())
                        continue
                    if local:
                        agent.record_results(self.state.conversation, local)
                    break
            except Exception:
                log.exception("El turno de la conversación %s falló", self.state.conversation_id)
                error = ErrorEvent(INTERNAL_ERROR, "internal").to_dict()
                self.errors.append(error)
                yield error
            self.completed = True
        finally:
            if self.completed:
                # shielded: the save runs even if the client goes away while it waits its turn
                save = self.service.save(**self._final_save())
                self.reply = _last(await asyncio.shield(save))
            else:  # cancelled (client gone): save now, without awaiting in a cancelled task
                with contextlib.suppress(Exception):
                    self._finish()
        yield {"type": "done"}

    def _handle(self, event: Event, local: list[ToolResultInput]) -> dict[str, Any] | None:
        if isinstance(event, TextDelta):
            self.text_parts.append(event.text)
            return event.to_dict()
        if isinstance(event, SourcesEvent):
            self.sources = list(event.sources)
            return event.to_dict()
        if isinstance(event, LayerEvent):
            self.layers.append(event.layer)
            return event.to_dict()
        if isinstance(event, ErrorEvent):
            data = event.to_dict()
            self.errors.append(data)
            return data
        if isinstance(event, ToolCallEvent):
            if not event.awaiting_client:
                self.server_calls.extend(c.to_wire() for c in event.calls)
                return None
            return self._send_calls(event.calls, local)
        if isinstance(event, (ToolResultEvent, DoneEvent)):
            return None
        return None

    def _send_calls(
        self, calls: list[ToolCall], local: list[ToolResultInput]
    ) -> dict[str, Any] | None:
        pstate = self.state.pstate
        srs = self.profile.map_srs(pstate)
        sent: list[SentCall] = []
        wire: list[dict[str, Any]] = []
        for call in calls:
            out = self.profile.translate(call, srs)
            if isinstance(out, ToolCall):
                sent.append(SentCall(out.id, out.name, call.name))
                wire.append(out.to_wire())
            else:
                local.append(ToolResultInput(call.name, out, call.id, False))
        if not wire:
            return None
        self.client_calls = wire
        pstate["sent"] = [s.to_dict() for s in sent]
        return {"type": "tool_call", "toolCalls": wire}

    # ------------------------------------------------------------------ persistence
    def _assistant_row(self) -> NewMessage | None:
        text = "".join(self.text_parts)
        if not self.completed and not text and not self.client_calls:
            return None
        if self.errors:
            note = "\n\n".join(f"⚠️ {e.get('message', '')}" for e in self.errors)
            text = f"{text}\n\n{note}" if text.strip() else note
        if self.client_calls and not text.strip():
            text = DEFAULT_TOOL_TEXT
        metadata: dict[str, Any] = {"sources": [] if self.client_calls else self.sources}
        if self.client_calls:
            metadata["tool_calls"] = self.client_calls
        if self.layers:
            metadata["layers"] = self.layers
        if self.errors:
            last = self.errors[-1]
            metadata["error"] = {"code": last.get("code"), "message": last.get("message")}
        if self.server_calls:
            metadata["server_tool_calls"] = self.server_calls
        if not self.completed:
            metadata["cancelled"] = True
        return NewMessage(new_id(), "assistant", text, metadata)

    def _final_save(self) -> dict[str, Any]:
        row = self._assistant_row()
        return {
            "conversation_id": self.state.conversation_id,
            "state": self.state.conversation.to_json(),
            "profile_state": self.state.pstate,
            "title": self.state.conversation.title,
            "messages": [row] if row else [],
            "turn": "end",
        }

    def _finish(self) -> MessageRecord | None:
        """The end-of-turn save, right here (the turn's task is being cancelled)."""
        return _last(self.service.store.save(**self._final_save()))


def _last(inserted: list[MessageRecord] | None) -> MessageRecord | None:
    return inserted[-1] if inserted else None


def _final_answer(conversation: Conversation) -> bool:
    """The model has just given its last reply of the turn (no tool call follows): the agent ends
    the turn next, and the end of the turn saves in any case (also when the client went away),
    so an intermediate save now would write the same state twice."""
    last = conversation.messages[-1] if conversation.messages else None
    return (
        isinstance(last, AssistantMessage)
        and not last.tool_calls
        and not conversation.pending_calls
    )


__all__ = ["DEFAULT_TOOL_TEXT", "TurnRunner", "TurnState"]
