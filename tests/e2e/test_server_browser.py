"""Chromium drives a viewer page against the real uvicorn server on 127.0.0.1.

The page (served by this test on another loopback port, so CORS preflights really happen) holds a
small stand-in for the API-IDEE map API and our chat client (``/static/chatagent-lite.js``), which
speaks the classic plugin's protocol: providers, conversation, chat, tool-result, and SSE.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pyproj import Transformer

from idee_notebook_agent.core.conversation import ToolCall, ToolResultMessage
from idee_notebook_agent.llm.base import ChatRequest
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.server.app import create_app
from idee_notebook_agent.server.background import BackgroundServer
from tests.e2e.browser import ARGS, CHROMIUM
from tests.fakes.server_agent import build_agent, server_settings

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed"),
]

PAGE = """<!DOCTYPE html>
<html lang="es"><head><meta charset="utf-8"><title>Visor de prueba</title>
<link href="{api}/static/chatagent-lite.css" rel="stylesheet">
<script>
// Stand-in for the few API-IDEE map methods the chat plugin uses (CONTRACT 5.9).
window.IDEE = {{ layer: {{ WMS: function (o) {{ Object.assign(this, o); this.type = "WMS"; }} }} }};
function StandInMap() {{
  this.center = {{ x: -412000, y: 4927000 }}; this.zoom = 6; this.layers = []; this.calls = [];
}}
StandInMap.prototype = {{
  render: function () {{
    document.getElementById("map-status").textContent =
      Math.round(this.center.x) + "," + Math.round(this.center.y) + " z" + this.zoom +
      " [" + this.layers.map(function (l) {{ return l.name; }}).join(",") + "]";
  }},
  getCenter: function () {{ return {{ x: this.center.x, y: this.center.y }}; }},
  getZoom: function () {{ return this.zoom; }},
  getProjection: function () {{ return {{ code: "EPSG:3857" }}; }},
  getBbox: function () {{
    var d = 200000 / Math.pow(2, this.zoom - 6);
    return {{ x: {{ min: this.center.x - d, max: this.center.x + d }},
             y: {{ min: this.center.y - d, max: this.center.y + d }} }};
  }},
  getLayers: function () {{ return this.layers.slice(); }},
  setCenter: function (c) {{ this.calls.push(["setCenter", c]); this.center = {{ x: c.x, y: c.y }}; this.render(); }},
  setZoom: function (z) {{ this.calls.push(["setZoom", z]); this.zoom = z; this.render(); }},
  addLayers: function (l) {{ this.layers = this.layers.concat(l); this.render(); }},
  removeLayers: function (l) {{ var out = [].concat(l);
    this.layers = this.layers.filter(function (x) {{ return out.indexOf(x) < 0; }}); this.render(); }}
}};
</script>
<script src="{api}/static/chatagent-lite.js"></script>
</head><body>
<div id="map-status"></div>
<script>
  window.__map = new StandInMap(); window.__map.render();
  var stream = location.search.indexOf("stream=1") >= 0;
  window.__chat = IdeeChatLite.attach(window.__map, {{ backendUrl: "{api}/api", stream: stream }});
</script>
</body></html>
"""


class PageServer:
    """Serves the viewer page from its own loopback port (a different origin from the API)."""

    def __init__(self, html: str) -> None:
        body = html.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def __enter__(self) -> PageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stack(tmp_path) -> Iterator[tuple[str, ScriptedProvider, Any]]:
    provider = ScriptedProvider(delay=0.02)
    settings = server_settings(tmp_path)
    app = create_app(settings, build_agent(settings, provider))
    with BackgroundServer(app) as api, PageServer(PAGE.format(api=api.url)) as page:
        yield page.url, provider, app


def where_am_i(request: ChatRequest) -> list[Any]:
    results = {m.name: m.result for m in request.messages if isinstance(m, ToolResultMessage)}
    center = results["getMapCenter"]
    zoom = results["getCurrentZoom"]["level"]
    return [f"Estás en {center['lat']:.2f}, {center['lon']:.2f} a zoom {zoom}."]


def test_chat_page_drives_the_map_through_the_real_server(stack):
    from playwright.sync_api import expect, sync_playwright

    page_url, provider, app = stack
    to_3857 = Transformer.from_crs("EPSG:4326", "EPSG:3857", always_xy=True)
    mx, my = to_3857.transform(-3.7038, 40.4168)
    wms = {
        "type": "WMS",
        "url": "https://www.ign.es/wms-inspire/pnoa-ma?",
        "name": "OI.OrthoimageCoverage",
    }
    provider.queue(
        ["Voy a Madrid.", ToolCall("zoomTo", {"lat": 40.4168, "lon": -3.7038, "zoom": 12})],
        ["Ya estás en Madrid."],
        [ToolCall("addLayer", wms)],
        ["Capa añadida."],
        [ToolCall("getMapCenter", {}), ToolCall("getCurrentZoom", {})],
        where_am_i,
        ['<img src=x onerror="window.__pwned=1"> sin HTML'],
    )
    blocked: list[str] = []

    def guard(route: Any) -> None:
        if route.request.url.startswith(("http://127.0.0.1", "data:", "blob:")):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.route("**/*", guard)
            page.goto(page_url)
            expect(page.locator("#chatagent-provider-select option[value=fake]")).to_have_count(1)
            expect(page.locator("#chatagent-model-select")).to_have_value("fake-model")

            def say(text: str, reply: str) -> None:
                page.locator("#chatagent-input").fill(text)
                page.locator("#chatagent-send").click()
                expect(
                    page.locator(
                        ".chatagent-message-wrapper.assistant .chatagent-message", has_text=reply
                    )
                ).to_be_visible(timeout=15_000)
                expect(page.locator("#chatagent-send")).to_be_enabled()

            say("Llévame a Madrid", "Ya estás en Madrid.")
            center = page.evaluate("window.__map.getCenter()")
            assert center["x"] == pytest.approx(mx, abs=1) and center["y"] == pytest.approx(
                my, abs=1
            )
            assert page.evaluate("window.__map.getZoom()") == 12
            expect(page.locator(".chatagent-message", has_text="Voy a Madrid.")).to_be_visible()

            say("Pon la ortofoto", "Capa añadida.")
            layers = page.evaluate(
                "window.__map.getLayers().map(l => [l.name, l.type, l.transparent])"
            )
            assert layers == [["OI.OrthoimageCoverage", "WMS", True]]

            say("¿Dónde estoy?", "Estás en 40.42, -3.70 a zoom 12.")

            say("Escribe HTML", "sin HTML")
            bubble = page.locator(".chatagent-message", has_text="sin HTML")
            assert "<img" in bubble.inner_text()  # shown as text, not run
            assert page.evaluate("window.__pwned") is None

            # the same page in SSE mode: tokens stream in, the tool call runs mid-stream
            provider.queue(["Bajo el zoom.", ToolCall("setZoom", {"level": 9})], ["Zoom 9 listo."])
            page.goto(page_url + "?stream=1")
            expect(page.locator("#chatagent-provider-select option[value=fake]")).to_have_count(1)
            say("Aleja el mapa", "Zoom 9 listo.")
            assert page.evaluate("window.__map.getZoom()") == 9
            expect(page.locator(".chatagent-message", has_text="Bajo el zoom.")).to_be_visible()
            assert errors == []
        finally:
            browser.close()
    assert blocked == []

    store = app.state.service.store
    convs = store.list_page(0, 10)[1]
    assert len(convs) == 2
    roles = [m.role for c in convs for m in store.messages(c.id)]
    assert roles.count("system") == 5  # zoomTo, addWMSLayer, getMapCenter, getCurrentZoom, setZoom
