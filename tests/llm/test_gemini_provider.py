"""The Gemini provider through the real ``google-genai`` SDK against the loopback fake."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import socket

import pytest

from idee_notebook_agent.core.conversation import Conversation, UserMessage
from idee_notebook_agent.core.events import (
    DoneEvent,
    ErrorEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
)
from idee_notebook_agent.core.headless_map import HeadlessMapPort
from idee_notebook_agent.errors import ProviderAuthError
from idee_notebook_agent.llm.base import ChatRequest, TextChunk
from idee_notebook_agent.llm.gemini_provider import GeminiProvider, sanitize_schema
from idee_notebook_agent.llm.registry import ProviderRegistry
from tests.fakes.gemini_server import (
    FakeFunctionCall,
    FakeGeminiServer,
    GeminiReply,
    gemini_error,
)
from tests.llm.helpers import make_agent, make_settings, run_turn


def _agent(fake: FakeGeminiServer, **env):
    settings = make_settings(
        GEMINI_BASE_URL=fake.url, GOOGLE_API_KEY="server-gkey", LLM_PROVIDER="gemini", **env
    )
    return make_agent(settings)


def _contents(fake: FakeGeminiServer, index: int) -> list[dict]:
    return fake.generate_requests()[index].json["contents"]


def _text(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# ---------------------------------------------------------------------- full turns
async def test_full_turn_function_call_then_final_text(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.queue(
        GeminiReply(
            text="Vamos a Valencia.",
            function_calls=[
                FakeFunctionCall("zoomTo", {"lat": 39.4699, "lon": -0.3763, "zoom": 12})
            ],
        ),
        GeminiReply(text="Ya ves Valencia en el mapa."),
    )
    agent = _agent(gemini_fake)
    port = HeadlessMapPort()
    conversation = Conversation()

    events = await run_turn(agent, conversation, "Llévame a Valencia", map_port=port)

    assert port.center == (39.4699, -0.3763) and port.zoom == 12
    assert [c.name for e in events if isinstance(e, ToolCallEvent) for c in e.calls] == ["zoomTo"]
    assert next(e for e in events if isinstance(e, ToolResultEvent)).success
    assert _text(events) == "Vamos a Valencia.Ya ves Valencia en el mapa."
    assert len([e for e in events if isinstance(e, TextDelta)]) > 2
    assert isinstance(events[-1], DoneEvent)

    first = gemini_fake.generate_requests()[0]
    assert first.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert first.query == {"alt": ["sse"]}
    assert first.header("x-goog-api-key") == "server-gkey"
    body = first.json
    assert "Valencia" not in json.dumps(body["systemInstruction"])  # system prompt, not the user
    assert body["systemInstruction"]["parts"][0]["text"]
    declarations = {d["name"]: d for d in body["tools"][0]["functionDeclarations"]}
    assert set(declarations) == set(agent.tools.specs)
    schema = declarations["zoomTo"].get("parameters_json_schema") or declarations["zoomTo"].get(
        "parametersJsonSchema"
    )
    assert schema == sanitize_schema(agent.tools.specs["zoomTo"].parameters)

    contents = _contents(gemini_fake, 1)
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    model_parts = contents[1]["parts"]
    assert model_parts[0]["text"] == "Vamos a Valencia."
    assert model_parts[1]["functionCall"]["name"] == "zoomTo"
    assert model_parts[1]["functionCall"]["args"] == {"lat": 39.4699, "lon": -0.3763, "zoom": 12}
    response = contents[2]["parts"][0]["functionResponse"]
    assert response["name"] == "zoomTo"
    assert response["response"]["success"] is True and response["response"]["tool"] == "zoomTo"


async def test_parallel_function_calls_answer_in_one_turn(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.queue(
        GeminiReply(
            function_calls=[
                FakeFunctionCall("zoomTo", {"lat": 43.2630, "lon": -2.9350}),
                FakeFunctionCall("setZoom", {"level": 15}),
            ]
        ),
        GeminiReply(text="Bilbao a zoom 15."),
    )
    port = HeadlessMapPort()
    events = await run_turn(_agent(gemini_fake), Conversation(), "Bilbao cerca", map_port=port)
    assert [r.call.name for r in events if isinstance(r, ToolResultEvent)] == ["zoomTo", "setZoom"]
    assert port.center == (43.2630, -2.9350) and port.zoom == 15
    contents = _contents(gemini_fake, 1)
    assert len(contents) == 3
    assert [p["functionCall"]["name"] for p in contents[1]["parts"]] == ["zoomTo", "setZoom"]
    names = [p["functionResponse"]["name"] for p in contents[2]["parts"]]
    assert names == ["zoomTo", "setZoom"]


async def test_invalid_arguments_are_fed_back(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.queue(
        GeminiReply(function_calls=[FakeFunctionCall("setZoom", {"level": 99})]),
        GeminiReply(text="Uso un zoom válido."),
    )
    port = HeadlessMapPort()
    events = await run_turn(_agent(gemini_fake), Conversation(), "zoom 99", map_port=port)
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.success is False and "Argumentos no válidos" in result.result["error"]
    assert port.zoom != 99
    response = _contents(gemini_fake, 1)[-1]["parts"][0]["functionResponse"]["response"]
    assert response["success"] is False and "99" in response["result"]["error"]


async def test_unknown_tool_is_answered_to_the_model(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.check_models = False
    gemini_fake.queue(
        GeminiReply(function_calls=[FakeFunctionCall("panTo", {"x": 1})]),
        GeminiReply(text="Entendido."),
    )
    events = await run_turn(
        _agent(gemini_fake), Conversation(), "mueve", map_port=HeadlessMapPort()
    )
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert "Herramienta desconocida 'panTo'" in result.result["error"]
    assert _text(events) == "Entendido."


async def test_function_call_ids_and_signatures_are_echoed(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.queue(
        GeminiReply(
            function_calls=[
                FakeFunctionCall(
                    "getCurrentZoom", {}, id="fc-7", thought_signature=b"firma-secreta"
                )
            ]
        ),
        GeminiReply(text="Zoom 6."),
    )
    events = await run_turn(
        _agent(gemini_fake), Conversation(), "¿zoom?", map_port=HeadlessMapPort()
    )
    call = next(e for e in events if isinstance(e, ToolCallEvent)).calls[0]
    assert call.id == "fc-7"
    contents = _contents(gemini_fake, 1)
    part = contents[1]["parts"][0]
    signature = part.get("thoughtSignature") or part.get("thought_signature")
    assert base64.b64decode(signature) == b"firma-secreta"
    assert part["functionCall"]["id"] == "fc-7"
    assert contents[2]["parts"][0]["functionResponse"]["id"] == "fc-7"


async def test_gemini_3_history_without_signature_gets_the_placeholder(
    gemini_fake: FakeGeminiServer,
) -> None:
    """A restored conversation has no signatures; Gemini 3 would answer 400 without one."""
    agent = _agent(gemini_fake)
    conversation = Conversation()
    gemini_fake.queue(GeminiReply(function_calls=[FakeFunctionCall("getCurrentZoom", {})]))
    gemini_fake.queue(GeminiReply(text="Zoom 6."))
    await run_turn(agent, conversation, "¿zoom?", map_port=HeadlessMapPort())
    restored = Conversation.from_json(conversation.to_json())
    fresh = _agent(gemini_fake)  # a new process: no signature cache
    gemini_fake.queue(GeminiReply(text="Sigo."))
    await run_turn(fresh, restored, "¿y ahora?", model="gemini-3-pro-preview")
    part = _contents(gemini_fake, -1)[1]["parts"][0]
    signature = part.get("thoughtSignature") or part.get("thought_signature")
    assert base64.b64decode(signature) == b"skip_thought_signature_validator"
    assert "id" not in part["functionCall"]  # ids Gemini did not send are not invented


# ---------------------------------------------------------------------- errors
async def _error_then_recovery(
    fake: FakeGeminiServer, agent, *, expect_code: str, **kw
) -> ErrorEvent:
    conversation = Conversation()
    events = await run_turn(agent, conversation, "primera", **kw)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and errors[0].code == expect_code, errors
    assert isinstance(events[-1], DoneEvent)
    fake.valid_keys = None
    fake.replies.clear()
    fake.queue(GeminiReply(text="Ahora sí."))
    events = await run_turn(
        agent, conversation, "segunda", model="gemini-2.5-flash", provider=kw.get("provider")
    )
    assert _text(events) == "Ahora sí."
    texts = [p["text"] for c in _contents(fake, -1) if c["role"] == "user" for p in c["parts"]]
    assert texts == ["primera", "segunda"]
    return errors[0]


async def test_invalid_key_is_an_auth_error(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.valid_keys = {"otra"}
    error = await _error_then_recovery(gemini_fake, _agent(gemini_fake), expect_code="auth")
    assert "La clave de Gemini no es válida" in error.message
    assert "server-gkey" not in error.message


async def test_permission_denied_is_an_auth_error(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.queue(gemini_error(403))
    error = await _error_then_recovery(gemini_fake, _agent(gemini_fake), expect_code="auth")
    assert "HTTP 403" in error.message


async def test_unknown_model_names_the_model(gemini_fake: FakeGeminiServer) -> None:
    error = await _error_then_recovery(
        gemini_fake, _agent(gemini_fake), expect_code="model_not_found", model="gemini-0-nano"
    )
    assert "'gemini-0-nano'" in error.message


async def test_rate_limit_is_retried_then_clear(gemini_fake: FakeGeminiServer) -> None:
    settings = make_settings()
    registry = ProviderRegistry.from_settings(settings)
    provider = GeminiProvider(
        api_key="k", base_url=gemini_fake.url, max_retries=2, retry_initial_delay=0.01
    )
    registry.register_instance("gemini", provider)
    agent = make_agent(settings, registry)

    gemini_fake.queue(gemini_error(429), GeminiReply(text="Tras reintentar."))
    events = await run_turn(agent, Conversation(), "hola", provider="gemini")
    assert _text(events) == "Tras reintentar." and len(gemini_fake.generate_requests()) == 2

    gemini_fake.queue(gemini_error(429), gemini_error(429), gemini_error(429))
    error = await _error_then_recovery(
        gemini_fake, agent, expect_code="rate_limit", provider="gemini"
    )
    assert "HTTP 429" in error.message and "2 reintentos" in error.message
    assert len(gemini_fake.generate_requests()) == 2 + 3 + 1
    await provider.aclose()


async def test_server_error_becomes_unavailable(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.queue(gemini_error(500))
    error = await _error_then_recovery(gemini_fake, _agent(gemini_fake), expect_code="unavailable")
    assert "HTTP 500" in error.message


async def test_timeout_becomes_timeout_error(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.queue(GeminiReply(text="tarde", headers_delay=3))
    agent = _agent(gemini_fake, IDEE_LLM_TIMEOUT=0.5)
    error = await _error_then_recovery(gemini_fake, agent, expect_code="timeout")
    assert "0.5 s" in error.message


async def test_connection_refused_becomes_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = make_settings(
        GEMINI_BASE_URL=f"http://127.0.0.1:{port}", GOOGLE_API_KEY="k", LLM_PROVIDER="gemini"
    )
    events = await run_turn(make_agent(settings), Conversation(), "hola")
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert error.code == "unavailable" and "No se pudo conectar con Gemini" in error.message


async def test_blocked_answer_is_explained(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.queue(GeminiReply(text="", finish_reason="SAFETY"))
    events = await run_turn(_agent(gemini_fake), Conversation(), "algo")
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert "seguridad" in error.message


async def test_missing_key_without_base_url_says_how_to_set_one() -> None:
    provider = GeminiProvider(api_key=None, base_url=None)
    with pytest.raises(ProviderAuthError) as info:
        async for _ in provider.stream(ChatRequest(system="", messages=[UserMessage("hola")])):
            pass
    assert "GOOGLE_API_KEY" in str(info.value)


# ---------------------------------------------------------------------- keys and cancellation
async def test_per_call_key_is_used_once_and_never_stored(
    gemini_fake: FakeGeminiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    gemini_fake.valid_keys = {"server-gkey", "user-gkey-42"}
    gemini_fake.queue(GeminiReply(text="uno"), GeminiReply(text="dos"))
    agent = _agent(gemini_fake)
    conversation = Conversation()
    await run_turn(agent, conversation, "hola", api_key="user-gkey-42")
    await run_turn(agent, conversation, "otra")
    assert gemini_fake.api_keys() == ["user-gkey-42", "server-gkey"]
    assert "user-gkey-42" not in conversation.to_json()
    assert all(b"user-gkey-42" not in r.body for r in gemini_fake.requests)
    assert "user-gkey-42" not in caplog.text


async def test_closing_the_stream_closes_the_http_response(gemini_fake: FakeGeminiServer) -> None:
    gemini_fake.queue(GeminiReply(text="y" * 400, chunk_size=2, delay=0.02))
    provider = GeminiProvider(api_key="k", base_url=gemini_fake.url)
    request = ChatRequest(system="", messages=[UserMessage("cuenta")])
    got = []
    async with contextlib.aclosing(provider.stream(request)) as stream:
        async for chunk in stream:
            got.append(chunk)
            if len(got) == 2:
                break
    assert all(isinstance(c, TextChunk) for c in got)
    assert await gemini_fake.wait_disconnect()
    log = gemini_fake.streams[-1]
    assert log.client_disconnected and log.sent_events < log.planned_events
    await provider.aclose()


async def test_stopping_an_agent_turn_closes_the_model_stream(
    gemini_fake: FakeGeminiServer,
) -> None:
    gemini_fake.queue(GeminiReply(text="palabra " * 100, chunk_size=3, delay=0.02))
    agent = _agent(gemini_fake)
    conversation = Conversation()
    async with contextlib.aclosing(agent.stream(conversation, "habla")) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                break
    assert await gemini_fake.wait_disconnect()
    gemini_fake.queue(GeminiReply(text="Sigo aquí."))
    assert _text(await run_turn(agent, conversation, "¿sigues?")) == "Sigo aquí."


# ---------------------------------------------------------------------- schema
def test_sanitize_schema_drops_extensions_but_keeps_property_names() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "x-long-running": True,
        "properties": {
            "x-offset": {"type": "number", "examples": [1], "x-unit": "m"},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
        },
        "required": ["mode"],
        "additionalProperties": False,
    }
    assert sanitize_schema(schema) == {
        "type": "object",
        "properties": {
            "x-offset": {"type": "number"},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
        },
        "required": ["mode"],
        "additionalProperties": False,
    }


async def test_fake_also_answers_non_streamed_requests(gemini_fake: FakeGeminiServer) -> None:
    from google import genai
    from google.genai import types

    gemini_fake.queue(
        GeminiReply(text="entero", function_calls=[FakeFunctionCall("setZoom", {"level": 4})])
    )
    client = genai.Client(
        api_key="k",
        http_options=types.HttpOptions(base_url=gemini_fake.url, api_version="v1beta"),
    )
    reply = await client.aio.models.generate_content(model="gemini-2.5-flash", contents="x")
    assert reply.text == "entero"
    assert reply.function_calls[0].args == {"level": 4}
    await client.aio.aclose()
