"""SSE mode of ``chat/`` (CONTRACT 3.8): framing, flushing, keep-alive, client disconnect."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from idee_notebook_agent.core.conversation import ToolCall
from idee_notebook_agent.errors import ProviderUnavailableError
from idee_notebook_agent.llm.base import ChatRequest
from tests.server.conftest import MADRID_3857, new_conversation, parse_sse

ALLOWED = {"text_delta", "tool_call", "sources", "layer", "error", "done"}


async def stream_chat(client, cid: str, text: str, base: str = "/api") -> httpx.Response:
    return await client.post(
        f"{base}/conversations/{cid}/chat/",
        json={"content": text, "map_state": MADRID_3857, "stream": True, "provider": "fake"},
        headers={"Origin": "http://localhost:8080"},
    )


async def test_sse_framing_is_exactly_event_and_one_data_line(client, provider):
    provider.queue(['Hola, ¿en qué\nte ayudo? "comillas"'])
    cid = await new_conversation(client)
    r = await stream_chat(client, cid, "Llévame a Madrid")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream"
    assert r.headers["access-control-allow-origin"] == "*"
    events = parse_sse(r.text)
    names = [name for name, _ in events]
    assert set(names) <= ALLOWED
    assert names[-1] == "done" and names.count("done") == 1
    text = "".join(d["text"] for n, d in events if n == "text_delta")
    assert text == 'Hola, ¿en qué\nte ayudo? "comillas"'
    assert "Llévame" not in r.text  # the user's text is not echoed
    assert "ué" in r.text  # non-ASCII kept, as JSON.stringify would

    msgs = (await client.get(f"/api/conversations/{cid}/messages/")).json()
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[1]["content"] == "Hola, ¿en qué<br>te ayudo? &quot;comillas&quot;"


async def test_sse_tool_call_event_uses_camel_case_and_the_json_result_path(client, provider):
    provider.queue(
        ["Voy.", ToolCall("zoomTo", {"lat": 40.4168, "lon": -3.7038, "zoom": 12}, "z1")],
        ["Ya estás en Madrid."],
    )
    cid = await new_conversation(client, "/api/v2")
    r = await stream_chat(client, cid, "Llévame a Madrid", base="/api/v2")
    events = parse_sse(r.text)
    [(name, data)] = [(n, d) for n, d in events if n == "tool_call"]
    assert set(data) == {"type", "toolCalls"}
    [call] = data["toolCalls"]
    assert call["name"] == "zoomTo" and call["id"] == "z1" and call["args"]["srs"] == "EPSG:3857"
    assert [n for n, _ in events][-1] == "done"

    r = await client.post(
        f"/api/v2/conversations/{cid}/tool-result/",
        json={"tool_name": "zoomTo", "tool_call_id": "z1", "result": {"success": True}},
    )
    assert r.status_code == 201
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["content"] == [{"type": "text", "text": "Ya estás en Madrid."}]


async def test_sse_error_event_on_provider_failure(client, provider):
    provider.queue(["Un momento", ProviderUnavailableError("El proveedor no responde.")], ["Bien."])
    cid = await new_conversation(client)
    events = parse_sse((await stream_chat(client, cid, "Hola")).text)
    errors = [d for n, d in events if n == "error"]
    assert errors == [
        {"type": "error", "message": "El proveedor no responde.", "code": "unavailable"}
    ]
    assert [n for n, _ in events][-1] == "done"
    again = parse_sse((await stream_chat(client, cid, "Otra vez")).text)
    assert "".join(d["text"] for n, d in again if n == "text_delta") == "Bien."


@pytest.fixture
def executors() -> dict[str, Any]:
    async def slow_fetch(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        await asyncio.sleep(0.7)
        ctx.emit_layer(
            {
                "type": "geojson",
                "name": "Capa",
                "source": {"type": "FeatureCollection", "features": []},
            }
        )
        return {"success": True, "text": "contenido"}

    return {"fetchWebPage": slow_fetch}


async def test_keep_alive_comments_during_a_long_tool_run_and_layer_events(client, provider):
    provider.queue([ToolCall("fetchWebPage", {"url": "https://www.idee.es/"}, "f1")], ["Leído."])
    cid = await new_conversation(client)
    r = await stream_chat(client, cid, "Lee la web de la IDEE")
    assert ": keep-alive\n\n" in r.text
    events = parse_sse(r.text)
    names = [n for n, _ in events]
    assert "tool_call" not in names  # the server ran it; nothing for the plugin to do
    assert names == ["layer", "text_delta", "done"]
    assert events[0][1]["layer"]["name"] == "Capa"


async def test_sources_event_comes_first(tmp_path, provider):
    from idee_notebook_agent.server.app import create_app
    from tests.fakes.server_agent import SOURCE, StaticRetriever, build_agent, server_settings

    settings = server_settings(tmp_path)
    app = create_app(settings, build_agent(settings, provider, retriever=StaticRetriever()))
    provider.queue(["Respuesta."])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        cid = await new_conversation(c)
        events = parse_sse((await stream_chat(c, cid, "¿Qué dice x.md?")).text)
    assert events[0] == ("sources", {"type": "sources", "sources": [SOURCE]})


async def test_user_message_is_saved_before_the_model_is_called(app, client, provider):
    seen: dict[str, Any] = {}

    def inspect_store(request: ChatRequest) -> list[Any]:
        store = app.state.service.store
        seen["rows"] = [(m.role, m.content) for m in store.messages(seen["cid"])]
        return ["ok"]

    provider.queue(inspect_store)
    seen["cid"] = await new_conversation(client)
    parse_sse((await stream_chat(client, seen["cid"], "Guárdame primero")).text)
    assert seen["rows"] == [("user", "Guárdame primero")]


# ---------------------------------------------------------------------- against a real uvicorn
async def read_events(response: httpx.Response):
    """Yield (name, data) as lines arrive, parsing like the plugin does."""
    name = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            yield name, json.loads(line[len("data: ") :])


async def test_tokens_are_flushed_as_the_model_produces_them(live, provider):
    provider.delay = 0.15
    provider.queue([" ".join(f"palabra{i}" for i in range(12))])
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as c:
        cid = await new_conversation(c)
        body = {"content": "Cuéntame algo", "stream": True}
        async with c.stream("POST", f"/api/conversations/{cid}/chat/", json=body) as r:
            assert r.status_code == 200
            async for name, data in read_events(r):
                if name == "text_delta":
                    # the first token is here while the model is still producing the rest
                    assert data["text"] == "palabra0 "
                    assert provider.closed_streams == 0
                    break


async def wait_for(predicate, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def test_client_disconnect_cancels_the_turn_and_saves_what_was_said(app, live, provider):
    provider.delay = 0.1
    words = [f"w{i}" for i in range(60)]
    provider.queue([" ".join(words)], ["Sigo aquí."])
    store = app.state.service.store
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as c:
        cid = await new_conversation(c)
        received = []
        async with c.stream(
            "POST", f"/api/conversations/{cid}/chat/", json={"content": "Habla", "stream": True}
        ) as r:
            async for name, data in read_events(r):
                if name == "text_delta":
                    received.append(data["text"])
                if len(received) == 3:
                    break  # leaving the block closes the connection

        await wait_for(lambda: provider.closed_streams == 1)
        rows = await wait_for(lambda: [m for m in store.messages(cid) if m.role == "assistant"])
        assert rows[0].metadata.get("cancelled") is True
        said = rows[0].content
        assert said.startswith("".join(received).strip())
        assert len(said.split()) < len(words)  # the model stream was closed early
        assert store.get(cid).busy is False

        r = await c.post(f"/api/conversations/{cid}/chat/", json={"content": "¿Sigues?"})
        assert r.status_code == 201 and r.json()["content"] == "Sigo aquí."
        history = [getattr(m, "text", "") for m in provider.requests[-1].messages]
        assert history[0] == "Habla" and history[1].startswith("w0 w1 w2")


async def test_two_turns_on_one_conversation_do_not_interleave(client, provider):
    provider.delay = 0.01
    provider.queue(["primera respuesta larga"], ["segunda respuesta"])
    cid = await new_conversation(client)
    first, second = await asyncio.gather(
        stream_chat(client, cid, "uno"), stream_chat(client, cid, "dos")
    )
    assert [n for n, _ in parse_sse(first.text)][-1] == "done"
    assert [n for n, _ in parse_sse(second.text)][-1] == "done"
    later = provider.requests[1].messages
    assert len(later) == 3  # the second turn saw the whole first one
    msgs = (await client.get(f"/api/conversations/{cid}/messages/")).json()
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
