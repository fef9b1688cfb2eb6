"""The agent loop with the in-process scripted model and the headless map."""

from __future__ import annotations

import asyncio

import pytest

from idee_notebook_agent.core.agent import Agent, ToolResultInput
from idee_notebook_agent.core.conversation import Conversation, ToolCall, ToolResultMessage
from idee_notebook_agent.core.events import (
    DoneEvent,
    ErrorEvent,
    LayerEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
)
from idee_notebook_agent.core.headless_map import HeadlessMapPort
from idee_notebook_agent.errors import ProviderAuthError, ToolError
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.toolbox.registry import ToolRegistry


def make_agent(provider: ScriptedProvider, **kwargs) -> Agent:
    agent = Agent(retriever=None, **kwargs)
    agent.providers.register_instance("scripted", provider)
    agent.provider = "scripted"
    return agent


async def collect(gen):
    return [event async for event in gen]


async def test_map_call_runs_on_port_and_loop_continues_to_final_text():
    provider = ScriptedProvider(
        [
            [{"name": "zoomTo", "args": {"lat": 39.8628, "lon": -4.0273, "zoom": 12}}],
            ["Listo: Toledo."],
        ]
    )
    agent = make_agent(provider)
    port = HeadlessMapPort()
    conv = Conversation()
    events = await collect(agent.stream(conv, "Llévame a Toledo", map_port=port))
    assert port.center == (39.8628, -4.0273) and port.zoom == 12
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Listo: Toledo."
    assert isinstance(events[-1], DoneEvent) and not events[-1].pending
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert results[0].success and results[0].result["zoom"] == 12
    # the second model call saw the tool result
    assert isinstance(provider.requests[1].messages[-1], ToolResultMessage)
    assert conv.title == "Llévame a Toledo"


async def test_several_calls_in_one_reply_are_all_honoured_in_order():
    provider = ScriptedProvider(
        [
            [
                {"name": "zoomTo", "args": {"lat": 37.39, "lon": -5.99}},
                {"name": "setZoom", "args": {"level": 14}},
                {"name": "getCurrentZoom", "args": {}},
            ],
            ["Hecho."],
        ]
    )
    agent = make_agent(provider)
    port = HeadlessMapPort()
    events = await collect(agent.stream(Conversation(), "Sevilla a zoom 14", map_port=port))
    names = [e.call.name for e in events if isinstance(e, ToolResultEvent)]
    assert names == ["zoomTo", "setZoom", "getCurrentZoom"]
    assert [e for e in events if isinstance(e, ToolResultEvent)][-1].result == {"level": 14}


async def test_invalid_arguments_are_fed_back_and_not_executed():
    provider = ScriptedProvider(
        [[{"name": "setZoom", "args": {"level": "muy cerca"}}], ["Perdona."]]
    )
    agent = make_agent(provider)
    port = HeadlessMapPort(zoom=6)
    conv = Conversation()
    events = await collect(agent.stream(conv, "acerca", map_port=port))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.success and "level" in result.result["error"]
    assert port.zoom == 6
    fed_back = provider.requests[1].messages[-1]
    assert isinstance(fed_back, ToolResultMessage) and fed_back.success is False


async def test_unknown_tool_is_answered_to_the_model():
    provider = ScriptedProvider([[{"name": "teleport", "args": {}}], ["No puedo."]])
    events = await collect(
        make_agent(provider).stream(Conversation(), "x", map_port=HeadlessMapPort())
    )
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert "desconocida" in result.result["error"] and "zoomTo" in result.result["error"]


async def test_round_cap_ends_the_turn_with_a_clear_error():
    def always_call(_request):
        return [{"name": "getCurrentZoom", "args": {}}]

    provider = ScriptedProvider([always_call] * 10)
    agent = make_agent(provider, max_rounds=3)
    events = await collect(agent.stream(Conversation(), "bucle", map_port=HeadlessMapPort()))
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert errors and errors[0].code == "max_rounds" and "3" in errors[0].message
    assert len(provider.requests) == 3
    assert isinstance(events[-1], DoneEvent)


async def test_without_port_the_turn_ends_pending_and_resume_continues_it():
    provider = ScriptedProvider(
        [
            [{"name": "getMapCenter", "args": {}}, {"name": "getCurrentZoom", "args": {}}],
            ["Estás en Madrid a zoom 10."],
        ]
    )
    agent = make_agent(provider)
    conv = Conversation()
    events = await collect(agent.stream(conv, "¿Dónde estoy?"))
    pending = [e for e in events if isinstance(e, ToolCallEvent) and e.awaiting_client]
    assert len(pending) == 1 and [c.name for c in pending[0].calls] == [
        "getMapCenter",
        "getCurrentZoom",
    ]
    assert events[-1].pending
    # the conversation survives a round trip through JSON while it waits
    conv = Conversation.from_json(conv.to_json())
    first = conv.pending_calls[0]
    partial = await collect(
        agent.resume(conv, [ToolResultInput("getMapCenter", {"lat": 40.4, "lon": -3.7}, first.id)])
    )
    assert partial == [DoneEvent(pending=True)] and len(provider.requests) == 1
    # empty id: matched to the oldest pending call of that tool
    rest = await collect(agent.resume(conv, [ToolResultInput("getCurrentZoom", {"level": 10}, "")]))
    assert "".join(e.text for e in rest if isinstance(e, TextDelta)) == "Estás en Madrid a zoom 10."
    assert not conv.pending_calls
    with pytest.raises(Exception, match="pendiente"):
        agent.record_results(conv, [ToolResultInput("zoomTo", {}, "nope")])


async def test_server_tools_run_in_the_loop_and_layer_events_reach_the_port():
    def geocode(args, ctx):
        ctx.emit_layer(
            {
                "type": "geojson",
                "name": "Punto",
                "source": {"type": "Point", "coordinates": [-3.7, 40.4]},
            }
        )
        return {"success": True, "best": {"lat": 40.4, "lon": -3.7}}

    tools = ToolRegistry.load(executors={"geocodePlace": geocode})
    provider = ScriptedProvider(
        [
            [{"name": "geocodePlace", "args": {"q": "Madrid"}}],
            [{"name": "zoomTo", "args": {"lat": 40.4, "lon": -3.7, "zoom": 12}}],
            ["Madrid."],
        ]
    )
    agent = make_agent(provider, tools=tools)
    port = HeadlessMapPort()
    events = await collect(agent.stream(Conversation(), "Madrid", map_port=port))
    assert any(isinstance(e, LayerEvent) for e in events)
    assert "Punto" in [layer["name"] for layer in port.layers]
    assert port.zoom == 12


async def test_server_tool_errors_become_results_not_crashes():
    def broken(args, ctx):
        raise ToolError("CartoCiudad no responde", data={"candidates": []})

    def buggy(args, ctx):
        raise RuntimeError("boom")

    tools = ToolRegistry.load(executors={"geocodePlace": broken, "fetchWebPage": buggy})
    provider = ScriptedProvider(
        [
            [
                {"name": "geocodePlace", "args": {"q": "x"}},
                {"name": "fetchWebPage", "args": {"url": "http://a"}},
            ],
            ["Lo siento."],
        ]
    )
    events = await collect(
        make_agent(provider, tools=tools).stream(Conversation(), "x", map_port=HeadlessMapPort())
    )
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert results[0].result == {
        "success": False,
        "error": "CartoCiudad no responde",
        "candidates": [],
    }
    assert not results[1].success and "boom" in results[1].result["error"]


async def test_provider_error_becomes_error_event_and_conversation_stays_usable():
    provider = ScriptedProvider(
        [["Empiezo", ProviderAuthError("La clave no es válida.")], ["Ahora sí."]]
    )
    agent = make_agent(provider)
    conv = Conversation()
    events = await collect(agent.stream(conv, "hola"))
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert error.code == "auth" and "clave" in error.message
    events = await collect(agent.stream(conv, "otra vez"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Ahora sí."
    assert [m.role for m in conv.messages] == ["user", "assistant", "user", "assistant"]


async def test_cancellation_keeps_what_was_said_and_closes_the_model_stream():
    provider = ScriptedProvider([["uno dos tres cuatro cinco seis siete ocho"]], delay=0.05)
    agent = make_agent(provider)
    conv = Conversation()
    seen: list[str] = []

    async def run():
        async for event in agent.stream(conv, "cuenta"):
            if isinstance(event, TextDelta):
                seen.append(event.text)

    task = asyncio.create_task(run())
    while len(seen) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.closed_streams == 1
    assert conv.messages[-1].role == "assistant" and conv.messages[-1].text.startswith("uno dos")


async def test_new_message_closes_calls_left_pending():
    provider = ScriptedProvider([[{"name": "getMapCenter", "args": {}}], ["Vale."]])
    agent = make_agent(provider)
    conv = Conversation()
    await collect(agent.stream(conv, "¿dónde?"))
    assert conv.pending_calls
    await collect(agent.stream(conv, "olvídalo"))
    assert not conv.pending_calls and not conv.unanswered_calls()


async def test_api_key_override_is_never_in_the_conversation():
    provider = ScriptedProvider([["ok"]])
    agent = make_agent(provider)
    conv = Conversation()
    await collect(agent.stream(conv, "hola", api_key="sk-SENTINEL-123"))
    assert "SENTINEL" not in conv.to_json()


def test_ask_is_a_sync_wrapper():
    agent = make_agent(ScriptedProvider([[ToolCall("setZoom", {"level": 9})], ["Zoom 9."]]))
    port = HeadlessMapPort()
    reply = agent.ask("zoom 9", map_port=port)
    assert (
        reply.text == "Zoom 9."
        and port.zoom == 9
        and [c.name for c in reply.tool_calls] == ["setZoom"]
    )


def test_system_prompt_has_skills_context_and_map_state():
    agent = make_agent(ScriptedProvider())
    prompt = agent.system_prompt(
        [{"content": "IDEE.layer.WMS crea capas", "source": "docs/wms.md", "chunk_index": 2}],
        {"center": {"lat": 40.0, "lon": -3.0}, "zoom": 6},
    )
    assert "### Skill: navigation" in prompt and "docs/wms.md" in prompt and '"zoom": 6' in prompt
