"""Embedding models: fastembed (local ONNX, the default), OpenAI and Gemini, behind one small API.

Every embedder returns L2-normalised float32 rows, so the inner product is the cosine. A fastembed
model is loaded once per process (a thread-safe cache): loading takes a second or more and a few
hundred MB. ``name`` (``provider:model``) and ``dim`` are stored with each index so a query is
never compared with vectors of another model.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .errors import EmbeddingsUnavailableError

if TYPE_CHECKING:
    import numpy as np

    from ..config import Settings

log = logging.getLogger(__name__)

DEFAULT_FASTEMBED_MODEL = "jinaai/jina-embeddings-v2-base-es"
"""From fastembed's supported list: bilingual Spanish–English, 768-d, 8k tokens (about 0.64 GB)."""
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
DEFAULT_GEMINI_MODEL = "gemini-embedding-001"
GEMINI_BATCH = 100
"""batchEmbedContents accepts at most 100 texts per request."""

# Prefixes some model families were trained with (query side, document side); fastembed adds
# none itself.
_PREFIXES: tuple[tuple[str, tuple[str, str]], ...] = (
    (r"(?<![a-z0-9])e5(?![a-z0-9])", ("query: ", "passage: ")),
    (r"nomic-embed", ("search_query: ", "search_document: ")),
)

PROVIDER_ALIASES = {"local": "fastembed", "fastembed": "fastembed", "openai": "openai"}
PROVIDER_ALIASES.update({"gemini": "gemini", "google": "gemini", "none": "none", "bm25": "none"})


class Embedder(Protocol):
    """What the indexer and the retriever need from an embedding model."""

    name: str
    """``provider:model``, stored with the index."""

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def _normalise(matrix: Any) -> np.ndarray:
    import numpy as np

    arr = np.asarray(matrix, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


def _prefixes(model: str) -> tuple[str, str]:
    lower = model.lower()
    for pattern, pair in _PREFIXES:
        if re.search(pattern, lower):
            return pair
    return ("", "")


# ---------------------------------------------------------------------------- fastembed


class FastEmbedEmbedder:
    """A fastembed ``TextEmbedding`` (ONNX Runtime on the CPU)."""

    def __init__(self, model: Any, model_name: str, dim: int) -> None:
        self._model = model
        self.model_name = model_name
        self.name = f"fastembed:{model_name}"
        self._dim = dim
        self._query_prefix, self._doc_prefix = _prefixes(model_name)

    @property
    def dim(self) -> int:
        return self._dim

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            import numpy as np

            return np.zeros((0, self._dim), dtype=np.float32)
        batch = [self._doc_prefix + t for t in texts]
        return _normalise(list(self._model.embed(batch, batch_size=len(batch))))

    def embed_query(self, text: str) -> np.ndarray:
        return _normalise(list(self._model.embed([self._query_prefix + text])))[0]


_models: dict[tuple[str, str], FastEmbedEmbedder] = {}
_models_lock = threading.Lock()


def load_fastembed(
    model_name: str | None = None,
    model_path: Path | None = None,
    cache_dir: Path | None = None,
    *,
    allow_download: bool = True,
) -> FastEmbedEmbedder:
    """Load (once per process) a fastembed model, from its folder or fastembed's cache/hub.

    With ``model_path`` the folder is used as is (no network): it must hold ``model.onnx`` (or
    ``onnx/model.onnx``) and ``tokenizer.json``; models that fastembed does not list are
    registered with mean pooling and L2 normalisation. Without it the model comes from the cache,
    or is downloaded when ``allow_download`` (the ``index`` command) is true.
    """
    if model_path is not None:
        model_path = Path(model_path).expanduser().resolve()
        model_name = model_name or f"local/{model_path.name}"
    model_name = model_name or DEFAULT_FASTEMBED_MODEL
    # One instance per model: two ONNX sessions in a process fight over the cores.
    key = (model_name, str(model_path or ""))
    with _models_lock:
        cached = _models.get(key)
        if cached is not None:
            return cached
        embedder = _load_fastembed(model_name, model_path, cache_dir, allow_download)
        _models[key] = embedder
        return embedder


def _load_fastembed(
    model_name: str, model_path: Path | None, cache_dir: Path | None, allow_download: bool
) -> FastEmbedEmbedder:
    try:
        from fastembed import TextEmbedding
    except ImportError as exc:
        raise EmbeddingsUnavailableError(
            "fastembed no está instalado. Instálalo con: "
            'pip install "idee-notebook-agent[rag]" (o usa EMBEDDINGS_PROVIDER=openai|gemini).'
        ) from exc
    supported = {m["model"]: m for m in TextEmbedding.list_supported_models()}
    kwargs: dict[str, Any] = {}
    if cache_dir is not None:
        kwargs["cache_dir"] = str(cache_dir)
    if model_path is not None:
        if not model_path.is_dir():
            raise EmbeddingsUnavailableError(
                f"EMBEDDINGS_MODEL_PATH no es una carpeta: {model_path}. Indica la carpeta del "
                "modelo ONNX (con model.onnx y tokenizer.json)."
            )
        if model_name not in supported:
            _register_custom(TextEmbedding, model_name, model_path)
            supported = {m["model"]: m for m in TextEmbedding.list_supported_models()}
        kwargs["specific_model_path"] = str(model_path)
    elif model_name not in supported:
        raise EmbeddingsUnavailableError(
            f"fastembed no conoce el modelo '{model_name}'. Elige uno de "
            "TextEmbedding.list_supported_models() en EMBEDDINGS_MODEL, o indica la carpeta de "
            "un modelo ONNX en EMBEDDINGS_MODEL_PATH."
        )
    if not allow_download:
        kwargs["local_files_only"] = True
    try:
        model = TextEmbedding(model_name=model_name, **kwargs)
    except Exception as exc:
        where = str(model_path) if model_path else "la caché de fastembed"
        raise EmbeddingsUnavailableError(
            f"No se pudo cargar el modelo de embeddings '{model_name}' ({where}): "
            f"{_short(exc)}. "
            + (
                "No está descargado: ejecuta 'idee-agent index' con conexión a internet para "
                "descargarlo, "
                if not allow_download and model_path is None
                else "Comprueba la conexión a internet (la primera vez se descarga), "
            )
            + "o define EMBEDDINGS_MODEL_PATH con una copia local del modelo, o usa "
            "EMBEDDINGS_PROVIDER=openai|gemini. (The embedding model could not be loaded.)"
        ) from exc
    dim = int(supported[model_name]["dim"])
    log.info("Modelo de embeddings cargado: %s (dim %d)", model_name, dim)
    return FastEmbedEmbedder(model, model_name, dim)


def _register_custom(text_embedding: Any, model_name: str, model_path: Path) -> None:
    """Describe a local ONNX model to fastembed (dimension and pooling read from its files)."""
    from fastembed.common.model_description import ModelSource, PoolingType

    config: dict[str, Any] = {}
    config_file = model_path / "config.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text(encoding="utf-8"))
    dim = config.get("hidden_size") or config.get("dim") or config.get("d_model")
    if not dim:
        raise EmbeddingsUnavailableError(
            f"No se pudo leer la dimensión del modelo en {config_file} (falta hidden_size)."
        )
    pooling = PoolingType.MEAN
    pooling_file = model_path / "1_Pooling" / "config.json"
    if pooling_file.is_file():
        pool = json.loads(pooling_file.read_text(encoding="utf-8"))
        if pool.get("pooling_mode_cls_token"):
            pooling = PoolingType.CLS
    model_file = "model.onnx"
    if not (model_path / model_file).is_file() and (model_path / "onnx" / "model.onnx").is_file():
        model_file = "onnx/model.onnx"
    try:
        text_embedding.add_custom_model(
            model=model_name,
            pooling=pooling,
            normalization=True,
            sources=ModelSource(hf=model_name),  # required; never contacted with a local path
            dim=int(dim),
            model_file=model_file,
        )
    except ValueError:  # registered by another thread in the meantime
        log.debug("Modelo %s ya registrado en fastembed", model_name)


def _secret(value: Any) -> str:
    """The key's text (settings hold a SecretStr; a plain str is accepted too)."""
    if value is None:
        return ""
    return value.get_secret_value() if hasattr(value, "get_secret_value") else str(value)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


# ---------------------------------------------------------------------------- OpenAI / Gemini


class OpenAIEmbedder:
    """OpenAI (or any OpenAI-compatible ``/embeddings`` endpoint) through the official SDK."""

    def __init__(self, settings: Settings, model: str | None = None) -> None:
        try:
            from openai import OpenAI
        except ImportError as exc:  # pragma: no cover - openai is a core dependency
            raise EmbeddingsUnavailableError("Falta el paquete 'openai'.") from exc
        key = _secret(settings.openai_api_key)
        if not key:
            raise EmbeddingsUnavailableError(
                "EMBEDDINGS_PROVIDER=openai necesita OPENAI_API_KEY. Defínela o usa "
                "EMBEDDINGS_PROVIDER=fastembed (local, sin clave)."
            )
        self.model_name = model or DEFAULT_OPENAI_MODEL
        self.name = f"openai:{self.model_name}"
        self._client = OpenAI(
            api_key=key,
            base_url=settings.openai_base_url or None,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
        )
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed_query("dimensión").shape[0])
        return self._dim

    def _embed(self, texts: list[str]) -> np.ndarray:
        try:
            reply = self._client.embeddings.create(model=self.model_name, input=texts)
        except Exception as exc:
            raise EmbeddingsUnavailableError(
                f"OpenAI no devolvió embeddings ({self.model_name}): {_short(exc)}. Revisa "
                "OPENAI_API_KEY, OPENAI_BASE_URL y el nombre del modelo (EMBEDDINGS_MODEL)."
            ) from exc
        rows = [d.embedding for d in sorted(reply.data, key=lambda d: d.index)]
        matrix = _normalise(rows)
        self._dim = matrix.shape[1]
        return matrix

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text])[0]


class GeminiEmbedder:
    """Gemini embeddings (``batchEmbedContents``) through google-genai, with retrieval task types."""

    def __init__(self, settings: Settings, model: str | None = None) -> None:
        from google import genai
        from google.genai import types

        key = _secret(settings.google_api_key)
        if not key:
            raise EmbeddingsUnavailableError(
                "EMBEDDINGS_PROVIDER=gemini necesita GOOGLE_API_KEY (o GEMINI_API_KEY). Defínela o "
                "usa EMBEDDINGS_PROVIDER=fastembed (local, sin clave)."
            )
        self.model_name = model or DEFAULT_GEMINI_MODEL
        self.name = f"gemini:{self.model_name}"
        options: dict[str, Any] = {"timeout": int(settings.llm_timeout * 1000)}
        if settings.gemini_base_url:
            options["base_url"] = settings.gemini_base_url
        self._types = types
        self._client = genai.Client(api_key=key, http_options=types.HttpOptions(**options))
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed_query("dimensión").shape[0])
        return self._dim

    def _embed(self, texts: list[str], task: str) -> np.ndarray:
        import numpy as np

        rows: list[list[float]] = []
        config = self._types.EmbedContentConfig(task_type=task)
        for start in range(0, len(texts), GEMINI_BATCH):
            part = texts[start : start + GEMINI_BATCH]
            try:
                reply = self._client.models.embed_content(
                    model=self.model_name, contents=part, config=config
                )
            except Exception as exc:
                raise EmbeddingsUnavailableError(
                    f"Gemini no devolvió embeddings ({self.model_name}): {_short(exc)}. Revisa "
                    "GOOGLE_API_KEY, GEMINI_BASE_URL y el nombre del modelo (EMBEDDINGS_MODEL)."
                ) from exc
            rows.extend(list(e.values or []) for e in reply.embeddings or [])
        if len(rows) != len(texts):
            raise EmbeddingsUnavailableError(
                f"Gemini devolvió {len(rows)} embeddings para {len(texts)} textos."
            )
        matrix = _normalise(np.asarray(rows, dtype=np.float32))
        self._dim = matrix.shape[1]
        return matrix

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, "RETRIEVAL_DOCUMENT")

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text], "RETRIEVAL_QUERY")[0]


# ---------------------------------------------------------------------------- selection


def resolve_provider(settings: Settings) -> str:
    """``fastembed``, ``openai``, ``gemini`` or ``none`` from EMBEDDINGS_PROVIDER (``auto``...).

    ``auto`` means fastembed (local, private, no key) when it is installed or a model folder is
    given; otherwise OpenAI or Gemini when their key is set; otherwise none (BM25 only).
    """
    raw = (settings.embeddings_provider or "auto").strip().lower()
    if raw != "auto":
        if raw not in PROVIDER_ALIASES:
            raise EmbeddingsUnavailableError(
                f"EMBEDDINGS_PROVIDER='{raw}' no es válido: usa auto, fastembed, openai, gemini "
                "o none."
            )
        return PROVIDER_ALIASES[raw]
    if settings.embeddings_model_path:
        return "fastembed"
    try:
        import importlib.util

        if importlib.util.find_spec("fastembed") is not None:
            return "fastembed"
    except (ImportError, ValueError):
        pass
    if settings.openai_api_key:
        return "openai"
    if settings.google_api_key:
        return "gemini"
    return "none"


def configured_name(settings: Settings) -> str | None:
    """The ``provider:model`` the settings select, without loading anything (None: BM25 only)."""
    provider = resolve_provider(settings)
    if provider == "none":
        return None
    if provider == "fastembed":
        name = settings.embeddings_model
        if not name and settings.embeddings_model_path:
            name = f"local/{Path(settings.embeddings_model_path).expanduser().resolve().name}"
        return f"fastembed:{name or DEFAULT_FASTEMBED_MODEL}"
    default = DEFAULT_OPENAI_MODEL if provider == "openai" else DEFAULT_GEMINI_MODEL
    return f"{provider}:{settings.embeddings_model or default}"


def get_embedder(settings: Settings, *, allow_download: bool = True) -> Embedder | None:
    """The embedder the settings select; None for BM25 only. Raises EmbeddingsUnavailableError."""
    provider = resolve_provider(settings)
    if provider == "none":
        return None
    if provider == "openai":
        return OpenAIEmbedder(settings, settings.embeddings_model)
    if provider == "gemini":
        return GeminiEmbedder(settings, settings.embeddings_model)
    cache_dir = Path(settings.cache_dir) / "fastembed"
    if allow_download:
        os.makedirs(cache_dir, exist_ok=True)
    return load_fastembed(
        settings.embeddings_model,
        settings.embeddings_model_path,
        cache_dir,
        allow_download=allow_download,
    )
