"""A tiny documentation website on 127.0.0.1 for the web crawler tests.

Pages link to each other, to an off-site URL and to a page that redirects to a private address;
``robots.txt`` forbids ``/privado/``. Every request is recorded, so a test can prove what the
crawler did and did not fetch. ``HoneyPot`` is a second server that must never be reached.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Route:
    """What the fake answers for one path."""

    body: str = ""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:  # client hang-ups
        return


class StaticSite:
    """Serve ``routes`` (path → Route) and record every requested path."""

    def __init__(self, routes: dict[str, Route] | None = None, host: str = "127.0.0.1") -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.hits: list[str] = []
        self.host = host
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    def start(self) -> StaticSite:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                with site._lock:
                    site.hits.append(path)
                route = site.routes.get(path) or site.fallback(path)
                data = route.body.encode("utf-8")
                self.send_response(route.status)
                self.send_header("Content-Type", route.content_type)
                self.send_header("Content-Length", str(len(data)))
                for key, value in route.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self._httpd = _QuietServer((self.host, 0), Handler)
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def fallback(self, path: str) -> Route:
        return Route("<html><body><h1>404</h1></body></html>", status=404)

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def root(self) -> str:
        assert self._httpd is not None, "the fake site is not running"
        return f"http://{self.host}:{self._httpd.server_address[1]}"

    def __enter__(self) -> StaticSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HoneyPot(StaticSite):
    """Answers anything with 200; a test asserts that ``hits`` stays empty."""

    def fallback(self, path: str) -> Route:
        return Route("<html><body><h1>Secreto interno</h1><p>no debería leerse</p></body></html>")


def _page(title: str, body: str) -> str:
    return f"""<!doctype html>
<html lang="es"><head><meta charset="utf-8"><title>{title}</title></head>
<body>
<nav><a href="/">Inicio</a> · <a href="/guia/capas.html">Capas</a></nav>
<main>
{body}
</main>
<footer>© Documentación de prueba</footer>
</body></html>
"""


def docs_site_routes(private_redirect: str, offsite: str = "http://example.org/fuera") -> dict:
    """The fake documentation site: 4 reachable pages, one forbidden by robots.txt, one
    redirect to ``private_redirect`` (a private address), an on-site redirect, an off-site
    link, an image and a 404."""
    index = _page(
        "Documentación API-IDEE de prueba",
        f"""<h1>Documentación de API-IDEE</h1>
<p>Bienvenida a la documentación de prueba del visualizador.</p>
<ul>
<li><a href="/guia/capas.html">Añadir capas WMS y WMTS</a></li>
<li><a href="guia/controles.html#inicio">Controles del mapa</a></li>
<li><a href="/guia/eventos.md">Eventos (Markdown)</a></li>
<li><a href="/privado/interno.html">Zona privada</a></li>
<li><a href="/salto">Enlace que redirige</a></li>
<li><a href="/viejo/capas">Antigua página de capas</a></li>
<li><a href="{offsite}">Sitio externo</a></li>
<li><a href="/no-existe.html">Página rota</a></li>
<li><a href="/imagen.png">Una imagen</a></li>
</ul>""",
    )
    capas = _page(
        "Capas",
        """<h1>Capas</h1>
<p>API-IDEE admite capas de varios tipos de servicio.</p>
<h2>Capas WMS</h2>
<p>Para añadir una capa WMS crea un objeto <code>IDEE.layer.WMS</code> con la URL del servicio
y el nombre de la capa, y llama a <code>map.addLayers()</code>.</p>
<pre>const capa = new IDEE.layer.WMS({
  url: 'https://www.ign.es/wms-inspire/pnoa-ma',
  name: 'OI.OrthoimageCoverage'
});
map.addLayers(capa);</pre>
<h2>Capas WMTS</h2>
<p>Las capas teseladas WMTS usan <code>IDEE.layer.WMTS</code> y un matrixSet como
GoogleMapsCompatible.</p>
<p><a href="controles.html">Ver controles</a> · <a href="/">Volver</a></p>""",
    )
    controles = _page(
        "Controles",
        """<h1>Controles del mapa</h1>
<h2>Control de escala</h2>
<p>El control scale muestra la escala numérica y gráfica del mapa.</p>
<h2>Control de ubicación</h2>
<p>El control location centra el mapa en la posición del usuario mediante la geolocalización
del navegador.</p>""",
    )
    eventos = """# Eventos

## Evento de clic

El evento `IDEE.evt.CLICK` se lanza cuando el usuario pulsa sobre el mapa; el manejador
recibe las coordenadas del punto.

## Evento de carga

`IDEE.evt.LOAD` avisa de que una capa terminó de cargar sus teselas.
"""
    return {
        "/robots.txt": Route(
            "User-agent: *\nDisallow: /privado/\n", content_type="text/plain; charset=utf-8"
        ),
        "/": Route(index),
        "/guia/capas.html": Route(capas),
        "/guia/controles.html": Route(controles),
        "/guia/eventos.md": Route(eventos, content_type="text/markdown; charset=utf-8"),
        "/privado/interno.html": Route(_page("Privado", "<h1>Interno</h1><p>Secreto.</p>")),
        "/salto": Route("", status=302, headers={"Location": private_redirect}),
        "/viejo/capas": Route("", status=301, headers={"Location": "/guia/capas.html"}),
        "/imagen.png": Route("PNG", content_type="image/png"),
    }
