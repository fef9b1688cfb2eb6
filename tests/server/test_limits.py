"""TTL cleanup, per-client limit, SQLite WAL, and turns that must not be cleaned away."""

from __future__ import annotations

from datetime import timedelta

import httpx
from sqlalchemy import text, update

from idee_notebook_agent.server.app import create_app
from idee_notebook_agent.server.store import ConversationRow, Store, utcnow
from tests.fakes.server_agent import build_agent, server_settings


def age(store: Store, cid: str, hours: float, busy: bool = False) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            update(ConversationRow)
            .where(ConversationRow.id == cid)
            .values(
                updated_at=utcnow() - timedelta(hours=hours),
                turn_started_at=utcnow() if busy else None,
            )
        )


def make(tmp_path, provider, **overrides):
    settings = server_settings(tmp_path, **overrides)
    app = create_app(settings, build_agent(settings, provider))
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    return app, client


async def test_lazy_cleanup_at_creation_spares_turns_in_progress(tmp_path, provider):
    app, c = make(tmp_path, provider, conversation_cleanup_interval_seconds=0)
    store = app.state.service.store
    async with c:
        old = (await c.post("/api/conversations/", json={})).json()["id"]
        busy = (await c.post("/api/conversations/", json={})).json()["id"]
        fresh = (await c.post("/api/conversations/", json={})).json()["id"]
        age(store, old, 25)
        age(store, busy, 25, busy=True)
        await c.post("/api/conversations/", json={})
        assert (await c.get(f"/api/conversations/{old}/")).status_code == 404
        assert (await c.get(f"/api/conversations/{busy}/")).status_code == 200
        assert (await c.get(f"/api/conversations/{fresh}/")).status_code == 200


async def test_cleanup_runs_at_most_once_per_interval(tmp_path, provider):
    app, c = make(tmp_path, provider, conversation_cleanup_interval_seconds=3600)
    store = app.state.service.store
    async with c:
        old = (await c.post("/api/conversations/", json={})).json()["id"]
        age(store, old, 48)
        await c.post("/api/conversations/", json={})
        assert (await c.get(f"/api/conversations/{old}/")).status_code == 200
    assert [r.id for r in store.cleanup(24)] == [old]
    assert store.get(old) is None


async def test_per_client_limit_drops_the_oldest(tmp_path, provider):
    app, c = make(tmp_path, provider, conversation_max_per_client=3)
    async with c:
        mine = [
            (await c.post("/api/conversations/", json={}, headers={"X-Client-Id": "a"})).json()[
                "id"
            ]
            for _ in range(4)
        ]
        other = (await c.post("/api/conversations/", json={}, headers={"X-Client-Id": "b"})).json()
        ids = {conv["id"] for conv in (await c.get("/api/conversations/")).json()["results"]}
    assert ids == {*mine[1:], other["id"]}


def test_sqlite_uses_wal_and_survives_a_second_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    a, b = Store(url), Store(url)
    with a.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    rec = a.create("3f1e2d4c-0000-4000-8000-000000000001", client_id="x")
    assert b.get(rec.id).id == rec.id
    a.close()
    b.close()
