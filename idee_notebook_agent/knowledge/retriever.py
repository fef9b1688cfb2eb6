"""Hybrid retrieval over every indexed source, with an in-memory cache that follows re-indexing.

The agent builds one retriever (``default_retriever``: cheap, loads nothing) and awaits
``retrieve(query, k)`` each turn; the work runs in a worker thread. Each call compares the
manifest's file identity with the loaded snapshot and reloads only the sources whose version
changed, so a re-index (from this process or an ``idee-agent index`` elsewhere) is served
without a restart. A snapshot is immutable: a query that started on it finishes on it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .embeddings import Embedder, get_embedder
from .errors import EmbeddingsUnavailableError, IndexMismatchError, KnowledgeError
from .index import SourceIndex, lexical_tokens, rrf
from .store import KnowledgeStore

if TYPE_CHECKING:
    from ..config import Settings

log = logging.getLogger(__name__)

MODES = ("hybrid", "dense", "bm25")
_UNSET: Any = object()


@dataclass(frozen=True)
class Snapshot:
    """The sources loaded from one version of the manifest."""

    stamp: tuple[int, int, int]
    sources: tuple[SourceIndex, ...]


class KnowledgeRetriever:
    """FAISS + BM25 over all sources, fused with reciprocal-rank fusion."""

    def __init__(self, settings: Settings, *, embedder: Embedder | None = _UNSET) -> None:
        self.settings = settings
        self.store = KnowledgeStore(settings.data_dir)
        self._snapshot: Snapshot | None = None
        self._load_lock = threading.Lock()
        self._embedder_lock = threading.Lock()
        self._embedder: Embedder | None = embedder
        self._embedder_error: str | None = None
        self._warned: set[str] = set()
        self._warn_lock = threading.Lock()

    # ------------------------------------------------------------------ public API
    async def retrieve(self, query: str, k: int) -> list[dict[str, Any]]:
        """Top ``k`` chunks for ``query`` (embedding and search run in a worker thread)."""
        return await asyncio.to_thread(self.search, query, k)

    def search(self, query: str, k: int = 5, mode: str = "hybrid") -> list[dict[str, Any]]:
        """Top ``k`` chunks: ``hybrid`` (RRF of dense and BM25), ``dense`` or ``bm25``.

        Without usable vectors (no model, another model) every mode falls back to BM25. Each
        chunk's ``score`` is the fused RRF score in hybrid mode, else the cosine or BM25 score.
        """
        if mode not in MODES:
            raise KnowledgeError(f"Modo de búsqueda desconocido '{mode}': usa {', '.join(MODES)}.")
        query = (query or "").strip()
        snap = self.snapshot()
        if not query or not snap.sources or k <= 0:
            return []
        depth = max(4 * k, 20)
        dense: list[tuple[tuple[int, int], float]] = []
        lexical: list[tuple[tuple[int, int], float]] = []
        if mode in ("hybrid", "dense"):
            dense = self._dense(query, snap, depth)
        if mode in ("hybrid", "bm25") or (mode == "dense" and not dense):
            tokens = lexical_tokens(query)
            for si, src in enumerate(snap.sources):
                lexical.extend(((si, pos), score) for pos, score in src.lexical(tokens, depth))
            lexical.sort(key=lambda item: item[1], reverse=True)
            lexical = lexical[:depth]
        if mode == "dense" and dense:
            ranked = dense
        elif mode == "bm25" or not dense:
            ranked = lexical
        else:
            keys = {key for key, _ in dense} | {key for key, _ in lexical}
            ids = {key: i for i, key in enumerate(keys)}
            fused = rrf([[ids[key] for key, _ in dense], [ids[key] for key, _ in lexical]])
            back = {i: key for key, i in ids.items()}
            ranked = sorted(((back[i], s) for i, s in fused.items()), key=lambda x: -x[1])
        out: list[dict[str, Any]] = []
        for (si, pos), score in ranked[:k]:
            src = snap.sources[si]
            item = dict(src.chunks[pos])
            item.setdefault("source_name", src.name)
            item["score"] = round(float(score), 6)
            out.append(item)
        return out

    def snapshot(self) -> Snapshot:
        """The current sources, reloaded when the manifest changed since the last call."""
        snap = self._snapshot
        if snap is not None and snap.stamp == self.store.stamp():
            return snap
        with self._load_lock:
            snap = self._snapshot
            if snap is not None and snap.stamp == self.store.stamp():
                return snap
            self._snapshot = self._load(snap)
            return self._snapshot

    def refresh(self) -> Snapshot:
        """Reload now (a cheap no-op when nothing changed)."""
        return self.snapshot()

    # ------------------------------------------------------------------ internals
    def _load(self, old: Snapshot | None) -> Snapshot:
        reuse = {s.path.name: s for s in (old.sources if old else ()) if s.path is not None}
        for attempt in range(5):
            state = self.store.read()
            loaded: list[SourceIndex] = []
            replaced = False
            for name in sorted(state.sources):
                entry = state.sources[name]
                if entry["dir"] in reuse:
                    loaded.append(reuse[entry["dir"]])
                    continue
                try:
                    loaded.append(SourceIndex.load(self.store.version_dir(entry)))
                except Exception as exc:
                    if self.store.stamp() != state.stamp:
                        replaced = True  # a concurrent re-index replaced it: read again
                        break
                    self._warn_once(
                        f"load:{entry['dir']}",
                        "No se pudo cargar la fuente '%s' (%s); se omite. Vuelve a indexarla.",
                        name,
                        exc,
                    )
            if replaced:
                log.debug("Versión sustituida durante la carga (intento %d)", attempt + 1)
                continue
            log.debug("Conocimiento cargado: %d fuentes", len(loaded))
            return Snapshot(state.stamp, tuple(loaded))
        raise KnowledgeError(
            "El índice de conocimiento cambia continuamente mientras se carga; reintenta."
        )

    def _dense(self, query: str, snap: Snapshot, depth: int) -> list[tuple[tuple[int, int], float]]:
        with_vectors = [s for s in snap.sources if s.vectors is not None]
        if not with_vectors:
            self._warn_once(
                "no-vectors",
                "Las fuentes indexadas no tienen vectores (se indexaron sin modelo de "
                "embeddings): se busca solo con BM25.",
            )
            return []
        embedder = self._get_embedder()
        if embedder is None:
            return []
        usable = []
        for si, src in enumerate(snap.sources):
            if src.vectors is None:
                continue
            if src.model != embedder.name:
                self._warn_once(
                    f"mismatch:{src.name}:{src.model}",
                    "La fuente '%s' se indexó con el modelo %s y ahora está configurado %s: no se "
                    "mezclan vectores de modelos distintos, así que esa fuente se busca solo con "
                    "BM25. Reindexa con 'idee-agent index' o vuelve a configurar EMBEDDINGS_MODEL.",
                    src.name,
                    src.model,
                    embedder.name,
                )
                continue
            usable.append(si)
        if not usable:
            return []
        vector = embedder.embed_query(query)
        hits: list[tuple[tuple[int, int], float]] = []
        for si in usable:
            try:
                hits.extend(((si, pos), s) for pos, s in snap.sources[si].dense(vector, depth))
            except IndexMismatchError as exc:
                self._warn_once(f"dim:{snap.sources[si].name}", "%s", exc)
        hits.sort(key=lambda item: item[1], reverse=True)
        return hits[:depth]

    def _get_embedder(self) -> Embedder | None:
        if self._embedder is not _UNSET:
            return self._embedder
        with self._embedder_lock:
            if self._embedder is not _UNSET:
                return self._embedder
            try:
                self._embedder = get_embedder(self.settings, allow_download=False)
            except EmbeddingsUnavailableError as exc:
                self._embedder_error = str(exc)
                self._embedder = None
            if self._embedder is None:
                self._warn_once(
                    "no-embedder",
                    "Sin modelo de embeddings: la búsqueda usa solo BM25 (léxica). %s",
                    self._embedder_error or "EMBEDDINGS_PROVIDER=none.",
                )
            return self._embedder

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        with self._warn_lock:
            if key in self._warned:
                return
            self._warned.add(key)
        log.warning(message, *args)


_retrievers: dict[tuple[str, ...], KnowledgeRetriever] = {}
_retrievers_lock = threading.Lock()


def default_retriever(settings: Settings) -> KnowledgeRetriever | None:
    """The shared retriever of ``settings.data_dir``; None when nothing has been indexed.

    Cheap: one stat and a small JSON read. No index and no model is loaded until the first
    ``retrieve``.
    """
    store = KnowledgeStore(settings.data_dir)
    if not store.exists():
        return None
    key = (
        str(store.root.resolve()),
        settings.embeddings_provider or "",
        settings.embeddings_model or "",
        str(settings.embeddings_model_path or ""),
        str(settings.cache_dir),
    )
    with _retrievers_lock:
        retriever = _retrievers.get(key)
        if retriever is None:
            retriever = KnowledgeRetriever(settings)
            _retrievers[key] = retriever
        return retriever


def clear_cache() -> None:
    """Forget the shared retrievers (tests, or to free memory)."""
    with _retrievers_lock:
        _retrievers.clear()
