"""LeafletMapPort against a real ipyleaflet.Map: every map tool, good and bad arguments."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import ipyleaflet
import ipywidgets
import pytest

from idee_notebook_agent.core.webmercator import extent_from_view
from idee_notebook_agent.notebook.leaflet_port import LeafletMapPort, wmts_tile_url
from idee_notebook_agent.notebook.mapchat import default_basemap

from .conftest import IGN_GRIS

SQUARE = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "properties": {"name": "cuadrado"},
            "geometry": {
                "type": "Polygon",
                "coordinates": [
                    [[-4.1, 39.8], [-3.9, 39.8], [-3.9, 40.0], [-4.1, 40.0], [-4.1, 39.8]]
                ],  # fmt: skip
            },
        }
    ],
}


@pytest.fixture
def port() -> LeafletMapPort:
    base = default_basemap("http://127.0.0.1:9/{z}/{x}/{y}.png")
    m = ipyleaflet.Map(
        basemap=base, center=[40.2, -3.7], zoom=6, layout=ipywidgets.Layout(height="600px")
    )
    p = LeafletMapPort(m)
    p.describe_layer(base, name="basemap", type="XYZ", url=base.url, legend="Mapa base", base=True)
    return p


def render(port: LeafletMapPort, south: float, west: float, north: float, east: float) -> None:
    """What the browser sends after drawing the map (bounds and pixel bounds)."""
    port.map.set_state(
        {
            "south": south,
            "west": west,
            "north": north,
            "east": east,
            "left": 1000.0,
            "right": 1800.0,
            "top": 500.0,
            "bottom": 1000.0,
        }
    )


def names(port: LeafletMapPort) -> list[str]:
    return [layer["name"] for layer in port.call("listActiveLayers", {})]


# ---------------------------------------------------------------- navigation
def test_zoom_to_moves_the_leaflet_map(port: LeafletMapPort) -> None:
    result = port.call("zoomTo", {"lat": 40.4168, "lon": -3.7038, "zoom": 12})
    assert result["success"] is True
    assert port.map.center == [40.4168, -3.7038]
    assert port.map.zoom == 12
    assert port.call("getMapCenter", {}) == {"lat": 40.4168, "lon": -3.7038, "srs": "EPSG:4326"}
    assert port.call("getCurrentZoom", {}) == {"level": 12}


def test_zoom_to_reprojects_from_the_given_srs(port: LeafletMapPort) -> None:
    result = port.call("zoomTo", {"lat": 4926661.0, "lon": -412314.0, "srs": "EPSG:3857"})
    assert result["success"] is True
    lat, lon = port.map.center
    assert lat == pytest.approx(40.4166, abs=0.001)
    assert lon == pytest.approx(-3.7039, abs=0.001)
    assert port.map.zoom == 6  # zoom untouched when not given


@pytest.mark.parametrize(
    "args",
    [
        {"lat": 200, "lon": -3.7},
        {"lat": 40.0},
        {"lat": "norte", "lon": -3.7},
        {"lat": 40.0, "lon": -3.7, "zoom": 30},
    ],
)
def test_zoom_to_with_bad_arguments_answers_an_error(port: LeafletMapPort, args: dict) -> None:
    result = port.call("zoomTo", args)
    assert result["success"] is False and result["error"]
    assert port.map.center == [40.2, -3.7] and port.map.zoom == 6


def test_set_zoom(port: LeafletMapPort) -> None:
    assert port.call("setZoom", {"level": 9}) == {"success": True, "level": 9}
    assert port.map.zoom == 9
    for bad in ({"level": 40}, {"level": "x"}, {}):
        assert port.call("setZoom", bad)["success"] is False
    assert port.map.zoom == 9


def test_extent_before_rendering_is_computed_from_centre_zoom_and_size(
    port: LeafletMapPort,
) -> None:
    ext = port.call("getMapExtent", {})
    expected = extent_from_view(40.2, -3.7, 6, 800, 600)  # layout height 600 px, default width
    assert [ext["minX"], ext["minY"], ext["maxX"], ext["maxY"]] == pytest.approx(expected, abs=1e-6)
    assert ext["srs"] == "EPSG:4326"


def test_extent_after_rendering_comes_from_the_browser_bounds(port: LeafletMapPort) -> None:
    render(port, 39.0, -5.0, 41.0, -2.0)
    assert port.call("getMapExtent", {}) == {
        "minX": -5.0,
        "minY": 39.0,
        "maxX": -2.0,
        "maxY": 41.0,
        "srs": "EPSG:4326",
    }
    # the kernel moves the map: until the browser reports new bounds, compute with its pixel size
    port.call("zoomTo", {"lat": 41.39, "lon": 2.17, "zoom": 10})
    ext = port.call("getMapExtent", {})
    expected = extent_from_view(41.39, 2.17, 10, 800, 500)
    assert [ext["minX"], ext["minY"], ext["maxX"], ext["maxY"]] == pytest.approx(expected, abs=1e-6)
    render(port, 41.3, 2.0, 41.5, 2.3)
    assert port.call("getMapExtent", {})["minX"] == 2.0


def test_zoom_to_extent_fits_the_box(port: LeafletMapPort) -> None:
    result = port.call(
        "zoomToExtent", {"minLon": -3.9, "minLat": 40.3, "maxLon": -3.5, "maxLat": 40.6}
    )
    assert result["success"] is True
    lat, lon = port.map.center
    assert lat == pytest.approx(40.45) and lon == pytest.approx(-3.7)
    assert 8 <= port.map.zoom <= 12
    bad = port.call("zoomToExtent", {"minLon": 1, "minLat": 2, "maxLon": 0, "maxLat": 3})
    assert bad["success"] is False


def test_map_state_is_in_degrees(port: LeafletMapPort) -> None:
    state = port.state()
    assert state["center"] == {"lat": 40.2, "lon": -3.7}
    assert state["srs"] == "EPSG:4326" and state["extent"]["srs"] == "EPSG:4326"
    assert state["layers"] == ["basemap"]


# ---------------------------------------------------------------- layers
def test_list_active_layers_describes_the_base_map(port: LeafletMapPort) -> None:
    layers = port.call("listActiveLayers", {})
    assert layers == [
        {
            "name": "basemap",
            "type": "XYZ",
            "visible": True,
            "legend": "Mapa base",
            "url": "http://127.0.0.1:9/{z}/{x}/{y}.png",
            "base": True,
        }
    ]


def test_add_wmts_layer_builds_a_kvp_gettile_template(port: LeafletMapPort) -> None:
    result = port.call("addLayer", dict(IGN_GRIS))
    assert result == {"success": True, "name": "IGNBase-gris", "type": "WMTS"}
    layer = port.map.layers[-1]
    assert isinstance(layer, ipyleaflet.TileLayer) and not isinstance(layer, ipyleaflet.WMSLayer)
    assert layer.url.startswith("https://www.ign.es/wmts/ign-base?SERVICE=WMTS&REQUEST=GetTile")
    for part in (
        "LAYER=IGNBase-gris",
        "FORMAT=image/jpeg",
        "TILEMATRIXSET=GoogleMapsCompatible",
        "TILEMATRIX={z}",
        "TILEROW={y}",
        "TILECOL={x}",
    ):
        assert part in layer.url
    assert layer.name == "Mapa Base de España – IGNBaseGris"
    listed = port.call("listActiveLayers", {})[-1]
    assert listed["name"] == "IGNBase-gris" and listed["type"] == "WMTS"
    assert listed["url"] == "https://www.ign.es/wmts/ign-base?"


def test_wmts_template_helper_handles_urls_with_and_without_query() -> None:
    assert wmts_tile_url("https://a/wmts", "L").startswith("https://a/wmts?SERVICE=WMTS")
    assert wmts_tile_url("https://a/wmts?map=x", "L").startswith("https://a/wmts?map=x&SERVICE")
    rest = wmts_tile_url("https://a/{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}.png", "L")
    assert rest == "https://a/GoogleMapsCompatible/{z}/{y}/{x}.png"


def test_wmts_in_another_crs_is_refused(port: LeafletMapPort) -> None:
    result = port.call("addLayer", {**IGN_GRIS, "matrixSet": "EPSG:25830"})
    assert result["success"] is False and "GoogleMapsCompatible" in result["error"]
    assert names(port) == ["basemap"]


def test_add_wms_layer(port: LeafletMapPort) -> None:
    result = port.call(
        "addLayer",
        {
            "type": "wms",
            "url": "https://www.ign.es/wms-inspire/pnoa-ma?",
            "name": "OI.OrthoimageCoverage",
            "legend": "PNOA",
            "format": "image/jpeg",
            "transparent": False,
        },
    )
    assert result["success"] is True and result["type"] == "WMS"
    layer = port.map.layers[-1]
    assert isinstance(layer, ipyleaflet.WMSLayer)
    assert layer.layers == "OI.OrthoimageCoverage"
    assert layer.format == "image/jpeg" and layer.transparent is False
    assert port.call("removeLayer", {"name": "PNOA"}) == {
        "success": True,
        "name": "OI.OrthoimageCoverage",
    }


def test_add_xyz_and_tms_layers(port: LeafletMapPort) -> None:
    assert port.call("addLayer", {"type": "XYZ", "url": "https://t/{z}/{x}/{y}.png", "name": "x"})[
        "success"
    ]
    assert port.map.layers[-1].tms is False
    port.call("addLayer", {"type": "TMS", "url": "https://t/{z}/{x}/{y}.png", "name": "tms-y"})
    assert port.map.layers[-1].tms is True  # rows counted from the south
    port.call("addLayer", {"type": "TMS", "url": "https://t/{z}/{x}/{-y}.png", "name": "tms-neg"})
    assert port.map.layers[-1].tms is False  # Leaflet inverts {-y} itself
    bad = port.call("addLayer", {"type": "XYZ", "url": "https://t/tiles.png", "name": "bad"})
    assert bad["success"] is False and "{z}" in bad["error"]
    assert names(port) == ["basemap", "x", "tms-y", "tms-neg"]


def test_add_geojson_styles_and_fits(port: LeafletMapPort) -> None:
    result = port.call(
        "addLayer",
        {"type": "GeoJSON", "name": "Cuadrado", "data": json.dumps(SQUARE), "fit": True},
    )
    assert result["success"] is True
    layer = port.map.layers[-1]
    assert isinstance(layer, ipyleaflet.GeoJSON)
    assert layer.data["features"][0]["properties"]["name"] == "cuadrado"
    assert layer.style["color"] and layer.style["weight"] == 2
    lat, lon = port.map.center
    assert lat == pytest.approx(39.9) and lon == pytest.approx(-4.0)
    assert port.map.zoom >= 9


@pytest.mark.parametrize(
    "args",
    [
        {"type": "GeoJSON", "name": "roto", "data": "{no es json"},
        {"type": "GeoJSON", "name": "vacio"},
        {"type": "GeoJSON", "name": "lista", "data": "[1, 2]"},
        {"type": "KML", "url": "https://x/y.kml", "name": "kml"},
        {"type": "SHAPEFILE", "url": "https://x", "name": "shp"},
        {"type": "WMS", "name": "sin-url"},
        {"url": "https://x"},
    ],
)
def test_bad_layers_are_answered_with_an_error(port: LeafletMapPort, args: dict) -> None:
    result = port.call("addLayer", args)
    assert result["success"] is False and result["error"]
    assert names(port) == ["basemap"]


class _GeoJSONHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/square.geojson":
            body = json.dumps(SQUARE).encode()
            self.send_response(200)
        else:
            body = b"not found"
            self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


def test_geojson_from_a_url_is_fetched(port: LeafletMapPort) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _GeoJSONHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        ok = port.call(
            "addLayer", {"type": "GeoJSON", "name": "remoto", "url": f"{base}/square.geojson"}
        )
        missing = port.call(
            "addLayer", {"type": "GeoJSON", "name": "falta", "url": f"{base}/nada.geojson"}
        )
    finally:
        server.shutdown()
        server.server_close()
    assert ok["success"] is True
    assert port.map.layers[-1].data["type"] == "FeatureCollection"
    assert missing["success"] is False and "404" in missing["error"]


def test_same_name_replaces_the_layer(port: LeafletMapPort) -> None:
    port.call("addLayer", dict(IGN_GRIS))
    port.call("addLayer", {**IGN_GRIS, "format": "image/png"})
    assert names(port) == ["basemap", "IGNBase-gris"]
    assert "FORMAT=image/png" in port.map.layers[-1].url


def test_remove_layer_by_name_and_base_protection(port: LeafletMapPort) -> None:
    port.call("addLayer", dict(IGN_GRIS))
    assert port.call("removeLayer", {"name": "IGNBase-gris"}) == {
        "success": True,
        "name": "IGNBase-gris",
    }
    assert names(port) == ["basemap"]
    missing = port.call("removeLayer", {"name": "IGNBase-gris"})
    assert missing == {"success": False, "error": "Layer not found: IGNBase-gris"}
    protected = port.call("removeLayer", {"name": "basemap"})
    assert protected["success"] is False and "force" in protected["error"]
    assert names(port) == ["basemap"]
    assert port.call("removeLayer", {"name": "basemap", "force": True})["success"] is True
    assert port.map.layers == ()


def test_layers_of_a_users_own_map_are_listed(port: LeafletMapPort) -> None:
    m = ipyleaflet.Map(center=[40, -3], zoom=5)
    m.add(ipyleaflet.WMSLayer(url="https://w?", layers="capa", name="Mi WMS"))
    own = LeafletMapPort(m)
    layers = own.call("listActiveLayers", {})
    assert layers[0]["base"] is True
    assert layers[1]["name"] == "capa" and layers[1]["type"] == "WMS"
    assert own.call("removeLayer", {"name": "Mi WMS"})["success"] is True
    assert len(m.layers) == 1


def test_detection_layer_event_is_drawn_with_its_style(port: LeafletMapPort) -> None:
    port.show_layer(
        {"type": "geojson", "name": "Piscinas detectadas", "source": SQUARE, "detection": True}
    )
    layer = port.map.layers[-1]
    assert isinstance(layer, ipyleaflet.GeoJSON) and layer.name == "Piscinas detectadas"
    assert layer.style["color"] == "#e03131"
    assert port.map.center == [40.2, -3.7]  # no fit requested


def test_layer_events_without_a_drawable_type_are_ignored(port: LeafletMapPort) -> None:
    port.show_layer({"type": "geocoding_candidates", "candidates": [{"address": "Calle Mayor"}]})
    port.show_layer({"type": "WMS", "url": "https://w?", "name": "capa", "legend": "Capa WMS"})
    assert names(port) == ["basemap", "capa"]


def test_user_map_tools_run_and_unknown_tools_are_answered(port: LeafletMapPort) -> None:
    port.register_tool("setBasemapOpacity", lambda args, m: _set_opacity(m, args))
    assert port.supports("setBasemapOpacity")
    assert port.call("setBasemapOpacity", {"opacity": 0.5}) == {"success": True}
    assert port.map.layers[0].opacity == 0.5
    failing = port.call("setBasemapOpacity", {})
    assert failing["success"] is False and "opacity" in failing["error"]
    assert port.call("flyAway", {}) == {"success": False, "error": "Unknown tool: flyAway"}


def _set_opacity(m: Any, args: dict) -> dict:
    m.layers[0].opacity = float(args["opacity"])
    return {"success": True}


def test_tools_run_from_another_thread(port: LeafletMapPort) -> None:
    results: list[Any] = []
    thread = threading.Thread(
        target=lambda: results.append(port.call("zoomTo", {"lat": 43.36, "lon": -8.41}))
    )
    thread.start()
    thread.join(5)
    assert results and results[0]["success"] is True
    assert port.map.center == [43.36, -8.41]


def test_attribution_and_titles_from_the_model_cannot_inject_html(port: LeafletMapPort) -> None:
    port.call(
        "addLayer",
        {
            **IGN_GRIS,
            "legend": "<img src=x onerror=alert(1)>",
            "attribution": '<b>IGN</b> <a href="javascript:alert(2)">x</a><script>alert(3)</script>'
            '<a href="https://www.scne.es" onclick="alert(4)">SCNE</a>',
        },
    )
    layer = port.map.layers[-1]
    assert "<img" not in layer.name and "&lt;img" in layer.name
    assert "<script" not in layer.attribution and "javascript:" not in layer.attribution
    assert "onclick" not in layer.attribution
    assert '<a href="https://www.scne.es" target="_blank" rel="noopener noreferrer">SCNE</a>' in (
        layer.attribution
    )
    assert layer.attribution.startswith("<b>IGN</b>")
