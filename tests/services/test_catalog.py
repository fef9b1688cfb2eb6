"""The layer catalog: data integrity, lookups over many phrasings, addLayer completion."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from idee_notebook_agent.errors import ToolError
from idee_notebook_agent.services import catalog
from idee_notebook_agent.services.catalog import complete_add_layer, get_catalog, guess_type

# (phrase a user or a model may write, catalog id it must resolve to)
PHRASINGS = [
    ("mapa base gris", "IGNBaseGris"),
    ("IGN base gris", "IGNBaseGris"),
    ("Mapa Base de España – IGNBaseGris", "IGNBaseGris"),
    ("mapa base de españa - ignbasegris", "IGNBaseGris"),
    ("IGNBaseGris", "IGNBaseGris"),
    ("IGNBase-gris", "IGNBaseGris"),
    ("gris ign base", "IGNBaseGris"),
    ("grey basemap", "IGNBaseGris"),
    ("mapa base", "IGNBaseTodo"),
    ("IGNBaseTodo", "IGNBaseTodo"),
    ("Mapa Base de España - IGNBaseTodo", "IGNBaseTodo"),
    ("callejero", "IGNBaseTodo"),
    ("mapa base tms", "IGNBaseTodo_TMS"),
    ("IGNBaseTodo_TMS", "IGNBaseTodo_TMS"),
    ("mapa simplificado", "IGNBaseSimplificado"),
    ("IGN base orto", "IGNBaseOrto"),
    ("híbrido", "IGNBaseOrto"),
    ("ortofoto", "PNOA"),
    ("ortofotos", "PNOA"),
    ("pnoa", "PNOA"),
    ("la ortofoto del PNOA", "PNOA"),
    ("Ortofotos máxima actualidad PNOA", "PNOA"),
    ("foto aérea", "PNOA"),
    ("orthophoto", "PNOA"),
    ("ortofto", "PNOA"),
    ("OI.OrthoimageCoverage", "PNOA"),
    ("pnoa wms", "PNOA_WMS"),
    ("pnoa histórico", "PNOA_historico"),
    ("ortofotos antiguas", "PNOA_historico"),
    ("ortofotos provisionales", "PNOA_provisionales"),
    ("vista satélite", "PNOA"),
    ("sentinel", "Satelites_historicos"),
    ("pnoa orthophoto", "PNOA"),
    ("mapas antiguos", "PrimeraEdicionMTN"),
    ("fototeca", "Fototeca"),
    ("catastro", "Catastro"),
    ("CATASTRO", "Catastro"),
    ("catatsro", "Catastro"),
    ("add the cadastre layer", "Catastro"),
    ("parcelas catastrales", "Catastro"),
    ("unidades administrativas", "UnidadesAdministrativas"),
    ("municipios", "UnidadesAdministrativas"),
    ("unidades administrativas mvt", "UnidadesAdministrativas_MVT"),
    ("límites municipales", "LimitesAdministrativos"),
    ("límites administrativos", "LimitesAdministrativos"),
    ("administrative boundaries", "LimitesAdministrativos"),
    ("relieve", "RelieveSombreado"),
    ("sombreado", "RelieveSombreado"),
    ("hillshade", "RelieveSombreado"),
    ("hidrografía", "Hidrografia"),
    ("ríos", "Hidrografia"),
    ("rivers", "Hidrografia"),
    ("carreteras", "Transportes"),
    ("roads", "Transportes"),
    ("ferrocarril", "Transportes_Ferrocarril"),
    ("railways", "Transportes_Ferrocarril"),
    ("curvas de nivel", "CurvasNivel"),
    ("MDT", "MDT_ElevationGridCoverage"),
    ("modelo digital del terreno", "MDT_ElevationGridCoverage"),
    ("lidar", "MDS_LiDAR"),
    ("ocupación del suelo", "OcupacionSuelo"),
    ("usos del suelo", "OcupacionSuelo"),
    ("land cover", "OcupacionSuelo"),
    ("mapa topográfico", "MTN"),
    ("MTN", "MTN"),
    ("mapas históricos", "PrimeraEdicionMTN"),
    ("planos de madrid", "PlanosMadrid"),
    ("nombres geográficos", "NGBE"),
    ("terremotos", "Geofisica_Ultimos10dias"),
    ("volcanes", "Volcanologia"),
    ("redes geodésicas", "RedesGeodesicas"),
    ("camino de santiago", "CaminoSantiago"),
    ("cuadrículas", "Cuadriculas"),
    ("BTN", "BTN_Completa"),
    ("copernicus", "Copernicus_HRLForestTCD2015"),
]


def test_catalog_data_is_complete_and_cited():
    data = json.loads(
        resources.files("idee_notebook_agent.services").joinpath("data/catalog.json").read_text()
    )
    layers = data["layers"]
    assert len(layers) >= 40
    ids = [e["id"] for e in layers]
    assert len(ids) == len(set(ids))
    categories = {e["category"] for e in layers}
    for wanted in ("base_map", "orthophoto", "orthophoto_historical", "administrative"):
        assert wanted in categories
    for wanted in ("cadastre", "hydrography", "transport", "hillshade", "land_cover"):
        assert wanted in categories
    groups: dict[str, int] = {}
    for entry in layers:
        assert entry["type"] in catalog.LAYER_TYPES, entry["id"]
        assert entry["url"].startswith("https://"), entry["id"]
        assert entry["sources"], f"{entry['id']} has no source"
        assert entry["title_es"] and entry["title_en"]
        assert entry["attribution"]
        if entry["type"] == "WMTS":
            assert entry["matrix_set"] and entry["format"]
        groups[entry["group"]] = groups.get(entry["group"], 0) + int(entry["preferred"])
    assert all(count == 1 for count in groups.values()), groups


@pytest.mark.parametrize(("phrase", "expected"), PHRASINGS)
def test_phrasings_resolve_to_the_intended_layer(phrase, expected):
    assert len(PHRASINGS) >= 40
    assert catalog.resolve(phrase).id == expected
    top, score = catalog.search(phrase, 3)[0]
    assert top.id == expected
    assert score >= catalog.MIN_SCORE


def test_ignbasegris_definition_is_the_agreed_one():
    layer = complete_add_layer({"name": "IGNBaseGris"})
    assert layer["type"] == "WMTS"
    assert layer["url"] == "https://www.ign.es/wmts/ign-base?"
    assert layer["name"] == "IGNBase-gris"
    assert layer["legend"] == "Mapa Base de España – IGNBaseGris"
    assert layer["format"] == "image/jpeg"
    assert layer["matrixSet"] == "GoogleMapsCompatible"
    assert layer["catalog_id"] == "IGNBaseGris"
    assert "scne.es" in layer["attribution"]


def test_catalog_wms_definition_carries_version_and_transparency():
    layer = complete_add_layer({"name": "catastro", "fit": True})
    assert layer["type"] == "WMS"
    assert layer["name"] == "Catastro"
    assert layer["version"] == "1.1.1"
    assert layer["transparent"] is True
    assert layer["fit"] is True
    assert "Catastro" in layer["attribution"]


def test_preferred_type_picks_the_twin_of_the_same_product():
    assert catalog.resolve("PNOA", prefer_type="WMS").id == "PNOA_WMS"
    assert catalog.resolve("PNOA", prefer_type="TMS").id == "PNOA_MA_TMS"
    layer = complete_add_layer({"name": "ortofoto", "type": "WMS"})
    assert (layer["type"], layer["name"]) == ("WMS", "OI.OrthoimageCoverage")


def test_ambiguous_phrase_returns_candidates_to_ask_the_user():
    with pytest.raises(ToolError) as info:
        complete_add_layer({"name": "mapa de España"})
    assert "¿Cuál quieres?" in str(info.value)
    candidates = info.value.data["candidates"]
    assert info.value.data["reason"] == "ambiguous"
    assert len(candidates) >= 2
    assert {"id", "title", "type"} <= set(candidates[0])


def test_unknown_name_without_url_gives_suggestions():
    with pytest.raises(ToolError) as info:
        complete_add_layer({"name": "capa inventada de unicornios"})
    assert "No encuentro la capa" in str(info.value)
    assert info.value.data["reason"] == "not_found"
    assert isinstance(info.value.data["candidates"], list)


def test_explicit_definition_is_kept_and_type_guessed():
    args = {"url": "https://example.org/wms?", "name": "capa1"}
    assert complete_add_layer(dict(args))["type"] == "WMS"
    assert complete_add_layer({"url": "https://x.org/data.geojson"})["type"] == "GeoJSON"
    tms = complete_add_layer({"url": "https://t.org/1.0.0/a/{z}/{x}/{-y}.png", "name": "a"})
    assert tms["type"] == "TMS"
    wmts = complete_add_layer({"type": "WMTS", "url": "https://e.org/wmts?", "name": "l"})
    assert wmts["matrixSet"] == "GoogleMapsCompatible"
    data = complete_add_layer({"data": '{"type": "Point", "coordinates": [0, 0]}'})
    assert data["type"] == "GeoJSON"


def test_catalog_title_used_as_service_layer_name_is_corrected():
    fixed = complete_add_layer(
        {"type": "WMTS", "url": "https://www.ign.es/wmts/ign-base?", "name": "IGNBaseGris"}
    )
    assert fixed["name"] == "IGNBase-gris"
    assert fixed["matrixSet"] == "GoogleMapsCompatible"


def test_geojson_without_url_or_data_is_refused():
    with pytest.raises(ToolError, match="url"):
        complete_add_layer({"type": "GeoJSON", "name": "mis datos"})


def test_entry_without_known_layer_name_points_to_capabilities():
    with pytest.raises(ToolError) as info:
        complete_add_layer({"name": "DireccionesCodigosPostales"})
    assert "searchIdeeService" in str(info.value)
    assert info.value.data["url"].startswith("https://www.cartociudad.es/")


def test_empty_request_asks_for_a_name():
    with pytest.raises(ToolError, match="Falta la capa"):
        complete_add_layer({})


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("https://www.ign.es/wmts/pnoa-ma?", "WMTS"),
        ("https://www.ign.es/wms-inspire/pnoa-ma?", "WMS"),
        ("https://vt.ign.es/1.0.0/u/{z}/{x}/{y}.pbf", "MVT"),
        ("https://tile.example.org/{z}/{x}/{y}.png", "XYZ"),
        ("https://api-features.ign.es/collections/namedplace/items", "OGCAPIFeatures"),
        ("https://example.org/file.kml", "KML"),
    ],
)
def test_guess_type(url, kind):
    assert guess_type(url) == kind


def test_search_returns_scored_entries_best_first():
    results = catalog.search("ortofoto", limit=4)
    scores = [s for _, s in results]
    assert scores == sorted(scores, reverse=True)
    assert len(results) <= 4
    assert len({e.group for e, _ in results}) == len(results)
    assert get_catalog().get("pnoa").id == "PNOA"
