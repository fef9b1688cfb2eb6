"""Fixtures of the notebook tests: the loopback fakes (once per session) and a notebook runner."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.notebooks.harness import (
    CLEARED,
    E5_MODEL,
    POOLS_DIR,
    SHARED,
    Executed,
    Fakes,
    execute,
    kernel_env,
)


@pytest.fixture(scope="session")
def fakes() -> Iterator[Fakes]:
    if not (POOLS_DIR / "manifest.json").is_file() or not (E5_MODEL / "model.onnx").is_file():
        pytest.skip(f"shared assets missing under {SHARED} (pool images, E5 model)")
    from tests.fakes.cartociudad_server import CartoCiudadFake
    from tests.fakes.idee_catalog_server import IdeeCatalogFake
    from tests.fakes.openai_server import FakeOpenAIServer
    from tests.fakes.wms_server import start_wms_server

    carto = CartoCiudadFake().start()
    catalog = IdeeCatalogFake().start()
    wms = start_wms_server(POOLS_DIR, resolution=0.4)
    openai = FakeOpenAIServer().start()
    try:
        yield Fakes(carto, catalog, wms, openai)
    finally:
        openai.stop()
        wms.close()
        catalog.stop()
        carto.stop()


@pytest.fixture
def run_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fakes: Fakes
) -> Callable[..., Executed]:
    """``run_notebook(name, **env)``: run a copy of ``notebooks/<name>`` offline, fresh kernel."""

    def run(name: str, **extra_env: str) -> Executed:
        for key in list(os.environ):
            if key.endswith("_API_KEY") or key in CLEARED:
                monkeypatch.delenv(key, raising=False)
        for key, value in kernel_env(tmp_path, fakes, extra_env).items():
            monkeypatch.setenv(key, value)
        return execute(name, tmp_path)

    return run
