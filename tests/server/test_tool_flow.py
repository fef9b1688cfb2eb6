"""Map calls through the REST contract: profiles, several and chained calls, errors mid-turn."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyproj import Transformer

from idee_notebook_agent.core.conversation import ToolCall, ToolResultMessage
from idee_notebook_agent.errors import ProviderRateLimitError
from idee_notebook_agent.llm.base import ChatRequest
from idee_notebook_agent.services.catalog import complete_add_layer
from tests.server.conftest import MADRID_3857, new_conversation

TO_3857 = Transformer.from_crs("EPSG:4326", "EPSG:3857", always_xy=True)
TO_4326 = Transformer.from_crs("EPSG:3857", "EPSG:4326", always_xy=True)


def results_seen(request: ChatRequest) -> list[ToolResultMessage]:
    return [m for m in request.messages if isinstance(m, ToolResultMessage)]


async def chat(client, cid: str, text: str, base: str = "/api", **extra: Any) -> dict[str, Any]:
    body = {"content": text, "map_state": MADRID_3857, "provider": "fake", "model": "fake-model"}
    r = await client.post(f"{base}/conversations/{cid}/chat/", json={**body, **extra})
    assert r.status_code == 201, r.text
    return r.json()


async def tool_result(
    client, cid: str, name: str, result: Any, call_id: str = "", base: str = "/api"
) -> dict[str, Any]:
    success = not (isinstance(result, dict) and result.get("success") is False)
    r = await client.post(
        f"{base}/conversations/{cid}/tool-result/",
        json={
            "tool_name": name,
            "tool_call_id": call_id,
            "result": result,
            "success": success,
            "provider": "fake",
            "model": "fake-model",
        },
    )
    assert r.status_code == 201, r.text
    return r.json()


async def test_zoom_to_is_reprojected_into_the_map_srs_and_answered(client, provider):
    provider.queue(
        [ToolCall("zoomTo", {"lat": 40.4168, "lon": -3.7038, "zoom": 12}, "call_z1")],
        ["Listo, estás en Madrid."],
    )
    cid = await new_conversation(client)
    reply = await chat(client, cid, "Llévame a Madrid")
    assert reply["type"] == "tool_call"
    assert reply["content"] == "Ejecutando acción en el mapa..."
    assert "tool_calls" in reply, reply
    [call] = reply["tool_calls"]
    assert call["name"] == "zoomTo" and call["id"] == "call_z1"
    x, y = TO_3857.transform(-3.7038, 40.4168)
    assert call["args"]["lon"] == pytest.approx(x, abs=0.01)
    assert call["args"]["lat"] == pytest.approx(y, abs=0.01)
    assert call["args"]["srs"] == "EPSG:3857" and call["args"]["zoom"] == 12
    assert reply["metadata"]["tool_calls"] == reply["tool_calls"]

    final = await tool_result(client, cid, "zoomTo", {"success": True}, call_id="")
    assert final["type"] == "text" and final["content"] == "Listo, estás en Madrid."
    [seen] = results_seen(provider.requests[-1])
    assert seen.call_id == "call_z1" and seen.result == {"success": True}

    msgs = (await client.get(f"/api/conversations/{cid}/messages/")).json()
    assert [m["role"] for m in msgs] == ["user", "assistant", "system", "assistant"]
    record = msgs[2]
    assert json.loads(record["content"]) == {
        "tool": "zoomTo",
        "result": {"success": True},
        "success": True,
    }
    assert record["metadata"] == {"role": "tool", "tool_call_id": "call_z1", "tool_name": "zoomTo"}


async def test_several_calls_in_one_reply_wait_for_every_result(client, provider):
    provider.queue(
        [
            "Miro el mapa.",
            ToolCall("getMapCenter", {}, "c1"),
            ToolCall("getCurrentZoom", {}, "c2"),
        ],
        ["Estás en Madrid a zoom 6."],
    )
    cid = await new_conversation(client)
    reply = await chat(client, cid, "¿Dónde estoy?")
    assert [c["name"] for c in reply["tool_calls"]] == ["getMapCenter", "getCurrentZoom"]
    assert reply["content"] == "Miro el mapa."
    calls_before = len(provider.requests)

    first = await tool_result(
        client, cid, "getMapCenter", {"lat": 4927000.0, "lon": -412000.0, "srs": "EPSG:3857"}, "c1"
    )
    assert first["type"] == "text" and first["content"] == ""
    assert len(provider.requests) == calls_before  # the model is not called with half the results

    second = await tool_result(client, cid, "getCurrentZoom", {"level": 6}, "c2")
    assert second["content"] == "Estás en Madrid a zoom 6."
    seen = {m.name: m.result for m in results_seen(provider.requests[-1])}
    lon, lat = TO_4326.transform(-412000.0, 4927000.0)
    assert seen["getMapCenter"]["lat"] == pytest.approx(lat, abs=1e-6)
    assert seen["getMapCenter"]["lon"] == pytest.approx(lon, abs=1e-6)
    assert seen["getMapCenter"]["srs"] == "EPSG:4326"
    assert seen["getCurrentZoom"] == {"level": 6}


async def test_chained_calls_come_back_in_the_tool_result_reply(client, provider):
    def after_center(request: ChatRequest) -> list[Any]:
        center = results_seen(request)[-1].result
        return [ToolCall("zoomTo", {"lat": center["lat"] + 1, "lon": center["lon"], "zoom": 8})]

    provider.queue([ToolCall("getMapCenter", {})], after_center, ["Te he movido al norte."])
    cid = await new_conversation(client)
    reply = await chat(client, cid, "Muévete un grado al norte")
    assert "tool_calls" in reply, reply
    [call] = reply["tool_calls"]
    assert call["name"] == "getMapCenter" and call["id"]

    chained = await tool_result(
        client, cid, "getMapCenter", {"lat": 4927000.0, "lon": -412000.0, "srs": "EPSG:3857"}
    )
    assert chained["type"] == "tool_call"
    [zoom] = chained["tool_calls"]
    lon, lat = TO_4326.transform(-412000.0, 4927000.0)
    x, y = TO_3857.transform(lon, lat + 1)
    assert zoom["name"] == "zoomTo"
    assert zoom["args"]["lat"] == pytest.approx(y, abs=0.05)
    assert zoom["args"]["lon"] == pytest.approx(x, abs=0.05)

    final = await tool_result(client, cid, "zoomTo", {"success": True}, zoom["id"])
    assert final == {**final, "type": "text", "content": "Te he movido al norte."}


async def test_classic_add_layer_wms_becomes_add_wms_layer(client, provider):
    args = {
        "type": "WMS",
        "url": "https://www.ign.es/wms-inspire/pnoa-ma?",
        "name": "OI.OrthoimageCoverage",
    }
    provider.queue([ToolCall("addLayer", args, "l1")], ["Añadida."])
    cid = await new_conversation(client)
    reply = await chat(client, cid, "Pon la ortofoto")
    assert reply["tool_calls"] == [
        {
            "name": "addWMSLayer",
            "args": {
                "url": args["url"],
                "name": args["name"],
                "legend": args["name"],
                "transparent": True,
            },
            "id": "l1",
        }
    ]
    final = await tool_result(client, cid, "addWMSLayer", {"success": True, "name": args["name"]})
    assert final["content"] == "Añadida."
    [seen] = results_seen(provider.requests[-1])
    assert seen.name == "addLayer" and seen.success


async def test_classic_cannot_show_wmts_so_the_model_is_told(client, provider):
    wmts = {"type": "WMTS", "url": "https://www.ign.es/wmts/ign-base?", "name": "IGNBase-gris"}
    provider.queue(
        [ToolCall("addLayer", wmts, "w1"), ToolCall("zoomTo", {"lat": 40.0, "lon": -3.0}, "z1")],
        ["No puedo mostrar WMTS aquí; te he centrado el mapa."],
    )
    cid = await new_conversation(client)
    reply = await chat(client, cid, "Pon el mapa gris y céntrate")
    assert [c["name"] for c in reply["tool_calls"]] == ["zoomTo"]  # addLayer never reaches it
    final = await tool_result(client, cid, "zoomTo", {"success": True}, "z1")
    assert final["type"] == "text"
    seen = {m.call_id: m for m in results_seen(provider.requests[-1])}
    assert seen["w1"].success is False
    assert "not supported by this viewer" in seen["w1"].result["error"]
    assert "WMTS" in seen["w1"].result["error"]
    assert seen["z1"].success is True


async def test_classic_gets_the_wms_equivalent_of_a_catalog_tile_layer(agent, client, provider):
    # "pon la ortofoto del PNOA": the catalog resolves PNOA to WMTS; the classic plugin only
    # shows WMS, so the same orthophoto is sent as its WMS service instead of being refused.
    agent.tools.preprocessors["addLayer"] = lambda args, ctx: complete_add_layer(args)
    provider.queue([ToolCall("addLayer", {"name": "PNOA"}, "p1")], ["Ortofoto añadida."])
    cid = await new_conversation(client)
    reply = await chat(client, cid, "pon la ortofoto del PNOA")
    assert "tool_calls" in reply, reply
    [call] = reply["tool_calls"]
    assert call["name"] == "addWMSLayer"
    assert call["args"]["url"] == "https://www.ign.es/wms-inspire/pnoa-ma?"
    assert call["args"]["name"] == "OI.OrthoimageCoverage"
    final = await tool_result(client, cid, "addWMSLayer", {"success": True, "name": "x"}, "p1")
    assert final["content"] == "Ortofoto añadida."


async def test_classic_only_unsupported_calls_continue_in_the_same_request(client, provider):
    geo = {"type": "GeoJSON", "data": '{"type": "Point", "coordinates": [-3.7, 40.4]}'}
    provider.queue([ToolCall("addLayer", geo, "g1")], ["Este visor no muestra GeoJSON."])
    cid = await new_conversation(client)
    reply = await chat(client, cid, "Dibuja un punto")
    assert reply["type"] == "text" and reply["content"] == "Este visor no muestra GeoJSON."
    assert len(provider.requests) == 2


async def test_v2_sends_our_tool_names_and_blocks(client, provider):
    wmts = {"type": "WMTS", "url": "https://www.ign.es/wmts/ign-base?", "name": "IGNBase-gris"}
    provider.queue(
        [
            "Hecho:",
            ToolCall("addLayer", wmts, "w1"),
            ToolCall(
                "zoomToExtent", {"minLon": -4, "minLat": 40, "maxLon": -3, "maxLat": 41}, "e1"
            ),
        ]
    )
    cid = await new_conversation(client, "/api/v2")
    reply = await chat(client, cid, "Mapa gris", base="/api/v2")
    assert reply["type"] == "tool_call"
    assert reply["content"][0] == {"type": "text", "text": "Hecho:"}
    block = reply["content"][1]
    assert block["type"] == "tool_call"
    assert [c["name"] for c in block["toolCalls"]] == ["addLayer", "zoomToExtent"]
    assert block["toolCalls"][0]["args"] == wmts
    assert block["toolCalls"][1]["args"] == {"minLon": -4, "minLat": 40, "maxLon": -3, "maxLat": 41}


async def test_classic_zoom_to_extent_becomes_a_centred_zoom_to(client, provider):
    extent = {"minLon": -4.0, "minLat": 40.0, "maxLon": -3.0, "maxLat": 41.0}
    provider.queue([ToolCall("zoomToExtent", extent, "e1")], ["Encuadrado."])
    cid = await new_conversation(client)
    reply = await chat(client, cid, "Encuadra")
    assert "tool_calls" in reply, reply
    [call] = reply["tool_calls"]
    assert call["name"] == "zoomTo" and call["id"] == "e1"
    x, y = TO_3857.transform(-3.5, 40.5)
    assert call["args"]["lon"] == pytest.approx(x, abs=0.01)
    assert call["args"]["lat"] == pytest.approx(y, abs=0.01)
    assert call["args"]["srs"] == "EPSG:3857"
    assert isinstance(call["args"]["zoom"], int) and 6 <= call["args"]["zoom"] <= 10
    final = await tool_result(client, cid, "zoomTo", {"success": True}, "e1")
    assert final["content"] == "Encuadrado."
    [seen] = results_seen(provider.requests[-1])
    assert seen.name == "zoomToExtent"


async def test_map_extent_results_are_converted_to_degrees(client, provider):
    provider.queue([ToolCall("getMapExtent", {}, "x1")], ["Vale."])
    cid = await new_conversation(client)
    await chat(client, cid, "¿Qué veo?")
    ext = {
        "minX": -500000.0,
        "minY": 4850000.0,
        "maxX": -300000.0,
        "maxY": 5000000.0,
        "srs": "EPSG:3857",
    }
    await tool_result(client, cid, "getMapExtent", ext, "x1")
    [seen] = results_seen(provider.requests[-1])
    min_lon, min_lat = TO_4326.transform(-500000.0, 4850000.0)
    max_lon, max_lat = TO_4326.transform(-300000.0, 5000000.0)
    assert seen.result["srs"] == "EPSG:4326"
    assert seen.result["minX"] == pytest.approx(min_lon, abs=1e-6)
    assert seen.result["minY"] == pytest.approx(min_lat, abs=1e-6)
    assert seen.result["maxX"] == pytest.approx(max_lon, abs=1e-6)
    assert seen.result["maxY"] == pytest.approx(max_lat, abs=1e-6)


async def test_list_active_layers_array_result_is_accepted(client, provider):
    provider.queue([ToolCall("listActiveLayers", {}, "a1")], ["Tienes una capa."])
    cid = await new_conversation(client)
    await chat(client, cid, "¿Qué capas hay?")
    layers = [{"name": "IGNBaseTodo", "type": "TMS", "visible": True, "legend": ""}]
    final = await tool_result(client, cid, "listActiveLayers", layers, "a1")
    assert final["content"] == "Tienes una capa."
    assert results_seen(provider.requests[-1])[0].result == layers


@pytest.fixture
def executors() -> dict[str, Any]:
    def geocode(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        ctx.emit_layer(
            {
                "type": "geojson",
                "name": "Municipio de Toledo",
                "source": {"type": "FeatureCollection", "features": []},
                "fit": True,
            }
        )
        return {"success": True, "best": {"name": "Toledo", "lat": 39.86, "lon": -4.03}}

    return {"geocodePlace": geocode}


async def test_server_tools_run_in_the_loop_and_map_calls_are_sent(client, provider):
    provider.queue(
        [
            ToolCall("geocodePlace", {"q": "Toledo"}, "g1"),
            ToolCall("zoomTo", {"lat": 39.86, "lon": -4.03}, "z1"),
        ],
        ["Toledo, marcado."],
    )
    cid = await new_conversation(client, "/api/v2")
    reply = await chat(client, cid, "Muéstrame Toledo", base="/api/v2")
    assert [c["name"] for c in reply["tool_calls"]] == ["zoomTo"]
    assert reply["metadata"]["server_tool_calls"][0]["name"] == "geocodePlace"
    layer_blocks = [b for b in reply["content"] if b["type"] == "layer"]
    assert layer_blocks[0]["layer"]["name"] == "Municipio de Toledo"
    final = await tool_result(client, cid, "zoomTo", {"success": True}, "z1", base="/api/v2")
    assert final["content"] == [{"type": "text", "text": "Toledo, marcado."}]
    names = [m.name for m in results_seen(provider.requests[-1])]
    assert names == ["geocodePlace", "zoomTo"]


async def test_tool_result_errors(client, provider):
    cid = await new_conversation(client)
    r = await client.post(
        f"/api/conversations/{cid}/tool-result/",
        json={"tool_name": "zoomTo", "tool_call_id": "", "result": {"success": True}},
    )
    assert r.status_code == 409 and "pendiente" in r.json()["detail"]
    r = await client.post(
        f"/api/conversations/{cid}/tool-result/", json={"tool_name": "zoomTo", "result": None}
    )
    assert r.status_code == 400 and r.json()["result"]
    r = await client.post(f"/api/conversations/{cid}/tool-result/", json={"result": {}})
    assert r.status_code == 400 and r.json()["tool_name"]


async def test_a_new_message_cancels_calls_still_out(client, provider):
    provider.queue([ToolCall("zoomTo", {"lat": 40, "lon": -3}, "old")], ["Hola de nuevo."])
    cid = await new_conversation(client)
    await chat(client, cid, "Ve a algún sitio")
    reply = await chat(client, cid, "Olvídalo, di hola")
    assert reply["content"] == "Hola de nuevo."
    r = await client.post(
        f"/api/conversations/{cid}/tool-result/",
        json={"tool_name": "zoomTo", "tool_call_id": "old", "result": {"success": True}},
    )
    assert r.status_code == 409
    [cancelled] = results_seen(provider.requests[-1])
    assert cancelled.call_id == "old" and cancelled.success is False


async def test_provider_error_mid_turn_keeps_the_conversation_usable(client, provider):
    provider.queue(
        ["Empiezo a responder", ProviderRateLimitError("Límite de peticiones del proveedor.")],
        ["Ahora sí."],
    )
    cid = await new_conversation(client)
    reply = await chat(client, cid, "Hola")
    assert reply["type"] == "text"
    assert reply["content"].startswith("Empiezo a responder")
    assert "Límite de peticiones del proveedor." in reply["content"]
    assert reply["metadata"]["error"]["code"] == "rate_limit"

    again = await chat(client, cid, "¿Y ahora?")
    assert again["content"] == "Ahora sí."
    history = [getattr(m, "text", None) for m in provider.requests[-1].messages]
    assert "Hola" in history and "¿Y ahora?" in history
    msgs = (await client.get(f"/api/conversations/{cid}/messages/")).json()
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]


async def test_provider_error_after_a_tool_result(client, provider):
    provider.queue(
        [ToolCall("setZoom", {"level": 9}, "s1")],
        [ProviderRateLimitError("Demasiadas peticiones.")],
        ["Recuperado."],
    )
    cid = await new_conversation(client)
    await chat(client, cid, "Zoom 9")
    reply = await tool_result(client, cid, "setZoom", {"success": True, "level": 9}, "s1")
    assert "Demasiadas peticiones." in reply["content"] and reply["type"] == "text"
    assert (await chat(client, cid, "Sigue"))["content"] == "Recuperado."


async def test_an_unexpected_failure_is_answered_and_the_conversation_survives(
    client, provider, caplog
):
    provider.queue(["Empiezo", RuntimeError("fallo inesperado")], ["Funciono otra vez."])
    cid = await new_conversation(client)
    reply = await chat(client, cid, "Hola")
    assert reply["metadata"]["error"]["code"] == "internal"
    assert reply["content"].startswith("Empiezo") and "Error interno" in reply["content"]
    assert "fallo inesperado" not in reply["content"]  # internals stay in the log
    assert "fallo inesperado" in caplog.text
    assert (await chat(client, cid, "¿Sigues?"))["content"] == "Funciono otra vez."


async def test_v2_intermediate_result_reply_is_an_empty_block_list(client, provider):
    provider.queue(
        [ToolCall("getMapCenter", {}, "a"), ToolCall("getCurrentZoom", {}, "b")], ["Ok."]
    )
    cid = await new_conversation(client, "/api/v2")
    await chat(client, cid, "¿Dónde?", base="/api/v2")
    first = await tool_result(client, cid, "getCurrentZoom", {"level": 5}, "", base="/api/v2")
    assert first["content"] == [] and first["type"] == "text"
    final = await tool_result(
        client, cid, "getMapCenter", {"lat": 40, "lon": -3}, "", base="/api/v2"
    )
    assert final["content"] == [{"type": "text", "text": "Ok."}]
