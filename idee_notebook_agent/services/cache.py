"""A small bounded, thread-safe LRU cache with expiry, for geocoding and capabilities answers.

External services are slow compared with a dictionary look-up, and the same place or service is
asked for again and again in one session; a documented, bounded cache keeps that cheap without
letting memory grow (DESIGN.md: no global mutable state except documented caches).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")

_MISSING = object()


class TTLCache(Generic[V]):
    """LRU cache of at most ``maxsize`` items, each valid for ``ttl`` seconds (None: forever)."""

    def __init__(self, maxsize: int = 256, ttl: float | None = 3600.0) -> None:
        if maxsize < 1:
            raise ValueError("maxsize debe ser al menos 1")
        self.maxsize = maxsize
        self.ttl = ttl
        self._data: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, default: Any = None) -> V | Any:
        now = time.monotonic()
        with self._lock:
            item = self._data.get(key, _MISSING)
            if item is _MISSING:
                self.misses += 1
                return default
            expires, value = item  # type: ignore[misc]
            if expires < now:
                del self._data[key]
                self.misses += 1
                return default
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def set(self, key: Hashable, value: V) -> None:
        expires = time.monotonic() + self.ttl if self.ttl is not None else float("inf")
        with self._lock:
            self._data[key] = (expires, value)
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The cached value, or ``compute()`` stored (not under the lock: slow I/O may run)."""
        value = self.get(key, _MISSING)
        if value is not _MISSING:
            return value  # type: ignore[return-value]
        value = compute()
        self.set(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = 0
            self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def info(self) -> dict[str, int]:
        with self._lock:
            return {
                "size": len(self._data),
                "maxsize": self.maxsize,
                "hits": self.hits,
                "misses": self.misses,
            }
