"""An in-memory map: the CLI's map, and the map of tests and scripts with no widget."""

from __future__ import annotations

from typing import Any

from .map_tools import BaseMapPort

SPAIN_CENTER = (40.2, -3.7)
SPAIN_ZOOM = 6


class HeadlessMapPort(BaseMapPort):
    """Keeps centre, zoom and layers; the extent comes from a nominal pixel size."""

    def __init__(
        self,
        center: tuple[float, float] = SPAIN_CENTER,
        zoom: float = SPAIN_ZOOM,
        size: tuple[int, int] = (1024, 768),
        base_layer: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.center = (float(center[0]), float(center[1]))
        self.zoom = zoom
        self.size = size
        self.layers: list[dict[str, Any]] = []
        if base_layer is not None:
            self.layers.append({**base_layer, "base": True})

    def _center(self) -> tuple[float, float]:
        return self.center

    def _set_view(self, lat: float | None, lon: float | None, zoom: float | None) -> None:
        if lat is not None and lon is not None:
            self.center = (lat, lon)
        if zoom is not None:
            self.zoom = zoom

    def _zoom(self) -> float:
        return self.zoom

    def _size(self) -> tuple[int, int]:
        return self.size

    def _layers(self) -> list[dict[str, Any]]:
        return [dict(layer) for layer in self.layers]

    def _add(self, layer: dict[str, Any]) -> None:
        self.layers.append(dict(layer))

    def _remove(self, name: str) -> None:
        self.layers = [layer for layer in self.layers if layer.get("name") != name]
