"""Built-in server tools of the geo services, registered on import by ``toolbox/registry.py``.

``geocodePlace`` (CartoCiudad + offline gazetteer), ``searchIdeeService`` (IDEE catalogue and
GetCapabilities), ``fetchWebPage`` (SSRF-guarded), and the ``addLayer`` preprocessor that turns a
catalog name into a full layer definition. Errors are ``ToolError``s: the model reads them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import ToolError
from ..toolbox.registry import ToolContext, map_tool_preprocessor, server_tool


@server_tool("geocodePlace")
def geocode_place_tool(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Runs in a worker thread (blocking httpx); layers are emitted through ``ctx``."""
    from .geocoding import geocode_place

    return geocode_place(args, ctx.settings, ctx.emit_layer)


@server_tool("searchIdeeService")
async def search_idee_service_tool(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Topic search (parallel, async) or, with ``url``, the layers of one WMS/WMTS service."""
    url = str(args.get("url") or "").strip()
    layer_type = args.get("type")
    if url:
        from .ogc import describe_service

        kind = layer_type if layer_type in ("WMS", "WMTS") else None
        if layer_type and kind is None:
            raise ToolError(
                f"Con 'url' solo se pueden listar capas de servicios WMS o WMTS, no {layer_type}."
            )
        return await asyncio.to_thread(describe_service, url, ctx.settings, kind)
    query = str(args.get("query") or "").strip()
    if not query:
        raise ToolError(
            "Indica 'query' (tema o nombre del servicio, p. ej. 'hidrografía') o 'url' de un "
            "servicio WMS/WMTS. (EN: give query or url.)"
        )
    from .idee_search import search_services

    limit = max(1, min(int(args.get("limit") or 10), 50))
    return await search_services(query, ctx.settings, layer_type=layer_type, limit=limit)


@server_tool("fetchWebPage")
def fetch_web_page_tool(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Runs in a worker thread; the SSRF guard refuses private and metadata addresses."""
    from .webfetch import fetch_web_page

    return fetch_web_page(str(args.get("url") or ""), ctx.settings)


@map_tool_preprocessor("addLayer")
def add_layer_preprocessor(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """``addLayer(name="IGNBaseGris")`` → full WMTS definition; ambiguity → ToolError."""
    from .catalog import complete_add_layer

    return complete_add_layer(args)
