"""Conversations over HTTP: create, chat, tool results, limits and lazy cleanup.

One ``Agent`` serves every request; each conversation is loaded, run and saved under its own lock,
so two requests on the same conversation never interleave in this process. Store calls run in
worker threads to keep the event loop free for streaming.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anyio

from ..config import Settings
from ..core.agent import Agent, ToolResultInput
from ..core.conversation import Conversation, new_id
from ..errors import ConfigurationError, IdeeAgentError
from .http_errors import CONVERSATION_NOT_FOUND, ApiError
from .profiles import Profile, SentCall, map_state_for_model
from .serial import SerialWorker
from .serializers import reply_out, waiting_reply
from .store import (
    ConversationRecord,
    LoadedConversation,
    MessageRecord,
    NewMessage,
    Store,
    Unit,
    iso,
    utcnow,
)
from .turns import TurnRunner, TurnState

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class Preloaded:
    """A conversation read before its lock was taken, and the turn count seen then."""

    loaded: LoadedConversation
    token: int | None


class ConversationService:
    def __init__(self, settings: Settings, agent: Agent, store: Store) -> None:
        self.settings = settings
        self.agent = agent
        self.store = store
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}
        self._last_cleanup: float | None = None
        self._turns: OrderedDict[str, int] = OrderedDict()
        self._db_thread: SerialWorker | None = None
        self.tasks: set[asyncio.Task[Any]] = set()

    async def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run store work off the event loop. SQLite work goes to one dedicated thread: with
        many threads, writers would collide on its lock and back off for up to 100 ms each."""
        call = partial(fn, *args, **kwargs)
        if not self.store.serial:
            return await anyio.to_thread.run_sync(call)
        return await self._worker().submit(call)

    async def unit(self, unit: Unit) -> Any:
        """Run one unit of store work in a transaction. On SQLite, units waiting together in the
        queue share one transaction and one commit (``Store.run_units``): the reads and writes of
        many turns starting or ending at once then cost a fraction of one commit each."""
        if not self.store.serial:
            return await anyio.to_thread.run_sync(self._run_unit, unit)
        return await self._worker().submit(unit, self.store.run_units)

    def _run_unit(self, unit: Unit) -> Any:
        result, error = self.store.run_units([unit])[0]
        if error is not None:
            raise error
        return result

    async def save(self, conversation_id: str, **fields: Any) -> list[MessageRecord] | None:
        """``Store.save`` as a unit (see ``unit``)."""
        return await self.unit(
            partial(self.store.save_in, conversation_id=conversation_id, **fields)
        )

    def _worker(self) -> SerialWorker:
        if self._db_thread is None:
            self._db_thread = SerialWorker("idee-db")
        return self._db_thread

    def close(self) -> None:
        """Release the database thread and connections (both come back on the next use)."""
        if self._db_thread is not None:
            self._db_thread.shutdown()
            self._db_thread = None
        self.store.close()

    # ------------------------------------------------------------------ locking
    @contextlib.asynccontextmanager
    async def locked(self, conversation_id: str) -> AsyncIterator[None]:
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = self._locks[conversation_id] = asyncio.Lock()
        self._lock_users[conversation_id] = self._lock_users.get(conversation_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._lock_users[conversation_id] -= 1
            if self._lock_users[conversation_id] <= 0:
                self._lock_users.pop(conversation_id, None)
                self._locks.pop(conversation_id, None)

    def _generation(self, conversation_id: str) -> int:
        """How many turns this process has started on the conversation (a bounded LRU)."""
        value = self._turns.setdefault(conversation_id, 0)
        self._turns.move_to_end(conversation_id)
        while len(self._turns) > 10_000:
            self._turns.popitem(last=False)
        return value

    async def preload(self, conversation_id: str) -> Preloaded:
        """Read a conversation before its turn (404 when it does not exist)."""
        token = None if conversation_id in self._locks else self._generation(conversation_id)
        loaded = await self.unit(partial(self.store.load_in, conversation_id=conversation_id))
        if loaded is None:
            raise ApiError(404, CONVERSATION_NOT_FOUND)
        return Preloaded(loaded, token)

    @contextlib.asynccontextmanager
    async def turn(
        self, conversation_id: str, preloaded: Preloaded | None = None
    ) -> AsyncIterator[TurnState]:
        """The conversation loaded under its lock (404 when it does not exist).

        ``preloaded`` saves a read when no other turn started since it was read.
        """
        async with self.locked(conversation_id):
            current = self._turns.get(conversation_id)
            fresh = preloaded is not None and preloaded.token is not None
            loaded = preloaded.loaded if fresh and current == preloaded.token else None
            self._generation(conversation_id)
            self._turns[conversation_id] = (current or 0) + 1
            if loaded is None:
                loaded = (await self.preload(conversation_id)).loaded
            if loaded.state:
                conversation = Conversation.from_json(loaded.state)
            else:
                conversation = Conversation(id=conversation_id, title=loaded.record.title)
            yield TurnState(conversation_id, conversation, loaded.profile_state)

    # ------------------------------------------------------------------ conversations
    async def require(self, conversation_id: str) -> ConversationRecord:
        record = await self.db(self.store.get, conversation_id)
        if record is None:
            raise ApiError(404, CONVERSATION_NOT_FOUND)
        return record

    async def create(self, client_id: str, title: str = "") -> ConversationRecord:
        await self._maybe_cleanup()
        limit = self.settings.conversation_max_per_client
        if limit > 0 and client_id:
            removed = await self.db(self.store.trim_client, client_id, limit - 1)
            if removed:
                log.info("Límite por cliente: %d conversaciones antiguas borradas", len(removed))
        conversation = Conversation()
        conversation.title = title[:255]
        return await self.unit(
            partial(
                self.store.create_in,
                conversation_id=conversation.id,
                client_id=client_id,
                title=title,
                state=conversation.to_json(),
            )
        )

    async def _maybe_cleanup(self) -> None:
        """Lazy TTL cleanup at creation, at most once per interval (seed README 3.7)."""
        now = time.monotonic()
        interval = max(self.settings.conversation_cleanup_interval_seconds, 0)
        if self._last_cleanup is not None and now - self._last_cleanup < interval:
            return
        self._last_cleanup = now
        try:
            removed = await self.db(self.store.cleanup, self.settings.conversation_ttl_hours)
        except Exception:
            log.exception("La limpieza de conversaciones caducadas falló")
            return
        if removed:
            log.info("Limpieza: %d conversaciones caducadas borradas", len(removed))

    # ------------------------------------------------------------------ chat
    def check_provider(self, provider: str | None) -> None:
        """Unknown provider → 400 naming the available ones (CONTRACT 14.4)."""
        if not provider:
            return
        try:
            self.agent.providers.get_config(provider)
        except ConfigurationError as exc:
            raise ApiError(400, str(exc), provider=[str(exc)]) from None

    def _chat_runner(
        self, state: TurnState, body: Any, profile: Profile
    ) -> tuple[TurnRunner, AsyncIterator[Any]]:
        model_state, srs = map_state_for_model(body.map_state)
        if srs:
            state.pstate["srs"] = srs
        state.pstate["sent"] = []  # a new message closes calls still out (the agent answers them)
        runner = TurnRunner(
            self,
            state,
            profile,
            provider=body.provider,
            model=body.model,
            api_key=body.api_key,
        )
        stream = self.agent.stream(
            state.conversation, body.content, model_state, **runner.agent_kwargs()
        )
        return runner, stream

    async def chat_events(
        self,
        conversation_id: str,
        body: Any,
        profile: Profile,
        preloaded: Preloaded | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """The turn's wire events (SSE); the assistant message is saved when it ends."""
        async with self.turn(conversation_id, preloaded) as state:
            runner, stream = self._chat_runner(state, body, profile)
            async with contextlib.aclosing(runner.run(stream)) as events:
                async for event in events:
                    yield event

    async def chat_reply(self, conversation_id: str, body: Any, profile: Profile) -> dict[str, Any]:
        async with self.turn(conversation_id) as state:
            runner, stream = self._chat_runner(state, body, profile)
            async with contextlib.aclosing(runner.run(stream)) as events:
                async for _event in events:
                    pass
        if runner.reply is None:
            raise ApiError(404, CONVERSATION_NOT_FOUND)
        return reply_out(runner.reply, profile.shape)

    # ------------------------------------------------------------------ tool results
    async def tool_result(
        self, conversation_id: str, body: Any, profile: Profile
    ) -> dict[str, Any]:
        async with self.turn(conversation_id) as state:
            conversation, pstate = state.conversation, state.pstate
            match = _match_call(conversation, pstate, body.tool_name, body.tool_call_id)
            if match is None:
                what = f"'{body.tool_name}'" + (
                    f" con id '{body.tool_call_id}'" if body.tool_call_id else ""
                )
                raise ApiError(
                    409,
                    f"No hay ninguna llamada pendiente a {what} en esta conversación; puede que ya "
                    "se respondiera o que un mensaje nuevo la cancelara. (No pending tool call.)",
                )
            result = profile.result_for_model(match.tool, body.result, pstate)
            try:
                done = self.agent.record_results(
                    conversation, [ToolResultInput(match.tool, result, match.id, body.success)]
                )
            except IdeeAgentError as exc:
                raise ApiError(409, str(exc)) from None
            pstate["sent"] = [s for s in pstate.get("sent", []) if s.get("id") != match.id]
            record = NewMessage(
                new_id(),
                "system",
                json.dumps(
                    {"tool": body.tool_name, "result": body.result, "success": body.success},
                    ensure_ascii=False,
                    default=str,
                ),
                {"role": "tool", "tool_call_id": match.id, "tool_name": body.tool_name},
            )
            saved = await self.save(
                conversation_id,
                state=conversation.to_json(),
                profile_state=pstate,
                messages=[record],
                turn=None if not done else "begin",
            )
            if saved is None:
                raise ApiError(404, CONVERSATION_NOT_FOUND)
            if not done:
                pending = len(conversation.pending_calls)
                return waiting_reply(new_id(), iso(utcnow()), pending, profile.shape)
            runner = TurnRunner(
                self,
                state,
                profile,
                provider=body.provider,
                model=body.model,
                api_key=body.api_key,
                begin_saved=True,
            )
            stream = self.agent.resume(conversation, [], **runner.agent_kwargs())
            async with contextlib.aclosing(runner.run(stream)) as events:
                async for _event in events:
                    pass
        if runner.reply is None:
            raise ApiError(404, CONVERSATION_NOT_FOUND)
        return reply_out(runner.reply, profile.shape)


def _match_call(
    conversation: Conversation, pstate: dict[str, Any], tool_name: str, call_id: str
) -> SentCall | None:
    """The pending call a result answers: by id, else the oldest of that name (CONTRACT 14.4)."""
    sent = [SentCall(**s) for s in pstate.get("sent", []) if isinstance(s, dict)]
    pending_ids = {c.id for c in conversation.pending_calls}
    sent = [s for s in sent if s.id in pending_ids]
    if call_id:
        for item in sent:
            if item.id == call_id:
                return item
        for call in conversation.pending_calls:
            if call.id == call_id:
                return SentCall(call.id, call.name, call.name)
    for item in sent:
        if item.name == tool_name:
            return item
    for item in sent:
        if item.tool == tool_name:
            return item
    for call in conversation.pending_calls:
        if call.name == tool_name:
            return SentCall(call.id, call.name, call.name)
    return None


__all__ = ["ConversationService"]
