"""The retriever the agent uses: cheap to build, hybrid search, fallbacks, live refresh and
atomic re-indexing while queries run."""

from __future__ import annotations

import asyncio
import logging
import threading

from idee_notebook_agent.knowledge import retriever as retriever_module
from idee_notebook_agent.knowledge.indexers import index_source
from idee_notebook_agent.knowledge.retriever import KnowledgeRetriever, default_retriever
from tests.fakes.embeddings_server import FakeEmbeddingsServer
from tests.knowledge.helpers import CORPUS, make_settings

REQUIRED = {"content", "source", "chunk_index", "language", "title", "score", "source_name"}


def test_default_retriever_is_none_without_an_index_and_lazy_with_one(settings):
    assert default_retriever(settings) is None
    index_source(str(CORPUS / "docs"), "path", name="docs", settings=settings, progress=False)
    retriever = default_retriever(settings)
    assert isinstance(retriever, KnowledgeRetriever)
    assert retriever._snapshot is None  # nothing loaded yet
    assert retriever._embedder is retriever_module._UNSET  # no model either
    assert default_retriever(settings) is retriever  # one shared instance per data folder


async def test_retrieve_returns_chunk_metadata_and_keeps_the_event_loop_free(corpus_settings):
    retriever = KnowledgeRetriever(corpus_settings)
    task = asyncio.create_task(retriever.retrieve("¿Cómo añado una capa WMS al mapa?", 4))
    ticks = 0
    while not task.done():
        ticks += 1
        await asyncio.sleep(0)
    chunks = task.result()
    assert ticks > 10  # the loop kept running while the index loaded and the query was embedded
    assert len(chunks) == 4 and all(set(c) >= REQUIRED for c in chunks)
    top = chunks[0]
    assert top["source"] == "docs/capas.md" and "WMS" in top["title"]
    assert top["source_name"] == "corpus" and top["language"] == "markdown"
    assert top["line_start"] <= top["line_end"]
    assert [c["score"] for c in chunks] == sorted((c["score"] for c in chunks), reverse=True)


def test_modes_give_their_own_rankings(corpus_settings):
    retriever = KnowledgeRetriever(corpus_settings)
    dense = retriever.search("mapa de calor", 3, "dense")
    lexical = retriever.search("mapa de calor", 3, "bm25")
    assert dense[0]["source"] == "docs/en/styles.md"  # Spanish question, English document
    assert all(0 < c["score"] <= 1.0 for c in dense)
    assert [c["source"] for c in lexical] != [c["source"] for c in dense]
    assert retriever.search("", 3) == [] and retriever.search("capas", 0) == []


def test_without_a_model_search_uses_bm25_and_says_so_once(corpus_settings, caplog):
    cfg = corpus_settings.model_copy(update={"embeddings_provider": "none"})
    retriever = KnowledgeRetriever(cfg)
    with caplog.at_level(logging.WARNING, logger="idee_notebook_agent.knowledge"):
        first = retriever.search("parcelas catastrales", 3)
        retriever.search("ortofotos", 3)
    assert first[0]["source"] == "docs/servicios-idee.md"
    notes = [r for r in caplog.records if "solo BM25" in r.getMessage()]
    assert len(notes) == 1


def test_vectors_of_another_model_are_never_mixed(corpus_settings, caplog):
    fake = FakeEmbeddingsServer(api_key="k").start()
    try:
        cfg = corpus_settings.model_copy(
            update={
                "embeddings_provider": "openai",
                "openai_api_key": "k",
                "openai_base_url": fake.openai_base_url,
            }
        )
        with caplog.at_level(logging.WARNING, logger="idee_notebook_agent.knowledge"):
            hits = KnowledgeRetriever(cfg).search("parcelas catastrales", 3)
        assert hits and hits[0]["source"] == "docs/servicios-idee.md"
        message = " ".join(r.getMessage() for r in caplog.records)
        assert "se indexó con el modelo fastembed:local/multilingual-e5-small-q4" in message
        assert "openai:text-embedding-3-small" in message and "Reindexa" in message
        assert fake.requests == []  # the query was not even embedded with the other model
    finally:
        fake.stop()


def test_a_reindex_is_seen_without_a_restart(settings, tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "a.md").write_text("# Nota\n\nLa primera versión habla de ortofotos.\n")
    index_source(str(folder), "path", name="notas", settings=settings, progress=False)
    retriever = KnowledgeRetriever(settings)
    assert "primera" in retriever.search("versión", 1)[0]["content"]
    (folder / "a.md").write_text("# Nota\n\nLa segunda versión habla de catastro.\n")
    index_source(str(folder), "path", name="notas", settings=settings, progress=False)
    assert "segunda" in retriever.search("versión", 1)[0]["content"]
    index_source(
        str(CORPUS / "docs" / "en"), "path", name="otra", settings=settings, progress=False
    )
    assert {s.name for s in retriever.snapshot().sources} == {"notas", "otra"}
    from idee_notebook_agent.knowledge.store import KnowledgeStore

    KnowledgeStore(settings.data_dir).remove("otra")
    assert [s.name for s in retriever.snapshot().sources] == ["notas"]


def _version(folder, marker: str, count: int) -> None:
    for old in folder.glob("*.md"):
        old.unlink()
    for i in range(count):
        (folder / f"doc{i}.md").write_text(
            f"# Documento {i}\n\nMarcador {marker}: texto del documento {i} sobre capas del mapa.\n"
        )


def test_queries_during_reindexing_never_see_a_half_built_index(settings, tmp_path):
    folder_a, folder_b = tmp_path / "a", tmp_path / "b"
    folder_a.mkdir()
    folder_b.mkdir()
    _version(folder_a, "VERSIONA", 3)
    _version(folder_b, "VERSIONB", 5)
    expected = {"VERSIONA": 3, "VERSIONB": 5}
    index_source(str(folder_a), "path", name="docs", settings=settings, progress=False)
    retriever = KnowledgeRetriever(settings)
    done = threading.Event()
    errors: list[str] = []
    seen: set[str] = set()
    reads = [0]

    def reader() -> None:
        while not done.is_set():
            try:
                snap = retriever.snapshot()
                (source,) = snap.sources
                markers = {c["content"].split("Marcador ")[1].split(":")[0] for c in source.chunks}
                if len(markers) != 1:
                    errors.append(f"mezcla de versiones: {markers}")
                marker = markers.pop()
                if len(source.chunks) != expected[marker] or source.vectors.ntotal != len(
                    source.chunks
                ):
                    errors.append(f"índice incompleto: {marker} {len(source.chunks)}")
                hits = retriever.search("marcador capas del mapa", 10)
                got = {h["content"].split("Marcador ")[1].split(":")[0] for h in hits}
                if len(got) != 1 or len(hits) not in expected.values():
                    errors.append(f"resultado mezclado: {got} {len(hits)}")
                seen.update(got)
                reads[0] += 1
            except Exception as exc:  # any failure is a finding
                errors.append(repr(exc))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for folder in (folder_b, folder_a, folder_b, folder_a, folder_b):
            index_source(str(folder), "path", name="docs", settings=settings, progress=False)
    finally:
        done.set()
        for t in threads:
            t.join()
    assert errors == []
    assert reads[0] > 5 and seen == {"VERSIONA", "VERSIONB"}
    final = retriever.search("marcador", 10)
    assert len(final) == 5 and all("VERSIONB" in h["content"] for h in final)


def test_an_agent_built_with_settings_gets_the_retriever(corpus_settings):
    from idee_notebook_agent.core.agent import Agent

    agent = Agent(corpus_settings)
    assert isinstance(agent.retriever, KnowledgeRetriever)
    empty = make_settings(corpus_settings.data_dir.parent / "vacio")
    assert Agent(empty).retriever is None
