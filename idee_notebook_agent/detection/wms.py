"""Imagery tiles from a WMS 1.3.0 layer (PNOA by default) through owslib, behind the SSRF guard.

The WMS URL may come from the model, so every request passes ``services.ssrf``: GetCapabilities
is fetched with the guarded httpx client and handed to owslib as XML; owslib's GetMap (which uses
``requests``) gets the endpoint checked with ``check_url`` first and every redirect hop checked by
a ``requests`` response hook, installed through owslib's ``auth_delegate``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urljoin

from ..config import Settings, get_settings
from ..errors import ServiceError, ToolError
from ..services.cache import TTLCache
from .geo import Bounds, normalize_srs_quiet

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

DEFAULT_LAYER = "OI.OrthoimageCoverage"
PREFERRED_FORMATS = ("image/jpeg", "image/png")


class TileSource(Protocol):
    """Where tile images come from: a WMS, or an in-memory cache (benchmarks, tests)."""

    @property
    def description(self) -> str:
        """Text for the detections' ``source`` property (imagery URL and layer)."""

    def crs_options(self) -> list[str]:
        """CRS codes the source can serve ([] = unknown, use the request's)."""

    def fetch(self, bbox: Bounds, crs: str, width: int, height: int) -> np.ndarray:
        """An RGB uint8 image of ``bbox`` (x/y order in ``crs``) at ``width × height``."""


def _guard_auth(settings: Settings):
    """A requests ``AuthBase`` that checks the URL and each redirect target with the SSRF guard."""
    import requests

    from ..services.ssrf import Policy, check_url

    policy = Policy.from_settings(settings)

    def on_response(response: Any, *args: Any, **kwargs: Any) -> Any:
        if response.is_redirect:
            check_url(urljoin(response.url, response.headers.get("location", "")), policy=policy)
        return response

    class GuardAuth(requests.auth.AuthBase):
        def __call__(self, request: Any) -> Any:
            check_url(request.url, policy=policy)
            request.register_hook("response", on_response)
            return request

    return GuardAuth()


def _capabilities_url(url: str) -> str:
    import httpx

    parsed = httpx.URL(url)
    keep = [(k, v) for k, v in parsed.params.multi_items() if k.lower() not in ("request",)]
    params = dict(keep)
    lowered = {k.lower() for k in params}
    if "service" not in lowered:
        params["SERVICE"] = "WMS"
    if "version" not in lowered:
        params["VERSION"] = "1.3.0"
    params["REQUEST"] = "GetCapabilities"
    return str(parsed.copy_with(params=params))


# Capabilities documents by URL, kept an hour (a documented, bounded, thread-safe cache).
_CAPS_CACHE: TTLCache[bytes] = TTLCache(maxsize=32, ttl=3600.0)


def fetch_capabilities(url: str, settings: Settings) -> bytes:
    """GetCapabilities XML through the guarded client (cached per URL)."""
    import httpx

    from ..services.ssrf import check_url, guarded_client

    check_url(url, settings)  # also for a cached answer: the same URL must stay refused
    cached = _CAPS_CACHE.get(url)
    if cached is not None:
        return cached
    try:
        with guarded_client(settings) as client:
            response = client.get(_capabilities_url(url))
    except httpx.TimeoutException as exc:
        raise ServiceError(
            f"El servicio WMS {url} no respondió a tiempo ({settings.http_timeout:.0f} s). "
            "Reintenta más tarde. (WMS timeout.)"
        ) from exc
    except httpx.HTTPError as exc:
        raise ServiceError(
            f"No se pudo contactar con el servicio WMS {url}: {exc.__class__.__name__}. "
            "Comprueba la URL o reintenta. (WMS unreachable.)"
        ) from exc
    if response.status_code != 200:
        raise ServiceError(
            f"El servicio WMS {url} respondió HTTP {response.status_code} a GetCapabilities. "
            "Comprueba la URL. (WMS error.)"
        )
    content = response.content
    if len(content) > settings.fetch_max_bytes:
        raise ServiceError(f"Las capacidades de {url} son demasiado grandes ({len(content)} B).")
    _CAPS_CACHE.set(url, content)
    return content


def decode_image(data: bytes, width: int, height: int) -> np.ndarray:
    """RGB uint8 array of a JPEG/PNG answer, resized if the server ignored WIDTH/HEIGHT."""
    import cv2
    import numpy as np

    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ServiceError(
            "El WMS no devolvió una imagen legible (quizá un error en HTML o XML). "
            "(WMS answer is not an image.)"
        )
    image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    if image.shape[:2] != (height, width):
        log.warning(
            "WMS returned %sx%s instead of %sx%s; resizing",
            image.shape[1],
            image.shape[0],
            width,
            height,
        )
        image = cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
    return image


@dataclass
class WmsTileSource:
    """One layer of a WMS 1.3.0 service; ``open()`` reads the capabilities once."""

    url: str
    layer: str = DEFAULT_LAYER
    settings: Settings | None = None
    image_format: str | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        self.settings = self.settings or get_settings()
        self._wms: Any = None
        self._crs: list[str] = []

    @property
    def description(self) -> str:
        return f"WMS {self.url} capa {self.layer}"

    def open(self) -> WmsTileSource:
        from owslib.util import Authentication
        from owslib.wms import WebMapService

        assert self.settings is not None
        xml = fetch_capabilities(self.url, self.settings)
        try:
            wms = WebMapService(
                self.url,
                version="1.3.0",
                xml=xml,
                auth=Authentication(auth_delegate=_guard_auth(self.settings)),
                timeout=self.timeout or self.settings.http_timeout,
            )
        except Exception as exc:
            raise ServiceError(
                f"La respuesta GetCapabilities de {self.url} no es un WMS 1.3.0 válido: {exc}. "
                "(Invalid WMS capabilities.)"
            ) from exc
        if self.layer not in wms.contents:
            names = [n for n in wms.contents if n]
            from rapidfuzz import process

            close = [m[0] for m in process.extract(self.layer, names, limit=5)]
            raise ToolError(
                f"La capa '{self.layer}' no existe en {self.url}. Capas parecidas: "
                f"{', '.join(close) or 'ninguna'}. (Unknown WMS layer.)",
                data={"layers": close},
            )
        formats = wms.getOperationByName("GetMap").formatOptions or []
        if self.image_format is None:
            self.image_format = next(
                (f for f in PREFERRED_FORMATS if f in formats), formats[0] if formats else None
            )
        if not self.image_format:
            raise ServiceError(f"El WMS {self.url} no anuncia formatos de imagen para GetMap.")
        self._crs = sorted(
            {c for c in (normalize_srs_quiet(x) for x in wms[self.layer].crsOptions or []) if c}
        )
        self._wms = wms
        return self

    def crs_options(self) -> list[str]:
        return list(self._crs)

    def coverage_lonlat(self) -> Bounds | None:
        """The layer's advertised extent in degrees (EX_GeographicBoundingBox), if any."""
        if self._wms is None:
            return None
        box = getattr(self._wms[self.layer], "boundingBoxWGS84", None)
        return tuple(float(v) for v in box[:4]) if box else None  # type: ignore[return-value]

    def fetch(self, bbox: Bounds, crs: str, width: int, height: int) -> np.ndarray:
        import requests
        from owslib.util import ServiceException

        from ..services.ssrf import BlockedURLError

        if self._wms is None:
            self.open()
        assert self.settings is not None
        timeout = self.timeout or self.settings.http_timeout
        try:
            response = self._wms.getmap(
                layers=[self.layer],
                styles=[""],
                srs=crs,
                bbox=tuple(float(v) for v in bbox),  # x/y order; owslib swaps for lat/lon CRSs
                size=(int(width), int(height)),
                format=self.image_format,
                transparent=False,
                timeout=timeout,
            )
            data = response.read()
        except BlockedURLError:
            raise
        except requests.Timeout as exc:
            raise ServiceError(
                f"GetMap de {self.url} tardó más de {timeout:.0f} s. Reintenta o acerca el zoom. "
                "(GetMap timeout.)"
            ) from exc
        except ServiceException as exc:
            raise ServiceError(f"El WMS {self.url} devolvió una excepción: {exc}") from exc
        except requests.RequestException as exc:
            raise ServiceError(
                f"GetMap de {self.url} falló: {exc.__class__.__name__}: {exc}. (GetMap failed.)"
            ) from exc
        return decode_image(data, int(width), int(height))


class CachingTileSource:
    """Keeps up to ``maxsize`` fetched tiles in memory, so re-running a view downloads nothing.

    Used by benchmarks (to time detection without the network) and by notebook users who try
    several ``min_score`` values on one area.
    """

    def __init__(self, inner: TileSource, maxsize: int = 64) -> None:
        import threading
        from collections import OrderedDict

        self.inner = inner
        self.maxsize = maxsize
        self._tiles: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        return self.inner.description

    def crs_options(self) -> list[str]:
        return self.inner.crs_options()

    def fetch(self, bbox: Bounds, crs: str, width: int, height: int) -> np.ndarray:
        key = (tuple(round(float(v), 9) for v in bbox), crs, int(width), int(height))
        with self._lock:
            image = self._tiles.get(key)
            if image is not None:
                self._tiles.move_to_end(key)
                return image
        image = self.inner.fetch(bbox, crs, width, height)
        with self._lock:
            self._tiles[key] = image
            while len(self._tiles) > self.maxsize:
                self._tiles.popitem(last=False)
        return image
