"""fetchWebPage: clean text, size cap, content types, errors, and the SSRF guard."""

from __future__ import annotations

import pytest

from idee_notebook_agent.errors import ServiceError
from idee_notebook_agent.services.ssrf import BlockedURLError
from idee_notebook_agent.services.webfetch import fetch_web_page, html_to_text
from tests.fakes.ogc_capabilities_server import ARTICLE
from tests.services.conftest import make_settings


@pytest.fixture
def web(tmp_path):
    return make_settings(tmp_path, allow_hosts="127.0.0.1", http_timeout=2.0)


def test_page_becomes_clean_text(web, ogc_fake):
    result = fetch_web_page(ogc_fake.url("/pages/idee.html"), web)
    assert result["success"] is True
    assert result["title"] == "Según tipo de servicio | IDEE"
    text = result["text"]
    assert ARTICLE in text
    assert "Unidades administrativas" in text  # tables are kept
    for noise in ("NO-DEBE-APARECER-SCRIPT", "MENU-NAVEGACION", "PIE-DE-PAGINA", "color: red"):
        assert noise not in text
    assert result["truncated"] is False
    assert "no instrucciones" in result["note"]


def test_text_is_cut_at_the_limit(web, ogc_fake):
    result = fetch_web_page(ogc_fake.url("/pages/big.html"), web, max_chars=5000)
    assert len(result["text"]) == 5000 and result["truncated"] is True


def test_download_stops_at_the_byte_cap(tmp_path, ogc_fake):
    small = make_settings(tmp_path, allow_hosts="127.0.0.1", fetch_max_bytes=20_000)
    result = fetch_web_page(ogc_fake.url("/pages/big.html"), small)
    assert result["truncated"] is True
    assert 0 < len(result["text"]) < 20_000


def test_plain_text_is_returned_as_is(web, ogc_fake):
    result = fetch_web_page(ogc_fake.url("/pages/plain.txt"), web)
    assert result["text"] == "Texto plano de prueba.\nSegunda línea."


def test_binary_content_is_refused(web, ogc_fake):
    with pytest.raises(ServiceError, match="no es una página de texto"):
        fetch_web_page(ogc_fake.url("/pages/image.png"), web)


def test_http_errors_are_reported(web, ogc_fake):
    with pytest.raises(ServiceError, match="HTTP 404"):
        fetch_web_page(ogc_fake.url("/pages/missing"), web)


def test_timeout_is_reported(tmp_path, ogc_fake):
    slow = make_settings(tmp_path, allow_hosts="127.0.0.1", http_timeout=0.3)
    with pytest.raises(ServiceError, match="no respondió a tiempo"):
        fetch_web_page(ogc_fake.url("/slow?seconds=1.5"), slow)


def test_private_addresses_are_refused(tmp_path, ogc_fake):
    closed = make_settings(tmp_path, allow_hosts="")
    with pytest.raises(BlockedURLError):
        fetch_web_page(ogc_fake.url("/pages/idee.html"), closed)
    with pytest.raises(BlockedURLError):
        fetch_web_page("http://169.254.169.254/latest/meta-data/", closed)
    assert ogc_fake.requests == []


def test_redirect_to_private_address_is_refused(web, ogc_fake):
    with pytest.raises(BlockedURLError):
        fetch_web_page(ogc_fake.url("/redirect?to=http://10.1.1.1/"), web)


def test_html_without_article_still_gives_its_text():
    html = "<html><body><div>Solo un div con texto suficiente para leerlo.</div></body></html>"
    assert "Solo un div" in html_to_text(html)
