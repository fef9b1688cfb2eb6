"""Object detection on orthophotos: detector registry, tiling pipeline and GeoDataFrame output.

``detect_objects(...)`` returns a :class:`DetectionRun` (``.gdf``, ``.to_gpkg()``); the chat's
``detectObjects`` tool runs the same pipeline and ``last_run()`` gives its result in Python.
Heavy libraries (onnxruntime, OpenCV, geopandas) load on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "Detection": "idee_notebook_agent.detection.base",
    "Detector": "idee_notebook_agent.detection.base",
    "detector": "idee_notebook_agent.detection.base",
    "available_detectors": "idee_notebook_agent.detection.base",
    "get_detector": "idee_notebook_agent.detection.base",
    "DetectionRun": "idee_notebook_agent.detection.pipeline",
    "detect_objects": "idee_notebook_agent.detection.pipeline",
    "get_run": "idee_notebook_agent.detection.pipeline",
    "last_run": "idee_notebook_agent.detection.pipeline",
    "download_model": "idee_notebook_agent.detection.models",
    "WmsTileSource": "idee_notebook_agent.detection.wms",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
