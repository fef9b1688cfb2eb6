"""Crawling a documentation site served on 127.0.0.1, through the SSRF-guarded client."""

from __future__ import annotations

import pytest

from idee_notebook_agent.errors import ServiceError
from idee_notebook_agent.knowledge.indexers import index_source
from idee_notebook_agent.knowledge.retriever import KnowledgeRetriever
from idee_notebook_agent.knowledge.store import KnowledgeStore
from tests.fakes.docs_site import HoneyPot, StaticSite, docs_site_routes
from tests.knowledge.helpers import make_settings


@pytest.fixture
def honeypot():
    with HoneyPot() as pot:  # stands for a private address: nothing may reach it
        yield pot


@pytest.fixture
def site(honeypot):
    with StaticSite(docs_site_routes(f"{honeypot.root}/admin")) as fake:
        yield fake


def _crawl_settings(tmp_path, model_dir):
    # The site is reached as "localhost" (allowed by name); 127.0.0.1 itself stays private.
    return make_settings(tmp_path, allow_hosts="localhost")


def test_a_site_is_crawled_on_its_own_host_only_and_respecting_robots(
    tmp_path, model_dir, site, honeypot
):
    cfg = _crawl_settings(tmp_path, model_dir)
    start = site.root.replace("127.0.0.1", "localhost") + "/"
    report = index_source(start, "web", name="docs", settings=cfg, progress=False)

    paths = sorted(set(site.hits))
    assert paths == sorted(
        [
            "/",
            "/robots.txt",
            "/guia/capas.html",
            "/guia/controles.html",
            "/guia/eventos.md",
            "/salto",
            "/viejo/capas",
            "/no-existe.html",
        ]
    )
    assert "/privado/interno.html" not in site.hits  # robots.txt: Disallow: /privado/
    assert "/imagen.png" not in site.hits
    assert honeypot.hits == []  # the redirect to a private address was not followed
    assert any("redirige fuera del sitio" in r for r in report.skipped.values())
    assert report.skipped[start + "no-existe.html"] == "HTTP 404"
    entry = KnowledgeStore(cfg.data_dir).sources()["docs"]
    assert entry["pages"] == report.documents == 4 and entry["robots_disallowed"] == 1

    hits = KnowledgeRetriever(cfg).search("¿Cómo añado una capa WMS?", 3)
    assert hits[0]["source"] == start + "guia/capas.html"
    assert hits[0]["title"].endswith("Capas WMS") and hits[0]["language"] == "html"
    clic = KnowledgeRetriever(cfg).search("evento de clic", 1)[0]
    assert clic["source"].endswith("/guia/eventos.md") and clic["language"] == "markdown"
    assert clic["line_start"] >= 1


def test_max_pages_limits_the_crawl(tmp_path, model_dir, site):
    cfg = _crawl_settings(tmp_path, model_dir)
    start = site.root.replace("127.0.0.1", "localhost") + "/"
    report = index_source(start, "web", name="dos", settings=cfg, progress=False, max_pages=2)
    assert report.documents == 2


def test_a_private_start_address_is_refused_before_any_request(tmp_path, model_dir, honeypot):
    cfg = _crawl_settings(tmp_path, model_dir)
    with pytest.raises(ServiceError, match="Dirección bloqueada"):
        index_source(f"{honeypot.root}/", "web", name="privada", settings=cfg, progress=False)
    assert honeypot.hits == []
    assert KnowledgeStore(cfg.data_dir).sources() == {}
