"""Cut a bbox into overlapping image tiles and map tile pixels back to map coordinates.

The whole bbox is one virtual raster of ``width × height`` pixels (its pixel size is the
detector's resolution expressed in the request CRS); tiles are windows of it, the last ones shifted
back so that every tile has the full size when the raster is large enough. A tile's affine
transform is the GetMap one: ``x = minx + px·(maxx−minx)/W``, ``y = maxy − py·(maxy−miny)/H``
(GEO-FACTS.md §2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Bounds = tuple[float, float, float, float]


@dataclass(frozen=True)
class Tile:
    """A window of the virtual raster: its pixel offset and size, and its bbox in the work CRS."""

    index: int
    col: int
    row: int
    x_off: int
    y_off: int
    width: int
    height: int
    bbox: Bounds

    @property
    def pixel_size(self) -> tuple[float, float]:
        minx, miny, maxx, maxy = self.bbox
        return (maxx - minx) / self.width, (maxy - miny) / self.height

    def to_map(self, px: float, py: float) -> tuple[float, float]:
        """Map coordinates of the pixel position ``(px, py)`` (edges, not centres)."""
        minx, miny, maxx, maxy = self.bbox
        return (
            minx + px * (maxx - minx) / self.width,
            maxy - py * (maxy - miny) / self.height,
        )

    def box_to_map(self, x1: float, y1: float, x2: float, y2: float) -> Bounds:
        """A pixel box as ``(minx, miny, maxx, maxy)`` in the work CRS."""
        ax, ay = self.to_map(x1, y2)
        bx, by = self.to_map(x2, y1)
        return ax, ay, bx, by


@dataclass(frozen=True)
class Raster:
    """The virtual raster covering the request bbox."""

    bbox: Bounds
    width: int
    height: int

    @property
    def pixel_size(self) -> tuple[float, float]:
        minx, miny, maxx, maxy = self.bbox
        return (maxx - minx) / self.width, (maxy - miny) / self.height


def raster_for(bbox: Bounds, res_x: float, res_y: float) -> Raster:
    """The raster of ``bbox`` at about ``res_x × res_y`` map units per pixel (exactly covering it)."""
    minx, miny, maxx, maxy = bbox
    width = max(1, round((maxx - minx) / res_x))
    height = max(1, round((maxy - miny) / res_y))
    return Raster(bbox, width, height)


def _starts(total: int, size: int, overlap: int) -> list[int]:
    if total <= size:
        return [0]
    stride = max(1, size - overlap)
    count = math.ceil((total - size) / stride) + 1
    starts = [min(i * stride, total - size) for i in range(count)]
    return sorted(set(starts))


def count_tiles(raster: Raster, size: int, overlap: int) -> int:
    return len(_starts(raster.width, size, overlap)) * len(_starts(raster.height, size, overlap))


def plan_tiles(raster: Raster, size: int, overlap: int) -> list[Tile]:
    """Tiles of at most ``size`` px sharing ``overlap`` px, row by row from the top left."""
    minx, _, _, maxy = raster.bbox
    rx, ry = raster.pixel_size
    tiles = []
    for row, y0 in enumerate(_starts(raster.height, size, overlap)):
        for col, x0 in enumerate(_starts(raster.width, size, overlap)):
            w, h = min(size, raster.width - x0), min(size, raster.height - y0)
            bbox = (minx + x0 * rx, maxy - (y0 + h) * ry, minx + (x0 + w) * rx, maxy - y0 * ry)
            tiles.append(Tile(len(tiles), col, row, x0, y0, w, h, bbox))
    return tiles
