"""50 conversations in parallel through a real uvicorn: every reply reaches its own conversation."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from idee_notebook_agent.core.conversation import UserMessage
from idee_notebook_agent.llm.base import ChatRequest
from tests.server.conftest import parse_sse

N = 50


def echo(request: ChatRequest) -> list[Any]:
    last = [m for m in request.messages if isinstance(m, UserMessage)][-1]
    return [f"eco de {last.text} fin"]


async def test_fifty_parallel_conversations_each_get_their_own_reply(app, live, provider):
    provider.delay = 0.01
    provider.queue(*[echo] * N)

    async def one(c: httpx.AsyncClient, i: int) -> tuple[str, str]:
        r = await c.post("/api/conversations/", json={}, headers={"X-Client-Id": f"cliente-{i}"})
        cid = r.json()["id"]
        text = f"mensaje número {i}"
        body = {"content": text, "provider": "fake", "stream": i % 2 == 0}
        r = await c.post(f"/api/conversations/{cid}/chat/", json=body)
        if i % 2 == 0:
            assert r.status_code == 200
            events = parse_sse(r.text)
            reply = "".join(d["text"] for n, d in events if n == "text_delta")
        else:
            assert r.status_code == 201
            reply = r.json()["content"]
        return cid, reply

    limits = httpx.Limits(max_connections=N, max_keepalive_connections=N)
    async with httpx.AsyncClient(base_url=live.url, timeout=60, limits=limits) as c:
        results = await asyncio.gather(*(one(c, i) for i in range(N)))
        assert len({cid for cid, _ in results}) == N
        for i, (cid, reply) in enumerate(results):
            assert reply == f"eco de mensaje número {i} fin"
            msgs = (await c.get(f"/api/conversations/{cid}/messages/")).json()
            assert [(m["role"], m["content"]) for m in msgs] == [
                ("user", f"mensaje número {i}"),
                ("assistant", f"eco de mensaje número {i} fin"),
            ]
        page = (await c.get("/api/conversations/")).json()
        assert page["count"] == N
    assert len(provider.requests) == N
