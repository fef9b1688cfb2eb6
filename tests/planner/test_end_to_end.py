"""Whole turns through Agent + HeadlessMapPort with provider ``offline``.

Server tools are small test executors registered into a real ToolRegistry (the bundled specs,
skills and the real addLayer catalog preprocessor), so the planner's loop runs for real:
tool call → result → next call → final text, on a map that really moves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.agent import Agent, ToolResultInput
from idee_notebook_agent.core.conversation import Conversation
from idee_notebook_agent.core.events import (
    DoneEvent,
    ErrorEvent,
    LayerEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
)
from idee_notebook_agent.core.headless_map import HeadlessMapPort
from idee_notebook_agent.errors import ToolError
from idee_notebook_agent.llm.offline import OfflinePlanner
from idee_notebook_agent.llm.planner.text import fold
from idee_notebook_agent.llm.registry import ProviderRegistry
from idee_notebook_agent.toolbox.registry import ToolContext, ToolRegistry
from tests.fakes.planner_world import square

# name, type, lat, lon, bbox (rough, for the test only)
PLACES = {
    "toledo": ("Toledo", "municipio", 39.8567, -4.0245, [-4.12, 39.80, -3.92, 39.93]),
    "madrid": ("Madrid", "municipio", 40.4168, -3.7038, [-3.889, 40.312, -3.518, 40.644]),
    "sevilla": ("Sevilla", "municipio", 37.3886, -5.9823, [-6.02, 37.31, -5.89, 37.45]),
    "cuenca": ("Cuenca", "provincia", 40.07, -2.13, [-2.9, 39.2, -1.0, 40.7]),
}


class NoKnowledge:
    async def retrieve(self, query: str, k: int) -> list[dict[str, Any]]:
        return []


class Services:
    """Test executors in the agreed result shapes; they remember what they were asked."""

    def __init__(self) -> None:
        self.detect_args: list[dict[str, Any]] = []

    def geocode(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        if "lat" in args and "lon" in args:
            return {
                "success": True,
                "source": "gazetteer",
                "result": {
                    "type": "municipio",
                    "name": "Madrid",
                    "address": "Madrid",
                    "lat": args["lat"],
                    "lon": args["lon"],
                    "muni": "Madrid",
                    "province": "Madrid",
                    "bbox": None,
                },
            }
        key = fold(str(args.get("q") or ""))
        if key not in PLACES:
            raise ToolError(f"No hay resultados para '{args.get('q')}'.", data={"candidates": []})
        name, kind, lat, lon, bbox = PLACES[key]
        kind = str(args.get("type") or kind)
        candidate = {
            "id": key,
            "type": kind,
            "name": name,
            "address": name,
            "lat": lat,
            "lon": lon,
            "muni": name,
            "province": name,
            "bbox": bbox,
        }
        result = {
            "success": True,
            "source": "gazetteer",
            "query": args.get("q"),
            "candidates": [candidate],
            "best": candidate,
        }
        if kind in ("municipio", "provincia"):
            boundary = square((bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2, 0.05)
            label = "Municipio" if kind == "municipio" else "Provincia"
            ctx.emit_layer(
                {"type": "geojson", "name": f"{label} de {name}", "source": boundary, "fit": True}
            )
            result.update(boundary=boundary, bbox=bbox)
        return result

    def detect(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        self.detect_args.append(args)
        box = args["bbox"]
        lon, lat = (box["minX"] + box["maxX"]) / 2, (box["minY"] + box["maxY"]) / 2
        ctx.emit_layer(
            {
                "type": "geojson",
                "name": "Piscinas detectadas",
                "source": square(lon, lat, 0.0001),
                "detection": True,
                "run_id": "r1",
            }
        )
        return {
            "success": True,
            "detector": args["detector"],
            "method": "opencv",
            "count": 1,
            "bbox": box,
            "srs": "EPSG:4326",
            "tiles": 1,
            "layer_name": "Piscinas detectadas",
            "run_id": "r1",
        }

    def search(self, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {
            "success": True,
            "query": args.get("query"),
            "errors": [],
            "services": [
                {
                    "title": "Hidrografía IDEE",
                    "type": "WMS",
                    "url": "https://servicios.idee.es/wms-inspire/hidrografia?",
                    "layers": ["HY.PhysicalWaters.Waterbodies"],
                    "abstract": "",
                    "source": "catalog",
                }
            ],
        }


@pytest.fixture
def services() -> Services:
    return Services()


@pytest.fixture
def agent(tmp_path: Path, services: Services) -> Agent:
    settings = Settings(
        _env_file=None, llm_provider="offline", data_dir=tmp_path, cache_dir=tmp_path / "cache"
    )
    registry = ToolRegistry.load(
        settings,
        executors={
            "geocodePlace": services.geocode,
            "detectObjects": services.detect,
            "searchIdeeService": services.search,
        },
    )
    return Agent(settings, tools=registry, retriever=NoKnowledge(), provider="offline")


async def turn(agent: Agent, conversation: Conversation, text: str, port: Any) -> list[Any]:
    return [e async for e in agent.stream(conversation, text, map_port=port)]


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def called(events: list[Any]) -> list[str]:
    return [c.name for e in events if isinstance(e, ToolCallEvent) for c in e.calls]


def needs_catalog(agent: Agent) -> None:
    if "addLayer" not in agent.tools.preprocessors:
        pytest.skip("the layer catalog (services) is not installed")


async def test_go_to_a_place_moves_the_map(agent: Agent) -> None:
    port = HeadlessMapPort()
    events = await turn(agent, Conversation(), "Llévame a Toledo, por favor", port)
    assert called(events) == ["geocodePlace", "zoomTo"]
    assert not any(e.awaiting_client for e in events if isinstance(e, ToolCallEvent))
    assert port.center == pytest.approx((39.8567, -4.0245)) and port.zoom == 12
    assert "Toledo" in text_of(events)
    assert isinstance(events[-1], DoneEvent) and not events[-1].pending


async def test_municipality_boundary_is_drawn_and_framed(agent: Agent) -> None:
    port = HeadlessMapPort()
    events = await turn(agent, Conversation(), "dame el municipio de Madrid", port)
    assert called(events) == ["geocodePlace", "zoomToExtent"]
    assert [e.layer["name"] for e in events if isinstance(e, LayerEvent)] == ["Municipio de Madrid"]
    assert [(la["name"], la["type"]) for la in port.layers] == [("Municipio de Madrid", "GEOJSON")]
    lat, lon = port.center
    assert 40.312 < lat < 40.644 and -3.889 < lon < -3.518
    assert "municipio de Madrid" in text_of(events)


async def test_catalog_layer_is_resolved_and_shown(agent: Agent) -> None:
    needs_catalog(agent)
    port = HeadlessMapPort()
    events = await turn(agent, Conversation(), "pon la ortofoto del PNOA", port)
    assert called(events) == ["addLayer"]
    [layer] = port.layers
    assert layer["type"] == "WMTS" and "pnoa-ma" in layer["url"]
    assert "He añadido la capa" in text_of(events)


async def test_pools_are_detected_in_the_current_view(agent: Agent, services: Services) -> None:
    port = HeadlessMapPort(center=(36.51, -4.88), zoom=18)
    view = port.extent()
    events = await turn(agent, Conversation(), "Detecta las piscinas de la vista", port)
    assert called(events) == ["getMapExtent", "detectObjects"]
    [args] = services.detect_args
    assert args["detector"] == "pools"
    assert args["bbox"] == {k: view[k] for k in ("minX", "minY", "maxX", "maxY")}
    assert [la["name"] for la in port.layers] == ["Piscinas detectadas"]
    assert "1 piscinas" in text_of(events) or "He detectado 1" in text_of(events)


async def test_multi_step_request_runs_every_step(agent: Agent) -> None:
    needs_catalog(agent)
    port = HeadlessMapPort()
    events = await turn(
        agent, Conversation(), "llévame a Sevilla, pon la ortofoto y acércate un poco", port
    )
    assert called(events) == ["geocodePlace", "zoomTo", "addLayer", "getCurrentZoom", "setZoom"]
    assert port.center == pytest.approx((37.3886, -5.9823)) and port.zoom == 13
    # the geocoder draws the municipality it found (draw defaults to true), then the orthophoto
    assert [la["type"] for la in port.layers] == ["GEOJSON", "WMTS"]
    assert len(text_of(events).splitlines()) == 3


async def test_a_catalog_question_and_its_answer(agent: Agent) -> None:
    needs_catalog(agent)
    port = HeadlessMapPort()
    conversation = Conversation()
    first = await turn(agent, conversation, "carga la capa IGN", port)
    question = text_of(first)
    assert "?" in question and port.layers == []
    number = next(line.split(".")[0] for line in question.splitlines() if "IGNBaseGris" in line)
    second = await turn(agent, conversation, f"la {number}", port)
    assert called(second) == ["addLayer"]
    assert [la["name"] for la in port.layers] == ["IGNBase-gris"]


async def test_without_a_map_port_the_front_end_runs_map_calls(agent: Agent) -> None:
    conversation = Conversation()
    events = [e async for e in agent.stream(conversation, "llévame a Toledo")]
    assert isinstance(events[-1], DoneEvent) and events[-1].pending
    waiting = [e for e in events if isinstance(e, ToolCallEvent) and e.awaiting_client]
    assert [c.name for e in waiting for c in e.calls] == ["zoomTo"]
    call = waiting[0].calls[0]
    assert call.args == {"lat": 39.8567, "lon": -4.0245, "zoom": 12}
    stored = Conversation.from_json(conversation.to_json())  # as the REST store would
    result = ToolResultInput("zoomTo", {"success": True}, call.id)
    resumed = [e async for e in agent.resume(stored, [result])]
    assert "Te he llevado a Toledo" in text_of(resumed)
    assert isinstance(resumed[-1], DoneEvent) and not resumed[-1].pending


async def test_the_conversation_survives_what_the_planner_cannot_do(agent: Agent) -> None:
    port = HeadlessMapPort()
    conversation = Conversation()
    poem = await turn(agent, conversation, "escribe un poema", port)
    assert called(poem) == [] and "OPENAI_API_KEY" in text_of(poem)
    missing = await turn(agent, conversation, "llévame a Atlantis", port)
    assert [e.success for e in missing if isinstance(e, ToolResultEvent)] == [False]
    assert "No he encontrado «Atlantis»" in text_of(missing)
    works = await turn(agent, conversation, "take me to Madrid", port)
    assert called(works) == ["geocodePlace", "zoomTo"] and text_of(works).startswith("I moved")
    again = Conversation.from_json(conversation.to_json())
    assert again.to_dict() == conversation.to_dict()


async def test_broken_rules_are_an_error_event_not_a_crash(agent: Agent, tmp_path: Path) -> None:
    bad = tmp_path / "bad_intents"
    bad.mkdir()
    (bad / "x.yaml").write_text("intents:\n  - id: x\n    action: fly\n    anchors: [a]\n")
    agent.providers.register_instance("broken", OfflinePlanner(intents_dirs=[bad]))
    conversation = Conversation()
    events = [e async for e in agent.stream(conversation, "hola", provider="broken")]
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert errors and "no pudo cargar sus reglas" in errors[0].message
    assert conversation.last_user_text == "hola"


def test_offline_is_the_default_provider_without_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "LLM_PROVIDER",
        "IDEE_PROVIDERS_FILE",
        "PROVIDERS_CONFIG_PATH",
        "OPENAI_BASE_URL",
        "GEMINI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    registry = ProviderRegistry.from_settings(Settings(_env_file=None))
    assert registry.default_name() == "offline"
    provider, model = registry.resolve()
    assert isinstance(provider, OfflinePlanner) and model == "planner"
