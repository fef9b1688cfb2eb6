"""Web Mercator arithmetic for views: extent from centre, zoom and pixel size, and the inverse."""

from __future__ import annotations

import math

TILE_SIZE = 256
EARTH_RADIUS = 6378137.0
MAX_LAT = 85.05112878


def lonlat_to_mercator(lon: float, lat: float) -> tuple[float, float]:
    lat = max(min(lat, MAX_LAT), -MAX_LAT)
    x = math.radians(lon) * EARTH_RADIUS
    y = math.log(math.tan(math.pi / 4 + math.radians(lat) / 2)) * EARTH_RADIUS
    return x, y


def mercator_to_lonlat(x: float, y: float) -> tuple[float, float]:
    lon = math.degrees(x / EARTH_RADIUS)
    lat = math.degrees(2 * math.atan(math.exp(y / EARTH_RADIUS)) - math.pi / 2)
    return lon, lat


def resolution(zoom: float) -> float:
    """Metres per pixel at the equator for a Web Mercator zoom level."""
    return 2 * math.pi * EARTH_RADIUS / (TILE_SIZE * 2**zoom)


def extent_from_view(
    lat: float, lon: float, zoom: float, width: int, height: int
) -> tuple[float, float, float, float]:
    """(minLon, minLat, maxLon, maxLat) of a ``width``×``height`` px view."""
    cx, cy = lonlat_to_mercator(lon, lat)
    res = resolution(zoom)
    half_w, half_h = width * res / 2, height * res / 2
    min_lon, min_lat = mercator_to_lonlat(cx - half_w, cy - half_h)
    max_lon, max_lat = mercator_to_lonlat(cx + half_w, cy + half_h)
    return min_lon, min_lat, max_lon, max_lat


def zoom_for_extent(
    min_lon: float,
    min_lat: float,
    max_lon: float,
    max_lat: float,
    width: int,
    height: int,
    max_zoom: int = 19,
) -> int:
    """The largest integer zoom at which the extent fits a ``width``×``height`` px view."""
    x0, y0 = lonlat_to_mercator(min_lon, min_lat)
    x1, y1 = lonlat_to_mercator(max_lon, max_lat)
    span = max(abs(x1 - x0) / max(width, 1), abs(y1 - y0) / max(height, 1), 1e-9)
    zoom = math.log2(2 * math.pi * EARTH_RADIUS / (TILE_SIZE * span))
    return int(max(0, min(max_zoom, math.floor(zoom))))
