"""Ultralytics-style YOLO detect models exported to ONNX, run with onnxruntime.

Layout (../shared/models/yolo11n-untrained/README.md): input ``[1, 3, S, S]`` float32 RGB 0..1,
letterboxed with grey 114; output ``[1, 4 + nc, N]`` with rows ``cx, cy, w, h`` in input pixels
and ``nc`` class scores already through a sigmoid (no objectness row). Decoding is: transpose,
best class, confidence threshold, NMS per class, undo the letterbox.
"""

from __future__ import annotations

import ast
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigurationError, MissingExtraError
from .base import Detection

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

PAD_VALUE = 114
MAX_DETECTIONS = 300


@dataclass(frozen=True)
class Letterbox:
    """How an image was fitted into the model input: ``input = image * gain + (pad_x, pad_y)``."""

    gain: float
    pad_x: float
    pad_y: float
    width: int
    height: int


def letterbox(image: np.ndarray, size: tuple[int, int]) -> tuple[np.ndarray, Letterbox]:
    """Resize keeping the aspect ratio and pad to ``size`` (w, h), as Ultralytics' LetterBox."""
    import cv2

    h, w = image.shape[:2]
    new_w, new_h = size
    gain = min(new_w / w, new_h / h)
    unpad_w, unpad_h = round(w * gain), round(h * gain)
    dw, dh = (new_w - unpad_w) / 2, (new_h - unpad_h) / 2
    if (unpad_w, unpad_h) != (w, h):
        image = cv2.resize(image, (unpad_w, unpad_h), interpolation=cv2.INTER_LINEAR)
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    if top or bottom or left or right:
        image = cv2.copyMakeBorder(
            image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3
        )
    return image, Letterbox(gain, float(left), float(top), w, h)


def decode(
    output: np.ndarray,
    box: Letterbox,
    *,
    conf: float = 0.25,
    iou: float = 0.45,
    names: dict[int, str] | None = None,
    max_det: int = MAX_DETECTIONS,
) -> list[Detection]:
    """Turn a raw ``[1, 4 + nc, N]`` output into pixel boxes of the original image."""
    import cv2
    import numpy as np

    pred = np.asarray(output, dtype=np.float32)[0].T  # [N, 4 + nc]
    scores_all = pred[:, 4:]
    cls = scores_all.argmax(axis=1)
    scores = scores_all[np.arange(len(pred)), cls]
    keep = scores >= conf
    if not keep.any():
        return []
    xywh, scores, cls = pred[keep, :4], scores[keep], cls[keep]
    x1 = xywh[:, 0] - xywh[:, 2] / 2
    y1 = xywh[:, 1] - xywh[:, 3] / 2
    rects = np.stack([x1, y1, xywh[:, 2], xywh[:, 3]], axis=1).astype(np.float64)
    idx = cv2.dnn.NMSBoxesBatched(
        rects.tolist(), scores.astype(float).tolist(), cls.astype(int).tolist(), conf, iou
    )
    idx = np.asarray(idx, dtype=int).reshape(-1)
    idx = idx[np.argsort(-scores[idx], kind="stable")][:max_det]
    names = names or {}
    out = []
    for i in idx:
        bx1 = (rects[i, 0] - box.pad_x) / box.gain
        by1 = (rects[i, 1] - box.pad_y) / box.gain
        bx2 = (rects[i, 0] + rects[i, 2] - box.pad_x) / box.gain
        by2 = (rects[i, 1] + rects[i, 3] - box.pad_y) / box.gain
        bx1, bx2 = min(max(bx1, 0.0), box.width), min(max(bx2, 0.0), box.width)
        by1, by2 = min(max(by1, 0.0), box.height), min(max(by2, 0.0), box.height)
        if bx2 <= bx1 or by2 <= by1:
            continue
        c = int(cls[i])
        out.append(
            Detection(
                float(bx1),
                float(by1),
                float(bx2),
                float(by2),
                float(scores[i]),
                c,
                names.get(c, str(c)),
                "onnx",
            )
        )
    return out


def parse_names(raw: str | None, nc: int) -> dict[int, str]:
    """Class names from the ONNX metadata ``names`` (a Python dict literal in Ultralytics)."""
    if raw:
        try:
            value = ast.literal_eval(raw)
            if isinstance(value, dict):
                return {int(k): str(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return dict(enumerate(map(str, value)))
        except (ValueError, SyntaxError):
            log.warning("Unreadable 'names' metadata in the ONNX model: %.80s", raw)
    return {i: str(i) for i in range(nc)}


class YoloOnnx:
    """An onnxruntime session over a YOLO detect graph; ``detect`` is thread-safe."""

    def __init__(self, path: str | Path, *, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise MissingExtraError("onnxruntime", "ml") from exc
        self.path = Path(path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(
                str(self.path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ConfigurationError(
                f"No se pudo cargar el modelo ONNX {self.path}: {exc}. Vuelve a descargarlo con "
                "'idee-agent models download --force'."
            ) from exc
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        ishape, oshape = list(inputs[0].shape), list(outputs[0].shape)
        if (
            len(ishape) != 4
            or ishape[1] != 3
            or not all(isinstance(v, int) for v in ishape[2:])
            or len(oshape) != 3
            or not isinstance(oshape[1], int)
            or oshape[1] < 5
        ):
            raise ConfigurationError(
                f"El modelo {self.path.name} no tiene la forma de un YOLO de detección exportado "
                f"(entrada {ishape}, salida {oshape}; se espera [1,3,S,S] → [1,4+nc,N])."
            )
        self.input_name = inputs[0].name
        self.output_name = outputs[0].name
        self.input_size = (int(ishape[3]), int(ishape[2]))  # (w, h)
        self.num_classes = int(oshape[1]) - 4
        meta = self.session.get_modelmeta().custom_metadata_map
        self.names = parse_names(meta.get("names"), self.num_classes)

    def preprocess(self, image: np.ndarray) -> tuple[np.ndarray, Letterbox]:
        """Letterboxed NCHW float32 tensor (0..1) and the letterbox that made it."""
        import numpy as np

        boxed, info = letterbox(image, self.input_size)
        tensor = boxed.transpose(2, 0, 1).astype(np.float32, order="C")  # HWC → CHW, one copy
        tensor *= np.float32(1 / 255.0)
        return tensor[None], info

    def infer(self, tensor: np.ndarray) -> np.ndarray:
        return self.session.run([self.output_name], {self.input_name: tensor})[0]

    def detect(
        self, image: np.ndarray, *, conf: float = 0.25, iou: float = 0.45
    ) -> list[Detection]:
        tensor, info = self.preprocess(image)
        return decode(self.infer(tensor), info, conf=conf, iou=iou, names=self.names)
