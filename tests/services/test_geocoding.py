"""geocodePlace through the real httpx client against the loopback CartoCiudad fake."""

from __future__ import annotations

import json
import math

import pytest
import shapely
from shapely.geometry import shape

from idee_notebook_agent.errors import ServiceError, ToolError
from idee_notebook_agent.services import cartociudad
from idee_notebook_agent.services.geocoding import MAX_RESULT_VERTICES, _simplified, geocode_place
from tests.fakes.cartociudad_server import DATA
from tests.services.conftest import make_settings

CANDIDATE_KEYS = {"id", "type", "name", "address", "lat", "lon", "muni", "province", "bbox"}


def run(args, settings):
    layers: list[dict] = []
    return geocode_place(args, settings, layers.append), layers


def test_municipality_boundary_is_returned_and_drawn(settings, carto):
    result, layers = run({"q": "Madrid", "type": "municipio"}, settings)
    assert result["success"] is True
    assert result["source"] == "cartociudad"
    best = result["best"]
    assert set(best) >= CANDIDATE_KEYS
    assert (best["id"], best["type"], best["name"]) == ("28079", "municipio", "Madrid")
    fc = result["boundary"]
    assert fc["type"] == "FeatureCollection"
    geometry = shape(fc["features"][0]["geometry"])
    assert geometry.geom_type == "MultiPolygon"
    assert result["bbox"] == pytest.approx([-3.8889, 40.3121, -3.518, 40.6437])
    assert best["bbox"] == result["bbox"]
    assert geometry.contains(shapely.Point(best["lon"], best["lat"]))
    assert len(layers) == 1
    layer = layers[0]
    assert layer["type"] == "geojson" and layer["fit"] is True
    assert layer["name"] == "Municipio de Madrid"
    assert layer["source"]["features"][0]["properties"]["id"] == "28079"
    find = [p for _, path, p in carto.requests if path.endswith("/find")]
    assert find == [{"id": "28079", "type": "municipio"}]


def test_type_is_compared_case_insensitively_and_only_wanted_types_are_asked(settings, carto):
    result, _ = run({"q": "Madrid", "type": "municipio"}, settings)
    assert all(c["type"] == "municipio" for c in result["candidates"])
    assert [c["name"] for c in result["candidates"]][0] == "Madrid"
    params = next(p for _, path, p in carto.requests if path.endswith("/candidates"))
    assert "callejero" in params["no_process"] and "municipio" not in params["no_process"]


def test_real_boundary_of_humanes_matches_its_geojson_twin(settings):
    result, layers = run({"q": "Humanes de Madrid", "type": "municipio"}, settings)
    twin = json.loads(
        (
            DATA / "find_id_28073_type_municipio_outputformat_geojson.Humanes_de_Madrid.json"
        ).read_text()
    )
    expected = shape(twin["features"][0]["geometry"])
    got = shape(layers[0]["source"]["features"][0]["geometry"])
    assert got.symmetric_difference(expected).area < 1e-12
    assert result["bbox"] == pytest.approx(list(expected.bounds), abs=1e-6)
    assert cartociudad.geometry_of(twin).equals(
        cartociudad.geometry_of(
            json.loads((DATA / "find_id_28073_type_municipio.Humanes_de_Madrid.json").read_text())
        )
    )


def test_type_prefix_in_the_query_means_that_type(settings):
    result, layers = run({"q": "municipio de Madrid"}, settings)
    assert result["best"]["type"] == "municipio" and layers


def test_province_boundary(settings):
    result, layers = run({"q": "Madrid", "type": "provincia"}, settings)
    assert result["best"]["type"] == "provincia"
    assert layers[0]["name"] == "Provincia de Madrid"
    assert result["bbox"][0] < -4


def test_draw_false_returns_the_boundary_without_a_layer(settings):
    result, layers = run({"q": "Madrid", "type": "municipio", "draw": False}, settings)
    assert "boundary" in result and layers == []


def test_plain_query_gives_candidates_with_coordinates_and_no_boundary(settings):
    result, layers = run({"q": "Madrid"}, settings)
    best = result["best"]
    assert best["type"] == "poblacion"
    assert best["lat"] == pytest.approx(40.408412) and best["lon"] == pytest.approx(-3.687601)
    assert "boundary" not in result and layers == []
    types = [c["type"] for c in result["candidates"]]
    assert "municipio" in types and "provincia" in types


def test_address_with_portal(settings):
    result, _ = run({"q": "Calle Iglesia 5, Madrid", "limit": 1}, settings)
    assert len(result["candidates"]) == 1
    best = result["best"]
    assert best["type"] == "portal" and best["portal"] == 5
    assert best["lat"] == pytest.approx(40.395795, abs=1e-5)


def test_find_by_id_and_type(settings):
    result, layers = run({"id": "28073", "type": "municipio"}, settings)
    assert result["best"]["name"] == "Humanes de Madrid"
    assert layers and result["bbox"]


def test_id_without_type_is_refused(settings):
    with pytest.raises(ToolError, match="type"):
        run({"id": "28079"}, settings)


def test_nothing_to_search_is_refused(settings):
    with pytest.raises(ToolError):
        run({}, settings)


def test_reverse_geocoding(settings):
    result, _ = run({"lat": 39.4724, "lon": -0.3446}, settings)
    assert result["success"] and result["source"] == "cartociudad"
    assert result["result"]["type"] == "portal"
    assert result["result"]["muni"] == "València"


def test_reverse_geocoding_far_from_any_address(settings):
    result, _ = run({"lat": 40.0, "lon": -3.0}, settings)
    assert result["success"] is False
    assert result["candidates"] == []
    assert result["nearest_municipality"]["name"] == "Tarancón"


def test_no_results(settings):
    result, _ = run({"q": "Xyzzyx"}, settings)
    assert result == {
        "success": False,
        "error": "CartoCiudad no encontró resultados para 'Xyzzyx'.",
        "query": "Xyzzyx",
        "candidates": [],
    }


def test_answers_are_cached(settings, carto):
    run({"q": "Madrid", "type": "municipio"}, settings)
    asked = len(carto.requests)
    result, layers = run({"q": "Madrid", "type": "municipio"}, settings)
    assert len(carto.requests) == asked
    assert result["bbox"] and layers
    assert cartociudad.cache_info()["hits"] >= 2


def test_gazetteer_answers_when_cartociudad_is_unreachable(tmp_path, closed_port):
    settings = make_settings(tmp_path, cartociudad_url=f"http://127.0.0.1:{closed_port}/x")
    result, layers = run({"q": "Alicante", "type": "municipio"}, settings)
    assert result["success"] is True
    assert result["source"] == "gazetteer"
    assert "nomenclátor sin conexión" in result["note"]
    assert result["best"]["name"] == "Alacant/Alicante"
    assert result["bbox"] and layers == [] and "boundary" not in result


def test_gazetteer_answers_on_timeout(tmp_path, carto):
    carto.delay = 1.0
    settings = make_settings(tmp_path, cartociudad_url=carto.url, http_timeout=0.3)
    result, _ = run({"q": "La Coruña"}, settings)
    assert result["source"] == "gazetteer"
    assert "0.3 s" in result["note"]
    assert result["best"]["id"] == "15030"


def test_gazetteer_answers_on_server_error(tmp_path, carto):
    carto.fail_status = 503
    settings = make_settings(tmp_path, cartociudad_url=carto.url)
    result, _ = run({"q": "Toledo", "type": "provincia"}, settings)
    assert result["source"] == "gazetteer"
    assert result["best"]["type"] == "provincia" and result["best"]["id"] == "45"


def test_reverse_falls_back_to_nearest_municipality(tmp_path, closed_port):
    settings = make_settings(tmp_path, cartociudad_url=f"http://127.0.0.1:{closed_port}")
    result, _ = run({"lat": 41.65, "lon": -0.88}, settings)
    assert result["source"] == "gazetteer" and result["result"]["name"] == "Zaragoza"


def test_unreachable_and_unknown_to_the_gazetteer_is_a_clear_error(tmp_path, closed_port):
    settings = make_settings(tmp_path, cartociudad_url=f"http://127.0.0.1:{closed_port}")
    with pytest.raises(ServiceError, match="No se pudo contactar con CartoCiudad"):
        run({"q": "Calle Mayor 3, Soria", "type": "portal"}, settings)


def test_bad_request_is_reported_not_hidden(tmp_path, carto):
    carto.fail_status = 400
    settings = make_settings(tmp_path, cartociudad_url=carto.url)
    with pytest.raises(ServiceError, match="HTTP 400"):
        run({"q": "Madrid"}, settings)


def test_big_boundaries_are_simplified_for_the_model_only():
    ring = [
        (math.cos(2 * math.pi * i / 5000), math.sin(2 * math.pi * i / 5000)) for i in range(5000)
    ]
    polygon = shapely.Polygon(ring)
    simple = _simplified(polygon)
    assert shapely.get_num_coordinates(simple) <= MAX_RESULT_VERTICES
    assert simple.area == pytest.approx(polygon.area, rel=0.01)


def test_gazetteer_code_rescues_a_misspelt_municipality(settings, carto):
    result, layers = run({"q": "Humanez de Madrid", "type": "municipio"}, settings)
    assert result["source"] == "cartociudad"
    assert result["best"]["id"] == "28073" and layers
    finds = [p for _, path, p in carto.requests if path.endswith("/find")]
    assert finds == [{"id": "28073", "type": "municipio"}]
