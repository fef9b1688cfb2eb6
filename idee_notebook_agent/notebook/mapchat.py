"""``MapChat``: an ipyleaflet map and the chat side by side, the product's main face.

One call shows an IGN base map (with attribution, centred on Spain) and the chat panel; the agent
acts on that map through ``LeafletMapPort``. Users may pass their own ``ipyleaflet.Map``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

import ipywidgets

from ..core.headless_map import SPAIN_CENTER, SPAIN_ZOOM
from .leaflet_port import IGN_ATTRIBUTION, LeafletMapPort
from .widget import ChatWidget, Turn

log = logging.getLogger(__name__)

_current: weakref.ref[MapChat] | None = None  # the most recent MapChat, for %idee_agent
_current_lock = threading.Lock()


def current_mapchat() -> MapChat | None:
    """The most recently created (and not closed) ``MapChat`` of this kernel, if any."""
    with _current_lock:
        chat = _current() if _current is not None else None
    if chat is None or chat.chat.comm is None:
        return None
    return chat


def _set_current(chat: MapChat | None) -> None:
    global _current
    with _current_lock:
        _current = weakref.ref(chat) if chat is not None else None


def default_basemap(url: str) -> Any:
    """The IGN base map as a Leaflet tile layer (TMS rows ``{-y}`` are handled by Leaflet)."""
    import ipyleaflet

    return ipyleaflet.TileLayer(
        url=url,
        name="Mapa base IGN",
        attribution=IGN_ATTRIBUTION,
        max_native_zoom=17,
        max_zoom=20,
        base=True,
    )


class MapChat(ipywidgets.HBox):
    """Map + chat in one widget. ``chat.ask("Llévame a Toledo")`` also works from code."""

    def __init__(
        self,
        agent: Any = None,
        map: Any = None,
        provider: str | None = None,
        model: str | None = None,
        basemap_url: str | None = None,
        *,
        center: tuple[float, float] | None = None,
        zoom: float | None = None,
        height: str = "560px",
        chat_width: str = "380px",
        language: str | None = None,
        key_tester: Any = None,
        **kwargs: Any,
    ) -> None:
        import ipyleaflet

        if agent is None:
            from ..core.agent import Agent

            agent = Agent()
        settings = agent.settings
        base = None
        if map is None:
            url = basemap_url or settings.basemap_url
            base = default_basemap(url)
            map = ipyleaflet.Map(
                basemap=base,
                center=list(center or SPAIN_CENTER),
                zoom=zoom if zoom is not None else SPAIN_ZOOM,
                scroll_wheel_zoom=True,
                layout=ipywidgets.Layout(height=height, width="auto", flex="1 1 auto"),
            )
        elif basemap_url:
            log.info("basemap_url se ignora: se usa el mapa que has pasado")
        self.map = map
        self._owns_map = base is not None
        self.port = LeafletMapPort(map, http_timeout=settings.http_timeout)
        if base is not None:
            self.port.describe_layer(
                base,
                name="IGNBaseTodo" if "IGNBaseTodo" in base.url else "basemap",
                type="TMS" if "{-y}" in base.url else "XYZ",
                url=base.url,
                legend="Mapa base IGN",
                base=True,
            )
        self.chat = ChatWidget(
            agent,
            self.port,
            provider=provider,
            model=model,
            language=language,
            key_tester=key_tester,
            layout=ipywidgets.Layout(flex="0 0 auto", height=height),
        )
        self.chat.height = height
        self.chat.width = chat_width
        kwargs.setdefault(
            "layout", ipywidgets.Layout(width="100%", height=height, align_items="stretch")
        )
        super().__init__(children=[map, self.chat], **kwargs)
        self.add_class("idee-mapchat")
        _set_current(self)

    # ------------------------------------------------------------------ delegation
    @property
    def agent(self) -> Any:
        return self.chat.agent

    @property
    def conversation(self) -> Any:
        return self.chat.conversation

    @property
    def detections(self) -> Any:
        """Every detection run as a GeoDataFrame (EPSG:4326): detector, class, score, geometry…"""
        return self.chat.detections

    def submit(self, text: str, **kwargs: Any) -> Turn:
        """Send ``text`` as if typed in the chat; returns at once (see ``Turn.wait``)."""
        return self.chat.submit(text, **kwargs)

    def ask(self, text: str, *, timeout: float | None = None, **kwargs: Any) -> Turn:
        """Send ``text`` and wait for the answer (blocks this cell, not the agent)."""
        return self.chat.ask(text, timeout=timeout, **kwargs)

    def stop(self, wait: float | None = None) -> bool:
        return self.chat.stop(wait)

    def new_conversation(self) -> Any:
        return self.chat.new_conversation()

    def close(self) -> None:
        global _current
        chat = getattr(self, "chat", None)
        if chat is not None:
            chat.close()
        if getattr(self, "_owns_map", False):
            self.map.close()  # a map the user passed in stays theirs
        with _current_lock:
            if _current is not None and _current() is self:
                _current = None
        super().close()


__all__ = ["MapChat", "current_mapchat", "default_basemap"]
