"""Indexing git repositories and folders end to end (real git, fastembed, FAISS, bm25s)."""

from __future__ import annotations

import json

import pytest

from idee_notebook_agent.knowledge.errors import KnowledgeError
from idee_notebook_agent.knowledge.indexers import default_name, index_source, iter_folder
from idee_notebook_agent.knowledge.retriever import KnowledgeRetriever
from idee_notebook_agent.knowledge.store import KnowledgeStore
from tests.knowledge.helpers import CORPUS, git, make_repo

SMALL = {
    rel: (CORPUS / rel).read_text(encoding="utf-8")
    for rel in ("README.md", "docs/capas.md", "src/api/geocoder.py")
}


def _repo_files() -> dict[str, str]:
    files = dict(SMALL)
    files["node_modules/lib/index.js"] = "export function nada() { return 'dependencia'; }\n"
    files["dist/app.min.js"] = "var a=1;" * 100
    files["package-lock.json"] = json.dumps({"lockfileVersion": 3})
    files["grande.md"] = "# Grande\n" + ("x" * 600_000)
    return files


def test_a_local_git_repository_is_cloned_shallow_and_indexed(settings, tmp_path):
    repo = make_repo(tmp_path / "api-idee", _repo_files())
    (repo / "imagen.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0binario")
    head = git("rev-parse", "HEAD", cwd=repo)

    report = index_source(str(repo), "git", settings=settings, progress=False)

    assert report.name == "api-idee" and report.documents == 3
    assert report.model == "fastembed:local/multilingual-e5-small-q4" and report.dim == 384
    entry = KnowledgeStore(settings.data_dir).sources()["api-idee"]
    assert entry["commit"] == head and entry["chunks"] == report.chunks
    assert entry["embedding_model"] == report.model and entry["type"] == "git"
    clone = settings.cache_dir / "git" / "api-idee"
    assert git("rev-parse", "--is-shallow-repository", cwd=clone) == "true"
    hits = KnowledgeRetriever(settings).search("¿cómo añado una capa WMS?", 3)
    assert hits[0]["source"] == "docs/capas.md" and "WMS" in hits[0]["title"]
    sources = {h["source"] for h in KnowledgeRetriever(settings).search("dependencia nada", 10)}
    assert not any(s.startswith(("node_modules", "dist")) for s in sources)


def test_a_file_url_works_like_a_path(settings, tmp_path):
    repo = make_repo(tmp_path / "repo", {"docs/capas.md": SMALL["docs/capas.md"]})
    report = index_source(repo.as_uri(), "git", name="por-url", settings=settings, progress=False)
    assert report.documents == 1 and report.chunks >= 5


def test_reindexing_replaces_the_source_and_removes_the_old_version(settings, tmp_path):
    repo = make_repo(
        tmp_path / "docs", {"a.md": "# Alfa\n\nPrimera versión del texto sobre capas."}
    )
    first = index_source(str(repo), "git", settings=settings, progress=False)
    store = KnowledgeStore(settings.data_dir)
    old_dir = store.version_dir(store.sources()["docs"])
    (repo / "a.md").write_text("# Beta\n\nSegunda versión, sobre eventos del mapa.\n")
    (repo / "b.md").write_text("# Gamma\n\nUn documento nuevo sobre proyecciones UTM.\n")
    git("add", "-A", cwd=repo)
    git("-c", "user.name=P", "-c", "user.email=p@e.org", "commit", "-qm", "v2", cwd=repo)

    second = index_source(str(repo), "git", settings=settings, progress=False)

    assert second.documents == 2 and second.chunks > first.chunks
    entry = store.sources()["docs"]
    assert entry["chunks"] == second.chunks and not old_dir.exists()
    assert [p.name for p in store.versions.iterdir()] == [entry["dir"]]
    contents = " ".join(h["content"] for h in KnowledgeRetriever(settings).search("versión", 5))
    assert "Segunda versión" in contents and "Primera versión" not in contents


def test_a_local_folder_is_indexed_with_type_path(settings):
    folder = CORPUS / "src"
    report = index_source(str(folder), "path", name="carpeta", settings=settings, progress=False)
    assert [d.source for d in iter_folder(folder)] == ["api/geocoder.py", "facade/js/Map.js"]
    assert report.documents == 2 and report.chunks == 10
    entry = KnowledgeStore(settings.data_dir).sources()["carpeta"]
    assert entry["location"] == str(folder.resolve()) and entry["type"] == "path"
    assert entry["chunks"] == 10 and entry["embedding_dim"] == 384


def test_bad_sources_fail_clearly_and_change_nothing(settings, tmp_path):
    index_source(
        str(CORPUS / "docs" / "en"), "path", name="buena", settings=settings, progress=False
    )
    store = KnowledgeStore(settings.data_dir)
    before = store.sources()
    with pytest.raises(KnowledgeError, match="no es una carpeta"):
        index_source(str(tmp_path / "no-existe"), "path", name="buena", settings=settings)
    with pytest.raises(KnowledgeError, match="No se pudo clonar"):
        index_source(str(tmp_path / "no-es-repo"), "git", name="buena", settings=settings)
    empty = tmp_path / "vacia"
    empty.mkdir()
    (empty / "foto.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(KnowledgeError, match="No se encontró texto indexable"):
        index_source(str(empty), "path", name="buena", settings=settings)
    with pytest.raises(KnowledgeError, match="Nombre de fuente no válido"):
        index_source(str(CORPUS), "path", name="../fuera", settings=settings)
    with pytest.raises(KnowledgeError, match="git, web o path"):
        index_source(str(CORPUS), "ftp", settings=settings)
    assert store.sources() == before
    assert [p.name for p in store.versions.iterdir()] == [before["buena"]["dir"]]


def test_without_an_embedding_model_the_source_is_indexed_for_bm25_only(tmp_path):
    from tests.knowledge.helpers import make_settings

    cfg = make_settings(tmp_path, embeddings_provider="none", embeddings_model_path=None)
    report = index_source(str(CORPUS / "docs"), "path", name="lexico", settings=cfg, progress=False)
    assert report.model is None
    assert KnowledgeStore(cfg.data_dir).sources()["lexico"]["embedding_model"] is None
    hits = KnowledgeRetriever(cfg).search("parcelas catastrales", 3)
    assert hits[0]["source"] == "servicios-idee.md"  # relative to the indexed folder


def test_an_unavailable_model_falls_back_to_bm25_and_says_so(tmp_path, monkeypatch):
    from tests.knowledge.helpers import make_settings

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = make_settings(
        tmp_path,
        embeddings_model_path=None,
        embeddings_model="sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
    )
    report = index_source(
        str(CORPUS / "docs"), "path", name="sin-modelo", settings=cfg, progress=False
    )
    assert report.model is None
    assert any("solo con BM25" in w and "No se pudo cargar" in w for w in report.warnings)


def test_default_names():
    assert default_name("https://github.com/IGN/API-IDEE.git", "git") == "API-IDEE"
    assert default_name("git@github.com:IGN/api-idee.git", "git") == "api-idee"
    assert default_name("https://componentes.idee.es/api-idee/docs/", "web") == (
        "componentes.idee.es-api-idee-docs"
    )
