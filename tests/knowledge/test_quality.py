"""Retrieval quality on the test corpus: recall@5 of dense, BM25 and hybrid search over 30
question → expected-chunk pairs (Spanish and English questions, Spanish and English documents).

A chunk matches when it comes from the expected file and its title names the expected section
(merged neighbours keep every title). The figures are printed (``pytest -s``) and the floors
below catch a regression in chunking, embedding or fusion.
"""

from __future__ import annotations

import json

import pytest

from idee_notebook_agent.knowledge.retriever import KnowledgeRetriever
from tests.knowledge.helpers import DATA

QA = json.loads((DATA / "qa.json").read_text(encoding="utf-8"))


def recall_at(retriever: KnowledgeRetriever, mode: str, k: int = 5) -> tuple[float, list[str]]:
    found, missed = 0, []
    for item in QA:
        hits = retriever.search(item["q"], k, mode)
        ok = any(
            h["source"] == src and part in h["title"] for h in hits for src, part in item["expect"]
        )
        found += ok
        if not ok:
            missed.append(item["q"])
    return found / len(QA), missed


def test_the_evaluation_set_is_big_enough():
    assert len(QA) >= 20


@pytest.mark.parametrize(("mode", "floor"), [("dense", 0.85), ("bm25", 0.8), ("hybrid", 0.85)])
def test_recall_at_5(corpus_settings, mode, floor):
    recall, missed = recall_at(KnowledgeRetriever(corpus_settings), mode)
    print(f"\nrecall@5 {mode}: {recall:.3f} ({len(QA)} preguntas); fallos: {missed}")
    assert recall >= floor, missed


def test_hybrid_is_never_worse_than_both_halves(corpus_settings):
    retriever = KnowledgeRetriever(corpus_settings)
    dense, _ = recall_at(retriever, "dense")
    lexical, _ = recall_at(retriever, "bm25")
    hybrid, _ = recall_at(retriever, "hybrid")
    assert hybrid >= min(dense, lexical)
