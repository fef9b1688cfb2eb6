"""Detections: layer events from detectObjects become map layers and a GeoDataFrame."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import geopandas as gpd
import ipyleaflet
import pytest

from idee_notebook_agent.notebook.detections import DetectionStore
from idee_notebook_agent.notebook.mapchat import MapChat
from idee_notebook_agent.toolbox.registry import ToolContext


def pools(run_id: str, boxes: list[tuple[float, float, float]]) -> dict[str, Any]:
    """A synthetic detection FeatureCollection (EPSG:4326), as the detection issue specifies."""
    features = []
    for index, (lon, lat, score) in enumerate(boxes):
        d = 0.0001
        features.append(
            {
                "type": "Feature",
                "id": f"{run_id}-{index}",
                "geometry": {
                    "type": "Polygon",
                    "coordinates": [
                        [[lon, lat], [lon + d, lat], [lon + d, lat + d], [lon, lat + d], [lon, lat]]
                    ],  # fmt: skip
                },
                "properties": {
                    "detector": "pools",
                    "class": "pool",
                    "score": score,
                    "method": "opencv",
                    "source": {
                        "url": "https://www.ign.es/wms-inspire/pnoa-ma?",
                        "layer": "OI.OrthoimageCoverage",
                    },  # fmt: skip
                    "run_id": run_id,
                    "time": datetime(2026, 5, 1, 10, 0, tzinfo=timezone.utc).isoformat(),
                },
            }
        )
    return {"type": "FeatureCollection", "features": features}


def layer(run_id: str, boxes: list[tuple[float, float, float]]) -> dict[str, Any]:
    return {
        "type": "geojson",
        "name": "Piscinas detectadas",
        "source": pools(run_id, boxes),
        "detection": True,
        "run_id": run_id,
    }


def test_store_keeps_every_run_as_a_geodataframe() -> None:
    store = DetectionStore()
    assert store.add_layer(layer("run-1", [(-3.70, 40.41, 0.91), (-3.71, 40.42, 0.55)])) == 2
    assert store.add_layer(layer("run-2", [(-0.37, 39.47, 0.8)])) == 1
    assert store.add_layer({"type": "geojson", "name": "Municipio", "source": pools("x", [])}) == 0
    gdf = store.to_geodataframe()
    assert isinstance(gdf, gpd.GeoDataFrame)
    assert gdf.crs.to_epsg() == 4326
    for column in ("detector", "class", "score", "geometry", "run_id", "time"):
        assert column in gdf.columns
    assert list(gdf["run_id"]) == ["run-1", "run-1", "run-2"]
    assert list(gdf["score"]) == [0.91, 0.55, 0.8]
    assert set(gdf["detector"]) == {"pools"} and set(gdf["class"]) == {"pool"}
    assert str(gdf["time"].dtype).startswith("datetime64") and gdf["time"].dt.tz is not None
    assert gdf.geometry.iloc[0].bounds[0] == pytest.approx(-3.70)
    assert "OI.OrthoimageCoverage" in gdf["source"].iloc[0]
    assert len(store) == 3 and [r.run_id for r in store.runs] == ["run-1", "run-2"]


def test_empty_store_has_the_columns() -> None:
    gdf = DetectionStore().to_geodataframe()
    assert len(gdf) == 0 and gdf.crs.to_epsg() == 4326
    assert {"detector", "class", "score", "run_id", "time"} <= set(gdf.columns)


def test_bad_features_are_skipped_and_missing_run_ids_filled() -> None:
    store = DetectionStore()
    data = pools("", [(-3.7, 40.4, 0.9)])
    data["features"][0]["properties"].pop("run_id")
    data["features"].append({"type": "Feature", "geometry": None, "properties": {}})
    data["features"].append(
        {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": "x"}, "properties": {}}
    )
    store.add_layer({"type": "geojson", "name": "d", "source": data, "detection": True, "run_id": "r9"})  # fmt: skip
    store.add_layer({"type": "geojson", "name": "roto", "source": "{no json", "detection": True})
    gdf = store.to_geodataframe()
    assert list(gdf["run_id"]) == ["r9"]


@pytest.mark.parametrize(("driver", "suffix"), [("GeoJSON", ".geojson"), ("GPKG", ".gpkg")])
def test_detections_export_with_to_file(tmp_path: Path, driver: str, suffix: str) -> None:
    store = DetectionStore()
    store.add_layer(layer("run-1", [(-3.70, 40.41, 0.91), (-3.71, 40.42, 0.55)]))
    path = tmp_path / f"piscinas{suffix}"
    store.to_geodataframe().to_file(path, driver=driver)
    back = gpd.read_file(path)
    assert len(back) == 2 and back.crs.to_epsg() == 4326
    assert sorted(back["score"]) == [0.55, 0.91]


def test_detect_objects_layer_events_reach_the_map_and_chat_detections(make_agent, closing) -> None:
    runs = iter(["run-a", "run-b"])

    def detect(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        run_id = next(runs)
        data = pools(run_id, [(-3.70, 40.41, 0.9), (-3.69, 40.41, 0.7)])
        ctx.emit_layer(
            {
                "type": "geojson",
                "name": "Piscinas detectadas",
                "source": data,
                "detection": True,
                "run_id": run_id,
            }  # fmt: skip
        )
        return {"success": True, "detector": "pools", "count": 2, "run_id": run_id}

    call = {
        "name": "detectObjects",
        "args": {
            "detector": "pools",
            "bbox": {"minX": -3.71, "minY": 40.4, "maxX": -3.68, "maxY": 40.42},
        },  # fmt: skip
    }
    agent, _ = make_agent(
        [[call], ["Encontré 2 piscinas."], [call], ["Otras 2."]],
        executors={"detectObjects": detect},
    )
    mc = closing(MapChat(agent=agent, provider="scripted"))
    assert mc.ask("detecta piscinas", timeout=10).answer == "Encontré 2 piscinas."
    assert mc.ask("otra vez", timeout=10).answer == "Otras 2."

    gdf = mc.detections
    assert len(gdf) == 4 and sorted(set(gdf["run_id"])) == ["run-a", "run-b"]
    geojson = [la for la in mc.map.layers if isinstance(la, ipyleaflet.GeoJSON)]
    assert len(geojson) == 1 and geojson[0].name == "Piscinas detectadas"  # replaced, not stacked
    notices = [i["text"] for i in mc.chat.messages if i["kind"] == "notice"]
    assert notices and "chat.detections" in notices[-1]
    layer_msgs = mc.chat.comm.custom()
    summary = [m for m in layer_msgs if m.get("type") == "layer"][-1]["layer"]
    assert summary["detection"] is True and "source" not in summary  # big data stays in the kernel


def test_a_real_detect_objects_run_lands_in_chat_detections(make_agent, closing, tmp_path) -> None:
    """The detection capability's own tool, over its fake WMS: the same path as in production."""
    pools_dir = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "pools"
    if not (pools_dir / "manifest.json").exists():
        pytest.skip("shared pool imagery missing (CI lays ../shared beside the repo)")
    wms = pytest.importorskip("tests.fakes.wms_server")
    pytest.importorskip("idee_notebook_agent.detection.tools")
    from pyproj import Transformer

    from idee_notebook_agent.config import Settings
    from idee_notebook_agent.detection.base import clear_instances

    clear_instances()
    with wms.start_wms_server(pools_dir, resolution=0.4) as fake:
        t = Transformer.from_crs(wms.NATIVE_CRS, "EPSG:4326", always_xy=True)
        w, s, e, n = t.transform_bounds(420000.0, 4479795.2, 420409.6, 4480000.0)
        call = {
            "name": "detectObjects",
            "args": {
                "detector": "pools",
                "bbox": {"minX": w, "minY": s, "maxX": e, "maxY": n},
                "wms_url": fake.url,
            },
        }
        agent, _ = make_agent([[call], ["Listo."]])
        agent.settings = Settings(
            _env_file=None,
            IDEE_ALLOW_HOSTS="127.0.0.1",
            IDEE_MODELS_DIR=str(tmp_path / "models"),
            IDEE_CACHE_DIR=str(tmp_path / "cache"),
            IDEE_DATA_DIR=str(tmp_path / "data"),
        )
        mc = closing(MapChat(agent=agent, provider="scripted"))
        turn = mc.ask("detecta las piscinas de la vista", timeout=120)
    assert turn.answer == "Listo.", turn.errors
    result = json.loads(mc.chat.messages[1]["calls"][0]["result"])
    assert result["success"] is True and result["count"] >= 1
    gdf = mc.detections
    assert len(gdf) == result["count"] and set(gdf["run_id"]) == {result["run_id"]}
    assert set(gdf["detector"]) == {"pools"} and gdf.crs.to_epsg() == 4326
    assert gdf["time"].notna().all()
    layer = mc.map.layers[-1]
    assert isinstance(layer, ipyleaflet.GeoJSON) and layer.name == "Piscinas detectadas"
