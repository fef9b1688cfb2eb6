"""Fixtures of the geo-services tests: loopback fakes and settings pointing at them."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.services import cartociudad, ogc
from tests.fakes.cartociudad_server import CartoCiudadFake
from tests.fakes.idee_catalog_server import IdeeCatalogFake
from tests.fakes.ogc_capabilities_server import OGCFake


def make_settings(tmp_path, **overrides) -> Settings:
    """Settings isolated from the environment and any .env file."""
    values = {
        "data_dir": tmp_path / "data",
        "cache_dir": tmp_path / "cache",
        "http_timeout": 3.0,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    cartociudad.clear_cache()
    ogc.clear_cache()
    yield
    cartociudad.clear_cache()
    ogc.clear_cache()


@pytest.fixture
def carto() -> Iterator[CartoCiudadFake]:
    with CartoCiudadFake() as fake:
        yield fake


@pytest.fixture
def ogc_fake() -> Iterator[OGCFake]:
    with OGCFake() as fake:
        yield fake


@pytest.fixture
def idee_catalog() -> Iterator[IdeeCatalogFake]:
    with IdeeCatalogFake() as fake:
        yield fake


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def settings(tmp_path, carto, idee_catalog) -> Settings:
    """Everything pointed at the fakes; the SSRF guard lets 127.0.0.1 through."""
    return make_settings(
        tmp_path,
        cartociudad_url=carto.url,
        idee_catalog_url=idee_catalog.url,
        allow_hosts="127.0.0.1",
    )
