"""One source's searchable index: FAISS over normalised vectors plus BM25 (bm25s) over the same
chunks, saved in one folder and loaded whole into memory (read-only afterwards, so any number of
threads can search it).

FAISS is exact inner product (``IndexFlatIP``) up to ``APPROX_THRESHOLD`` vectors and HNSW above,
where exact search would cost more than the rest of a query. Rankings are fused with
reciprocal-rank fusion (RRF), which needs no score calibration between BM25 and cosine.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import IndexMismatchError, KnowledgeError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

APPROX_THRESHOLD = 100_000
"""Above this many vectors the source gets an HNSW index instead of an exact one."""
HNSW_M = 32
HNSW_EF_SEARCH = 96
RRF_K = 60
FORMAT_VERSION = 1

CHUNKS_FILE = "chunks.jsonl"
VECTORS_FILE = "vectors.faiss"
BM25_DIR = "bm25"
META_FILE = "meta.json"

_WORD = re.compile(r"\w+", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_stopwords: frozenset[str] | None = None


def _stop() -> frozenset[str]:
    global _stopwords
    if _stopwords is None:
        from bm25s.stopwords import STOPWORDS_EN, STOPWORDS_SPANISH

        _stopwords = frozenset(_fold(w) for w in (*STOPWORDS_EN, *STOPWORDS_SPANISH))
    return _stopwords


def _fold(text: str) -> str:
    """Lower case without accents, so 'capa', 'Capa' and 'cápa' match."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def lexical_tokens(text: str) -> list[str]:
    """BM25 tokens: words folded to lower case without accents, identifiers also split at
    camelCase and snake_case (``addLayer`` → ``addlayer add layer``), stop words dropped."""
    stop = _stop()
    out: list[str] = []
    for word in _WORD.findall(text):
        folded = _fold(word)
        if len(folded) > 1 and folded not in stop:
            out.append(folded)
        if "_" in word or (not word.islower() and not word.isupper()):
            parts = [p for chunk in word.split("_") for p in _CAMEL.findall(chunk)]
            if len(parts) > 1:
                out.extend(f for f in (_fold(p) for p in parts) if len(f) > 1 and f not in stop)
    return out


def rrf(rankings: list[list[int]], k: int = RRF_K) -> dict[int, float]:
    """Reciprocal-rank fusion: each list is best first; returns id → fused score."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank + 1)
    return scores


@dataclass
class SourceIndex:
    """Chunks (dicts), their vectors in FAISS (optional) and a BM25 index, for one source."""

    meta: dict[str, Any]
    chunks: list[dict[str, Any]]
    vectors: Any = None
    """A FAISS index, or None when the source was indexed for BM25 only."""
    bm25: Any = None
    path: Path | None = None
    _empty: bool = field(default=False, repr=False)

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))

    @property
    def model(self) -> str | None:
        return self.meta.get("embedding_model")

    @property
    def dim(self) -> int | None:
        return self.meta.get("embedding_dim")

    # ------------------------------------------------------------------ build / save / load
    @classmethod
    def build(
        cls,
        chunks: list[dict[str, Any]],
        vectors: np.ndarray | None,
        meta: dict[str, Any],
        *,
        approx_threshold: int = APPROX_THRESHOLD,
        texts: list[str] | None = None,
    ) -> SourceIndex:
        """Build the FAISS and BM25 indexes of ``chunks`` (``texts`` are what BM25 indexes)."""
        import bm25s

        if vectors is not None and len(vectors) != len(chunks):
            raise KnowledgeError(
                f"Hay {len(vectors)} vectores para {len(chunks)} fragmentos; reindexa la fuente."
            )
        meta = dict(meta)
        meta["format"] = FORMAT_VERSION
        meta["chunks"] = len(chunks)
        faiss_index = None
        if vectors is not None and len(chunks):
            faiss_index = _faiss_index(vectors, approx_threshold)
            meta["embedding_dim"] = int(vectors.shape[1])
            meta["vector_index"] = "hnsw" if len(vectors) > approx_threshold else "flat"
        else:
            meta["embedding_model"] = None
            meta["embedding_dim"] = None
            meta["vector_index"] = None
        corpus = [lexical_tokens(t) for t in (texts or [c["content"] for c in chunks])]
        bm25 = None
        if chunks:
            bm25 = bm25s.BM25()
            bm25.index(corpus, show_progress=False)
        return cls(meta, chunks, faiss_index, bm25, _empty=not chunks)

    def save(self, folder: Path) -> None:
        """Write the index into ``folder`` (a fresh temporary folder: the store renames it)."""
        import faiss

        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / CHUNKS_FILE, "w", encoding="utf-8") as fh:
            for chunk in self.chunks:
                fh.write(json.dumps(chunk, ensure_ascii=False) + "\n")
        if self.vectors is not None:
            faiss.write_index(self.vectors, str(folder / VECTORS_FILE))
        if self.bm25 is not None:
            self.bm25.save(str(folder / BM25_DIR), show_progress=False)
        (folder / META_FILE).write_text(
            json.dumps(self.meta, ensure_ascii=False, indent=2), encoding="utf-8"
        )
        self.path = folder

    @classmethod
    def load(cls, folder: Path) -> SourceIndex:
        """Load a saved index fully into memory."""
        import bm25s
        import faiss

        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise KnowledgeError(
                f"El índice de '{meta.get('name')}' tiene un formato antiguo "
                f"({meta.get('format')}); vuelve a indexarlo con 'idee-agent index'."
            )
        with open(folder / CHUNKS_FILE, encoding="utf-8") as fh:
            chunks = [json.loads(line) for line in fh if line.strip()]
        vectors = None
        if (folder / VECTORS_FILE).exists():
            vectors = faiss.read_index(str(folder / VECTORS_FILE))
            if hasattr(vectors, "hnsw"):
                vectors.hnsw.efSearch = HNSW_EF_SEARCH
        bm25 = None
        if (folder / BM25_DIR).exists():
            bm25 = bm25s.BM25.load(str(folder / BM25_DIR), show_progress=False)
        return cls(meta, chunks, vectors, bm25, folder, _empty=not chunks)

    # ------------------------------------------------------------------ search
    def dense(self, query_vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` chunks by cosine: [(position, score)], best first."""
        import numpy as np

        if self.vectors is None or self._empty:
            return []
        q = np.asarray(query_vector, dtype=np.float32).reshape(1, -1)
        if q.shape[1] != self.vectors.d:
            raise IndexMismatchError(
                f"La fuente '{self.name}' se indexó con vectores de dimensión {self.vectors.d} "
                f"({self.model}), pero la consulta tiene dimensión {q.shape[1]}. Reindexa la "
                "fuente con el modelo actual o vuelve a configurar EMBEDDINGS_MODEL."
            )
        k = min(k, self.vectors.ntotal)
        _single_thread_search()
        scores, ids = self.vectors.search(q, k)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def lexical(self, tokens: list[str], k: int) -> list[tuple[int, float]]:
        """Top ``k`` chunks by BM25 over already-tokenised query words; zero scores dropped."""
        import numpy as np

        if self.bm25 is None or self._empty or not tokens:
            return []
        scores = self.bm25.get_scores(list(tokens))  # unknown words score nothing
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(i), float(scores[i])) for i in top if scores[i] > 0.0]


_threads_set = False


def _single_thread_search() -> None:
    """One OpenMP thread for FAISS: a single query is faster so (1.2 ms against 2.6 ms for 20k
    vectors on 2 cores), and concurrent queries already run in their own worker threads."""
    global _threads_set
    if not _threads_set:
        import faiss

        faiss.omp_set_num_threads(1)
        _threads_set = True


def _faiss_index(vectors: np.ndarray, approx_threshold: int) -> Any:
    import faiss
    import numpy as np

    data = np.ascontiguousarray(vectors, dtype=np.float32)
    dim = data.shape[1]
    if len(data) > approx_threshold:
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 80
        index.hnsw.efSearch = HNSW_EF_SEARCH
    else:
        index = faiss.IndexFlatIP(dim)
    index.add(data)
    return index
