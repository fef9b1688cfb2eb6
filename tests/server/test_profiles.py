"""Unit checks of the classic/current translation helpers and the safe HTML of classic replies."""

from __future__ import annotations

import pytest
from pyproj import Transformer

from idee_notebook_agent.core.conversation import ToolCall
from idee_notebook_agent.server.profiles import CLASSIC, CURRENT, map_state_for_model
from idee_notebook_agent.server.render import to_safe_html

TO_4326 = Transformer.from_crs("EPSG:3857", "EPSG:4326", always_xy=True)
UTM_TO_4326 = Transformer.from_crs("EPSG:25830", "EPSG:4326", always_xy=True)


def test_map_state_in_metres_becomes_degrees():
    raw = {
        "center": {"lat": 4983459.6216, "lon": -467062.8225},
        "zoom": 5,
        "srs": "EPSG:3857",
        "extent": {"minX": -600000, "minY": 4900000, "maxX": -300000, "maxY": 5050000},
    }
    state, srs = map_state_for_model(raw)
    lon, lat = TO_4326.transform(-467062.8225, 4983459.6216)
    assert srs == "EPSG:3857"
    assert state["center"] == {
        "lat": pytest.approx(lat, abs=1e-6),
        "lon": pytest.approx(lon, abs=1e-6),
    }
    assert state["srs"] == "EPSG:4326" and state["zoom"] == 5
    assert state["extent"]["srs"] == "EPSG:4326"
    assert state["extent"]["minX"] == pytest.approx(
        TO_4326.transform(-600000, 4900000)[0], abs=1e-6
    )


def test_map_state_in_utm_and_without_srs():
    state, srs = map_state_for_model(
        {"center": {"lat": 4474000, "lon": 440000}, "srs": "EPSG:25830"}
    )
    lon, lat = UTM_TO_4326.transform(440000, 4474000)
    assert srs == "EPSG:25830"
    assert state["center"]["lat"] == pytest.approx(lat, abs=1e-6)
    guessed, srs = map_state_for_model({"center": {"lat": 4927000, "lon": -412000}})
    assert srs == "EPSG:3857" and guessed["center"]["lat"] == pytest.approx(40.4, abs=0.1)
    degrees, srs = map_state_for_model({"center": {"lat": 40.4, "lon": -3.7}})
    assert srs == "EPSG:4326" and degrees["center"] == {"lat": 40.4, "lon": -3.7}


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        "x",
        {},
        {"center": {"lat": "a", "lon": None}},
        {"center": {"lat": 1e12, "lon": 1e12}, "srs": "EPSG:4326"},
        {"center": {"lat": 1, "lon": 2}, "srs": "EPSG:999999"},
    ],
)
def test_unreadable_map_state_is_dropped_not_rejected(raw):
    state, _srs = map_state_for_model(raw)
    assert state is None or "center" not in state


def test_zoom_to_with_its_own_srs_is_reprojected_to_the_map():
    call = ToolCall("zoomTo", {"lat": 4474000, "lon": 440000, "srs": "EPSG:25830", "zoom": 10}, "z")
    out = CURRENT.translate(call, "EPSG:3857")
    lon, lat = UTM_TO_4326.transform(440000, 4474000)
    back = TO_4326.transform(out.args["lon"], out.args["lat"])
    assert back[0] == pytest.approx(lon, abs=1e-6) and back[1] == pytest.approx(lat, abs=1e-6)
    assert out.args["srs"] == "EPSG:3857" and out.id == "z"


def test_zoom_to_without_a_known_map_srs():
    call = ToolCall("zoomTo", {"lat": 40.4, "lon": -3.7}, "z")
    assert CURRENT.translate(call, None).args == {"lat": 40.4, "lon": -3.7, "srs": "EPSG:4326"}
    classic = CLASSIC.translate(call, CLASSIC.map_srs({}))
    assert classic.args["srs"] == "EPSG:3857" and abs(classic.args["lat"]) > 1000


def test_classic_wms_without_url_is_answered_not_sent():
    out = CLASSIC.translate(ToolCall("addLayer", {"type": "WMS", "name": "x"}), "EPSG:3857")
    assert out["success"] is False and "url" in out["error"]
    passthrough = CLASSIC.translate(ToolCall("miHerramienta", {"a": 1}, "m"), "EPSG:3857")
    assert passthrough.name == "miHerramienta" and passthrough.args == {"a": 1}


def test_safe_html():
    assert to_safe_html("") == ""
    assert to_safe_html("a < b & c") == "a &lt; b &amp; c"
    assert (
        to_safe_html('<img src=x onerror="alert(1)">')
        == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
    )
    assert to_safe_html("línea1\nlínea2") == "línea1<br>línea2"
    assert to_safe_html("`<b>`") == "<code>&lt;b&gt;</code>"
    link = to_safe_html("Ver https://a.es/x?y=1&z=2, gracias")
    assert link == (
        'Ver <a href="https://a.es/x?y=1&amp;z=2" target="_blank" rel="noopener noreferrer">'
        "https://a.es/x?y=1&amp;z=2</a>, gracias"
    )
    assert "<a" not in to_safe_html("[x](javascript:alert(1))")
    evil = to_safe_html('[pulsa](https://a.es/"onmouseover="alert(1))')
    assert 'onmouseover="' not in evil
