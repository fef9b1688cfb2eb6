"""Index a source: a git repository, a web documentation site or a local folder.

``index_source`` collects the documents, chunks them, embeds the chunks in batches, builds the
FAISS + BM25 index in a temporary folder and publishes it atomically (``store``). Nothing that
was indexed before is touched until the new version is complete.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .chunking import Document, chunk_documents
from .embeddings import Embedder, get_embedder
from .errors import EmbeddingsUnavailableError, KnowledgeError
from .index import APPROX_THRESHOLD, SourceIndex
from .store import NAME_RE, KnowledgeStore, check_name

if TYPE_CHECKING:
    import numpy as np

    from ..config import Settings

log = logging.getLogger(__name__)

SOURCE_TYPES = ("git", "web", "path")
MAX_FILE_BYTES = 500_000
GIT_TIMEOUT = 900
SKIP_DIRS = frozenset(
    [
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "bower_components",
        "build",
        "dist",
        "out",
        "target",
        "vendor",
        "venv",
        ".venv",
        "env",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "site-packages",
        "coverage",
        "htmlcov",
        ".idea",
        ".vscode",
        ".next",
        ".nuxt",
        ".cache",
        ".gradle",
    ]
)
TEXT_SUFFIXES = frozenset(
    [
        ".py",
        ".pyi",
        ".js",
        ".mjs",
        ".cjs",
        ".jsx",
        ".ts",
        ".tsx",
        ".mts",
        ".cts",
        ".java",
        ".kt",
        ".scala",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".swift",
        ".sh",
        ".bash",
        ".sql",
        ".r",
        ".lua",
        ".pl",
        ".css",
        ".scss",
        ".less",
        ".vue",
        ".svelte",
        ".md",
        ".markdown",
        ".mdx",
        ".rst",
        ".txt",
        ".adoc",
        ".html",
        ".htm",
        ".xhtml",
        ".json",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".xml",
        ".properties",
        ".gradle",
    ]
)
TEXT_NAMES = frozenset({"readme", "license", "changelog", "makefile", "dockerfile", "contributing"})
SKIP_NAMES = frozenset(
    [
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "cargo.lock",
        "uv.lock",
        "composer.lock",
        "gemfile.lock",
    ]
)
_UNSET: Any = object()


@dataclass
class IndexReport:
    """What ``index_source`` did, for the CLI and the notebook."""

    name: str
    type: str
    location: str
    documents: int
    chunks: int
    model: str | None
    dim: int | None
    seconds: float
    embed_seconds: float = 0.0
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    entry: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------- documents


def iter_folder(root: Path) -> Iterator[Document]:
    """Text files of a folder (code, docs, config), skipping build and vendor folders,
    binaries, lock files, minified files and files over ``MAX_FILE_BYTES``."""
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for filename in sorted(filenames):
            path = Path(dirpath) / filename
            rel = path.relative_to(root).as_posix()
            doc = _read_document(path, rel)
            if doc is not None:
                yield doc


def _read_document(path: Path, rel: str) -> Document | None:
    lower = path.name.lower()
    if lower in SKIP_NAMES or ".min." in lower:
        return None
    if path.suffix.lower() not in TEXT_SUFFIXES and path.stem.lower() not in TEXT_NAMES:
        return None
    try:
        if path.is_symlink() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError as exc:
        log.warning("No se pudo leer %s: %s", path, exc)
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    lines = text.count("\n") + 1
    if path.suffix.lower() in (".js", ".css", ".json") and len(text) / lines > 500:
        return None  # minified or generated
    return Document(text, rel)


def clone_git(source: str, dest: Path, timeout: int = GIT_TIMEOUT) -> str:
    """Shallow-clone ``source`` (URL, file:// URL or local path) into ``dest``; return the commit."""
    git = shutil.which("git")
    if git is None:
        raise KnowledgeError(
            "No se encuentra el programa 'git'. Instálalo (p. ej. apt-get install git) o indexa "
            "una copia local con --type path."
        )
    local = Path(source).expanduser()
    url = local.resolve().as_uri() if local.exists() else source  # file:// so --depth applies
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.tmp-{uuid.uuid4().hex[:8]}")
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    cmd = [git, "-c", "protocol.ext.allow=never", "clone", "--depth", "1", "--quiet"]
    try:
        subprocess.run(
            [*cmd, "--", url, str(tmp)],
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        commit = subprocess.run(
            [git, "-C", str(tmp), "rev-parse", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        detail = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise KnowledgeError(
            f"No se pudo clonar {source}: {detail[-1] if detail else exc}. Comprueba la URL o "
            "la ruta y que el repositorio sea accesible."
        ) from exc
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise KnowledgeError(f"La clonación de {source} superó {timeout} s; reintenta.") from exc
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    return commit


def default_name(source: str, source_type: str) -> str:
    """A source name from its location: repository name, site host, or folder name."""
    if source_type == "web":
        parts = urlsplit(source)
        base = (parts.hostname or "web") + parts.path.rstrip("/").replace("/", "-")
    elif source_type == "git" and not Path(source).expanduser().exists():
        base = source.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        base = base[:-4] if base.endswith(".git") else base
    else:
        base = Path(source).expanduser().resolve().name
        base = base[:-4] if base.endswith(".git") else base
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip("-._")[:64] or "fuente"
    return name if NAME_RE.match(name) else f"src-{name}"[:64]


# ---------------------------------------------------------------------------- pipeline


def index_source(
    source: str,
    source_type: str,
    *,
    name: str | None = None,
    settings: Settings | None = None,
    batch_size: int = 100,
    max_pages: int = 50,
    progress: bool = True,
    embedder: Embedder | None = _UNSET,
    approx_threshold: int = APPROX_THRESHOLD,
) -> IndexReport:
    """Index ``source`` and publish it as ``name`` (replacing a previous version atomically)."""
    from ..config import get_settings

    settings = settings or get_settings()
    started = time.perf_counter()
    if source_type not in SOURCE_TYPES:
        raise KnowledgeError(f"Tipo de fuente '{source_type}' no válido: usa git, web o path.")
    if batch_size < 1:
        raise KnowledgeError("--batch-size debe ser al menos 1.")
    name = check_name(name or default_name(source, source_type))
    store = KnowledgeStore(settings.data_dir)
    report = IndexReport(name, source_type, source, 0, 0, None, None, 0.0)
    extra: dict[str, Any] = {}

    docs = list(_collect(source, source_type, name, settings, max_pages, progress, report, extra))
    if not docs:
        raise KnowledgeError(
            f"No se encontró texto indexable en {source} (código, Markdown, HTML o texto). "
            "Nada ha cambiado en las fuentes ya indexadas."
        )
    chunks = chunk_documents(docs, progress=progress, total=len(docs))
    for chunk in chunks:
        chunk.extra["source_name"] = name
    if not chunks:
        raise KnowledgeError(f"Los documentos de {source} no tienen texto. Nada ha cambiado.")

    if embedder is _UNSET:
        try:
            embedder = get_embedder(settings, allow_download=True)
        except EmbeddingsUnavailableError as exc:
            embedder = None
            report.warnings.append(f"{exc} Se indexa solo con BM25.")
            log.warning("%s Se indexa solo con BM25.", exc)
    texts = [c.search_text() for c in chunks]
    vectors = None
    if embedder is not None:
        t0 = time.perf_counter()
        vectors = embed_in_batches(embedder, texts, batch_size, progress=progress)
        report.embed_seconds = time.perf_counter() - t0
        report.model, report.dim = embedder.name, int(vectors.shape[1])

    meta = {
        "name": name,
        "type": source_type,
        "location": source,
        "documents": len(docs),
        "embedding_model": report.model,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }
    index = SourceIndex.build(
        [c.to_dict() for c in chunks], vectors, meta, texts=texts, approx_threshold=approx_threshold
    )
    build_dir = store.new_build_dir(name)
    try:
        index.save(build_dir)
        summary = {
            k: index.meta.get(k)
            for k in ("type", "location", "documents", "chunks", "embedding_model")
        }
        summary.update(
            {
                "embedding_dim": index.meta.get("embedding_dim"),
                "created_at": meta["created_at"],
                **extra,
            }
        )
        report.entry = store.publish(name, build_dir, summary)
    except BaseException:
        store.discard(build_dir)
        raise
    report.documents, report.chunks = len(docs), len(chunks)
    report.seconds = time.perf_counter() - started
    return report


def embed_in_batches(
    embedder: Embedder, texts: list[str], batch_size: int, *, progress: bool = False
) -> np.ndarray:
    """Embed ``texts`` in batches of similar length (less padding), in the original order."""
    import numpy as np
    from tqdm.auto import tqdm

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    parts: list[np.ndarray] = []
    with tqdm(total=len(texts), desc="Embeddings", unit="frag", disable=not progress) as bar:
        for start in range(0, len(order), batch_size):
            batch = [texts[i] for i in order[start : start + batch_size]]
            parts.append(embedder.embed_documents(batch))
            bar.update(len(batch))
    sorted_vectors = np.concatenate(parts, axis=0) if parts else np.zeros((0, 1), np.float32)
    out = np.empty_like(sorted_vectors)
    out[np.asarray(order, dtype=np.int64)] = sorted_vectors
    return out


def _collect(
    source: str,
    source_type: str,
    name: str,
    settings: Settings,
    max_pages: int,
    progress: bool,
    report: IndexReport,
    extra: dict[str, Any],
) -> Iterator[Document]:
    if source_type == "path":
        root = Path(source).expanduser()
        if not root.is_dir():
            raise KnowledgeError(f"{source} no es una carpeta. Indica una carpeta con --type path.")
        extra["location"] = str(root.resolve())
        yield from iter_folder(root)
    elif source_type == "git":
        dest = Path(settings.cache_dir) / "git" / name
        extra["commit"] = clone_git(source, dest)
        yield from iter_folder(dest)
    else:
        from .crawler import SiteCrawler

        crawler = SiteCrawler(source, settings, max_pages=max_pages, progress=progress)
        yield from crawler.documents()
        report.skipped.update(crawler.report.skipped)
        extra["pages"] = len(crawler.report.pages)
        if crawler.report.robots_disallowed:
            extra["robots_disallowed"] = len(crawler.report.robots_disallowed)
