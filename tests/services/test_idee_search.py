"""searchIdeeService against the loopback IDEE catalogue: categories in parallel, fallbacks."""

from __future__ import annotations

import pytest

from idee_notebook_agent.services.idee_search import (
    CATALOG_SOURCE,
    CATEGORIES,
    parse_q_records,
    search_services,
)
from tests.services.conftest import make_settings


@pytest.fixture
def cat_settings(tmp_path, idee_catalog):
    return make_settings(tmp_path, idee_catalog_url=idee_catalog.url, http_timeout=1.0)


async def test_topic_search_covers_every_category(cat_settings, idee_catalog):
    result = await search_services("hidrografía", cat_settings)
    assert result["success"] is True and result["errors"] == []
    types = {s["type"] for s in result["services"]}
    assert {"WMS", "WFS", "OGCAPIFeatures", "MVT"} <= types
    asked = [p["keyword"] for _, path, p in idee_catalog.requests if path.endswith("/q")]
    assert sorted(asked) == sorted(c.keyword for c in CATEGORIES)
    assert all(p["any"] == "hidrografía" for _, _, p in idee_catalog.requests)
    wms = next(s for s in result["services"] if s["type"] == "WMS")
    assert wms["url"] == "https://servicios.idee.es/wms-inspire/hidrografia?"
    assert "HY.PhysicalWaters.Waterbodies" in wms["layers"]
    for service in result["services"]:
        assert {"title", "type", "url", "layers", "abstract", "source"} <= set(service)


async def test_catalog_layers_come_first(cat_settings):
    result = await search_services("catastro", cat_settings)
    first = result["services"][0]
    assert first["source"] == CATALOG_SOURCE and first["catalog_id"] == "Catastro"
    assert first["layers"] == ["Catastro"]


async def test_a_slow_category_does_not_block_the_others(cat_settings, idee_catalog):
    idee_catalog.slow["MVT"] = 3.0
    result = await search_services("hidrografía", cat_settings)
    assert result["success"] is True
    assert any("Teselas vectoriales" in e and "no respondió" in e for e in result["errors"])
    types = {s["type"] for s in result["services"]}
    assert "MVT" not in types and {"WMS", "WFS"} <= types


async def test_a_failing_category_is_reported(cat_settings, idee_catalog):
    idee_catalog.fail["WFS"] = 500
    result = await search_services("hidrografía", cat_settings)
    assert any("WFS" in e and "HTTP 500" in e for e in result["errors"])
    assert "WFS" not in {s["type"] for s in result["services"]}


async def test_type_filter_asks_one_category(cat_settings, idee_catalog):
    result = await search_services("hidrografía", cat_settings, layer_type="WFS")
    assert {s["type"] for s in result["services"]} == {"WFS"}
    assert len([1 for _, path, _ in idee_catalog.requests if path.endswith("/q")]) == 1


async def test_csw_is_the_fallback_without_q_search(cat_settings, idee_catalog):
    idee_catalog.q_enabled = False
    result = await search_services("relieve", cat_settings, layer_type="TMS")
    assert result["success"] is True
    tms = [s for s in result["services"] if s["type"] == "TMS"]
    assert tms and any("{z}" in s["url"] for s in tms)
    assert any(
        method == "POST" and path.endswith("/csw") for method, path, _ in idee_catalog.requests
    )


async def test_catalogue_down_without_local_match_is_a_failure(tmp_path, closed_port):
    down = make_settings(tmp_path, idee_catalog_url=f"http://127.0.0.1:{closed_port}/srv")
    result = await search_services("geología submarina", down)
    assert result["success"] is False
    assert "No se pudo consultar el catálogo" in result["error"]
    assert len(result["errors"]) == len(CATEGORIES)


async def test_catalogue_down_still_offers_the_local_catalog(tmp_path, closed_port):
    down = make_settings(tmp_path, idee_catalog_url=f"http://127.0.0.1:{closed_port}/srv")
    result = await search_services("ortofoto", down)
    assert result["success"] is True
    assert result["services"][0]["catalog_id"] == "PNOA"
    assert result["errors"]


async def test_no_results_is_a_successful_empty_answer(cat_settings):
    result = await search_services("zzzz nada", cat_settings)
    assert result["success"] is True and result["services"] == []
    assert "No se encontraron" in result["message"]


def test_q_records_single_object_and_string_link():
    data = {
        "summary": {"@count": "1"},
        "metadata": {
            "defaultTitle": "Servicio WMTS",
            "link": "OI.OrthoimageCoverage|PNOA|https://www.ign.es/wmts/pnoa-ma?request=GetCapabilities&service=WMTS|OGC:WMTS|",
        },
    }
    services = parse_q_records(data, CATEGORIES[0])
    assert services == [
        {
            "title": "Servicio WMTS",
            "type": "WMTS",
            "url": "https://www.ign.es/wmts/pnoa-ma",
            "layers": ["OI.OrthoimageCoverage"],
            "abstract": "",
            "source": "catálogo IDEE",
            "category": CATEGORIES[0].label,
        }
    ]
