"""A small simulated map + geo services for driving the offline planner round by round.

It answers tool calls in the agreed result shapes (geocodePlace, addLayer catalog resolution,
searchIdeeService, detectObjects...) and keeps a little state (zoom, layers) so multi-step plans
see the effect of earlier calls. Used by tests/planner; the end-to-end tests use the real
Agent + HeadlessMapPort instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from idee_notebook_agent.core.conversation import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from idee_notebook_agent.llm.base import ChatRequest, TextChunk, ToolCallChunk
from idee_notebook_agent.resources import data_path
from idee_notebook_agent.toolbox.specs import ToolSpec, load_tool_specs

GEO_LAT, GEO_LON = 40.5, -3.25
CENTER = {"lat": 40.4, "lon": -3.7}
EXTENT = {"minX": -3.72, "minY": 40.39, "maxX": -3.68, "maxY": 40.41, "srs": "EPSG:4326"}
BASE = {"name": "IGNBaseTodo", "type": "WMTS", "legend": "Mapa IGN", "base": True}


@lru_cache(maxsize=1)
def _specs() -> tuple[ToolSpec, ...]:
    return tuple(load_tool_specs([data_path("tools")]))


def all_specs() -> list[ToolSpec]:
    """The bundled tool specs (the 14 tools the model sees)."""
    return list(_specs())


def square(lon: float, lat: float, d: float = 0.1) -> dict[str, Any]:
    ring = [[lon - d, lat - d], [lon + d, lat - d], [lon + d, lat + d], [lon - d, lat + d]]
    return {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "properties": {},
                "geometry": {"type": "Polygon", "coordinates": [[*ring, ring[0]]]},
            }
        ],
    }


@dataclass
class World:
    """Simulated tool results. ``geo_type`` is the type of forward-geocoding candidates."""

    zoom: int = 10
    layers: list[dict[str, Any]] = field(default_factory=lambda: [dict(BASE)])
    geo_type: str = "Municipio"
    geo_fail: bool = False
    add_candidates: list[dict[str, Any]] | None = None
    services: list[dict[str, Any]] | None = None
    detect_error: str | None = None
    log: list[ToolCall] = field(default_factory=list)

    @classmethod
    def from_case(cls, spec: dict[str, Any] | None) -> World:
        spec = dict(spec or {})
        if "layers" in spec:
            spec["layers"] = [dict(layer) for layer in spec["layers"]]
        return cls(**spec)

    def state(self) -> dict[str, Any]:
        return {
            "center": dict(CENTER),
            "zoom": self.zoom,
            "extent": dict(EXTENT),
            "srs": "EPSG:4326",
            "layers": [layer["name"] for layer in self.layers],
        }

    def run(self, name: str, args: dict[str, Any]) -> tuple[Any, bool]:
        method = getattr(self, f"do_{name}", None)
        if method is None:
            return {"success": False, "error": f"Unknown tool: {name}"}, False
        result = method(dict(args))
        return result, not (isinstance(result, dict) and result.get("success") is False)

    # ---- server tools ------------------------------------------------------------------
    def do_geocodePlace(self, args: dict[str, Any]) -> dict[str, Any]:
        if "lat" in args and "lon" in args:
            return {
                "success": True,
                "source": "cartociudad",
                "result": {
                    "id": "p1",
                    "type": "portal",
                    "name": "Calle Mayor 1",
                    "address": "Calle Mayor 1",
                    "lat": args["lat"],
                    "lon": args["lon"],
                    "muni": "Madrid",
                    "province": "Madrid",
                    "bbox": None,
                },
            }
        if self.geo_fail:
            return {"success": False, "error": "Sin resultados en CartoCiudad.", "candidates": []}
        q = str(args.get("q") or "")
        kind = str(args.get("type") or self.geo_type)
        admin = kind.lower() in ("municipio", "provincia", "comunidad autonoma")
        box = [GEO_LON - 0.1, GEO_LAT - 0.1, GEO_LON + 0.1, GEO_LAT + 0.1]
        candidate = {
            "id": "c1",
            "type": kind,
            "name": q,
            "address": q,
            "lat": GEO_LAT,
            "lon": GEO_LON,
            "muni": q,
            "province": q,
            "bbox": box if admin else None,
        }
        result: dict[str, Any] = {
            "success": True,
            "source": "gazetteer",
            "query": q,
            "candidates": [candidate],
            "best": candidate,
        }
        if admin:
            result["boundary"] = square(GEO_LON, GEO_LAT)
            result["bbox"] = box
        return result

    def do_searchIdeeService(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("url"):
            return {
                "success": True,
                "url": args["url"],
                "type": "WMS",
                "title": "Servicio",
                "layers": [{"name": "capa1", "title": "Capa 1", "abstract": ""}],
            }
        services = self.services
        if services is None:
            services = [
                {
                    "title": f"Servicio de {args.get('query')}",
                    "type": "WMS",
                    "url": "https://example.test/wms",
                    "layers": ["HY.PhysicalWaters.Waterbodies"],
                    "abstract": "",
                    "source": "catalog",
                }
            ]
        return {"success": True, "query": args.get("query"), "services": services, "errors": []}

    def do_detectObjects(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.detect_error:
            return {"success": False, "error": self.detect_error}
        return {
            "success": True,
            "detector": args.get("detector"),
            "method": "opencv",
            "count": 3,
            "bbox": args.get("bbox"),
            "srs": "EPSG:4326",
            "tiles": 1,
            "layer_name": "Piscinas detectadas",
            "run_id": "r1",
        }

    def do_listDetectors(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"detectors": [{"name": "pools", "description": "Piscinas", "classes": ["pool"]}]}

    def do_fetchWebPage(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"success": False, "error": "offline"}

    # ---- map tools ---------------------------------------------------------------------
    def do_getCurrentZoom(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"level": self.zoom}

    def do_setZoom(self, args: dict[str, Any]) -> dict[str, Any]:
        self.zoom = int(args["level"])
        return {"success": True, "level": self.zoom}

    def do_getMapCenter(self, args: dict[str, Any]) -> dict[str, Any]:
        return {**CENTER, "srs": "EPSG:4326"}

    def do_getMapExtent(self, args: dict[str, Any]) -> dict[str, Any]:
        return dict(EXTENT)

    def do_zoomTo(self, args: dict[str, Any]) -> dict[str, Any]:
        if args.get("zoom") is not None:
            self.zoom = int(args["zoom"])
        return {"success": True, "zoom": self.zoom, "srs": "EPSG:4326"}

    def do_zoomToExtent(self, args: dict[str, Any]) -> dict[str, Any]:
        self.zoom = 11
        return {"success": True, "zoom": 11, "srs": "EPSG:4326"}

    def do_listActiveLayers(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "name": layer["name"],
                "type": layer.get("type", ""),
                "visible": True,
                "legend": layer.get("legend", ""),
                "url": "",
                "base": bool(layer.get("base")),
            }
            for layer in self.layers
        ]

    def do_addLayer(self, args: dict[str, Any]) -> dict[str, Any]:
        if (
            self.add_candidates
            and not args.get("url")
            and args.get("name") not in {c.get("id") for c in self.add_candidates}
        ):
            return {
                "success": False,
                "error": "Hay varias capas que coinciden. ¿Cuál quieres?",
                "candidates": self.add_candidates,
            }
        layer = {"name": args.get("name") or "capa", "type": args.get("type") or "WMS"}
        self.layers.append({**layer, "legend": args.get("legend") or layer["name"]})
        return {"success": True, **layer}

    def do_removeLayer(self, args: dict[str, Any]) -> dict[str, Any]:
        for layer in self.layers:
            if layer["name"] == args.get("name"):
                self.layers.remove(layer)
                return {"success": True, "name": layer["name"]}
        return {"success": False, "error": f"Layer not found: {args.get('name')}"}


@dataclass
class Turn:
    calls: list[ToolCall]
    text: str
    messages: list[Message]
    rounds: int


async def drive(
    provider: Any,
    text: str,
    world: World,
    *,
    specs: list[ToolSpec] | None = None,
    history: list[Message] | None = None,
    max_rounds: int = 12,
) -> Turn:
    """Run one user turn against ``world`` the way the agent loop would, round by round."""
    specs = all_specs() if specs is None else specs
    messages: list[Message] = [*(history or []), UserMessage(text)]
    made: list[ToolCall] = []
    for round_no in range(1, max_rounds + 1):
        request = ChatRequest(
            system="", messages=list(messages), tools=specs, map_state=world.state()
        )
        calls: list[ToolCall] = []
        parts: list[str] = []
        async for chunk in provider.stream(request):
            if isinstance(chunk, ToolCallChunk):
                calls.append(chunk.call)
            elif isinstance(chunk, TextChunk):
                parts.append(chunk.text)
        messages.append(AssistantMessage("".join(parts), calls))
        if not calls:
            return Turn(made, "".join(parts), messages, round_no)
        for call in calls:
            made.append(call)
            result, ok = world.run(call.name, call.args)
            messages.append(ToolResultMessage(call.id, call.name, result, ok))
    raise AssertionError(f"the planner did not finish within {max_rounds} rounds: {made}")


def drive_sync(provider: Any, text: str, world: World, **kwargs: Any) -> Turn:
    return asyncio.run(drive(provider, text, world, **kwargs))
