"""``listDetectors`` / ``detectObjects`` as the agent runs them: result, layer event, failures."""

from __future__ import annotations

import re

from pyproj import Transformer

from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.core.conversation import Conversation, ToolCall
from idee_notebook_agent.core.events import LayerEvent, ToolResultEvent
from idee_notebook_agent.detection.base import Detector, available_detectors, detector
from idee_notebook_agent.detection.pipeline import get_run
from idee_notebook_agent.errors import ConfigurationError
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.toolbox.registry import ToolContext, ToolRegistry
from tests.fakes.wms_server import NATIVE_CRS

RESULT_KEYS = {
    "success",
    "detector",
    "method",
    "count",
    "bbox",
    "srs",
    "tiles",
    "layer_name",
    "run_id",
}


def view_bbox(fake) -> dict[str, float]:
    t = Transformer.from_crs(NATIVE_CRS, "EPSG:4326", always_xy=True)
    w, s, e, n = t.transform_bounds(420000.0, 4479795.2, 420409.6, 4480000.0)  # 2 of the images
    return {"minX": w, "minY": s, "maxX": e, "maxY": n}


async def test_detect_objects_tool_returns_the_summary_and_emits_the_layer(fake_wms, settings):
    registry = ToolRegistry.load(settings)
    events: list = []
    ctx = ToolContext(settings, emit=events.append)
    call = ToolCall(
        "detectObjects", {"detector": "pools", "bbox": view_bbox(fake_wms), "wms_url": fake_wms.url}
    )
    assert registry.check_call(call) is None
    result, ok = await registry.execute(call, ctx)
    assert ok, result
    assert set(result) >= RESULT_KEYS
    assert (result["detector"], result["method"], result["srs"]) == ("pools", "opencv", "EPSG:4326")
    assert result["layer_name"] == "Piscinas detectadas" and result["count"] >= 3
    (event,) = events
    assert isinstance(event, LayerEvent)
    layer = event.layer
    assert (layer["type"], layer["name"], layer["detection"]) == (
        "geojson",
        "Piscinas detectadas",
        True,
    )
    assert layer["run_id"] == result["run_id"]
    features = layer["source"]["features"]
    assert layer["source"]["type"] == "FeatureCollection" and len(features) == result["count"]
    props = features[0]["properties"]
    assert props["method"] == "opencv" and props["class"] == "pool" and 0 < props["score"] <= 1
    assert fake_wms.url in props["source"] and "OI.OrthoimageCoverage" in props["source"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", props["time"])
    assert len(get_run(result["run_id"]).gdf) == result["count"]


async def test_tool_failures_are_answers_the_model_can_read(fake_wms, settings):
    registry = ToolRegistry.load(settings)
    events: list = []
    ctx = ToolContext(settings, emit=events.append)
    unknown = ToolCall("detectObjects", {"detector": "cars", "bbox": view_bbox(fake_wms)})
    result, ok = await registry.execute(unknown, ctx)
    assert not ok and "cars" in result["error"] and "pools" in result["detectors"]
    huge = ToolCall(
        "detectObjects",
        {
            "detector": "pools",
            "bbox": {"minX": -4.0, "minY": 40.0, "maxX": -3.0, "maxY": 41.0},
            "wms_url": fake_wms.url,
        },
    )
    result, ok = await registry.execute(huge, ctx)
    assert not ok and "Acerca el zoom" in result["error"] and result["max_tiles"] == 64
    assert events == []


async def test_list_detectors_reports_the_method_that_would_run(settings):
    registry = ToolRegistry.load(settings)
    result, ok = await registry.execute(ToolCall("listDetectors", {}), ToolContext(settings))
    assert ok
    pools = next(d for d in result["detectors"] if d["name"] == "pools")
    assert pools["classes"] == ["pool"] and pools["method"] == "opencv"
    assert pools["resolution_m"] == 0.25 and pools["layer_name"] == "Piscinas detectadas"


def test_detector_decorator_validates_and_registers_user_detectors():
    try:

        @detector
        class Boats(Detector):
            name = "test-boats"
            description = "Barcos (prueba)."
            classes = ("boat",)

            def detect(self, image, *, resolution_m=None, min_score=None):
                return []

        assert available_detectors()["test-boats"] is Boats
        try:

            @detector
            class Nameless(Detector):
                description = "x"
                classes = ("x",)

                def detect(self, image, *, resolution_m=None, min_score=None):
                    return []
        except ConfigurationError as exc:
            assert "name" in str(exc)
        else:
            raise AssertionError("a detector without a name was accepted")
    finally:
        from idee_notebook_agent.detection import base

        base._REGISTRY.pop("test-boats", None)


async def test_agent_turn_detects_pools_and_streams_the_layer(fake_wms, settings):
    bbox = view_bbox(fake_wms)
    provider = ScriptedProvider(
        [
            [
                {
                    "name": "detectObjects",
                    "args": {"detector": "pools", "bbox": bbox, "wms_url": fake_wms.url},
                }
            ],
            ["He dibujado las piscinas detectadas."],
        ]
    )
    agent = Agent(settings, retriever=None)
    agent.providers.register_instance("scripted", provider)
    agent.provider = "scripted"
    events = [e async for e in agent.stream(Conversation(), "Detecta las piscinas de la vista")]
    layers = [e for e in events if isinstance(e, LayerEvent)]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert len(layers) == 1 and layers[0].layer["detection"] is True
    assert results[0].success and results[0].result["count"] == len(
        layers[0].layer["source"]["features"]
    )
    assert events.index(layers[0]) < events.index(results[0])
