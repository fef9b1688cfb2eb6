"""Server tools ``listDetectors`` and ``detectObjects`` (tools/*.json hold their specs).

Imported by ``toolbox.registry`` at start-up, which also discovers the detectors. The detection
itself (HTTP, onnxruntime, OpenCV) runs in a worker thread; Stop cancels the remaining tiles.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from ..errors import IdeeAgentError, MissingExtraError, ToolError
from ..toolbox.registry import ToolContext, server_tool
from .base import available_detectors, discover

log = logging.getLogger(__name__)

discover()


@server_tool("listDetectors")
def list_detectors(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Every registered detector with its classes, resolution and the method it would use now."""
    from .base import get_detector

    detectors = []
    for name, cls in available_detectors().items():
        info = cls.info()
        try:
            info["method"] = get_detector(name, ctx.settings).method
        except Exception as exc:  # one broken detector must not hide the list
            log.warning("Detector %s unavailable: %s", name, exc)
            info["method"] = "no disponible"
        detectors.append(info)
    return {"success": True, "detectors": detectors}


@server_tool("detectObjects")
async def detect_objects(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run the pipeline on the bbox, draw the detections as a layer and return the summary."""
    from .pipeline import detect_objects as run_pipeline

    cancel = threading.Event()
    try:
        run = await asyncio.to_thread(
            run_pipeline,
            args["detector"],
            args["bbox"],
            args.get("srs") or "EPSG:4326",
            wms_url=args.get("wms_url"),
            wms_layer=args.get("wms_layer"),
            image_width=args.get("image_width"),
            image_height=args.get("image_height"),
            min_score=args.get("min_score"),
            settings=ctx.settings,
            cancel=cancel,
        )
    except asyncio.CancelledError:
        cancel.set()  # the worker thread stops after the tiles in flight
        raise
    except ToolError:
        raise
    except MissingExtraError as exc:
        raise ToolError(str(exc)) from exc
    except IdeeAgentError as exc:
        raise ToolError(f"No se pudo ejecutar la detección: {exc}") from exc
    if run.count:
        ctx.emit_layer(run.layer())
    return run.summary()
