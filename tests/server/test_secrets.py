"""The user's api_key is used for its request only: never stored, logged or echoed (CONTRACT 14.6)."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx

from idee_notebook_agent.llm.registry import ProviderConfig
from idee_notebook_agent.server.app import create_app
from tests.fakes.openai_server import FakeToolCall, OpenAIReply
from tests.fakes.server_agent import build_agent, server_settings

SENTINEL = "sk-SENTINEL-7f3a9c-never-store-me"


async def test_api_key_never_reaches_the_database_logs_or_replies(
    tmp_path: Path,
    provider,
    openai_fake,
    caplog,
):
    caplog.set_level(logging.DEBUG)
    openai_fake.valid_keys = {SENTINEL}
    openai_fake.models = ["fake-model"]
    openai_fake.queue(
        OpenAIReply(tool_calls=[FakeToolCall("zoomTo", {"lat": 40.4, "lon": -3.7}, "call_k1")]),
        OpenAIReply(text="Hecho con tu clave."),
    )
    settings = server_settings(tmp_path)
    groq = ProviderConfig(name="groq", kind="openai", base_url=openai_fake.url)
    app = create_app(settings, build_agent(settings, provider, configs=[groq]))
    bodies: list[str] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:

        async def send(method: str, url: str, **kw) -> httpx.Response:
            r = await c.request(method, url, **kw)
            bodies.append(r.text + str(r.headers))
            return r

        key = {"provider": "groq", "model": "fake-model", "api_key": SENTINEL}
        r = await send("POST", "/api/test-key/", json={"provider": "groq", "api_key": SENTINEL})
        assert r.json()["valid"] is True
        cid = (await send("POST", "/api/conversations/", json={})).json()["id"]
        r = await send(
            "POST", f"/api/conversations/{cid}/chat/", json={"content": "Ve a Madrid", **key}
        )
        assert r.json()["tool_calls"][0]["id"] == "call_k1"
        r = await send(
            "POST",
            f"/api/conversations/{cid}/tool-result/",
            json={
                "tool_name": "zoomTo",
                "tool_call_id": "call_k1",
                "result": {"success": True},
                **key,
            },
        )
        assert r.json()["content"] == "Hecho con tu clave."
        provider.queue(["streamed"])
        await send(
            "POST",
            f"/api/conversations/{cid}/chat/",
            json={"content": "otra", "stream": True, "provider": "fake", "api_key": SENTINEL},
        )
        r = await send("POST", f"/api/conversations/{cid}/chat/", json={"content": " ", **key})
        assert r.status_code == 400
        r = await send(
            "POST",
            f"/api/conversations/{cid}/chat/",
            json={"content": "x", "provider": "nadie", "api_key": SENTINEL},
        )
        assert r.status_code == 400
        r = await send(
            "POST",
            f"/api/conversations/{cid}/tool-result/",
            json={"result": None, "api_key": SENTINEL},
        )
        assert r.status_code == 400
        await send("GET", f"/api/conversations/{cid}/messages/")
        await send("GET", f"/api/v2/conversations/{cid}/messages/")
    app.state.service.store.close()

    assert SENTINEL in openai_fake.bearer_keys()  # it was really used for the calls
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SENTINEL.encode() not in path.read_bytes(), path
    assert SENTINEL not in caplog.text
    assert all(SENTINEL not in b for b in bodies)
