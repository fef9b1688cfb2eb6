"""``GET /``: the API-IDEE viewer with a chat panel wired to this server, in one command.

API-IDEE loads from its public CDN (componentes.idee.es), so the page needs Internet access; the
chat talks to this server's ``/api``. When ``IDEE_CHATAGENT_PLUGIN_URL`` names a folder holding the
API-IDEE ChatAgent plugin (``chatagent.js`` and ``chatagent.css``), the page uses that plugin;
otherwise our small built-in panel (``/static/chatagent-lite.js``). It is a setting, not a query
parameter, so nobody can make this origin load someone else's script with a crafted link.
"""

from __future__ import annotations

import html
import json

API_IDEE_CSS = "https://componentes.idee.es/api-idee/assets/css/apiidee.ol.min.css"
API_IDEE_JS = "https://componentes.idee.es/api-idee/js/apiidee.ol.min.js"
API_IDEE_CONFIG_JS = "https://componentes.idee.es/api-idee/js/configuration.js"

PAGE = """<!DOCTYPE html>
<html lang="es">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Asistente de mapas IDEE · visor API-IDEE</title>
<link href="{css}" rel="stylesheet">
<script src="{js}"></script>
<script src="{config_js}"></script>
{plugin_tags}
<link href="{root}/static/chatagent-lite.css" rel="stylesheet">
<script src="{root}/static/chatagent-lite.js"></script>
<style>
  html, body {{ margin: 0; padding: 0; height: 100%; font-family: system-ui, sans-serif; }}
  #mapjs {{ width: 100%; height: 100%; }}
  #offline {{ padding: 2em; max-width: 46em; }}
</style>
</head>
<body>
<div id="mapjs"></div>
<div id="offline" hidden>
  <h1>No se pudo cargar API-IDEE</h1>
  <p>El visor se carga desde <code>componentes.idee.es</code> y este navegador no lo ha podido
  descargar (¿sin conexión?). El servidor funciona: su API está en
  <a href="{root}/api/docs">{root}/api/docs</a>.</p>
  <p><em>(API-IDEE could not be loaded from its CDN; the REST API is still available.)</em></p>
</div>
<script>
(function () {{
  var backendUrl = location.origin + {api_json};
  if (!window.IDEE) {{
    document.getElementById("mapjs").hidden = true;
    document.getElementById("offline").hidden = false;
    return;
  }}
  var map = IDEE.map({{ container: "mapjs", projection: "EPSG:3857*m",
                        center: {{ x: -412000, y: 4927000 }}, zoom: 6 }});
  window.ideeMap = map;
  if (IDEE.plugin && IDEE.plugin.ChatAgent) {{
    map.addPlugin(new IDEE.plugin.ChatAgent({{ position: "TR", collapsed: false,
                                               backendUrl: backendUrl }}));
  }} else {{
    window.ideeChat = IdeeChatLite.attach(map, {{ backendUrl: backendUrl }});
  }}
}})();
</script>
</body>
</html>
"""


def demo_page(root_path: str = "", plugin: str | None = None) -> str:
    """The HTML of ``GET /``; ``plugin`` (from the settings) must be an http(s) or / URL."""
    root = html.escape(root_path.rstrip("/"), quote=True)
    tags = ""
    if plugin and plugin.startswith(("http://", "https://", "/")):
        base = html.escape(plugin.rstrip("/"), quote=True)
        tags = (
            f'<link href="{base}/chatagent.css" rel="stylesheet">\n'
            f'<script src="{base}/chatagent.js"></script>'
        )
    return PAGE.format(
        css=API_IDEE_CSS,
        js=API_IDEE_JS,
        config_js=API_IDEE_CONFIG_JS,
        plugin_tags=tags,
        root=root,
        api_json=json.dumps(root_path.rstrip("/") + "/api").replace("<", "\\u003c"),
    )


__all__ = ["demo_page"]
