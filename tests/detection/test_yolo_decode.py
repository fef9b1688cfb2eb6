"""YOLO ONNX decode, NMS and letterbox, checked exactly against graphs with known outputs."""

from __future__ import annotations

import numpy as np
import pytest

from idee_notebook_agent.detection.base import Detection, get_detector
from idee_notebook_agent.detection.models import model_path
from idee_notebook_agent.detection.yolo import YoloOnnx, letterbox

# (anchor, cx, cy, w, h, class, score): two overlapping boxes and a separate one
PLANTED = [
    (100, 320.0, 320.0, 50.0, 40.0, 0, 0.91),
    (101, 324.0, 322.0, 52.0, 40.0, 0, 0.80),
    (5000, 100.0, 500.0, 30.0, 30.0, 0, 0.55),
]


def image(w: int, h: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def fake_model(tmp_path_factory, make_fake_yolo):
    path = tmp_path_factory.mktemp("yolo") / "fake.onnx"
    make_fake_yolo(str(path), nc=1, dets=PLANTED)
    return YoloOnnx(path, threads=1)


def boxes(dets: list[Detection]) -> list[tuple]:
    return [(d.x1, d.y1, d.x2, d.y2, round(d.score, 6), d.class_name, d.method) for d in dets]


def test_square_tile_decodes_planted_boxes_and_nms_drops_the_overlap(fake_model):
    assert fake_model.input_size == (640, 640) and fake_model.num_classes == 1
    assert fake_model.names == {0: "pool"}
    assert boxes(fake_model.detect(image(640, 640))) == [
        (295.0, 300.0, 345.0, 340.0, 0.91, "pool", "onnx"),
        (85.0, 485.0, 115.0, 515.0, 0.55, "pool", "onnx"),
    ]


def test_without_nms_overlap_both_survive_and_threshold_filters(fake_model):
    # IoU of the two planted boxes is 0.778: an NMS threshold above it keeps both
    assert len(fake_model.detect(image(640, 640), iou=0.8)) == 3
    assert boxes(fake_model.detect(image(640, 640), conf=0.6)) == [
        (295.0, 300.0, 345.0, 340.0, 0.91, "pool", "onnx")
    ]
    assert fake_model.detect(image(640, 640), conf=0.95) == []


def test_letterbox_is_undone_for_wide_small_and_large_tiles(fake_model):
    # 640×320: padded 160 px top and bottom; the third box falls in the padding and is dropped
    assert boxes(fake_model.detect(image(640, 320))) == [
        (295.0, 140.0, 345.0, 180.0, 0.91, "pool", "onnx")
    ]
    # 320×320: scaled ×2 into the model input
    assert boxes(fake_model.detect(image(320, 320))) == [
        (147.5, 150.0, 172.5, 170.0, 0.91, "pool", "onnx"),
        (42.5, 242.5, 57.5, 257.5, 0.55, "pool", "onnx"),
    ]
    # 1280×1280: scaled ×0.5
    assert boxes(fake_model.detect(image(1280, 1280)))[0] == (
        590.0,
        600.0,
        690.0,
        680.0,
        0.91,
        "pool",
        "onnx",
    )


def test_letterbox_geometry_matches_ultralytics():
    boxed, info = letterbox(image(640, 320), (640, 640))
    assert boxed.shape == (640, 640, 3)
    assert (info.gain, info.pad_x, info.pad_y) == (1.0, 0.0, 160.0)
    assert (boxed[:160] == 114).all() and (boxed[480:] == 114).all()
    boxed, info = letterbox(image(300, 200), (640, 640))
    assert (info.gain, info.pad_x, info.pad_y) == (640 / 300, 0.0, round((640 - 427) / 2 - 0.1))


def test_nms_is_per_class(tmp_path, make_fake_yolo):
    path = tmp_path / "two.onnx"
    make_fake_yolo(
        str(path),
        nc=2,
        dets=[(10, 320.0, 320.0, 50.0, 40.0, 0, 0.9), (11, 322.0, 320.0, 50.0, 40.0, 1, 0.85)],
    )
    model = YoloOnnx(path, threads=1)
    assert model.num_classes == 2
    found = model.detect(image(640, 640))
    assert [(d.class_id, d.class_name, round(d.score, 2)) for d in found] == [
        (0, "class0", 0.9),
        (1, "class1", 0.85),
    ]


def test_untrained_yolo11n_has_the_standard_layout_and_finds_nothing(untrained_yolo):
    model = YoloOnnx(untrained_yolo)
    assert (model.input_name, model.output_name) == ("images", "output0")
    assert model.input_size == (640, 640) and model.num_classes == 1
    assert model.names == {0: "pool"}
    tensor, _ = model.preprocess(image(640, 640))
    assert tensor.shape == (1, 3, 640, 640) and tensor.dtype == np.float32
    assert tensor.min() >= 0.0 and tensor.max() <= 1.0
    assert model.infer(tensor).shape == (1, 5, 8400)
    assert model.detect(image(640, 640)) == []
    # the README's measurement: at conf 0.005 the 400 stride-32 candidates give 20 after NMS 0.45
    low = model.detect(image(640, 640), conf=0.005)
    assert len(low) == 20
    assert all(abs(d.score - 0.01235) < 1e-4 for d in low)


def test_pool_detector_uses_an_installed_model_and_falls_back_when_broken(settings, make_fake_yolo):
    detector = get_detector("pools", settings)
    assert detector.method == "opencv" and detector.workers == 2
    target = model_path("pools", settings)
    target.parent.mkdir(parents=True)
    make_fake_yolo(str(target), nc=1, dets=PLANTED)
    assert detector.method == "onnx" and detector.workers == 1
    assert [d.score for d in detector.detect(image(640, 640))] == pytest.approx([0.91, 0.55])
    target.write_bytes(b"not an onnx file")
    assert detector.method == "opencv"
    assert "OpenCV" in detector.notes()[0]
