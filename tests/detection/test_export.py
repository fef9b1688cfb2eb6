"""GeoDataFrame, GeoJSON and GeoPackage output of a detection run."""

from __future__ import annotations

import geopandas as gpd
import pytest

from idee_notebook_agent.detection.pipeline import detect_objects
from tests.fakes.wms_server import NATIVE_CRS


@pytest.fixture(scope="module")
def run(fake_wms, tmp_path_factory):
    from idee_notebook_agent.config import Settings

    settings = Settings(
        IDEE_ALLOW_HOSTS="127.0.0.1", IDEE_MODELS_DIR=str(tmp_path_factory.mktemp("models"))
    )
    return detect_objects(
        "pools",
        (420000.0, 4479795.2, 420409.6, 4480000.0),
        NATIVE_CRS,
        wms_url=fake_wms.url,
        settings=settings,
        progress=False,
    )


def test_geodataframe_has_the_detection_columns_in_wgs84(run):
    gdf = run.gdf
    assert gdf.crs.to_epsg() == 4326 and len(gdf) == run.count >= 3
    assert {"detector", "class", "score", "method", "source", "run_id", "time"} <= set(gdf.columns)
    assert (gdf.geometry.geom_type == "Polygon").all() and gdf.is_valid.all()
    assert list(gdf.index) == [f["id"] for f in run.features]
    assert gdf["score"].is_monotonic_decreasing


def test_geojson_and_geopackage_round_trip(run, tmp_path):
    for path, kwargs in (
        (run.to_geojson(tmp_path / "piscinas.geojson"), {}),
        (run.to_gpkg(tmp_path / "piscinas.gpkg", layer="piscinas"), {"layer": "piscinas"}),
    ):
        back = gpd.read_file(path, **kwargs)
        assert back.crs.to_epsg() == 4326 and len(back) == run.count
        assert sorted(back["score"]) == sorted(run.gdf["score"])
        assert back.geometry.union_all().equals_exact(run.gdf.geometry.union_all(), 1e-9)


def test_an_empty_run_still_gives_a_typed_frame(run, tmp_path):
    from dataclasses import replace

    empty = replace(run, features=[], _gdf=None)
    assert len(empty.gdf) == 0 and "score" in empty.gdf.columns
    assert empty.gdf.crs.to_epsg() == 4326
    back = gpd.read_file(empty.to_gpkg(tmp_path / "vacio.gpkg"))
    assert len(back) == 0
