"""The offline gazetteer: counts, tolerant name matching, codes and nearest municipality."""

from __future__ import annotations

import pytest

from idee_notebook_agent.services.gazetteer import CCAA, MUNICIPIO, PROVINCIA, get_gazetteer


@pytest.fixture(scope="module")
def gaz():
    return get_gazetteer()


def test_every_municipality_province_and_community_is_there(gaz):
    kinds = [p.kind for p in gaz.places]
    assert kinds.count(MUNICIPIO) == 8132
    assert kinds.count(PROVINCIA) == 52
    assert kinds.count(CCAA) == 19


@pytest.mark.parametrize(
    ("query", "kind", "code"),
    [
        ("Madrid", MUNICIPIO, "28079"),
        ("madrid", PROVINCIA, "28"),
        ("MADRID", None, "28079"),
        ("A Coruña", MUNICIPIO, "15030"),
        ("La Coruña", MUNICIPIO, "15030"),
        ("Coruña, A", MUNICIPIO, "15030"),
        ("coruna", PROVINCIA, "15"),
        ("Alicante", MUNICIPIO, "03014"),
        ("Alacant", PROVINCIA, "03"),
        ("Lérida", MUNICIPIO, "25120"),
        ("Gerona", PROVINCIA, "17"),
        ("Valencia", MUNICIPIO, "46250"),
        ("San Sebastián", MUNICIPIO, "20069"),
        ("Donostia", MUNICIPIO, "20069"),
        ("Toldo", MUNICIPIO, "45168"),
        ("municipio de Toledo", None, "45168"),
        ("Vizcaya", PROVINCIA, "48"),
        ("l'Alfàs del Pi", MUNICIPIO, "03011"),
        ("Alfàs del Pi", MUNICIPIO, "03011"),
        ("Comunidad de Madrid", CCAA, "13"),
        ("Cataluña", CCAA, "09"),
        ("Euskadi", CCAA, "16"),
    ],
)
def test_names_match_with_accents_case_articles_and_exonyms(gaz, query, kind, code):
    places = gaz.lookup(query, kind)
    assert places, query
    assert places[0].code == code


def test_a_bare_city_name_prefers_the_municipality_then_the_province(gaz):
    kinds = [p.kind for p in gaz.lookup("Madrid")]
    assert kinds[:3] == [MUNICIPIO, PROVINCIA, CCAA]


def test_a_partial_name_lists_the_biggest_places_first(gaz):
    places = gaz.lookup("Villanueva", MUNICIPIO, limit=5)
    assert len(places) == 5
    assert all(p.name.startswith("Villanueva") for p in places)
    populations = [p.population for p in places]
    assert populations == sorted(populations, reverse=True)


def test_unknown_name_finds_nothing(gaz):
    assert gaz.lookup("Ciudad Inventada de Nada") == []


def test_candidate_shape_and_bbox_contain_the_point(gaz):
    cand = gaz.by_code("28079", MUNICIPIO).candidate()
    for key in ("id", "type", "name", "address", "lat", "lon", "muni", "province", "bbox"):
        assert key in cand
    min_lon, min_lat, max_lon, max_lat = cand["bbox"]
    assert min_lon < cand["lon"] < max_lon and min_lat < cand["lat"] < max_lat
    assert cand["bbox_approx"] is True
    province = gaz.by_code("45", PROVINCIA).candidate()
    assert province["bbox"][0] < -4.0 < province["bbox"][2]


def test_nearest_municipality(gaz):
    place, km = gaz.nearest_municipality(39.4724, -0.3446)
    assert place.code == "46250"
    assert km < 5
