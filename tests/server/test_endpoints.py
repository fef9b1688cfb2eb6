"""Contract tests for every endpoint and error of CONTRACT.md section 3 (JSON mode)."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from idee_notebook_agent.llm.registry import ProviderConfig
from idee_notebook_agent.server.app import create_app
from tests.fakes.server_agent import SOURCE, StaticRetriever, build_agent, server_settings
from tests.server.conftest import MADRID_3857, new_conversation

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


# ---------------------------------------------------------------------- providers, CORS
async def test_providers_lists_fake_provider_without_secrets(client):
    r = await client.get("/api/providers/", headers={"Origin": "http://viewer.example:8080"})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    body = r.json()
    assert isinstance(body, list)
    fake = next(p for p in body if p["name"] == "fake")
    assert fake["default_model"] == "fake-model"
    assert {"id": "fake-model", "label": "fake-model"} in fake["models"]
    assert all(set(p) == {"name", "models", "default_model"} for p in body)


@pytest.mark.parametrize("base", ["/api", "/api/v2"])
async def test_preflight_is_answered_for_post_and_delete(client, base):
    for path, method in (
        (f"{base}/conversations/", "POST"),
        (f"{base}/conversations/{uuid.uuid4()}/", "DELETE"),
    ):
        r = await client.options(
            path,
            headers={
                "Origin": "http://localhost:8080",
                "Access-Control-Request-Method": method,
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert 200 <= r.status_code < 300
        assert r.headers["access-control-allow-origin"] == "*"
        assert method in r.headers["access-control-allow-methods"]
        assert "content-type" in r.headers["access-control-allow-headers"].lower()


async def test_allowed_origins_restricts_cors(tmp_path, provider):
    settings = server_settings(tmp_path, allowed_origins="http://good.example")
    app = create_app(settings, build_agent(settings, provider))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        good = await c.get("/api/providers/", headers={"Origin": "http://good.example"})
        bad = await c.get("/api/providers/", headers={"Origin": "http://evil.example"})
    assert good.headers.get("access-control-allow-origin") == "http://good.example"
    assert "access-control-allow-origin" not in bad.headers


# ---------------------------------------------------------------------- test-key
async def test_test_key_errors_keep_the_original_messages(client):
    r = await client.post("/api/test-key/", json={"provider": "fake"})
    assert r.status_code == 400
    assert r.json() == {"valid": False, "error": "API key es requerida"}
    r = await client.post("/api/test-key/", json={"provider": "fake", "api_key": "   "})
    assert r.json() == {"valid": False, "error": "API key es requerida"}
    r = await client.post("/api/test-key/", json={"api_key": "sk-1"})
    assert r.status_code == 400
    assert r.json() == {"valid": False, "error": "Nombre del proveedor es requerido"}
    r = await client.post("/api/test-key/", json={"provider": "nadie", "api_key": "sk-1"})
    assert r.status_code == 200
    body = r.json()
    assert body["valid"] is False
    assert body["error"].startswith("Proveedor 'nadie' no encontrado. Disponibles: ")
    assert "fake" in body["error"]


async def test_test_key_checks_the_key_against_the_provider(tmp_path, provider, openai_fake):
    openai_fake.valid_keys = {"sk-good"}
    settings = server_settings(tmp_path)
    groq = ProviderConfig(name="groq", kind="openai", base_url=openai_fake.url)
    app = create_app(settings, build_agent(settings, provider, configs=[groq]))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        good = await c.post("/api/test-key/", json={"provider": "GROQ", "api_key": " sk-good "})
        bad = await c.post("/api/v2/test-key/", json={"provider": "groq", "api_key": "sk-bad"})
    assert good.status_code == 200
    assert good.json() == {
        "valid": True,
        "provider": "groq",
        "models": sorted(openai_fake.models),
    }
    assert bad.status_code == 200
    assert bad.json() == {"valid": False, "error": "HTTP 401: API key rechazada para 'groq'"}
    assert openai_fake.bearer_keys() == ["sk-good", "sk-bad"]


async def test_test_key_bad_body_answers_in_the_plugin_shape(client):
    r = await client.post(
        "/api/test-key/", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["valid"] is False and r.json()["error"]


# ---------------------------------------------------------------------- conversations CRUD
@pytest.mark.parametrize("base", ["/api", "/api/v2"])
async def test_create_get_delete_conversation(client, base):
    r = await client.post(f"{base}/conversations/", json={})
    assert r.status_code == 201
    conv = r.json()
    assert set(conv) == {"id", "title", "created_at", "updated_at", "message_count"}
    assert str(uuid.UUID(conv["id"])) == conv["id"]
    assert conv["title"] == "" and conv["message_count"] == 0
    assert ISO.match(conv["created_at"]) and ISO.match(conv["updated_at"])

    r = await client.get(f"{base}/conversations/{conv['id']}/")
    assert r.status_code == 200 and r.json() == conv

    r = await client.delete(f"{base}/conversations/{conv['id']}/")
    assert r.status_code == 204 and r.content == b""
    r = await client.delete(f"{base}/conversations/{conv['id']}/")
    assert r.status_code == 404 and "detail" in r.json()
    r = await client.get(f"{base}/conversations/{conv['id']}/messages/")
    assert r.status_code == 404


async def test_create_accepts_no_body_and_a_title(client):
    r = await client.post("/api/conversations/")
    assert r.status_code == 201
    r = await client.post("/api/conversations/", json={"title": "Mi mapa"})
    assert r.status_code == 201 and r.json()["title"] == "Mi mapa"
    r = await client.post("/api/conversations/", json={"title": "x" * 300})
    assert r.status_code == 400 and "title" in r.json()


async def test_unknown_and_non_uuid_ids_are_404(client):
    r = await client.get(f"/api/conversations/{uuid.uuid4()}/")
    assert r.status_code == 404
    assert "No Conversation matches the given query." in r.json()["detail"]
    for path in ("/api/conversations/not-a-uuid/", "/api/conversations/123/messages/"):
        r = await client.get(path)
        assert r.status_code == 404
        assert r.json()["detail"].endswith("(Not found.)")
    r = await client.post("/api/conversations/xyz/chat/", json={"content": "hola"})
    assert r.status_code == 404


async def test_wrong_method_is_405_with_detail(client):
    cid = await new_conversation(client)
    r = await client.put("/api/conversations/", json={})
    assert r.status_code == 405
    assert r.json() == {"detail": 'Método "PUT" no permitido. (Method "PUT" not allowed.)'}
    r = await client.get(f"/api/conversations/{cid}/chat/")
    assert r.status_code == 405
    r = await client.get("/api/test-key/")
    assert r.status_code == 405


async def test_list_is_paginated_newest_first(client):
    ids = []
    for i in range(52):
        r = await client.post(
            "/api/conversations/", json={"title": f"c{i}"}, headers={"X-Client-Id": f"k{i}"}
        )
        ids.append(r.json()["id"])
    r = await client.get("/api/conversations/")
    page = r.json()
    assert r.status_code == 200
    assert page["count"] == 52 and len(page["results"]) == 50
    assert page["previous"] is None and page["next"].endswith("page=2")
    assert page["results"][0]["id"] == ids[-1]
    stamps = [c["updated_at"] for c in page["results"]]
    assert stamps == sorted(stamps, reverse=True)
    r = await client.get("/api/conversations/?page=2")
    second = r.json()
    assert [c["id"] for c in second["results"]] == [ids[1], ids[0]]
    assert second["next"] is None and second["previous"].endswith("page=1")
    assert (await client.get("/api/conversations/?page=3")).status_code == 404
    assert (await client.get("/api/conversations/?page=abc")).status_code == 404


async def test_by_ids_returns_known_ones_in_the_asked_order(client):
    a = await new_conversation(client)
    b = await new_conversation(client)
    r = await client.post(
        "/api/conversations/by-ids/", json={"ids": [b, str(uuid.uuid4()), "basura", a]}
    )
    assert r.status_code == 200
    assert [c["id"] for c in r.json()] == [b, a]
    r = await client.post("/api/v2/conversations/by-ids/", json={})
    assert r.status_code == 400 and r.json()["ids"]
    r = await client.post("/api/conversations/by-ids/", json={"ids": "a"})
    assert r.status_code == 400 and "ids" in r.json()


async def test_conversation_config_exposes_the_limits(tmp_path, provider):
    settings = server_settings(tmp_path, conversation_max_per_client=7, conversation_ttl_hours=12)
    app = create_app(settings, build_agent(settings, provider))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        r = await c.get("/api/v2/conversation-config/")
    assert r.status_code == 200
    body = r.json()
    assert body["max_per_client"] == 7 and body["ttl_hours"] == 12


# ---------------------------------------------------------------------- chat (JSON)
async def test_chat_validation_errors_are_400_with_fields_and_save_nothing(client):
    cid = await new_conversation(client)
    url = f"/api/conversations/{cid}/chat/"
    r = await client.post(url, json={"content": "   "})
    assert r.status_code == 400
    assert "vacío" in r.json()["content"][0] and r.json()["detail"]
    r = await client.post(url, json={"content": "x" * 10_001})
    assert r.status_code == 400 and "10000" in r.json()["content"][0]
    r = await client.post(url, json={"map_state": None})
    assert r.status_code == 400 and r.json()["content"]
    r = await client.post(url, json={"content": "hola", "stream": "quizá"})
    assert r.status_code == 400 and r.json()["stream"]
    r = await client.post(url, content=b"[1, 2", headers={"content-type": "application/json"})
    assert r.status_code == 400
    r = await client.post(url, json={"content": "hola", "provider": "nadie"})
    assert r.status_code == 400
    assert "Disponibles" in r.json()["detail"] and "fake" in r.json()["detail"]
    assert r.json()["provider"]
    r = await client.get(f"/api/conversations/{cid}/messages/")
    assert r.json() == []


async def test_body_over_one_megabyte_is_413(client):
    cid = await new_conversation(client)
    payload = b'{"content": "hola", "map_state": {"x": "' + b"a" * 1_100_000 + b'"}}'
    r = await client.post(
        f"/api/conversations/{cid}/chat/",
        content=payload,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413
    assert "1 MB" in r.json()["detail"]


async def test_chat_text_reply_classic_shape_and_persistence(client, provider):
    cid = await new_conversation(client)
    provider.queue(["Madrid es la capital de España."])
    title = "¿Cuál es la capital? " + "x" * 150
    r = await client.post(
        f"/api/conversations/{cid}/chat/",
        json={"content": title, "map_state": None, "provider": "fake", "model": "fake-model"},
    )
    assert r.status_code == 201
    reply = r.json()
    assert reply["role"] == "assistant" and reply["type"] == "text"
    assert reply["content"] == "Madrid es la capital de España."
    assert reply["metadata"]["sources"] == []
    assert "tool_calls" not in reply
    assert ISO.match(reply["created_at"]) and uuid.UUID(reply["id"])

    msgs = (await client.get(f"/api/conversations/{cid}/messages/")).json()
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[0]["content"] == title.strip()
    assert msgs[1]["id"] == reply["id"]
    assert all(set(m) == {"id", "role", "content", "created_at", "metadata"} for m in msgs)

    conv = (await client.get(f"/api/conversations/{cid}/")).json()
    assert conv["title"] == title[:100]
    assert conv["message_count"] == 2
    assert conv["updated_at"] > conv["created_at"]
    assert conv["updated_at"] == msgs[-1]["created_at"]


async def test_map_state_null_absent_and_metres_are_accepted(client, provider):
    cid = await new_conversation(client)
    for body in (
        {"content": "uno", "map_state": None},
        {"content": "dos"},
        {"content": "tres", "map_state": MADRID_3857},
        {"content": "cuatro", "map_state": {"center": "raro", "zoom": "x"}},
    ):
        r = await client.post(f"/api/conversations/{cid}/chat/", json=body)
        assert r.status_code == 201, r.text
    states = [req.map_state for req in provider.requests]
    assert states[0] is None and states[1] is None and states[3] is None
    center = states[2]["center"]
    assert states[2]["srs"] == "EPSG:4326"
    assert center["lat"] == pytest.approx(40.4, abs=0.1)
    assert center["lon"] == pytest.approx(-3.70, abs=0.05)
    assert "40.4" in provider.requests[2].system[-300:] or "40.40" in provider.requests[2].system


async def test_sources_reach_the_reply_metadata(tmp_path, provider):
    settings = server_settings(tmp_path)
    agent = build_agent(settings, provider, retriever=StaticRetriever())
    app = create_app(settings, agent)
    provider.queue(["Según la documentación..."])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        cid = await new_conversation(c)
        r = await c.post(f"/api/conversations/{cid}/chat/", json={"content": "¿Qué es x?"})
    assert r.json()["metadata"]["sources"] == [SOURCE]


async def test_classic_content_is_escaped_html_and_v2_is_raw_blocks(client, provider):
    raw = (
        "Mira <script>alert(1)</script> **esto** en [IGN](https://www.ign.es/?a=1&b=2) "
        "o [x](javascript:alert(1)) y https://www.idee.es.\nfin"
    )
    provider.queue([raw], [raw])
    cid = await new_conversation(client)
    r = await client.post(f"/api/conversations/{cid}/chat/", json={"content": "hola"})
    html = r.json()["content"]
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<strong>esto</strong>" in html
    assert (
        '<a href="https://www.ign.es/?a=1&amp;b=2" target="_blank" rel="noopener noreferrer">'
        "IGN</a>" in html
    )
    assert "javascript" in html and 'href="javascript' not in html
    assert '<a href="https://www.idee.es" target="_blank" rel="noopener noreferrer">' in html
    assert html.endswith("</a>.<br>fin")

    cid2 = await new_conversation(client, "/api/v2")
    r = await client.post(f"/api/v2/conversations/{cid2}/chat/", json={"content": "hola"})
    reply = r.json()
    assert reply["type"] == "text"
    assert reply["content"] == [{"type": "text", "text": raw}]
    msgs = (await client.get(f"/api/v2/conversations/{cid2}/messages/")).json()
    assert msgs[0]["content"] == [{"type": "text", "text": "hola"}]


async def test_demo_page_and_docs_are_served(client):
    r = await client.get("/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    assert "componentes.idee.es/api-idee/js/apiidee.ol.min.js" in r.text
    assert '"/api"' in r.text and "/static/chatagent-lite.js" in r.text
    assert (await client.get("/static/chatagent-lite.js")).status_code == 200
    assert (await client.get("/api/docs")).status_code == 200
    schema = (await client.get("/api/openapi.json")).json()
    assert "/api/conversations/{conversation_id}/chat/" in schema["paths"]
    assert "/api/v2/conversations/{conversation_id}/tool-result/" in schema["paths"]


async def test_demo_page_loads_the_configured_plugin(tmp_path, provider):
    settings = server_settings(tmp_path, chatagent_plugin_url="http://localhost:8080/plugin/")
    app = create_app(settings, build_agent(settings, provider))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        text = (await c.get("/")).text
    assert '<script src="http://localhost:8080/plugin/chatagent.js"></script>' in text
    assert "IDEE.plugin.ChatAgent" in text
