"""The registered tools run through the real registry (validation, thread/async, errors)."""

from __future__ import annotations

import pytest

from idee_notebook_agent.core.conversation import ToolCall
from idee_notebook_agent.core.events import LayerEvent
from idee_notebook_agent.errors import ToolError
from idee_notebook_agent.toolbox.registry import ToolContext, ToolRegistry
from tests.services.conftest import make_settings


@pytest.fixture
def registry(settings):
    return ToolRegistry.load(settings)


def context(settings):
    events: list = []
    return ToolContext(settings, None, events.append), events


def test_our_executors_replace_the_placeholders(registry):
    for name in ("geocodePlace", "searchIdeeService", "fetchWebPage"):
        assert registry.executors[name].__module__ == "idee_notebook_agent.services.tools"
    assert "addLayer" in registry.preprocessors
    assert registry.is_map_tool("addLayer")


async def test_geocode_place_emits_the_boundary_layer(registry, settings):
    ctx, events = context(settings)
    call = ToolCall("geocodePlace", {"q": "Madrid", "type": "municipio"})
    assert registry.check_call(call) is None
    result, success = await registry.execute(call, ctx)
    assert success and result["best"]["id"] == "28079"
    layers = [e.layer for e in events if isinstance(e, LayerEvent)]
    assert layers and layers[0]["fit"] is True and layers[0]["name"] == "Municipio de Madrid"


async def test_geocode_failure_is_a_result_the_model_can_read(registry, tmp_path, closed_port):
    down = make_settings(tmp_path, cartociudad_url=f"http://127.0.0.1:{closed_port}")
    ctx, _ = context(down)
    result, success = await registry.execute(
        ToolCall("geocodePlace", {"q": "Plaza Mayor 1, Salamanca", "type": "portal"}), ctx
    )
    assert success is False
    assert "No se pudo contactar con CartoCiudad" in result["error"]


async def test_search_idee_service_topic_and_url(registry, settings, ogc_fake):
    ctx, _ = context(settings)
    result, success = await registry.execute(
        ToolCall("searchIdeeService", {"query": "transporte", "limit": 5}), ctx
    )
    assert success and result["services"]
    result, success = await registry.execute(
        ToolCall("searchIdeeService", {"url": ogc_fake.url("/wms"), "type": "WMS"}), ctx
    )
    assert success and result["type"] == "WMS"
    assert {"name", "title", "abstract"} <= set(result["layers"][0])


async def test_search_without_query_or_url_is_refused(registry, settings):
    ctx, _ = context(settings)
    result, success = await registry.execute(ToolCall("searchIdeeService", {}), ctx)
    assert success is False and "query" in result["error"]


async def test_fetch_web_page_through_the_registry(registry, settings, ogc_fake):
    ctx, _ = context(settings)
    ok, success = await registry.execute(
        ToolCall("fetchWebPage", {"url": ogc_fake.url("/pages/idee.html")}), ctx
    )
    assert success and "Infraestructura de Datos Espaciales" in ok["text"]
    blocked, success = await registry.execute(
        ToolCall("fetchWebPage", {"url": "http://169.254.169.254/latest/meta-data/"}), ctx
    )
    assert success is False and "bloqueada" in blocked["error"]


def test_add_layer_preprocessor_through_the_registry(registry, settings):
    ctx, _ = context(settings)
    call = registry.preprocess(ToolCall("addLayer", {"name": "IGNBaseGris", "fit": True}), ctx)
    assert call.args["name"] == "IGNBase-gris" and call.args["fit"] is True
    with pytest.raises(ToolError) as info:
        registry.preprocess(ToolCall("addLayer", {"name": "mapa de España"}), ctx)
    assert info.value.data["candidates"]
