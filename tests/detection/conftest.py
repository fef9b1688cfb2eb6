"""Fixtures for the detection tests: the shared assets, the fake WMS and settings that reach it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.detection.base import clear_instances

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
POOLS_DIR = SHARED / "data" / "pools"
YOLO_DIR = SHARED / "models" / "yolo11n-untrained"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared asset missing: {path} (CI lays ../shared beside the repo)")
    return path


@pytest.fixture(scope="session")
def pools_dir() -> Path:
    return need(POOLS_DIR / "manifest.json").parent


@pytest.fixture(scope="session")
def untrained_yolo() -> Path:
    return need(YOLO_DIR / "model.onnx")


@pytest.fixture(scope="session")
def make_fake_yolo():
    """``make_fake_yolo(path, nc, dets)`` from ../shared/models (builds a graph with known output)."""
    script = need(YOLO_DIR / "make_fake_yolo_onnx.py")
    spec = importlib.util.spec_from_file_location("make_fake_yolo_onnx", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_fake_yolo


@pytest.fixture(scope="module")
def fake_wms(pools_dir):
    from tests.fakes.wms_server import start_wms_server

    with start_wms_server(pools_dir, resolution=0.4) as fake:
        yield fake


@pytest.fixture
def settings(tmp_path) -> Settings:
    """Loopback allowed for the fakes; an empty models folder, so the OpenCV fallback runs."""
    clear_instances()
    yield Settings(
        IDEE_ALLOW_HOSTS="127.0.0.1",
        IDEE_MODELS_DIR=str(tmp_path / "models"),
        IDEE_CACHE_DIR=str(tmp_path / "cache"),
        IDEE_HTTP_TIMEOUT=5,
    )
    clear_instances()
