"""Every detection run the chat has seen, as a GeoPandas GeoDataFrame (EPSG:4326).

Detections reach the notebook as ``layer`` events whose layer carries ``"detection": true`` and
a FeatureCollection in ``source`` (each feature's properties: detector, class, score, method,
source, run_id, time). Keeping them here lets users analyse or export them with ``to_file``.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

log = logging.getLogger(__name__)

COLUMNS = (
    "detector",
    "class",
    "score",
    "method",
    "source",
    "run_id",
    "time",
    "layer_name",
    "geometry",
)


@dataclass
class DetectionRun:
    """One ``detectObjects`` result: its layer name, run id and features (GeoJSON dicts)."""

    run_id: str
    layer_name: str
    features: list[dict[str, Any]] = field(default_factory=list)
    received_at: str = field(
        default_factory=lambda: datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    )


def is_detection_layer(layer: Any) -> bool:
    return isinstance(layer, dict) and bool(layer.get("detection"))


class DetectionStore:
    """Collects detection layers (thread-safe: the agent's thread adds, the user's cell reads)."""

    def __init__(self) -> None:
        self._runs: list[DetectionRun] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(r.features) for r in self._runs)

    @property
    def runs(self) -> list[DetectionRun]:
        with self._lock:
            return list(self._runs)

    def add_layer(self, layer: dict[str, Any]) -> int:
        """Keep the features of a detection layer; returns how many were added (0 if not one)."""
        if not is_detection_layer(layer):
            return 0
        features = _features(layer.get("source") or layer.get("data"))
        run_id = str(
            layer.get("run_id")
            or next((f.get("properties", {}).get("run_id") for f in features), None)
            or f"run-{len(self._runs) + 1}"
        )
        run = DetectionRun(run_id, str(layer.get("name") or "detecciones"), features)
        with self._lock:
            self._runs.append(run)
        return len(features)

    def clear(self) -> None:
        with self._lock:
            self._runs.clear()

    def to_geodataframe(self) -> Any:
        """All runs in one GeoDataFrame (EPSG:4326); empty, with the columns, when none."""
        try:
            import geopandas as gpd
            import pandas as pd
            from shapely.geometry import shape
        except ImportError as exc:  # pragma: no cover - geopandas is in the [ml] extra
            from ..errors import MissingExtraError

            raise MissingExtraError("geopandas", "ml") from exc

        rows: list[dict[str, Any]] = []
        geometries: list[Any] = []
        for run in self.runs:
            for feature in run.features:
                geometry = feature.get("geometry")
                if not geometry:
                    continue
                try:
                    geom = shape(geometry)
                except Exception:
                    log.warning("Geometría de detección no válida en %s; se omite", run.run_id)
                    continue
                props = feature.get("properties") or {}
                rows.append(
                    {
                        "detector": props.get("detector"),
                        "class": props.get("class"),
                        "score": _float(props.get("score")),
                        "method": props.get("method"),
                        "source": _scalar(props.get("source")),
                        "run_id": str(props.get("run_id") or run.run_id),
                        "time": props.get("time") or run.received_at,
                        "layer_name": run.layer_name,
                    }
                )
                geometries.append(geom)
        frame = pd.DataFrame(rows, columns=[c for c in COLUMNS if c != "geometry"])
        frame["score"] = pd.to_numeric(frame["score"], errors="coerce").astype("float64")
        frame["time"] = pd.to_datetime(frame["time"], utc=True, errors="coerce", format="ISO8601")
        for column in ("detector", "class", "method", "source", "run_id", "layer_name"):
            frame[column] = frame[column].astype("object")
        return gpd.GeoDataFrame(frame, geometry=gpd.GeoSeries(geometries, crs="EPSG:4326"))


def _features(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError:
            return []
    if not isinstance(data, dict):
        return []
    if data.get("type") == "FeatureCollection":
        return [f for f in data.get("features") or [] if isinstance(f, dict)]
    if data.get("type") == "Feature":
        return [data]
    return []


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _scalar(value: Any) -> Any:
    """Nested values (the imagery source: WMS url + layer) as JSON text, so ``to_file`` works."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return value
