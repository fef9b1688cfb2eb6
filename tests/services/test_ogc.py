"""GetCapabilities of WMS 1.3.0 / 1.1.1 and WMTS 1.0.0 through owslib, bytes fetched guarded."""

from __future__ import annotations

import pytest

from idee_notebook_agent.errors import ServiceError, ToolError
from idee_notebook_agent.services.ogc import base_url, capabilities_url, describe_service
from idee_notebook_agent.services.ssrf import BlockedURLError
from tests.services.conftest import make_settings


@pytest.fixture
def ogc_settings(tmp_path):
    return make_settings(tmp_path, allow_hosts="127.0.0.1")


def test_wms_130_layers(ogc_settings, ogc_fake):
    info = describe_service(ogc_fake.url("/wms"), ogc_settings)
    assert info["success"] is True
    assert (info["type"], info["version"]) == ("WMS", "1.3.0")
    assert info["title"] == "Ortoimágenes PNOA de máxima actualidad (fake)"
    names = [layer["name"] for layer in info["layers"]]
    assert names == ["OI.OrthoimageCoverage", "OI.MosaicElement", "fondo"]
    assert info["layers"][0]["title"] == "Ortoimagen PNOA máxima actualidad"
    assert info["formats"] == ["image/jpeg", "image/png"]
    sent = ogc_fake.requests[0][2]
    assert sent["SERVICE"] == "WMS" and sent["REQUEST"] == "GetCapabilities"
    assert sent["VERSION"] == "1.3.0"


def test_wmts_layers_with_matrix_sets(ogc_settings, ogc_fake):
    info = describe_service(ogc_fake.url("/wmts"), ogc_settings)
    assert info["type"] == "WMTS"
    gris = next(layer for layer in info["layers"] if layer["name"] == "IGNBase-gris")
    assert gris["matrixSets"] == ["GoogleMapsCompatible"]
    assert gris["formats"] == ["image/jpeg"]


def test_wms_111_is_read_too(ogc_settings, ogc_fake):
    info = describe_service(ogc_fake.url("/catastro"), ogc_settings)
    assert (info["type"], info["version"]) == ("WMS", "1.1.1")
    assert [layer["name"] for layer in info["layers"]] == ["Catastro", "PARCELA"]


def test_wrong_guess_falls_back_to_the_other_service_type(ogc_settings, ogc_fake):
    info = describe_service(ogc_fake.url("/teselas"), ogc_settings)  # tried as WMS first
    assert info["type"] == "WMTS"
    asked = [params["SERVICE"] for _, path, params in ogc_fake.requests if path == "/teselas"]
    assert asked == ["WMS", "WMTS"]
    info = describe_service(ogc_fake.url("/wms") + "?map=x", ogc_settings, "WMS")
    assert info["url"].endswith("/wms?map=x")


def test_service_exception_is_reported(ogc_settings, ogc_fake):
    with pytest.raises(ServiceError, match="Capa desconocida"):
        describe_service(ogc_fake.url("/exception"), ogc_settings, "WMS")


def test_not_a_capabilities_document(ogc_settings, ogc_fake):
    with pytest.raises(ServiceError, match="no es un documento de capacidades"):
        describe_service(ogc_fake.url("/notxml"), ogc_settings, "WMS")


def test_only_wms_and_wmts(ogc_settings, ogc_fake):
    with pytest.raises(ToolError, match="WMS o WMTS"):
        describe_service(ogc_fake.url("/wms"), ogc_settings, "WFS")


def test_capabilities_are_cached(ogc_settings, ogc_fake):
    describe_service(ogc_fake.url("/wms"), ogc_settings)
    describe_service(ogc_fake.url("/wms?SERVICE=WMS&REQUEST=GetCapabilities"), ogc_settings)
    assert ogc_fake.capabilities_requests("/wms") == 1


def test_capabilities_fetch_goes_through_the_ssrf_guard(tmp_path, ogc_fake):
    closed = make_settings(tmp_path, allow_hosts="")
    with pytest.raises(BlockedURLError):
        describe_service(ogc_fake.url("/wms"), closed)
    assert ogc_fake.requests == []


def test_url_helpers_replace_ows_parameters():
    url = capabilities_url("https://x.es/wms?service=WMS&request=GetMap&map=a", "WMS")
    assert url == "https://x.es/wms?map=a&SERVICE=WMS&REQUEST=GetCapabilities&VERSION=1.3.0"
    assert base_url("https://x.es/wmts?SERVICE=WMTS&REQUEST=GetCapabilities") == "https://x.es/wmts"
