"""Our own MCP server (``IdeeMCPServer``) with one extra test tool, for the SDK-client tests.

``extra_registry()`` is the native registry plus ``countThings`` (a server tool that also draws a
GeoJSON layer) and an ``addLayer`` catalog preprocessor that knows two layers; run as a module it
serves that over stdio, so the tests exercise ``serve_stdio`` end to end.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

COUNT_SPEC = {
    "name": "countThings",
    "description": "Cuenta elementos y dibuja un punto.",
    "parameters": {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "string"}},
            "draw": {"type": "boolean", "default": False},
        },
        "required": ["items"],
        "additionalProperties": False,
    },
}

CATALOG = {
    "IGNBaseGris": {
        "type": "WMTS",
        "url": "https://www.ign.es/wmts/ign-base?",
        "name": "IGNBase-gris",
        "legend": "Mapa Base de España – IGNBaseGris",
        "format": "image/jpeg",
        "matrixSet": "GoogleMapsCompatible",
        "catalog_id": "IGNBaseGris",
    },
    "IGNBaseTodo": {
        "type": "WMTS",
        "url": "https://www.ign.es/wmts/ign-base?",
        "name": "IGNBaseTodo",
        "legend": "Mapa Base de España – IGNBaseTodo",
        "format": "image/jpeg",
        "matrixSet": "GoogleMapsCompatible",
        "catalog_id": "IGNBaseTodo",
    },
}


def count_things(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    items = list(args["items"])
    if args.get("draw"):
        point = {"type": "Point", "coordinates": [-3.7038, 40.4168]}
        feature = {"type": "Feature", "geometry": point, "properties": {"n": len(items)}}
        ctx.emit_layer(
            {
                "type": "geojson",
                "name": "Puntos contados",
                "source": {"type": "FeatureCollection", "features": [feature]},
            }
        )
    return {"success": True, "count": len(items), "first": items[0] if items else None}


def catalog_preprocessor(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    from idee_notebook_agent.errors import ToolError

    name = str(args.get("name", ""))
    if name in CATALOG:
        return {**CATALOG[name], **{k: v for k, v in args.items() if k != "name"}}
    matches = [k for k in CATALOG if k.lower().startswith(name.lower())]
    if matches:
        raise ToolError(
            "Hay varias capas que encajan. ¿Cuál quieres?",
            data={"candidates": [{"id": k, "title": CATALOG[k]["legend"]} for k in matches]},
        )
    raise ToolError(f"No hay ninguna capa '{name}' en el catálogo.")


def extra_registry(settings: Any = None, folder: Path | None = None) -> Any:
    from idee_notebook_agent.toolbox.registry import ToolRegistry

    folder = folder or Path(tempfile.mkdtemp(prefix="idee-mcp-tools-"))
    (folder / "countThings.json").write_text(json.dumps(COUNT_SPEC), encoding="utf-8")
    registry = ToolRegistry.load(
        settings, tool_dirs=[folder], executors={"countThings": count_things}
    )
    registry.preprocessors["addLayer"] = catalog_preprocessor
    return registry


def main() -> None:
    from idee_notebook_agent.mcp.server import IdeeMCPServer

    server = IdeeMCPServer(extra_registry())
    print("idee mcp stdio ready", file=sys.stderr, flush=True)
    asyncio.run(server.serve_stdio())


if __name__ == "__main__":
    main()
