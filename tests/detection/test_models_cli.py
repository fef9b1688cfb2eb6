"""Model download with sha256 verification, and the ``idee-agent models`` commands."""

from __future__ import annotations

import hashlib
import json

import pytest
import typer
from typer.testing import CliRunner

from idee_notebook_agent.config import reset_settings
from idee_notebook_agent.detection.base import get_detector
from idee_notebook_agent.detection.commands import register
from idee_notebook_agent.detection.models import ModelDownloadError, download_model, model_path
from tests.fakes.file_server import start_file_server

from .test_yolo_decode import PLANTED


@pytest.fixture
def model_bytes(tmp_path, make_fake_yolo) -> bytes:
    path = tmp_path / "m.onnx"
    make_fake_yolo(str(path), nc=1, dets=PLANTED)
    return path.read_bytes()


@pytest.fixture
def files(model_bytes):
    with start_file_server({"/pools.onnx": model_bytes}) as server:
        yield server


def test_download_verifies_and_installs_and_the_detector_switches_to_onnx(
    settings, files, model_bytes
):
    sha = hashlib.sha256(model_bytes).hexdigest()
    detector = get_detector("pools", settings)
    assert detector.method == "opencv"
    path = download_model("pools", settings, url=files.url + "/pools.onnx", sha256=sha)
    assert path == model_path("pools", settings) and path.read_bytes() == model_bytes
    assert detector.method == "onnx"
    # already there with the right checksum: no second download
    download_model("pools", settings, url=files.url + "/pools.onnx", sha256=sha)
    assert files.hits == ["/pools.onnx"]


def test_checksum_mismatch_installs_nothing(settings, files):
    with pytest.raises(ModelDownloadError, match="no coincide"):
        download_model("pools", settings, url=files.url + "/pools.onnx", sha256="0" * 64)
    target = model_path("pools", settings)
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_missing_configuration_and_http_errors_say_what_to_do(settings, files):
    with pytest.raises(ModelDownloadError, match="IDEE_POOL_MODEL_URL"):
        download_model("pools", settings)
    with pytest.raises(ModelDownloadError, match="IDEE_POOL_MODEL_SHA256"):
        download_model("pools", settings, url=files.url + "/pools.onnx")
    with pytest.raises(ModelDownloadError, match="HTTP 404"):
        download_model("pools", settings, url=files.url + "/nope.onnx", sha256="a" * 64)
    with pytest.raises(ModelDownloadError, match="No se pudo descargar"):
        download_model("pools", settings, url="http://127.0.0.1:9/x.onnx", sha256="a" * 64)


def test_cli_models_list_and_download(tmp_path, monkeypatch, files, model_bytes):
    monkeypatch.setenv("IDEE_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("IDEE_POOL_MODEL_URL", files.url + "/pools.onnx")
    monkeypatch.setenv("IDEE_POOL_MODEL_SHA256", hashlib.sha256(model_bytes).hexdigest())
    reset_settings()
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    runner = CliRunner()
    try:
        listed = runner.invoke(app, ["models", "list", "--json"])
        assert listed.exit_code == 0, listed.output
        assert json.loads(listed.stdout)[0]["installed"] is False
        done = runner.invoke(app, ["models", "download"])
        assert done.exit_code == 0, done.output
        assert "instalado" in done.stdout
        assert (tmp_path / "models" / "pools-yolo11n.onnx").read_bytes() == model_bytes
        assert json.loads(runner.invoke(app, ["models", "list", "--json"]).stdout)[0]["installed"]
        monkeypatch.setenv("IDEE_POOL_MODEL_SHA256", "b" * 64)
        reset_settings()
        bad = runner.invoke(app, ["models", "download", "--force"])
        assert bad.exit_code == 2 and "no coincide" in bad.output
    finally:
        reset_settings()
