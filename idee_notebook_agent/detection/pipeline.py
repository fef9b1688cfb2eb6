"""Extent → WMS tiles at the detector's resolution → detections → merged GeoJSON / GeoDataFrame.

``detect_objects`` is the one entry point: the ``detectObjects`` tool calls it in a worker thread,
and notebook users call it directly and get a :class:`DetectionRun` with ``.gdf``.
Limits are checked before any image is fetched, so a too-large area costs nothing.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings, get_settings
from ..errors import IdeeAgentError, ServiceError, ToolError
from . import geo
from .base import Detection, Detector, get_detector
from .tiling import Raster, Tile, count_tiles, plan_tiles, raster_for

if TYPE_CHECKING:
    import numpy as np

    from .wms import TileSource

log = logging.getLogger(__name__)

MERGE_IOMIN = 0.5
"""Boxes from different tiles whose intersection covers half of the smaller one are one object."""
FETCH_WORKERS = 4
RECENT_RUNS = 16


@dataclass
class MapBox:
    """A detection in the work CRS."""

    bounds: tuple[float, float, float, float]
    score: float
    class_name: str
    method: str
    tile: int


@dataclass
class DetectionRun:
    """One detection request: its parameters, the detections and how to export them."""

    detector: str
    method: str
    run_id: str
    time: str
    bbox: dict[str, float]
    srs: str
    work_crs: str
    resolution_m: float
    tiles: int
    failed_tiles: int
    source: str
    layer_name: str
    features: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    _gdf: Any = field(default=None, repr=False)

    @property
    def count(self) -> int:
        return len(self.features)

    def feature_collection(self) -> dict[str, Any]:
        """GeoJSON FeatureCollection in EPSG:4326 (RFC 7946)."""
        return geo.feature_collection(self.features)

    @property
    def gdf(self):
        """The detections as a GeoDataFrame (EPSG:4326), built once."""
        if self._gdf is None:
            self._gdf = geo.to_geodataframe(self.feature_collection())
        return self._gdf

    def to_geodataframe(self):
        return self.gdf.copy()

    def to_geojson(self, path: str | Path) -> Path:
        return geo.write_geojson(self.gdf, path)

    def to_gpkg(self, path: str | Path, layer: str | None = None) -> Path:
        return geo.write_geopackage(self.gdf, path, layer or f"{self.detector}_{self.run_id}")

    def layer(self) -> dict[str, Any]:
        """The ``layer`` event payload the map front ends draw."""
        return {
            "type": "geojson",
            "name": self.layer_name,
            "source": self.feature_collection(),
            "detection": True,
            "run_id": self.run_id,
        }

    def summary(self) -> dict[str, Any]:
        """The ``detectObjects`` tool result (the features travel in the layer event)."""
        result: dict[str, Any] = {
            "success": True,
            "detector": self.detector,
            "method": self.method,
            "count": self.count,
            "bbox": self.bbox,
            "srs": self.srs,
            "tiles": self.tiles,
            "layer_name": self.layer_name,
            "run_id": self.run_id,
            "resolution_m": round(self.resolution_m, 3),
        }
        if self.warnings:
            result["warnings"] = list(self.warnings)
        return result

    def _repr_html_(self) -> str:  # a readable cell output in notebooks
        return (
            f"<b>{self.layer_name}</b>: {self.count} detecciones · método {self.method} · "
            f"{self.tiles} teselas a {self.resolution_m:.2f} m/px · run {self.run_id}"
        )


# ---------------------------------------------------------------------------- recent runs
_RUNS: OrderedDict[str, DetectionRun] = OrderedDict()
_RUNS_LOCK = threading.Lock()


def _remember(run: DetectionRun) -> None:
    with _RUNS_LOCK:
        _RUNS[run.run_id] = run
        while len(_RUNS) > RECENT_RUNS:
            _RUNS.popitem(last=False)


def get_run(run_id: str) -> DetectionRun | None:
    """A recent run by id (the tool result carries ``run_id``), e.g. to get its GeoDataFrame."""
    with _RUNS_LOCK:
        return _RUNS.get(run_id)


def last_run() -> DetectionRun | None:
    """The most recent run in this process (what the chat just drew)."""
    with _RUNS_LOCK:
        return next(reversed(_RUNS.values()), None)


# ---------------------------------------------------------------------------- helpers
def _show_progress(progress: bool | None) -> bool:
    if progress is not None:
        return progress
    return "ipykernel" in sys.modules or bool(getattr(sys.stderr, "isatty", lambda: False)())


def _pixel_sizes(
    work_bounds: geo.Bounds,
    upm: tuple[float, float],
    detector: Detector,
    image_width: int | None,
    image_height: int | None,
) -> tuple[float, float, float]:
    """(res_x, res_y) in work-CRS units per pixel and the ground resolution in m/px."""
    minx, miny, maxx, maxy = work_bounds
    if image_width or image_height:
        ground_w, ground_h = (maxx - minx) / upm[0], (maxy - miny) / upm[1]
        res_m = ground_w / image_width if image_width else ground_h / image_height  # type: ignore[operator]
        if image_width and image_height:
            return (maxx - minx) / image_width, (maxy - miny) / image_height, res_m
        return res_m * upm[0], res_m * upm[1], res_m
    res_m = detector.resolution_m
    return res_m * upm[0], res_m * upm[1], res_m


def _too_large(n: int, limit: int, raster: Raster, res_m: float, detector: Detector) -> ToolError:
    w_km = raster.width * res_m / 1000
    h_km = raster.height * res_m / 1000
    step_km = (detector.tile_size - detector.tile_overlap) * res_m / 1000
    max_km2 = limit * step_km * step_km
    return ToolError(
        f"El área pedida ({w_km:.2f} × {h_km:.2f} km a {res_m:.2f} m/px) necesita {n} teselas y "
        f"el máximo por petición es {limit} (unos {max_km2:.2f} km²). Acerca el zoom o elige un "
        "área más pequeña. (Area too large: zoom in.)",
        data={
            "tiles": n,
            "max_tiles": limit,
            "area_km2": round(w_km * h_km, 3),
            "max_area_km2": round(max_km2, 3),
        },
    )


def _check_coverage(source: TileSource, bounds: geo.Bounds, srs: str) -> None:
    """Refuse an area the imagery layer does not cover (e.g. France on PNOA) before fetching."""
    coverage = getattr(source, "coverage_lonlat", lambda: None)()
    if not coverage:
        return
    w, s, e, n = geo.transform_bounds(bounds, srs, geo.WGS84)
    cw, cs, ce, cn = coverage
    if w > ce or e < cw or s > cn or n < cs:
        raise ToolError(
            f"El área pedida ({w:.4f}, {s:.4f}, {e:.4f}, {n:.4f}) está fuera de la cobertura de la "
            f"capa de imagen ({cw:.2f}, {cs:.2f}, {ce:.2f}, {cn:.2f}, lon/lat). Comprueba el bbox "
            "y su srs. (Area outside the imagery coverage.)"
        )


def merge_boxes(boxes: list[MapBox], threshold: float = MERGE_IOMIN) -> list[MapBox]:
    """Join detections of one object seen by neighbouring tiles (same class, different tiles).

    Overlap is measured as intersection over the smaller box, so an object cut by one tile's
    edge and seen whole by the next is joined; the result is the union box with the best score.
    """
    import numpy as np

    if len(boxes) < 2:
        return list(boxes)
    b = np.array([m.bounds for m in boxes], dtype=float)
    tiles = np.array([m.tile for m in boxes])
    classes = np.array([m.class_name for m in boxes])
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    ix = np.clip(
        np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0]), 0, None
    )
    iy = np.clip(
        np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1]), 0, None
    )
    iomin = ix * iy / np.maximum(np.minimum(area[:, None], area[None, :]), 1e-12)
    link = (
        (iomin >= threshold)
        & (tiles[:, None] != tiles[None, :])
        & (classes[:, None] == classes[None, :])
    )
    parent = list(range(len(boxes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(*np.nonzero(np.triu(link, 1)), strict=True):
        ri, rj = find(int(i)), find(int(j))
        if ri != rj:
            parent[rj] = ri
    groups: dict[int, list[int]] = {}
    for i in range(len(boxes)):
        groups.setdefault(find(i), []).append(i)
    merged = []
    for members in groups.values():
        best = max(members, key=lambda k: boxes[k].score)
        sub = b[members]
        merged.append(
            MapBox(
                (sub[:, 0].min(), sub[:, 1].min(), sub[:, 2].max(), sub[:, 3].max()),
                boxes[best].score,
                boxes[best].class_name,
                boxes[best].method,
                boxes[best].tile,
            )
        )
    merged.sort(key=lambda m: -m.score)
    return merged


def _inside(boxes: list[MapBox], bounds: geo.Bounds, srs: str, work: str) -> list[MapBox]:
    """Boxes whose centre lies in the requested bbox (the work-CRS envelope can be larger)."""
    if not boxes or srs == work:
        return boxes
    cx = [(m.bounds[0] + m.bounds[2]) / 2 for m in boxes]
    cy = [(m.bounds[1] + m.bounds[3]) / 2 for m in boxes]
    xs, ys = geo.transformer(work, srs).transform(cx, cy)
    minx, miny, maxx, maxy = bounds
    return [
        m for m, x, y in zip(boxes, xs, ys, strict=True) if minx <= x <= maxx and miny <= y <= maxy
    ]


def detections_to_map(tile: Tile, detections: Iterable[Detection]) -> list[MapBox]:
    """Pixel boxes of one tile as boxes in the work CRS (the tile's affine transform)."""
    return [
        MapBox(
            tile.box_to_map(d.x1, d.y1, d.x2, d.y2),
            d.score,
            d.class_name,
            d.method,
            tile.index,
        )
        for d in detections
    ]


# ---------------------------------------------------------------------------- the pipeline
def detect_objects(
    detector: str | Detector = "pools",
    bbox: Mapping[str, float] | Iterable[float] | None = None,
    srs: str = geo.WGS84,
    *,
    wms_url: str | None = None,
    wms_layer: str | None = None,
    image_width: int | None = None,
    image_height: int | None = None,
    min_score: float | None = None,
    settings: Settings | None = None,
    source: TileSource | None = None,
    progress: bool | None = None,
    max_tiles: int | None = None,
    fetch_workers: int = FETCH_WORKERS,
    cancel: threading.Event | None = None,
) -> DetectionRun:
    """Detect objects in the imagery of ``bbox`` (in ``srs``) and return them georeferenced.

    ``image_width``/``image_height`` set the pixel size of the whole bbox (otherwise the
    detector's resolution is used); the area is always fetched in tiles. Raises ``ToolError``
    with a message to show the user when the request cannot run (too large, bad bbox, WMS down).
    """
    started = time.perf_counter()
    settings = settings or get_settings()
    det = detector if isinstance(detector, Detector) else get_detector(detector, settings)
    if bbox is None:
        raise ToolError("Falta el bbox del área. Llama antes a getMapExtent. (Missing bbox.)")
    srs = geo.normalize_srs(srs)
    bounds = geo.parse_bbox(bbox, srs)
    if min_score is not None and not 0 <= min_score <= 1:
        raise ToolError("min_score debe estar entre 0 y 1.")

    if source is None:
        from .wms import DEFAULT_LAYER, WmsTileSource

        source = WmsTileSource(
            wms_url or settings.pnoa_wms_url, wms_layer or DEFAULT_LAYER, settings
        ).open()
    _check_coverage(source, bounds, srs)
    center = geo.center_lonlat(bounds, srs)
    work = geo.choose_work_crs(srs, source.crs_options(), center)
    work_bounds = geo.transform_bounds(bounds, srs, work)
    upm = geo.units_per_metre(work, *center)
    res_x, res_y, res_m = _pixel_sizes(work_bounds, upm, det, image_width, image_height)
    raster = raster_for(work_bounds, res_x, res_y)
    limit = max_tiles or settings.detection_max_tiles
    n_tiles = count_tiles(raster, det.tile_size, det.tile_overlap)
    if n_tiles > limit:
        raise _too_large(n_tiles, limit, raster, res_m, det)
    tiles = plan_tiles(raster, det.tile_size, det.tile_overlap)
    method = det.method
    log.info(
        "detect %s: %d tiles %s at %.3f m/px in %s via %s",
        det.name,
        len(tiles),
        (raster.width, raster.height),
        res_m,
        work,
        method,
    )

    boxes, failures, timings = _run_tiles(
        det, source, tiles, work, res_m, min_score, progress, fetch_workers, cancel
    )
    warnings = list(det.notes())
    if failures:
        first = failures[0][1]
        if len(failures) == len(tiles):
            raise ServiceError(
                f"No se pudo procesar ninguna de las {len(tiles)} teselas de imagen: {first}"
            ) from None
        warnings.append(
            f"{len(failures)} de {len(tiles)} teselas no se pudieron descargar o procesar; el "
            f"resultado puede estar incompleto. Primer error: {first}"
        )
    if cancel is not None and cancel.is_set():
        warnings.append("Detección cancelada: resultado parcial.")

    merged = _inside(merge_boxes(boxes), bounds, srs, work)
    run_id = uuid.uuid4().hex[:12]
    stamp = datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    methods = {m.method for m in merged}
    features = [
        {
            "type": "Feature",
            "id": f"{run_id}-{k}",
            "geometry": {"type": "Polygon", "coordinates": [geo.box_polygon(m.bounds, work)]},
            "properties": {
                "detector": det.name,
                "class": m.class_name,
                "score": round(float(m.score), 4),
                "method": m.method,
                "source": source.description,
                "run_id": run_id,
                "time": stamp,
            },
        }
        for k, m in enumerate(merged)
    ]
    timings["total_s"] = time.perf_counter() - started
    run = DetectionRun(
        detector=det.name,
        method=methods.pop() if len(methods) == 1 else method,
        run_id=run_id,
        time=stamp,
        bbox=dict(zip(("minX", "minY", "maxX", "maxY"), bounds, strict=True)),
        srs=srs,
        work_crs=work,
        resolution_m=res_m,
        tiles=len(tiles),
        failed_tiles=len(failures),
        source=source.description,
        layer_name=det.layer_name,
        features=features,
        warnings=warnings,
        timings=timings,
    )
    _remember(run)
    return run


def _run_tiles(
    det: Detector,
    source: TileSource,
    tiles: list[Tile],
    work: str,
    res_m: float,
    min_score: float | None,
    progress: bool | None,
    fetch_workers: int,
    cancel: threading.Event | None,
) -> tuple[list[MapBox], list[tuple[Tile, str]], dict[str, float]]:
    """Fetch and detect every tile: I/O in a small pool, detection behind a semaphore."""
    from tqdm.auto import tqdm

    from ..services.ssrf import BlockedURLError

    gate = threading.Semaphore(max(1, det.workers))
    timings = {"fetch_s": 0.0, "detect_s": 0.0}
    lock = threading.Lock()

    def one(tile: Tile) -> list[MapBox]:
        if cancel is not None and cancel.is_set():
            return []
        t0 = time.perf_counter()
        image: np.ndarray = source.fetch(tile.bbox, work, tile.width, tile.height)
        t1 = time.perf_counter()
        with gate:
            found = det.detect(image, resolution_m=res_m, min_score=min_score)
        out = detections_to_map(tile, found)
        t2 = time.perf_counter()
        with lock:
            timings["fetch_s"] += t1 - t0
            timings["detect_s"] += t2 - t1
        return out

    boxes: list[MapBox] = []
    failures: list[tuple[Tile, str]] = []
    workers = max(1, min(fetch_workers, len(tiles)))
    bar = tqdm(
        total=len(tiles),
        desc=f"{det.name}: teselas",
        unit="tesela",
        disable=not _show_progress(progress),
        leave=False,
    )
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="idee-detect")
    try:
        pending: dict[Future, Tile] = {pool.submit(one, t): t for t in tiles}
        while pending:
            done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            if cancel is not None and cancel.is_set():
                for fut in pending:
                    fut.cancel()
            for fut in done:
                tile = pending.pop(fut)
                bar.update(1)
                if fut.cancelled():
                    continue
                exc = fut.exception()
                if exc is None:
                    boxes.extend(fut.result())
                elif isinstance(exc, BlockedURLError) or (
                    isinstance(exc, IdeeAgentError) and not isinstance(exc, ServiceError)
                ):
                    raise exc  # guard or configuration errors fail the same way on every tile
                else:
                    log.warning("Tile %s failed: %s", tile.index, exc)
                    failures.append((tile, str(exc)))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    return boxes, failures, timings
