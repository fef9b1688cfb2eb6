from __future__ import annotations

import pytest

from idee_notebook_agent.core.headless_map import HeadlessMapPort
from idee_notebook_agent.core.map_tools import from_degrees, to_degrees

BASE = {
    "name": "IGNBaseTodo",
    "type": "TMS",
    "url": "https://tms-ign-base.idee.es/1.0.0/IGNBaseTodo/{z}/{x}/{-y}.jpeg",
}


def test_zoom_and_extent_follow_the_view():
    port = HeadlessMapPort(size=(800, 600))
    port.call("zoomTo", {"lat": 40.4168, "lon": -3.7038, "zoom": 12})
    ext = port.call("getMapExtent", {})
    assert ext["minX"] < -3.7038 < ext["maxX"] and ext["minY"] < 40.4168 < ext["maxY"]
    width_12 = ext["maxX"] - ext["minX"]
    port.call("setZoom", {"level": 13})
    ext13 = port.call("getMapExtent", {})
    assert (ext13["maxX"] - ext13["minX"]) == pytest.approx(width_12 / 2, rel=1e-6)
    # 800 px at z12: 800 * 156543.03 / 4096 m ≈ 30.6 km ≈ 0.275° of longitude
    assert width_12 == pytest.approx(800 * 360 / (256 * 2**12), rel=1e-6)


def test_zoom_to_reprojects_from_srs():
    port = HeadlessMapPort()
    x, y = from_degrees(-3.7038, 40.4168, "EPSG:3857")
    port.call("zoomTo", {"lat": y, "lon": x, "srs": "EPSG:3857", "zoom": 10})
    assert port.center == pytest.approx((40.4168, -3.7038), abs=1e-6)
    assert to_degrees(440000, 4474000, "EPSG:25830")[1] == pytest.approx(40.41, abs=0.01)


def test_bad_arguments_are_results_not_exceptions():
    port = HeadlessMapPort()
    assert port.call("zoomTo", {"lat": 400, "lon": 0})["success"] is False
    assert port.call("setZoom", {"level": 40})["success"] is False
    assert port.call("zoomTo", {"lat": 1})["success"] is False
    assert port.call("addLayer", {"type": "WMS"})["error"].startswith("Falta 'url'")
    assert port.call("addLayer", {"type": "GeoJSON", "data": "{nope"})["success"] is False
    assert port.call("flyAway", {}) == {"success": False, "error": "Unknown tool: flyAway"}


def test_layers_add_list_remove_and_base_protection():
    port = HeadlessMapPort(base_layer=BASE)
    assert port.call(
        "addLayer",
        {
            "type": "wms",
            "url": "https://x/wms?",
            "name": "AU.AdministrativeUnit",
            "legend": "Unidades",
        },
    ) == {
        "success": True,
        "name": "AU.AdministrativeUnit",
        "type": "WMS",
    }
    listed = port.call("listActiveLayers", {})
    assert [layer["name"] for layer in listed] == ["IGNBaseTodo", "AU.AdministrativeUnit"]
    assert port.call("removeLayer", {"name": "IGNBaseTodo"})["success"] is False
    assert port.call("removeLayer", {"name": "Unidades"}) == {
        "success": True,
        "name": "AU.AdministrativeUnit",
    }
    assert port.call("removeLayer", {"name": "nada"}) == {
        "success": False,
        "error": "Layer not found: nada",
    }
    assert port.call("removeLayer", {"name": "IGNBaseTodo", "force": True})["success"]


def test_geojson_fit_frames_the_data():
    port = HeadlessMapPort()
    square = {
        "type": "Polygon",
        "coordinates": [[[-3.9, 40.3], [-3.5, 40.3], [-3.5, 40.6], [-3.9, 40.6], [-3.9, 40.3]]],
    }
    port.call("addLayer", {"type": "GeoJSON", "name": "Madrid", "data": square, "fit": True})
    lat, lon = port.center
    assert lat == pytest.approx(40.45) and lon == pytest.approx(-3.7)
    ext = port.call("getMapExtent", {})
    assert ext["minX"] <= -3.9 and ext["maxX"] >= -3.5 and port.zoom >= 9
