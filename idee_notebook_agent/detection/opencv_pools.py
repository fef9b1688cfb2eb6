"""Pool water by colour and shape with OpenCV: the fallback when no pool model is installed.

Pool water in orthophotos is a bright, saturated cyan/turquoise. The thresholds come from the
annotated pools in ../shared/data/pools (hue 85–108 on OpenCV's 0–180 scale, median saturation
≥ 65, value ≥ 120) with some margin; sizes are in square metres and the morphology kernels in
metres, so the same parameters hold at 0.25 or 0.5 m/px. The score is a shape/colour heuristic in
0..1, not a calibrated probability.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .base import Detection

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class PoolColourParams:
    """Thresholds of the colour/shape segmentation (defaults measured on ../shared/data/pools)."""

    hue: tuple[int, int] = (80, 112)
    """Hue range of a water pixel (OpenCV scale 0–180; cyan is 90, blue 120)."""
    min_saturation: int = 40
    min_value: int = 100
    min_median_saturation: float = 55.0
    """A blob's median saturation; grey-blue roofs and glass fall below it."""
    min_median_value: float = 110.0
    min_area_m2: float = 10.0
    """A small plunge pool is about 2.5 × 4 m."""
    max_area_m2: float = 1500.0
    """A public 50 × 25 m pool plus margin."""
    min_side_m: float = 1.5
    max_aspect: float = 6.0
    min_fill: float = 0.4
    """Pixels of the blob / area of its minimum-area rectangle: pools are compact."""
    open_m: float = 0.5
    close_m: float = 0.75


DEFAULT_PARAMS = PoolColourParams()


def _kernel(size_m: float, resolution_m: float):
    import cv2

    k = max(1, round(size_m / resolution_m))
    k += 1 - k % 2  # odd: an even kernel's anchor shifts an opening by one pixel
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)) if k > 1 else None


def water_mask(image: np.ndarray, resolution_m: float, params: PoolColourParams = DEFAULT_PARAMS):
    """Binary mask (uint8 0/255) of pool-water pixels after opening and closing."""
    import cv2

    hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)
    mask = cv2.inRange(
        hsv,
        (params.hue[0], params.min_saturation, params.min_value),
        (params.hue[1], 255, 255),
    )
    k_open = _kernel(params.open_m, resolution_m)
    if k_open is not None:
        mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, k_open)
    k_close = _kernel(params.close_m, resolution_m)
    if k_close is not None:
        mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, k_close)
    return mask, hsv


def segment_pools(
    image: np.ndarray,
    resolution_m: float,
    *,
    min_score: float = 0.0,
    params: PoolColourParams = DEFAULT_PARAMS,
) -> list[Detection]:
    """Pool boxes in an RGB uint8 image taken at ``resolution_m`` metres per pixel."""
    import cv2
    import numpy as np

    mask, hsv = water_mask(image, resolution_m, params)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    px_area = resolution_m * resolution_m
    min_px, max_px = params.min_area_m2 / px_area, params.max_area_m2 / px_area
    min_side = params.min_side_m / resolution_m
    found: list[Detection] = []
    for i in range(1, count):
        x, y, w, h, area = (int(v) for v in stats[i])
        if not (min_px <= area <= max_px) or min(w, h) < min_side:
            continue
        roi = labels[y : y + h, x : x + w] == i
        points = cv2.findNonZero(roi.astype(np.uint8))
        (_, _), (rw, rh), _ = cv2.minAreaRect(points)
        rw, rh = max(rw, 1.0), max(rh, 1.0)
        if max(rw, rh) / min(rw, rh) > params.max_aspect:
            continue
        fill = min(1.0, area / (rw * rh))
        if fill < params.min_fill:
            continue
        pixels = hsv[y : y + h, x : x + w][roi]
        sat, val = float(np.median(pixels[:, 1])), float(np.median(pixels[:, 2]))
        if sat < params.min_median_saturation or val < params.min_median_value:
            continue
        score = 0.35 + 0.35 * fill + 0.15 * min(sat / 110.0, 1.0) + 0.15 * min(val / 220.0, 1.0)
        score = round(min(score, 1.0), 4)
        if score < min_score:
            continue
        found.append(Detection(x, y, x + w, y + h, score, 0, "pool", "opencv"))
    found.sort(key=lambda d: -d.score)
    return found
