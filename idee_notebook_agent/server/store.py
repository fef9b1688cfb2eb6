"""Conversation store (SQLAlchemy 2): the rows the REST API returns plus the agent's own state.

Each conversation keeps ``Conversation.to_json()`` (messages incl. pending map calls) in ``state``
and the front-end view of the chat as message rows. SQLite is the default (WAL mode, a busy
timeout, so several uvicorn workers can share the file); any SQLAlchemy URL such as
``postgresql+psycopg://user:pass@host/db`` works the same. API keys never reach this module.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import (
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    bindparam,
    case,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.pool import StaticPool

from ..config import Settings

log = logging.getLogger(__name__)

Unit = Callable[[Connection], Any]
"""Store work written against an open transaction (``Store.create_in``, ``load_in``, ``save_in``)."""

TURN_LEASE = timedelta(minutes=15)
"""A turn marked in progress longer than this is considered dead (its worker crashed)."""


def utcnow() -> datetime:
    """Naive UTC (portable across SQLite and PostgreSQL ``timestamp`` columns)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def iso(value: datetime) -> str:
    return value.isoformat(timespec="microseconds") + "Z"


class Base(DeclarativeBase):
    pass


class ConversationRow(Base):
    __tablename__ = "idee_conversations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    title: Mapped[str] = mapped_column(String(255), default="")
    client_id: Mapped[str] = mapped_column(String(128), default="", index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[str] = mapped_column(Text, default="")
    profile_state: Mapped[str] = mapped_column(Text, default="{}")
    turn_started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class MessageRow(Base):
    __tablename__ = "idee_messages"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(36), unique=True)
    conversation_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("idee_conversations.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    meta: Mapped[str] = mapped_column("metadata", Text, default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime)


@dataclass
class ConversationRecord:
    id: str
    title: str
    client_id: str
    created_at: datetime
    updated_at: datetime
    message_count: int
    busy: bool = False


@dataclass
class MessageRecord:
    id: str
    conversation_id: str
    role: str
    content: str
    metadata: dict[str, Any]
    created_at: datetime


@dataclass
class NewMessage:
    """A message row to insert in the same transaction as a state save."""

    id: str
    role: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadedConversation:
    record: ConversationRecord
    state: str
    profile_state: dict[str, Any]


def _busy(row: Any, now: datetime) -> bool:
    return row.turn_started_at is not None and row.turn_started_at > now - TURN_LEASE


def _record(row: Any, now: datetime | None = None) -> ConversationRecord:
    """From an ORM row or a Core row with the same column names."""
    return ConversationRecord(
        id=row.id,
        title=row.title or "",
        client_id=row.client_id or "",
        created_at=row.created_at,
        updated_at=row.updated_at,
        message_count=row.message_count or 0,
        busy=_busy(row, now or utcnow()),
    )


def _message(row: MessageRow) -> MessageRecord:
    try:
        meta = json.loads(row.meta or "{}")
    except json.JSONDecodeError:
        meta = {}
    return MessageRecord(row.id, row.conversation_id, row.role, row.content, meta, row.created_at)


_CONV = ConversationRow.__table__
_MSG = MessageRow.__table__
_RECORD_COLUMNS = (
    _CONV.c.id,
    _CONV.c.title,
    _CONV.c.client_id,
    _CONV.c.created_at,
    _CONV.c.updated_at,
    _CONV.c.message_count,
    _CONV.c.turn_started_at,
)

# Statements of the per-turn path, built once: with bound parameters instead of literal values
# SQLAlchemy finds their compiled form in its cache without rebuilding and re-hashing a new
# statement on every call (about half the cost of a save), on SQLite and PostgreSQL alike.
_GET = select(*_RECORD_COLUMNS).where(_CONV.c.id == bindparam("b_id"))
_LOAD = select(*_RECORD_COLUMNS, _CONV.c.state, _CONV.c.profile_state).where(
    _CONV.c.id == bindparam("b_id")
)
_EXISTS = select(_CONV.c.id).where(_CONV.c.id == bindparam("b_id"))
_INSERT_CONV = insert(_CONV)
_INSERT_MSG = insert(_MSG)
_SAVE_CACHE: dict[tuple[Any, ...], Any] = {}


def _save_statement(key: tuple[bool, bool, bool, bool, str | None]) -> Any:
    """``UPDATE`` for one combination of what a save sets (a handful exist; each built once)."""
    stmt = _SAVE_CACHE.get(key)
    if stmt is not None:
        return stmt
    has_state, has_pstate, has_title, has_rows, turn = key
    values: dict[str, Any] = {}
    if has_state:
        values["state"] = bindparam("b_state")
    if has_pstate:
        values["profile_state"] = bindparam("b_pstate")
    if has_title:
        values["title"] = case((_CONV.c.title == "", bindparam("b_title")), else_=_CONV.c.title)
    if has_rows:
        values["message_count"] = _CONV.c.message_count + bindparam("b_count")
        values["updated_at"] = bindparam("b_updated")
    if turn in ("begin", "end"):
        values["turn_started_at"] = bindparam("b_turn")
    stmt = update(_CONV).where(_CONV.c.id == bindparam("b_id")).values(values) if values else None
    _SAVE_CACHE[key] = stmt
    return stmt


def default_database_url(settings: Settings) -> str:
    path = Path(settings.data_dir) / "conversations.sqlite3"
    return f"sqlite:///{path}"


def _make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        memory = url in ("sqlite://", "sqlite:///:memory:")
        if not memory:
            db_path = url.split("///", 1)[-1]
            if db_path:
                Path(db_path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            poolclass=StaticPool if memory else None,
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            if not memory:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


class Store:
    """Synchronous, thread-safe store; the server calls it from worker threads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.serial = url.startswith("sqlite")
        """SQLite takes one writer at a time: callers should run its work on one thread."""
        self.engine = _make_engine(url)
        Base.metadata.create_all(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> Store:
        return cls(settings.database_url or default_database_url(settings))

    def close(self) -> None:
        self.engine.dispose()

    def run_units(self, units: list[Unit]) -> list[tuple[Any, BaseException | None]]:
        """Run units of work in one transaction; ``(result, error)`` for each, in order.

        The commit is most of the cost of a small write on SQLite (the pages go to the WAL each
        time), so the server groups the saves of concurrent turns that are waiting together. When
        a unit fails, the transaction is rolled back and every unit runs again in a transaction
        of its own, so an error stays with its caller and the others still commit.
        """
        if len(units) > 1:
            try:
                with self.engine.begin() as conn:
                    results = [unit(conn) for unit in units]
                return [(result, None) for result in results]
            except Exception:
                log.debug("Un grupo de escrituras falló; se repiten una a una", exc_info=True)
        outcomes: list[tuple[Any, BaseException | None]] = []
        for unit in units:
            try:
                with self.engine.begin() as conn:
                    outcomes.append((unit(conn), None))
            except Exception as exc:
                outcomes.append((None, exc))
        return outcomes

    # ------------------------------------------------------------------ conversations
    def create(
        self, conversation_id: str, *, client_id: str = "", title: str = "", state: str = ""
    ) -> ConversationRecord:
        with self.engine.begin() as conn:
            return self.create_in(
                conn, conversation_id, client_id=client_id, title=title, state=state
            )

    def create_in(
        self,
        conn: Connection,
        conversation_id: str,
        *,
        client_id: str = "",
        title: str = "",
        state: str = "",
    ) -> ConversationRecord:
        now = utcnow()
        row = {
            "id": conversation_id,
            "title": title[:255],
            "client_id": client_id[:128],
            "created_at": now,
            "updated_at": now,
            "message_count": 0,
            "state": state,
            "profile_state": "{}",
            "turn_started_at": None,
        }
        conn.execute(_INSERT_CONV, row)
        return ConversationRecord(
            conversation_id, row["title"], row["client_id"], now, now, 0, busy=False
        )

    def get(self, conversation_id: str) -> ConversationRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(_GET, {"b_id": conversation_id}).first()
        return _record(row) if row else None

    def load(self, conversation_id: str) -> LoadedConversation | None:
        """Record, agent state and profile state in one read (Core: this runs on every turn)."""
        with self.engine.connect() as conn:
            return self.load_in(conn, conversation_id)

    def load_in(self, conn: Connection, conversation_id: str) -> LoadedConversation | None:
        row = conn.execute(_LOAD, {"b_id": conversation_id}).first()
        if row is None:
            return None
        try:
            pstate = json.loads(row.profile_state or "{}")
        except json.JSONDecodeError:
            pstate = {}
        return LoadedConversation(_record(row), row.state or "", pstate)

    def list_page(self, offset: int, limit: int) -> tuple[int, list[ConversationRecord]]:
        """Newest ``updated_at`` first, as ``GET /conversations/`` pages them."""
        with self._session() as session:
            count = session.scalar(select(func.count()).select_from(ConversationRow)) or 0
            rows = session.scalars(
                select(ConversationRow)
                .order_by(ConversationRow.updated_at.desc(), ConversationRow.id)
                .offset(offset)
                .limit(limit)
            ).all()
            now = utcnow()
            return count, [_record(r, now) for r in rows]

    def get_many(self, ids: list[str]) -> list[ConversationRecord]:
        """The known ones among ``ids``, in the order asked; unknown ids are left out."""
        if not ids:
            return []
        with self._session() as session:
            rows = session.scalars(select(ConversationRow).where(ConversationRow.id.in_(ids)))
            now = utcnow()
            found = {r.id: _record(r, now) for r in rows}
        return [found[i] for i in dict.fromkeys(ids) if i in found]

    def delete(self, conversation_id: str) -> bool:
        with self._session.begin() as session:
            return self._delete(session, [conversation_id]) > 0

    @staticmethod
    def _delete(session: Session, ids: list[str]) -> int:
        if not ids:
            return 0
        session.execute(delete(MessageRow).where(MessageRow.conversation_id.in_(ids)))
        result = session.execute(delete(ConversationRow).where(ConversationRow.id.in_(ids)))
        return int(result.rowcount or 0)

    # ------------------------------------------------------------------ turns and messages
    def save(
        self,
        conversation_id: str,
        *,
        state: str | None = None,
        profile_state: dict[str, Any] | None = None,
        title: str | None = None,
        messages: list[NewMessage] | None = None,
        turn: str | None = None,
    ) -> list[MessageRecord] | None:
        """Save state, new rows and the turn flag in one transaction (Core: on every turn).

        ``turn`` is ``"begin"`` or ``"end"``. Returns the inserted rows, or None when the
        conversation no longer exists (deleted while a turn ran: nothing to keep).
        """
        with self.engine.begin() as conn:
            return self.save_in(
                conn,
                conversation_id,
                state=state,
                profile_state=profile_state,
                title=title,
                messages=messages,
                turn=turn,
            )

    def save_in(
        self,
        conn: Connection,
        conversation_id: str,
        *,
        state: str | None = None,
        profile_state: dict[str, Any] | None = None,
        title: str | None = None,
        messages: list[NewMessage] | None = None,
        turn: str | None = None,
    ) -> list[MessageRecord] | None:
        """``save`` inside the caller's transaction."""
        inserted = [
            MessageRecord(m.id, conversation_id, m.role, m.content, m.metadata, utcnow())
            for m in messages or []
        ]
        params: dict[str, Any] = {"b_id": conversation_id}
        if state is not None:
            params["b_state"] = state
        if profile_state is not None:
            params["b_pstate"] = json.dumps(profile_state, ensure_ascii=False, default=str)
        if title:
            params["b_title"] = title[:100]
        if inserted:
            params["b_count"] = len(inserted)
            params["b_updated"] = inserted[-1].created_at
        if turn not in ("begin", "end"):
            turn = None
        elif turn == "begin":
            params["b_turn"] = utcnow()
        else:
            params["b_turn"] = None
        stmt = _save_statement(
            (state is not None, profile_state is not None, bool(title), bool(inserted), turn)
        )
        if stmt is not None:
            if not conn.execute(stmt, params).rowcount:
                return None
        elif conn.execute(_EXISTS, {"b_id": conversation_id}).first() is None:
            return None
        if inserted:
            rows = [
                {
                    "id": m.id,
                    "conversation_id": conversation_id,
                    "role": m.role,
                    "content": m.content,
                    "metadata": json.dumps(m.metadata, ensure_ascii=False, default=str),
                    "created_at": m.created_at,
                }
                for m in inserted
            ]
            conn.execute(_INSERT_MSG, rows[0] if len(rows) == 1 else rows)
        return inserted

    def messages(self, conversation_id: str) -> list[MessageRecord]:
        with self._session() as session:
            rows = session.scalars(
                select(MessageRow)
                .where(MessageRow.conversation_id == conversation_id)
                .order_by(MessageRow.seq)
            ).all()
            return [_message(r) for r in rows]

    # ------------------------------------------------------------------ limits and cleanup
    def expired(self, hours: float, now: datetime | None = None) -> list[ConversationRecord]:
        """Conversations idle for more than ``hours``, except those with a turn in progress."""
        now = now or utcnow()
        cutoff = now - timedelta(hours=hours)
        with self._session() as session:
            rows = session.scalars(
                select(ConversationRow)
                .where(ConversationRow.updated_at < cutoff)
                .order_by(ConversationRow.updated_at)
            ).all()
            return [_record(r, now) for r in rows if not _busy(r, now)]

    def cleanup(self, hours: float, *, dry_run: bool = False) -> list[ConversationRecord]:
        victims = self.expired(hours)
        if victims and not dry_run:
            now = utcnow()
            with self._session.begin() as session:
                # re-check inside the transaction: a turn may have started meanwhile
                rows = session.scalars(
                    select(ConversationRow).where(ConversationRow.id.in_([v.id for v in victims]))
                ).all()
                ids = [r.id for r in rows if not _busy(r, now)]
                self._delete(session, ids)
            victims = [v for v in victims if v.id in set(ids)]
        return victims

    def trim_client(self, client_id: str, keep: int) -> list[str]:
        """Delete a client's oldest conversations so at most ``keep`` remain (busy ones stay)."""
        now = utcnow()
        with self.engine.begin() as conn:
            rows = conn.execute(
                select(_CONV.c.id, _CONV.c.turn_started_at)
                .where(_CONV.c.client_id == client_id)
                .order_by(_CONV.c.updated_at.desc())
                .offset(max(keep, 0))
            ).all()
            surplus = [r.id for r in rows if not _busy(r, now)]
            if surplus:
                conn.execute(delete(_MSG).where(_MSG.c.conversation_id.in_(surplus)))
                conn.execute(delete(_CONV).where(_CONV.c.id.in_(surplus)))
        return surplus


__all__ = [
    "ConversationRecord",
    "Unit",
    "LoadedConversation",
    "MessageRecord",
    "NewMessage",
    "Store",
    "iso",
    "utcnow",
]
