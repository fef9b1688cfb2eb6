"""Tiles, affine transforms, CRS choices and cross-tile merging, on known numbers."""

from __future__ import annotations

import math

import pytest

from idee_notebook_agent.detection import geo
from idee_notebook_agent.detection.pipeline import MapBox, merge_boxes
from idee_notebook_agent.detection.tiling import Tile, count_tiles, plan_tiles, raster_for
from idee_notebook_agent.errors import ToolError


@pytest.mark.parametrize(
    "bbox",
    [
        (-440000.0, 4930000.0, -439840.0, 4930160.0),  # EPSG:3857, 160 map units square
        (420000.0, 4479840.0, 420160.0, 4480000.0),  # EPSG:25830, 160 m square
    ],
)
def test_tile_affine_maps_pixel_edges_to_the_known_bbox(bbox):
    tile = Tile(0, 0, 0, 0, 0, 640, 640, bbox)
    minx, miny, maxx, maxy = bbox
    assert tile.to_map(0, 0) == (minx, maxy)
    assert tile.to_map(640, 640) == (maxx, miny)
    assert tile.to_map(320, 160) == (minx + 80.0, maxy - 40.0)
    assert tile.box_to_map(295, 300, 345, 340) == (
        minx + 73.75,
        maxy - 85.0,
        minx + 86.25,
        maxy - 75.0,
    )
    assert tile.pixel_size == (0.25, 0.25)


def test_tiles_cover_the_raster_with_the_overlap_and_agree_with_its_transform():
    raster = raster_for((0.0, 0.0, 300.0, 200.0), 0.25, 0.25)
    assert (raster.width, raster.height) == (1200, 800)
    tiles = plan_tiles(raster, 640, 64)
    assert len(tiles) == count_tiles(raster, 640, 64) == 4
    assert [(t.x_off, t.y_off, t.width, t.height) for t in tiles] == [
        (0, 0, 640, 640),
        (560, 0, 640, 640),
        (0, 160, 640, 640),
        (560, 160, 640, 640),
    ]
    for t in tiles:  # a tile pixel and the same raster pixel are one map point
        assert t.to_map(10, 20) == pytest.approx(
            (0.0 + (t.x_off + 10) * 0.25, 200.0 - (t.y_off + 20) * 0.25)
        )
    small = plan_tiles(raster_for((0.0, 0.0, 50.0, 30.0), 0.25, 0.25), 640, 64)
    assert [(t.width, t.height) for t in small] == [(200, 120)]


def test_units_per_metre_for_utm_mercator_and_degrees():
    lon, lat = -3.94, 40.46
    ux, uy = geo.units_per_metre("EPSG:25830", lon, lat)
    assert ux == pytest.approx(1.0, abs=1e-3) and uy == pytest.approx(1.0, abs=1e-3)
    mx, my = geo.units_per_metre("EPSG:3857", lon, lat)
    assert mx == pytest.approx(1 / math.cos(math.radians(lat)), rel=5e-3)
    assert my == pytest.approx(mx, rel=5e-3)
    dx, dy = geo.units_per_metre("EPSG:4326", lon, lat)
    assert dy == pytest.approx(1 / 111_000, rel=0.01) and dx > dy


def test_work_crs_prefers_the_request_then_utm_then_mercator():
    madrid = (-3.7, 40.4)
    offered = ["EPSG:4326", "EPSG:3857", "EPSG:25830", "CRS:84"]
    assert geo.choose_work_crs("EPSG:3857", offered, madrid) == "EPSG:3857"
    assert geo.choose_work_crs("EPSG:4326", offered, madrid) == "EPSG:25830"
    assert geo.choose_work_crs("EPSG:4326", ["EPSG:4326", "EPSG:3857"], madrid) == "EPSG:3857"
    assert geo.choose_work_crs("EPSG:4326", ["EPSG:4326", "CRS:84"], madrid) == "EPSG:4326"
    assert geo.choose_work_crs("EPSG:4326", [], madrid) == "EPSG:4326"
    assert geo.choose_work_crs("EPSG:4326", offered, (1.5, 41.4)) == "EPSG:3857"  # zone 31 absent


def test_srs_and_bbox_validation_messages():
    assert geo.normalize_srs("3857") == "EPSG:3857"
    assert geo.normalize_srs("urn:ogc:def:crs:EPSG::25830") == "EPSG:25830"
    assert geo.normalize_srs("crs:84") == "CRS:84"
    with pytest.raises(ToolError, match="desconocido"):
        geo.normalize_srs("EPSG:999999")
    assert geo.parse_bbox({"minX": 1, "minY": 2, "maxX": 3, "maxY": 4}, "EPSG:4326") == (1, 2, 3, 4)
    with pytest.raises(ToolError, match="invertido"):
        geo.parse_bbox([3, 2, 1, 4], "EPSG:4326")
    with pytest.raises(ToolError, match="EPSG:3857"):
        geo.parse_bbox([-440000, 4930000, -439000, 4931000], "EPSG:4326")
    with pytest.raises(ToolError, match="minX"):
        geo.parse_bbox({"minX": 1, "minY": 2}, "EPSG:4326")


def test_box_polygon_is_a_closed_ring_in_lon_lat():
    ring = geo.box_polygon((420000.0, 4479840.0, 420160.0, 4480000.0), "EPSG:25830")
    assert len(ring) == 5 and ring[0] == ring[-1]
    lon, lat = ring[0]
    assert -4.0 < lon < -3.9 and 40.4 < lat < 40.5


def test_merge_joins_an_object_cut_by_a_tile_edge_and_keeps_neighbours_apart():
    boxes = [
        MapBox((10.0, 0.0, 16.0, 4.0), 0.6, "pool", "onnx", tile=0),  # cut at x=16 by tile 0
        MapBox((10.0, 0.0, 20.0, 4.0), 0.9, "pool", "onnx", tile=1),  # whole in tile 1
        MapBox((22.0, 0.0, 30.0, 4.0), 0.8, "pool", "onnx", tile=1),  # a different pool
        MapBox((23.0, 0.0, 29.0, 4.0), 0.7, "pool", "onnx", tile=1),  # same tile: left alone
    ]
    merged = merge_boxes(boxes)
    assert [(m.bounds, m.score) for m in merged] == [
        ((10.0, 0.0, 20.0, 4.0), 0.9),
        ((22.0, 0.0, 30.0, 4.0), 0.8),
        ((23.0, 0.0, 29.0, 4.0), 0.7),
    ]
    other_class = [boxes[0], MapBox((10.0, 0.0, 20.0, 4.0), 0.9, "car", "onnx", tile=1)]
    assert len(merge_boxes(other_class)) == 2
