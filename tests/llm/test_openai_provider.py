"""The OpenAI provider through the real ``openai`` SDK against the loopback fake."""

from __future__ import annotations

import contextlib
import json
import logging
import socket

import pytest
from pydantic import SecretStr

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
from idee_notebook_agent.llm.base import ChatRequest, TextChunk, ToolCallChunk
from idee_notebook_agent.llm.openai_provider import KEYLESS_PLACEHOLDER, OpenAIProvider
from idee_notebook_agent.llm.registry import ProviderConfig, ProviderRegistry
from tests.fakes.openai_server import FakeOpenAIServer, FakeToolCall, OpenAIReply, openai_error
from tests.llm.helpers import make_agent, make_settings, run_turn


def _agent(fake: FakeOpenAIServer, **env):
    settings = make_settings(OPENAI_BASE_URL=fake.url, OPENAI_API_KEY="sk-server-key", **env)
    return make_agent(settings)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _messages(fake: FakeOpenAIServer, index: int) -> list[dict]:
    return fake.chat_requests()[index].json["messages"]


# ---------------------------------------------------------------------- full turns
async def test_full_turn_tool_call_then_final_text(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(
        OpenAIReply(
            text="Voy a Madrid.",
            tool_calls=[FakeToolCall("zoomTo", {"lat": 40.4168, "lon": -3.7038, "zoom": 12})],
        ),
        OpenAIReply(text="Ya estás en el centro de Madrid."),
    )
    agent = _agent(openai_fake)
    port = HeadlessMapPort()
    conversation = Conversation()

    events = await run_turn(agent, conversation, "Llévame a Madrid", map_port=port)

    assert port.center == (40.4168, -3.7038) and port.zoom == 12
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [c.name for e in calls for c in e.calls] == ["zoomTo"]
    assert calls[0].awaiting_client is False
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert results[0].success is True
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 2  # streamed, not one block
    assert "".join(deltas) == "Voy a Madrid.Ya estás en el centro de Madrid."
    assert isinstance(events[-1], DoneEvent) and not events[-1].pending

    first = openai_fake.chat_requests()[0].json
    assert first["stream"] is True
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": "Llévame a Madrid"}
    tools = {t["function"]["name"]: t for t in first["tools"]}
    assert tools["zoomTo"]["type"] == "function"
    assert tools["zoomTo"]["function"]["parameters"] == agent.tools.specs["zoomTo"].parameters

    second = _messages(openai_fake, 1)
    call_id = second[-2]["tool_calls"][0]["id"]
    assert second[-2]["role"] == "assistant"
    assert json.loads(second[-2]["tool_calls"][0]["function"]["arguments"]) == {
        "lat": 40.4168,
        "lon": -3.7038,
        "zoom": 12,
    }
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == call_id
    assert json.loads(second[-1]["content"])["result"]["success"] is True
    assert conversation.messages[-1].text == "Ya estás en el centro de Madrid."


async def test_several_tool_calls_in_one_reply_run_in_order(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(
        OpenAIReply(
            tool_calls=[
                FakeToolCall("zoomTo", {"lat": 41.3874, "lon": 2.1686}),
                FakeToolCall("setZoom", {"level": 14}),
                FakeToolCall("getMapCenter", {}),
            ],
            chunk_size=3,
            interleave=True,
        ),
        OpenAIReply(text="Listo."),
    )
    port = HeadlessMapPort()
    events = await run_turn(
        _agent(openai_fake), Conversation(), "Barcelona a zoom 14", map_port=port
    )

    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [r.call.name for r in results] == ["zoomTo", "setZoom", "getMapCenter"]
    assert all(r.success for r in results)
    assert results[2].result == {"lat": 41.3874, "lon": 2.1686, "srs": "EPSG:4326"}
    assert port.zoom == 14
    tool_messages = [m for m in _messages(openai_fake, 1) if m["role"] == "tool"]
    assistant = [m for m in _messages(openai_fake, 1) if m["role"] == "assistant"][-1]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in assistant["tool_calls"]]


async def test_invalid_arguments_are_fed_back_not_executed(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(
        OpenAIReply(tool_calls=[FakeToolCall("zoomTo", {"lat": "norte", "lon": -3.7})]),
        OpenAIReply(text="Perdona, corrijo."),
    )
    port = HeadlessMapPort()
    before = port.center
    events = await run_turn(_agent(openai_fake), Conversation(), "Ve al norte", map_port=port)

    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.success is False and "Argumentos no válidos" in result.result["error"]
    assert port.center == before
    fed_back = json.loads(_messages(openai_fake, 1)[-1]["content"])
    assert "norte" in fed_back["result"]["error"] and fed_back["success"] is False


async def test_unparsable_arguments_are_fed_back(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(
        OpenAIReply(tool_calls=[FakeToolCall("setZoom", '{"level": 12')]),
        OpenAIReply(text="Vale."),
    )
    port = HeadlessMapPort()
    events = await run_turn(_agent(openai_fake), Conversation(), "zoom 12", map_port=port)

    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.success is False and "JSON" in result.result["error"]
    assert port.zoom != 12
    sent_back = _messages(openai_fake, 1)[-2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent_back) == {"__raw__": '{"level": 12'}  # valid JSON on the wire


async def test_unknown_tool_is_answered_to_the_model(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(
        OpenAIReply(tool_calls=[FakeToolCall("flyTo", {"place": "Sevilla"})]),
        OpenAIReply(text="Uso otra herramienta."),
    )
    events = await run_turn(
        _agent(openai_fake), Conversation(), "Vuela a Sevilla", map_port=HeadlessMapPort()
    )
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert "Herramienta desconocida 'flyTo'" in result.result["error"]
    assert "zoomTo" in json.loads(_messages(openai_fake, 1)[-1]["content"])["result"]["error"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Uso otra herramienta."


async def test_same_provider_works_from_two_event_loops(openai_fake: FakeOpenAIServer) -> None:
    """``Agent.ask`` runs a fresh loop per call; the cached provider must survive that."""
    agent = _agent(openai_fake)
    openai_fake.queue(OpenAIReply(text="uno"), OpenAIReply(text="dos"))
    conversation = Conversation()

    import asyncio

    first = await asyncio.to_thread(agent.ask, "hola", conversation)
    second = await asyncio.to_thread(agent.ask, "otra vez", conversation)
    assert (first.text, second.text) == ("uno", "dos")
    assert not first.errors and not second.errors


# ---------------------------------------------------------------------- errors
async def _error_then_recovery(
    fake: FakeOpenAIServer, agent, *, expect_code: str, **kwargs
) -> ErrorEvent:
    conversation = Conversation()
    events = await run_turn(agent, conversation, "primera pregunta", **kwargs)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and errors[0].code == expect_code
    assert isinstance(events[-1], DoneEvent)
    # the conversation stays usable: the next turn reaches the model with the whole history
    fake.valid_keys = None
    fake.replies.clear()
    fake.queue(OpenAIReply(text="Ahora sí."))
    events = await run_turn(agent, conversation, "segunda pregunta", model="gpt-4o-mini")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Ahora sí."
    user_texts = [m["content"] for m in _messages(fake, -1) if m["role"] == "user"]
    assert user_texts == ["primera pregunta", "segunda pregunta"]
    return errors[0]


async def test_invalid_key_becomes_auth_error_event(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.valid_keys = {"sk-other"}
    error = await _error_then_recovery(openai_fake, _agent(openai_fake), expect_code="auth")
    assert "La clave de OpenAI no es válida" in error.message
    assert "sk-server-key" not in error.message


async def test_permission_denied_is_auth_error(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(openai_error(403))
    error = await _error_then_recovery(openai_fake, _agent(openai_fake), expect_code="auth")
    assert "HTTP 403" in error.message


async def test_unknown_model_names_the_model(openai_fake: FakeOpenAIServer) -> None:
    error = await _error_then_recovery(
        openai_fake, _agent(openai_fake), expect_code="model_not_found", model="gpt-9-ultra"
    )
    assert "'gpt-9-ultra'" in error.message


async def test_rate_limit_is_retried_then_succeeds(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(
        openai_error(429, headers={"retry-after-ms": "10"}), OpenAIReply(text="Tras esperar.")
    )
    agent = _agent(openai_fake, IDEE_LLM_MAX_RETRIES=2)
    events = await run_turn(agent, Conversation(), "hola")
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Tras esperar."
    assert len(openai_fake.chat_requests()) == 2


async def test_rate_limit_after_retries_is_clear(openai_fake: FakeOpenAIServer) -> None:
    for _ in range(3):
        openai_fake.queue(openai_error(429, headers={"retry-after-ms": "10"}))
    agent = _agent(openai_fake, IDEE_LLM_MAX_RETRIES=2)
    error = await _error_then_recovery(openai_fake, agent, expect_code="rate_limit")
    assert "HTTP 429" in error.message and "2 reintentos" in error.message
    assert len(openai_fake.chat_requests()) == 3 + 1  # 1 try + 2 retries, then the recovery turn


async def test_quota_exhausted_is_not_called_a_rate_limit(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(
        openai_error(
            429,
            "You exceeded your current quota.",
            code="insufficient_quota",
            headers={"x-should-retry": "false"},
        )
    )
    error = await _error_then_recovery(openai_fake, _agent(openai_fake), expect_code="rate_limit")
    assert "cuota" in error.message


async def test_server_error_becomes_unavailable(openai_fake: FakeOpenAIServer) -> None:
    for _ in range(2):
        openai_fake.queue(openai_error(500, headers={"retry-after-ms": "10"}))
    agent = _agent(openai_fake, IDEE_LLM_MAX_RETRIES=1)
    error = await _error_then_recovery(openai_fake, agent, expect_code="unavailable")
    assert "HTTP 500" in error.message


async def test_timeout_becomes_timeout_error(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(OpenAIReply(text="tarde", headers_delay=3))
    agent = _agent(openai_fake, IDEE_LLM_TIMEOUT=0.3)
    error = await _error_then_recovery(openai_fake, agent, expect_code="timeout")
    assert "0.3 s" in error.message


async def test_connection_refused_becomes_unavailable() -> None:
    settings = make_settings(
        OPENAI_BASE_URL=f"http://127.0.0.1:{_free_port()}/v1", OPENAI_API_KEY="sk-x"
    )
    events = await run_turn(make_agent(settings), Conversation(), "hola")
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert error.code == "unavailable" and "No se pudo conectar con OpenAI" in error.message


async def test_missing_key_without_base_url_says_how_to_set_one() -> None:
    provider = OpenAIProvider(name="openai", api_key=None, base_url=None)
    request = ChatRequest(system="", messages=[UserMessage("hola")])
    with pytest.raises(ProviderAuthError) as info:
        async for _ in provider.stream(request):
            pass
    assert "OPENAI_API_KEY" in str(info.value)
    with pytest.raises(ProviderAuthError):
        await provider.list_models()


# ---------------------------------------------------------------------- keys and endpoints
async def test_per_call_key_is_used_once_and_never_stored(
    openai_fake: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    openai_fake.valid_keys = {"sk-server-key", "sk-user-123"}
    openai_fake.queue(OpenAIReply(text="con tu clave"), OpenAIReply(text="con la del servidor"))
    agent = _agent(openai_fake)
    conversation = Conversation()

    await run_turn(agent, conversation, "hola", api_key="sk-user-123")
    await run_turn(agent, conversation, "otra")

    assert openai_fake.bearer_keys() == ["sk-user-123", "sk-server-key"]
    assert "sk-user-123" not in conversation.to_json()
    assert all(b"sk-user-123" not in r.body for r in openai_fake.requests)
    assert "sk-user-123" not in caplog.text
    assert "sk-user-123" not in repr(agent.providers.resolve(api_key="sk-user-123")[0])


async def test_wrong_per_call_key_is_an_auth_error_without_the_key(
    openai_fake: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    openai_fake.valid_keys = {"sk-server-key"}
    conversation = Conversation()
    events = await run_turn(_agent(openai_fake), conversation, "hola", api_key="sk-wrong-999")
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert error.code == "auth"
    assert "sk-wrong-999" not in error.message + caplog.text + conversation.to_json()


async def test_keyless_base_url_works_like_ollama(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(OpenAIReply(text="Hola desde un modelo local."))
    settings = make_settings(OPENAI_BASE_URL=openai_fake.url)
    agent = make_agent(settings)
    assert agent.providers.default_name() == "openai"
    events = await run_turn(agent, Conversation(), "hola")
    assert (
        "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hola desde un modelo local."
    )
    assert openai_fake.bearer_keys() == [KEYLESS_PLACEHOLDER]


async def test_providers_json_entry_uses_its_url_key_and_model(
    openai_fake: FakeOpenAIServer,
) -> None:
    openai_fake.queue(OpenAIReply(text="Soy groq."))
    settings = make_settings()
    registry = ProviderRegistry(
        [
            ProviderConfig(
                name="groq",
                kind="openai",
                base_url=openai_fake.url,
                api_key=SecretStr("gsk-test"),
                models={"Llama rápido": "fake-model"},
            )
        ],
        settings,
    )
    events = await run_turn(make_agent(settings, registry), Conversation(), "hola", provider="groq")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Soy groq."
    assert openai_fake.bearer_keys() == ["gsk-test"]
    assert openai_fake.chat_requests()[0].json["model"] == "fake-model"


async def test_temperature_refused_by_model_is_dropped(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(
        openai_error(
            400,
            "Unsupported value: 'temperature' does not support 0.1 with this model.",
            param="temperature",
            code="unsupported_value",
        ),
        OpenAIReply(text="Sin temperatura."),
    )
    events = await run_turn(_agent(openai_fake), Conversation(), "hola")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Sin temperatura."
    first, second = openai_fake.chat_requests()
    assert "temperature" in first.json and "temperature" not in second.json


# ---------------------------------------------------------------------- cancellation
async def test_closing_the_stream_closes_the_http_response(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(OpenAIReply(text="x" * 400, chunk_size=2, delay=0.02))
    provider = OpenAIProvider(api_key="sk-1", base_url=openai_fake.url)
    request = ChatRequest(system="", messages=[UserMessage("cuenta")], model="gpt-4o-mini")
    got = []
    async with contextlib.aclosing(provider.stream(request)) as stream:
        async for chunk in stream:
            got.append(chunk)
            if len(got) == 2:
                break
    assert all(isinstance(c, TextChunk) for c in got)
    assert await openai_fake.wait_disconnect(), "the fake never saw the client go away"
    log = openai_fake.streams[-1]
    assert log.client_disconnected and not log.finished
    assert log.sent_events < log.planned_events
    await provider.aclose()


async def test_stopping_an_agent_turn_closes_the_model_stream(
    openai_fake: FakeOpenAIServer,
) -> None:
    openai_fake.queue(OpenAIReply(text="palabra " * 100, chunk_size=3, delay=0.02))
    agent = _agent(openai_fake)
    conversation = Conversation()
    async with contextlib.aclosing(agent.stream(conversation, "habla mucho")) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                break
    assert await openai_fake.wait_disconnect()
    assert openai_fake.streams[-1].client_disconnected
    openai_fake.queue(OpenAIReply(text="Sigo aquí."))
    events = await run_turn(agent, conversation, "¿sigues?")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Sigo aquí."


# ---------------------------------------------------------------------- wire details
async def test_tool_call_deltas_are_accumulated_by_index(openai_fake: FakeOpenAIServer) -> None:
    openai_fake.queue(
        OpenAIReply(
            text="Hecho",
            tool_calls=[
                FakeToolCall("zoomTo", {"lat": 37.3891, "lon": -5.9845, "zoom": 13}, id="call_a"),
                FakeToolCall("addLayer", {"name": "PNOA", "legend": "Ortofoto"}, id="call_b"),
            ],
            chunk_size=1,
        )
    )
    provider = OpenAIProvider(api_key="sk-1", base_url=openai_fake.url)
    chunks = [
        c
        async for c in provider.stream(
            ChatRequest(system="s", messages=[UserMessage("x")], model="gpt-4o-mini")
        )
    ]
    calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.id, c.name, c.args) for c in calls] == [
        ("call_a", "zoomTo", {"lat": 37.3891, "lon": -5.9845, "zoom": 13}),
        ("call_b", "addLayer", {"name": "PNOA", "legend": "Ortofoto"}),
    ]
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == "Hecho"
    await provider.aclose()


async def test_fake_also_answers_non_streamed_requests(openai_fake: FakeOpenAIServer) -> None:
    import openai

    openai_fake.queue(
        OpenAIReply(text="entero", tool_calls=[FakeToolCall("setZoom", {"level": 3})])
    )
    client = openai.AsyncOpenAI(api_key="sk-1", base_url=openai_fake.url, max_retries=0)
    reply = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]
    )
    message = reply.choices[0].message
    assert message.content == "entero"
    assert json.loads(message.tool_calls[0].function.arguments) == {"level": 3}
    assert reply.choices[0].finish_reason == "tool_calls"
    await client.close()
