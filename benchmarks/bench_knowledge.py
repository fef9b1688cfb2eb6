"""Knowledge base: build throughput against raw fastembed, query latency at 1k and 20k chunks,
and retrieval quality (recall@5 of dense, BM25 and hybrid).

1. Build. The same chunks (this repository's own code and docs, capped at --chunks) are
   embedded by
     raw     fastembed's ``TextEmbedding.embed`` alone, at the same batch size (the baseline),
     build   ``index_source`` end to end: read files, chunk, embed, BM25, FAISS, save, publish.
   Ratio = build chunks/s ÷ raw chunks/s (target ≥ 0.9). Interleaved runs, best of --repeat.
2. Query. ``KnowledgeRetriever.search`` (tokenise, embed the query with the real model, FAISS,
   BM25, RRF, result dicts) on published indexes of 1,000 and 20,000 chunks. Chunk texts are
   real (the repository's chunks, recombined to reach 20k, so BM25 sees real posting lists); the
   stored vectors are synthetic unit vectors (embedding 20k chunks here would take over an hour
   and does not change FAISS's cost), the query embedding is real. p50/p95 over --queries
   queries, with the query embedding alone as the floor (target: hybrid p50 ≤ 15 ms at 20k).
3. Quality. recall@5 on tests/knowledge/data/qa.json over the test corpus.

Needs ../shared/models/multilingual-e5-small-q4 (or EMBEDDINGS_MODEL_PATH).
Run: .venv/bin/python benchmarks/bench_knowledge.py [--chunks 200] [--queries 300]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from idee_notebook_agent.config import Settings  # noqa: E402
from idee_notebook_agent.knowledge.chunking import chunk_documents  # noqa: E402
from idee_notebook_agent.knowledge.embeddings import load_fastembed  # noqa: E402
from idee_notebook_agent.knowledge.index import SourceIndex  # noqa: E402
from idee_notebook_agent.knowledge.indexers import index_source, iter_folder  # noqa: E402
from idee_notebook_agent.knowledge.retriever import KnowledgeRetriever  # noqa: E402
from idee_notebook_agent.knowledge.store import KnowledgeStore  # noqa: E402

MODEL_DIR = Path(
    os.environ.get("EMBEDDINGS_MODEL_PATH")
    or ROOT.parent / "shared" / "models" / "multilingual-e5-small-q4"
)
QA = json.loads((ROOT / "tests/knowledge/data/qa.json").read_text(encoding="utf-8"))


def settings_for(tmp: Path) -> Settings:
    return Settings(
        _env_file=None,
        data_dir=tmp / "data",
        cache_dir=tmp / "cache",
        embeddings_provider="fastembed",
        embeddings_model_path=MODEL_DIR,
    )


def load() -> str:
    """The machine's load average: these figures are only comparable on a quiet machine."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} on {os.cpu_count()} cores"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] * 1000


# ---------------------------------------------------------------------------- 1. build
def build_folder(tmp: Path, limit: int) -> Path:
    """Copy files of this repository into ``tmp`` until they make about ``limit`` chunks."""
    folder = tmp / "src"
    total = 0
    for base in (ROOT / "idee_notebook_agent", ROOT / "tests" / "knowledge" / "data" / "corpus"):
        for doc in iter_folder(base):
            n = len(chunk_documents([doc]))
            if total + n > limit:
                continue
            target = folder / base.name / doc.source
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(base / doc.source, target)
            total += n
    return folder


def bench_build(tmp: Path, limit: int, batch: int, repeat: int) -> None:
    folder = build_folder(tmp, limit)
    chunks = chunk_documents(iter_folder(folder))
    model = load_fastembed(model_path=MODEL_DIR)
    texts = ["passage: " + c.search_text() for c in chunks]  # exactly what index_source embeds
    list(model._model.embed(texts[:8], batch_size=8))  # warm up
    raw_times, build_times = [], []
    for i in range(repeat):
        t0 = time.perf_counter()
        list(model._model.embed(texts, batch_size=batch))
        raw_times.append(time.perf_counter() - t0)
        cfg = settings_for(tmp / f"run{i}")
        t0 = time.perf_counter()
        report = index_source(str(folder), "path", name="bench", settings=cfg, progress=False)
        build_times.append(time.perf_counter() - t0)
        assert report.chunks == len(chunks)
    raw_rate = len(chunks) / min(raw_times)
    build_rate = len(chunks) / min(build_times)
    mean_chars = statistics.mean(len(t) for t in texts)
    print(
        f"1. Build: {len(chunks)} chunks (mean {mean_chars:.0f} chars), batch {batch}, "
        f"best of {repeat} ({load()})"
    )
    print(f"   raw fastembed   {raw_rate:8.1f} chunks/s   ({min(raw_times):.1f} s)")
    print(f"   index_source    {build_rate:8.1f} chunks/s   ({min(build_times):.1f} s)")
    print(f"   ratio build/raw {build_rate / raw_rate:8.2f}   (target ≥ 0.90)\n")


# ---------------------------------------------------------------------------- 2. query
def corpus_chunks(n: int) -> list[dict]:
    """``n`` chunk dicts with real text: the repository's chunks, then recombinations of them."""
    import random

    base = [c.to_dict() for c in chunk_documents(iter_folder(ROOT / "idee_notebook_agent"))]
    base += [
        c.to_dict()
        for c in chunk_documents(iter_folder(ROOT / "tests" / "knowledge" / "data" / "corpus"))
    ]
    rng = random.Random(7)
    out = list(base[:n])
    paragraphs = [p for c in base for p in c["content"].split("\n\n") if len(p) > 40]
    while len(out) < n:
        i = len(out)
        text = "\n\n".join(rng.sample(paragraphs, 3))
        out.append({**base[i % len(base)], "content": text, "chunk_index": i})
    return out


def publish_synthetic(cfg: Settings, n: int, dim: int, model_name: str) -> None:
    import numpy as np

    chunks = corpus_chunks(n)
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    meta = {"name": f"n{n}", "type": "path", "location": "bench", "embedding_model": model_name}
    index = SourceIndex.build(chunks, vectors, meta)
    store = KnowledgeStore(cfg.data_dir)
    folder = store.new_build_dir(f"n{n}")
    index.save(folder)
    store.publish(f"n{n}", folder, {"chunks": n, "embedding_model": model_name})


def bench_query(tmp: Path, queries: int) -> None:
    model = load_fastembed(model_path=MODEL_DIR)
    questions = [item["q"] for item in QA]
    print(f"2. Query latency, {queries} queries, ms, real query embedding ({load()})")
    print(f"   {'chunks':>7} {'mode':<8} {'p50':>7} {'p95':>7}")
    for n in (1_000, 20_000):
        cfg = settings_for(tmp / f"q{n}")
        publish_synthetic(cfg, n, model.dim, model.name)
        retriever = KnowledgeRetriever(cfg)
        retriever.search("calentar", 5)  # load the snapshot and warm up
        floor: list[float] = []
        timings: dict[str, list[float]] = {"hybrid": [], "dense": [], "bm25": []}
        steps = ["embed", *timings]
        for i in range(queries):  # interleaved and rotated, so load and warm-up hit all alike
            q = f"{questions[i % len(questions)]} {i}"
            for step in steps[i % 4 :] + steps[: i % 4]:
                t0 = time.perf_counter()
                if step == "embed":
                    model.embed_query(q)
                    floor.append(time.perf_counter() - t0)
                else:
                    retriever.search(q, 5, step)
                    timings[step].append(time.perf_counter() - t0)
        print(f"   {n:>7} {'embed':<8} {pct(floor, 0.5):7.2f} {pct(floor, 0.95):7.2f}   (floor)")
        for mode, bucket in timings.items():
            print(f"   {n:>7} {mode:<8} {pct(bucket, 0.5):7.2f} {pct(bucket, 0.95):7.2f}")
        hybrid_p50 = pct(timings["hybrid"], 0.5)
        print(
            f"   {n:>7} hybrid − embedding floor (p50): {hybrid_p50 - pct(floor, 0.5):.2f} ms"
            + ("   (target p50 ≤ 15 ms)" if n == 20_000 else "")
        )
    print(f"   ({load()} at the end)\n")


# ---------------------------------------------------------------------------- 3. quality
def bench_quality(tmp: Path) -> None:
    cfg = settings_for(tmp / "quality")
    index_source(
        str(ROOT / "tests/knowledge/data/corpus"),
        "path",
        name="corpus",
        settings=cfg,
        progress=False,
    )
    retriever = KnowledgeRetriever(cfg)
    print(f"3. Retrieval quality, {len(QA)} questions → expected chunks (test corpus)")
    for mode in ("dense", "bm25", "hybrid"):
        found = 0
        for item in QA:
            hits = retriever.search(item["q"], 5, mode)
            found += any(
                h["source"] == src and part in h["title"]
                for h in hits
                for src, part in item["expect"]
            )
        print(f"   recall@5 {mode:<7} {found / len(QA):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--skip-build", action="store_true")
    args = parser.parse_args()
    if not (MODEL_DIR / "model.onnx").is_file():
        sys.exit(f"Falta el modelo de prueba en {MODEL_DIR}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if not args.skip_build:
            bench_build(tmp, args.chunks, args.batch_size, args.repeat)
        bench_query(tmp, args.queries)
        bench_quality(tmp)


if __name__ == "__main__":
    main()
