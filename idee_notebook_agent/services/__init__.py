"""Spanish geo services: the layer catalog, CartoCiudad geocoding with an offline gazetteer,
IDEE service search, OGC GetCapabilities, safe web fetching (SSRF guard) and small caches.

Modules are imported on use (``services.tools`` registers the built-in tools); see DESIGN.md.
"""
