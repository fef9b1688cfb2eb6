"""Whole user turns through Agent + HeadlessMapPort + ScriptedProvider against the fakes."""

from __future__ import annotations

import pytest

from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.core.conversation import Conversation, ToolCall, ToolResultMessage
from idee_notebook_agent.core.events import (
    DoneEvent,
    ErrorEvent,
    LayerEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from idee_notebook_agent.core.headless_map import HeadlessMapPort
from idee_notebook_agent.llm.base import ChatRequest
from idee_notebook_agent.llm.registry import ProviderRegistry
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.toolbox.registry import ToolRegistry


class NoKnowledge:
    async def retrieve(self, query: str, k: int) -> list[dict]:
        return []


def last_result(request: ChatRequest, tool: str) -> dict:
    message = next(
        m for m in reversed(request.messages) if isinstance(m, ToolResultMessage) and m.name == tool
    )
    return message.result


def make_agent(settings, replies) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider(replies)
    providers = ProviderRegistry.from_settings(settings)
    providers.register_instance("scripted", provider)
    agent = Agent(
        settings,
        tools=ToolRegistry.load(settings),
        providers=providers,
        retriever=NoKnowledge(),
        provider="scripted",
    )
    return agent, provider


async def run_turn(agent, text, port):
    conversation = Conversation()
    events = [e async for e in agent.stream(conversation, text, map_port=port)]
    return conversation, events


def inside(bbox, lat, lon) -> bool:
    return bbox[0] <= lon <= bbox[2] and bbox[1] <= lat <= bbox[3]


async def test_dame_el_municipio_de_madrid_draws_and_fits_in_one_turn(settings, carto):
    def zoom_to_boundary(request: ChatRequest) -> list:
        result = last_result(request, "geocodePlace")
        assert result["success"] and result["source"] == "cartociudad"
        west, south, east, north = result["bbox"]
        return [
            ToolCall(
                "zoomToExtent", {"minLon": west, "minLat": south, "maxLon": east, "maxLat": north}
            )
        ]

    def answer(request: ChatRequest) -> list:
        best = last_result(request, "geocodePlace")["best"]
        return [f"He dibujado el municipio de {best['name']} y encuadrado el mapa."]

    agent, provider = make_agent(
        settings,
        [
            [ToolCall("geocodePlace", {"q": "Madrid", "type": "municipio"})],
            zoom_to_boundary,
            answer,
        ],
    )
    port = HeadlessMapPort()
    conversation, events = await run_turn(agent, "dame el municipio de Madrid", port)

    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert isinstance(events[-1], DoneEvent) and not events[-1].pending
    layer_events = [e for e in events if isinstance(e, LayerEvent)]
    assert len(layer_events) == 1 and layer_events[0].layer["fit"] is True
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [(r.call.name, r.success) for r in results] == [
        ("geocodePlace", True),
        ("zoomToExtent", True),
    ]
    assert not any(e.awaiting_client for e in events if isinstance(e, ToolCallEvent))

    drawn = next(layer for layer in port.layers if layer["name"] == "Municipio de Madrid")
    assert drawn["type"] == "GEOJSON"
    assert drawn["data"]["features"][0]["properties"]["id"] == "28079"
    bbox = [-3.8889, 40.3121, -3.518, 40.6437]
    assert inside(bbox, *port.center)
    assert port.zoom >= 9
    assert "He dibujado el municipio de Madrid" in conversation.messages[-1].text
    assert len(provider.requests) == 3


async def test_boundary_layer_alone_fits_the_map(settings):
    agent, _ = make_agent(
        settings,
        [[ToolCall("geocodePlace", {"q": "Humanes de Madrid", "type": "municipio"})], ["Hecho."]],
    )
    port = HeadlessMapPort()
    start_zoom = port.zoom
    _, events = await run_turn(agent, "muestra el municipio de Humanes de Madrid", port)
    assert isinstance(events[-1], DoneEvent)
    assert any(layer["name"] == "Municipio de Humanes de Madrid" for layer in port.layers)
    assert inside([-3.854, 40.227, -3.796, 40.278], *port.center)
    assert port.zoom > start_zoom


async def test_catalog_layer_by_its_title_in_one_turn(settings):
    agent, _ = make_agent(
        settings,
        [
            [ToolCall("addLayer", {"name": "Mapa Base de España – IGNBaseGris"})],
            lambda request: [f"Capa {last_result(request, 'addLayer')['name']} añadida."],
        ],
    )
    port = HeadlessMapPort()
    conversation, events = await run_turn(
        agent, "carga en el mapa la capa Mapa Base de España – IGNBaseGris", port
    )
    layer = next(layer for layer in port.layers if layer["name"] == "IGNBase-gris")
    assert layer["type"] == "WMTS" and layer["url"] == "https://www.ign.es/wmts/ign-base?"
    assert layer["matrixSet"] == "GoogleMapsCompatible" and layer["format"] == "image/jpeg"
    assert conversation.messages[-1].text == "Capa IGNBase-gris añadida."
    call = next(e for e in events if isinstance(e, ToolCallEvent)).calls[0]
    assert call.args["catalog_id"] == "IGNBaseGris"  # the completed call is what was run


async def test_ambiguous_layer_comes_back_with_candidates_and_the_turn_goes_on(settings):
    def ask_user(request: ChatRequest) -> list:
        result = last_result(request, "addLayer")
        names = ", ".join(c["title"] for c in result["candidates"])
        return [f"¿Cuál quieres: {names}?"]

    agent, _ = make_agent(settings, [[ToolCall("addLayer", {"name": "mapa de España"})], ask_user])
    port = HeadlessMapPort()
    conversation, events = await run_turn(agent, "pon el mapa de España", port)
    failed = [e for e in events if isinstance(e, ToolResultEvent)][0]
    assert failed.success is False and len(failed.result["candidates"]) >= 2
    assert port.layers == []
    assert conversation.messages[-1].text.startswith("¿Cuál quieres:")


@pytest.mark.parametrize("tool", ["geocodePlace", "searchIdeeService"])
async def test_tool_errors_do_not_break_the_conversation(settings, carto, idee_catalog, tool):
    carto.fail_status = 400
    idee_catalog.fail = {c: 500 for c in ("WMS", "WMTS", "WFS", "OGCAPI", "TMS", "MVT")}
    args = {"q": "Madrid"} if tool == "geocodePlace" else {"query": "geología marina"}
    agent, _ = make_agent(settings, [[ToolCall(tool, args)], ["No ha sido posible."]])
    conversation, events = await run_turn(agent, "prueba", HeadlessMapPort())
    result = [e for e in events if isinstance(e, ToolResultEvent)][0]
    assert result.success is False and result.result["error"]
    assert isinstance(events[-1], DoneEvent)
    restored = Conversation.from_json(conversation.to_json())
    assert restored.messages[-1].text == "No ha sido posible."
