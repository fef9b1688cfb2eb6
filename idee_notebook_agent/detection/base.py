"""The detector contract and the ``@detector`` registry.

A detector turns one RGB image (a tile of an orthophoto at a known ground resolution) into boxes in
pixel space; the pipeline does the geography. Built-in detectors live in ``detection/detectors/``
and are discovered at start-up; third-party ones register with the same decorator (or the
``idee_notebook_agent.detectors`` entry point group), so built-ins and user additions are alike.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..config import Settings, get_settings
from ..errors import ConfigurationError, ToolError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "idee_notebook_agent.detectors"


@dataclass(frozen=True)
class Detection:
    """One box in pixel space of the detector's input image: x right, y down, edges in pixels.

    ``x2``/``y2`` are the far edges (a box covering pixel columns 10..19 has ``x1=10, x2=20``).
    """

    x1: float
    y1: float
    x2: float
    y2: float
    score: float
    class_id: int = 0
    class_name: str = ""
    method: str = ""

    @property
    def width(self) -> float:
        return self.x2 - self.x1

    @property
    def height(self) -> float:
        return self.y2 - self.y1


class Detector(ABC):
    """Base class: describe what the detector finds and at which resolution, then ``detect``.

    Subclasses set the class attributes and implement :meth:`detect`. One instance is shared by the
    pipeline across worker threads, so ``detect`` must be thread-safe.
    """

    name: ClassVar[str] = ""
    """Registry key used by ``detectObjects(detector=...)``."""
    description: ClassVar[str] = ""
    """One line for ``listDetectors`` (Spanish first)."""
    classes: ClassVar[tuple[str, ...]] = ()
    """Class labels the detector can return."""
    resolution_m: ClassVar[float] = 0.25
    """Ground resolution (m/px) the detector expects; the pipeline requests imagery at it."""
    tile_size: ClassVar[int] = 640
    """Side in pixels of the tiles the pipeline cuts (the model input for CNNs)."""
    tile_overlap: ClassVar[int] = 64
    """Pixels shared by neighbouring tiles, at least the size of most objects."""
    layer_name: ClassVar[str] = "Detecciones"
    """Name of the map layer the detections are drawn in."""
    default_min_score: ClassVar[float] = 0.25
    """Score threshold when the caller gives none."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()

    @property
    def method(self) -> str:
        """Which method ``detect`` will use (e.g. ``"onnx"`` or ``"opencv"``)."""
        return "custom"

    @property
    def workers(self) -> int:
        """How many tiles may be detected at once (CNN runtimes already use every core)."""
        return 1

    @abstractmethod
    def detect(
        self,
        image: np.ndarray,
        *,
        resolution_m: float | None = None,
        min_score: float | None = None,
    ) -> list[Detection]:
        """Boxes found in ``image`` (H×W×3 uint8 RGB) at ``resolution_m`` metres per pixel."""

    def notes(self) -> list[str]:
        """Things the user should know about the last set-up (e.g. why a fallback runs)."""
        return []

    @classmethod
    def info(cls) -> dict[str, Any]:
        return {
            "name": cls.name,
            "description": cls.description,
            "classes": list(cls.classes),
            "resolution_m": cls.resolution_m,
            "tile_size": cls.tile_size,
            "layer_name": cls.layer_name,
        }


D = TypeVar("D", bound=type[Detector])

# name -> class; a documented registry guarded by a lock (built-ins fill it at import time).
_REGISTRY: dict[str, type[Detector]] = {}
_INSTANCES: dict[tuple[Any, ...], Detector] = {}
_LOCK = threading.RLock()
_DISCOVERED = False


def detector(cls: D) -> D:
    """Class decorator: register a :class:`Detector` subclass under its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Detector)):
        raise ConfigurationError("@detector solo se aplica a subclases de Detector.")
    if not cls.name or not cls.description or not cls.classes:
        raise ConfigurationError(
            f"El detector {cls.__qualname__} necesita 'name', 'description' y 'classes'."
        )
    with _LOCK:
        other = _REGISTRY.get(cls.name)
        if other is not None and other.__qualname__ != cls.__qualname__:
            raise ConfigurationError(
                f"Detector duplicado '{cls.name}': {other.__module__}.{other.__qualname__} "
                f"y {cls.__module__}.{cls.__qualname__}."
            )
        _REGISTRY[cls.name] = cls
        # a re-registered class (module reloaded) must not keep serving old instances
        for key in [k for k in _INSTANCES if k[0] == cls.name]:
            _INSTANCES.pop(key, None)
    return cls


def discover() -> None:
    """Import ``detection/detectors/*`` and entry points once, so their decorators run."""
    global _DISCOVERED
    with _LOCK:
        if _DISCOVERED:
            return
        _DISCOVERED = True
        from . import detectors as package

        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            try:
                importlib.import_module(info.name)
            except Exception:  # one broken detector must not hide the others
                log.exception("No se pudo cargar el detector %s", info.name)
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                entry.load()
            except Exception:
                log.exception("No se pudo cargar el detector externo %s", entry.value)


def available_detectors() -> dict[str, type[Detector]]:
    """Registered detector classes by name (after discovery)."""
    discover()
    with _LOCK:
        return dict(sorted(_REGISTRY.items()))


def get_detector(name: str, settings: Settings | None = None) -> Detector:
    """The shared instance of detector ``name`` for these settings (models load once)."""
    settings = settings or get_settings()
    classes = available_detectors()
    cls = classes.get(name) or classes.get(name.strip().lower())
    if cls is None:
        known = ", ".join(classes) or "ninguno"
        raise ToolError(
            f"No existe el detector '{name}'. Detectores disponibles: {known}. "
            "(Unknown detector; call listDetectors.)",
            data={"detectors": list(classes)},
        )
    key = (cls.name, _settings_key(settings))
    with _LOCK:
        instance = _INSTANCES.get(key)
        if instance is None:
            instance = cls(settings)
            _INSTANCES[key] = instance
        return instance


def clear_instances() -> None:
    """Drop cached detector instances (after a model download, or in tests)."""
    with _LOCK:
        _INSTANCES.clear()


def _settings_key(settings: Settings) -> tuple[Any, ...]:
    from .models import models_dir

    return (str(models_dir(settings)), settings.pool_model_sha256)
