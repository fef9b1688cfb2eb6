"""Model files for detectors: where they live, and a verified download.

Weights are not shipped in the wheel; an operator points ``IDEE_POOL_MODEL_URL`` and
``IDEE_POOL_MODEL_SHA256`` at a file and runs ``idee-agent models download``. The file is written
atomically and only after its sha256 matches, so a half or wrong download is never loaded.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Settings, get_settings
from ..errors import ConfigurationError, IdeeAgentError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelSpec:
    """A model a detector can use: its file name and the settings that say where to get it."""

    name: str
    filename: str
    description: str
    url_setting: str
    sha256_setting: str
    url_env: str
    sha256_env: str


MODELS: dict[str, ModelSpec] = {
    "pools": ModelSpec(
        name="pools",
        filename="pools-yolo11n.onnx",
        description="Piscinas: YOLO (Ultralytics YOLO11n) exportado a ONNX, 1 clase 'pool'.",
        url_setting="pool_model_url",
        sha256_setting="pool_model_sha256",
        url_env="IDEE_POOL_MODEL_URL",
        sha256_env="IDEE_POOL_MODEL_SHA256",
    )
}


class ModelDownloadError(IdeeAgentError):
    """The model could not be fetched or verified; the message says what to do."""


def models_dir(settings: Settings | None = None) -> Path:
    """``IDEE_MODELS_DIR``, else ``<cache dir>/models``."""
    settings = settings or get_settings()
    folder = settings.models_dir or (settings.cache_dir / "models")
    return Path(folder).expanduser()


def get_spec(name: str) -> ModelSpec:
    spec = MODELS.get(name)
    if spec is None:
        raise ConfigurationError(
            f"Modelo desconocido '{name}'. Modelos conocidos: {', '.join(MODELS)}."
        )
    return spec


def model_path(name: str, settings: Settings | None = None) -> Path:
    """Where model ``name`` is (or would be) installed."""
    return models_dir(settings) / get_spec(name).filename


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def model_status(settings: Settings | None = None) -> list[dict[str, Any]]:
    """One row per known model: path, whether it is installed, and the configured source."""
    settings = settings or get_settings()
    rows = []
    for spec in MODELS.values():
        path = model_path(spec.name, settings)
        rows.append(
            {
                "name": spec.name,
                "description": spec.description,
                "path": str(path),
                "installed": path.is_file(),
                "size": path.stat().st_size if path.is_file() else None,
                "url": getattr(settings, spec.url_setting),
                "sha256": getattr(settings, spec.sha256_setting),
            }
        )
    return rows


def download_model(
    name: str = "pools",
    settings: Settings | None = None,
    *,
    url: str | None = None,
    sha256: str | None = None,
    force: bool = False,
    progress: Callable[[int, int | None], None] | None = None,
) -> Path:
    """Fetch model ``name`` from its configured URL, check its sha256 and install it atomically.

    Raises :class:`ModelDownloadError` with a message that says which setting to fix.
    """
    import httpx

    settings = settings or get_settings()
    spec = get_spec(name)
    url = url or getattr(settings, spec.url_setting)
    expected = (sha256 or getattr(settings, spec.sha256_setting) or "").strip().lower()
    target = model_path(name, settings)
    if not url:
        raise ModelDownloadError(
            f"No hay URL configurada para el modelo '{name}'. Define {spec.url_env} (y "
            f"{spec.sha256_env}) o pasa --url/--sha256. Mientras tanto el detector usa el "
            "método OpenCV. (No model URL configured.)"
        )
    if len(expected) != 64 or any(c not in "0123456789abcdef" for c in expected):
        raise ModelDownloadError(
            f"Falta la suma sha256 del modelo '{name}' (64 caracteres hexadecimales): define "
            f"{spec.sha256_env} o pasa --sha256. Sin ella no se instala un fichero descargado. "
            "(A sha256 is required to verify the download.)"
        )
    if target.is_file() and not force:
        if sha256_file(target) == expected:
            log.info("Model %s already installed at %s", name, target)
            return target
        log.info("Model %s at %s does not match the expected sha256; downloading", name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.filename}.", dir=target.parent)
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    try:
        timeout = httpx.Timeout(settings.http_timeout, read=max(settings.http_timeout, 60.0))
        with (
            os.fdopen(fd, "wb") as out,
            httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as response,
        ):
            if response.status_code != 200:
                raise ModelDownloadError(
                    f"La descarga del modelo '{name}' falló: HTTP {response.status_code} "
                    f"desde {url}. Comprueba {spec.url_env}."
                )
            total = int(response.headers.get("content-length") or 0) or None
            done = 0
            for block in response.iter_bytes(1 << 20):
                out.write(block)
                digest.update(block)
                done += len(block)
                if progress is not None:
                    progress(done, total)
        got = digest.hexdigest()
        if got != expected:
            raise ModelDownloadError(
                f"La suma sha256 del modelo descargado no coincide (esperada {expected[:12]}…, "
                f"obtenida {got[:12]}…). No se ha instalado. Comprueba {spec.url_env} y "
                f"{spec.sha256_env}. (Checksum mismatch.)"
            )
        os.replace(tmp, target)
    except httpx.HTTPError as exc:
        raise ModelDownloadError(
            f"No se pudo descargar el modelo '{name}' desde {url}: {exc.__class__.__name__}: "
            f"{exc}. Comprueba la conexión y {spec.url_env}; mientras tanto el detector usa "
            "OpenCV. (Download failed.)"
        ) from exc
    finally:
        if tmp.exists():
            tmp.unlink()
    log.info("Installed model %s at %s", name, target)
    return target
