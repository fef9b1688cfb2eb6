"""The per-source index: real FAISS (exact and HNSW) and real bm25s, saved and loaded."""

from __future__ import annotations

import numpy as np
import pytest

from idee_notebook_agent.knowledge.errors import IndexMismatchError
from idee_notebook_agent.knowledge.index import SourceIndex, lexical_tokens, rrf


def test_lexical_tokens_fold_accents_split_identifiers_and_drop_stop_words():
    tokens = lexical_tokens("¿Cómo añado la capa con addLayer y get_feature_info?")
    assert "como" not in tokens and "la" not in tokens and "con" not in tokens
    assert "anado" in tokens and "capa" in tokens
    assert {"addlayer", "add", "layer"} <= set(tokens)
    assert {"get_feature_info", "get", "feature", "info"} <= set(tokens)
    assert lexical_tokens("CÁPA") == lexical_tokens("capa")


def test_rrf_rewards_agreement_between_rankings():
    fused = rrf([[1, 2, 3], [3, 2, 4]])
    assert max(fused, key=fused.get) in (2, 3)
    assert fused[2] > fused[1] and fused[3] > fused[4]
    assert fused[1] == pytest.approx(1 / 61)


def _chunks(n: int) -> list[dict]:
    topics = ["capa wms ortofoto", "evento clic mapa", "estilo punto color", "proyeccion utm"]
    return [
        {"content": f"{topics[i % 4]} documento {i}", "source": f"d{i}.md", "chunk_index": 0}
        for i in range(n)
    ]


def _vectors(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_build_save_load_round_trip_keeps_results(tmp_path):
    chunks, vectors = _chunks(40), _vectors(40)
    index = SourceIndex.build(chunks, vectors, {"name": "x", "embedding_model": "m"})
    assert index.meta["vector_index"] == "flat" and index.meta["embedding_dim"] == 32
    index.save(tmp_path / "v1")
    loaded = SourceIndex.load(tmp_path / "v1")
    assert loaded.chunks == chunks and loaded.model == "m" and loaded.dim == 32
    q = vectors[7]
    assert loaded.dense(q, 3)[0][0] == 7
    assert loaded.dense(q, 3) == index.dense(q, 3)
    hits = loaded.lexical(lexical_tokens("evento clic"), 5)
    assert hits and all(chunks[i]["content"].startswith("evento clic") for i, _ in hits)
    assert loaded.lexical(lexical_tokens("palabrainexistente"), 5) == []


def test_above_the_threshold_an_approximate_hnsw_index_is_used(tmp_path):
    chunks, vectors = _chunks(300), _vectors(300, seed=1)
    exact = SourceIndex.build(chunks, vectors, {"name": "a"}, approx_threshold=10_000)
    approx = SourceIndex.build(chunks, vectors, {"name": "a"}, approx_threshold=100)
    assert approx.meta["vector_index"] == "hnsw" and exact.meta["vector_index"] == "flat"
    approx.save(tmp_path / "hnsw")
    loaded = SourceIndex.load(tmp_path / "hnsw")
    assert type(loaded.vectors).__name__ == "IndexHNSWFlat"
    agree = 0
    for i in range(0, 300, 10):
        top_exact = [p for p, _ in exact.dense(vectors[i], 5)]
        top_approx = [p for p, _ in loaded.dense(vectors[i], 5)]
        assert top_approx[0] == i
        agree += len(set(top_exact) & set(top_approx))
    assert agree / (30 * 5) > 0.9


def test_a_query_of_another_dimension_is_refused_with_a_clear_message():
    index = SourceIndex.build(_chunks(5), _vectors(5), {"name": "docs", "embedding_model": "m"})
    with pytest.raises(IndexMismatchError, match="dimensión 32"):
        index.dense(np.ones(16, dtype=np.float32), 3)


def test_bm25_only_index_has_no_vectors(tmp_path):
    index = SourceIndex.build(_chunks(8), None, {"name": "solo-bm25", "embedding_model": "m"})
    assert index.meta["embedding_model"] is None and index.vectors is None
    index.save(tmp_path / "b")
    loaded = SourceIndex.load(tmp_path / "b")
    assert loaded.dense(np.ones(32, np.float32), 3) == []
    assert loaded.lexical(lexical_tokens("proyección UTM"), 3)
