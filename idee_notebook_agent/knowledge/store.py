"""Where indexed sources live on disk, and how a re-index replaces one atomically.

Layout under ``<IDEE_DATA_DIR>/knowledge``::

    manifest.json          {"generation": n, "sources": {name: {"dir": ..., summary...}}}
    versions/<name>-<id>/  one built index (meta.json, chunks.jsonl, vectors.faiss, bm25/)
    .lock                  held by writers (several ``idee-agent index`` may run at once)

A new version is built in a temporary folder, renamed into ``versions/`` and then published by
replacing ``manifest.json`` with ``os.replace`` (atomic on POSIX and Windows). Readers only ever
follow the manifest, so they see the old index or the new one, never a half-built one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import KnowledgeError

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
STALE_SECONDS = 3600
"""Orphan temporary folders (a crashed build) older than this are removed by the next writer."""


def check_name(name: str) -> str:
    """A source name is used as a folder name: letters, digits, ``.``, ``_``, ``-``."""
    if not NAME_RE.match(name or ""):
        raise KnowledgeError(
            f"Nombre de fuente no válido: '{name}'. Usa letras, números, '.', '_' o '-' "
            "(hasta 64 caracteres), p. ej. --name api-idee-docs."
        )
    return name


@dataclass(frozen=True)
class ManifestState:
    """One reading of the manifest, with the file identity used to notice a change."""

    stamp: tuple[int, int, int]
    generation: int
    sources: dict[str, dict[str, Any]]


class KnowledgeStore:
    """Sources of one data directory: list, publish a new version, remove."""

    def __init__(self, data_dir: Path) -> None:
        self.root = Path(data_dir).expanduser() / "knowledge"
        self.versions = self.root / "versions"
        self.manifest_path = self.root / MANIFEST

    # ------------------------------------------------------------------ reading
    def exists(self) -> bool:
        """True when at least one source has been indexed (cheap: one stat and a small read)."""
        return bool(self.read().sources)

    def stamp(self) -> tuple[int, int, int]:
        """Identity of the manifest file; changes whenever a writer publishes."""
        try:
            st = os.stat(self.manifest_path)
        except FileNotFoundError:
            return (0, 0, 0)
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def read(self) -> ManifestState:
        for _ in range(3):
            stamp = self.stamp()
            if stamp == (0, 0, 0):
                return ManifestState(stamp, 0, {})
            try:
                data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except json.JSONDecodeError as exc:
                raise KnowledgeError(
                    f"El índice de conocimiento está dañado ({self.manifest_path}): {exc}. "
                    "Borra esa carpeta y vuelve a indexar."
                ) from exc
            return ManifestState(
                stamp, int(data.get("generation", 0)), dict(data.get("sources", {}))
            )
        return ManifestState((0, 0, 0), 0, {})

    def sources(self) -> dict[str, dict[str, Any]]:
        return self.read().sources

    def version_dir(self, entry: dict[str, Any]) -> Path:
        return self.versions / entry["dir"]

    # ------------------------------------------------------------------ writing
    @contextmanager
    def lock(self, timeout: float = 600.0) -> Iterator[None]:
        """Serialise writers across threads and processes."""
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(str(self.root / ".lock"), timeout=timeout):
                yield
        except Timeout as exc:
            raise KnowledgeError(
                "Otro proceso está actualizando el índice de conocimiento; espera a que termine "
                f"y reintenta (bloqueo {self.root / '.lock'})."
            ) from exc

    def new_build_dir(self, name: str) -> Path:
        """A fresh temporary folder for building a version of ``name``."""
        check_name(name)
        self.versions.mkdir(parents=True, exist_ok=True)
        path = self.versions / f".tmp-{name}-{uuid.uuid4().hex[:10]}"
        path.mkdir()
        return path

    def publish(self, name: str, build_dir: Path, summary: dict[str, Any]) -> dict[str, Any]:
        """Make ``build_dir`` the current version of ``name``; the old version is deleted."""
        check_name(name)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        final = self.versions / f"{name}-{stamp}-{uuid.uuid4().hex[:8]}"
        with self.lock():
            os.rename(build_dir, final)
            state = self.read()
            sources = dict(state.sources)
            old = sources.get(name)
            entry = {**summary, "name": name, "dir": final.name}
            sources[name] = entry
            self._write_manifest(state.generation + 1, sources)
            if old and old.get("dir") != final.name:
                self._remove_dir(self.versions / old["dir"])
            self._sweep()
        log.info("Fuente '%s' publicada (%s)", name, final.name)
        return entry

    def remove(self, name: str) -> dict[str, Any]:
        """Forget a source and delete its files."""
        with self.lock():
            state = self.read()
            sources = dict(state.sources)
            entry = sources.pop(name, None)
            if entry is None:
                known = ", ".join(sorted(state.sources)) or "ninguna"
                raise KnowledgeError(
                    f"No hay ninguna fuente llamada '{name}'. Fuentes indexadas: {known}."
                )
            self._write_manifest(state.generation + 1, sources)
            self._remove_dir(self.versions / entry["dir"])
        return entry

    def discard(self, build_dir: Path) -> None:
        """Drop a build that failed; nothing published changes."""
        self._remove_dir(build_dir)

    def _write_manifest(self, generation: int, sources: dict[str, Any]) -> None:
        tmp = self.root / f".{MANIFEST}.{uuid.uuid4().hex[:8]}"
        tmp.write_text(
            json.dumps(
                {"generation": generation, "sources": sources}, ensure_ascii=False, indent=2
            ),
            encoding="utf-8",
        )
        os.replace(tmp, self.manifest_path)

    def _remove_dir(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def _sweep(self) -> None:
        """Remove folders no manifest entry points to (crashed builds), once they are old."""
        live = {e["dir"] for e in self.read().sources.values()}
        now = time.time()
        for child in self.versions.iterdir():
            if child.name in live:
                continue
            try:
                age = now - child.stat().st_mtime
            except FileNotFoundError:
                continue
            if age > STALE_SECONDS:
                self._remove_dir(child)
