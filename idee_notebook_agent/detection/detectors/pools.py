"""Swimming pools: a YOLO ONNX model when installed, else colour/shape segmentation with OpenCV.

Detection must always work, so the model is optional: ``method`` says which path runs, and it
switches to the model as soon as ``idee-agent models download`` has installed it.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from ...config import Settings
from ...errors import IdeeAgentError
from ..base import Detection, Detector, detector
from ..models import model_path

if TYPE_CHECKING:
    import numpy as np

    from ..yolo import YoloOnnx

log = logging.getLogger(__name__)


@detector
class PoolDetector(Detector):
    name = "pools"
    description = (
        "Piscinas en ortofoto PNOA: modelo YOLO (ONNX) si está instalado; si no, segmentación "
        "por color y forma con OpenCV. (Swimming pools.)"
    )
    classes = ("pool",)
    resolution_m = 0.25
    tile_size = 640
    tile_overlap = 64
    layer_name = "Piscinas detectadas"
    default_min_score = 0.25
    opencv_min_score = 0.5
    nms_iou = 0.45

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(settings)
        self.model_file = model_path("pools", self.settings)
        self._model: YoloOnnx | None = None
        self._model_stamp: tuple[float, int] | None = None
        self._load_error: str | None = None
        self._lock = threading.Lock()

    def _stamp(self) -> tuple[float, int] | None:
        try:
            st = self.model_file.stat()
        except OSError:
            return None
        return (st.st_mtime, st.st_size)

    def _ensure_model(self) -> YoloOnnx | None:
        """The loaded model, reloading it when the file changed; None when absent or broken."""
        stamp = self._stamp()
        with self._lock:
            if stamp is None:
                self._model, self._model_stamp, self._load_error = None, None, None
                return None
            if stamp == self._model_stamp:
                return self._model
            self._model_stamp = stamp
            try:
                from ..yolo import YoloOnnx

                self._model = YoloOnnx(self.model_file)
                self._load_error = None
            except (IdeeAgentError, ImportError) as exc:
                log.warning("Pool model unusable, falling back to OpenCV: %s", exc)
                self._model, self._load_error = None, str(exc)
            return self._model

    @property
    def method(self) -> str:
        return "onnx" if self._ensure_model() is not None else "opencv"

    @property
    def workers(self) -> int:
        # onnxruntime already spreads one inference over the cores; OpenCV blobs are cheap.
        return 1 if self.method == "onnx" else 2

    def notes(self) -> list[str]:
        self._ensure_model()
        if self._load_error:
            return [f"El modelo de piscinas no se pudo cargar; se usó OpenCV. {self._load_error}"]
        return []

    def detect(
        self,
        image: np.ndarray,
        *,
        resolution_m: float | None = None,
        min_score: float | None = None,
    ) -> list[Detection]:
        model = self._ensure_model()
        if model is not None:
            conf = self.default_min_score if min_score is None else min_score
            return model.detect(image, conf=conf, iou=self.nms_iou)
        from ..opencv_pools import segment_pools

        return segment_pools(
            image,
            resolution_m or self.resolution_m,
            min_score=self.opencv_min_score if min_score is None else min_score,
        )
