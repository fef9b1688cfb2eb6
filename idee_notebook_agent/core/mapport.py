"""MapPort: whoever owns the map runs the map tools (DESIGN.md, "MapPort")."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

MAP_TOOLS: tuple[str, ...] = (
    "getMapCenter",
    "getCurrentZoom",
    "getMapExtent",
    "listActiveLayers",
    "addLayer",
    "removeLayer",
    "zoomTo",
    "zoomToExtent",
    "setZoom",
)


@runtime_checkable
class MapPort(Protocol):
    """A map the agent can act on within the same turn (notebook, CLI, tests).

    ``call`` returns a JSON-able result; failures are results with ``success: False`` and an
    ``error`` message, never exceptions. ``state`` describes the view in degrees (EPSG:4326):
    ``{"center": {"lat", "lon"}, "zoom", "extent": {...}, "srs": "EPSG:4326", "layers": [...]}``.
    """

    def supports(self, name: str) -> bool: ...

    def call(self, name: str, args: dict[str, Any]) -> Any: ...

    def state(self) -> dict[str, Any] | None: ...

    def show_layer(self, layer: dict[str, Any]) -> None:
        """Draw a layer produced by a server tool (a ``layer`` event)."""
        ...
