"""The planner's sentences, Spanish and English: one place to read and correct them."""

from __future__ import annotations

from typing import Any

CONFIGURE = {
    "es": (
        "Para conversar con libertad configura un modelo de lenguaje: define OPENAI_API_KEY o "
        "GOOGLE_API_KEY, indica un fichero providers.json con IDEE_PROVIDERS_FILE, o escribe tu "
        "clave en los ajustes (⚙) del chat."
    ),
    "en": (
        "To chat freely, configure a language model: set OPENAI_API_KEY or GOOGLE_API_KEY, point "
        "IDEE_PROVIDERS_FILE to a providers.json file, or enter your key in the chat settings (⚙)."
    ),
}

CAPABILITIES = {
    "es": (
        "Funciono sin modelo de lenguaje (planificador sin conexión) y sé hacer tareas de mapa "
        "concretas: ir a un lugar («llévame a Toledo»), acercar o alejar el zoom, decirte dónde "
        "estás o qué zoom tienes, listar, añadir o quitar capas del catálogo («pon la ortofoto del "
        "PNOA», «quita el catastro»), mostrar un municipio o una provincia («dame el municipio de "
        "Madrid»), detectar piscinas en la vista y buscar servicios de la IDEE («busca servicios "
        "de hidrografía»). Puedes encadenar peticiones con «y»."
    ),
    "en": (
        "I work without a language model (offline planner) and can do concrete map tasks: go to "
        "a place (“take me to Toledo”), zoom in or out, tell you where you are or the zoom level, "
        "list, add or remove catalog layers (“add the cadastre layer”), show a municipality or a "
        "province (“show the province of Cuenca”), detect swimming pools in the view and search "
        "IDEE services (“search services about hydrography”). You can chain requests with “and”."
    ),
}

MESSAGES: dict[str, dict[str, str]] = {
    "greeting": {"es": "¡Hola! ", "en": "Hello! "},
    "thanks": {"es": "¡De nada! ", "en": "You're welcome! "},
    "fallback": {
        "es": "No sé hacer «{text}» sin un modelo de lenguaje.",
        "en": "I cannot do “{text}” without a language model.",
    },
    "tool_missing": {
        "es": "No puedo {what}: la herramienta {tool} no está disponible aquí.",
        "en": "I cannot {what}: the {tool} tool is not available here.",
    },
    "tool_failed": {
        "es": "No pude {what}: {error}",
        "en": "I could not {what}: {error}",
    },
    "diverged": {
        "es": "He dejado de seguir el plan porque las herramientas ejecutadas no coinciden con él.",
        "en": "I stopped following the plan because the tools that ran do not match it.",
    },
    # navigation
    "what.move": {"es": "mover el mapa", "en": "move the map"},
    "what.geocode": {"es": "buscar «{q}»", "en": "look up “{q}”"},
    "what.zoom": {"es": "cambiar el zoom", "en": "change the zoom"},
    "what.read_zoom": {"es": "leer el zoom", "en": "read the zoom"},
    "what.center": {"es": "leer el centro del mapa", "en": "read the map centre"},
    "what.extent": {"es": "leer la extensión de la vista", "en": "read the view extent"},
    "what.layers": {"es": "leer las capas del mapa", "en": "read the map layers"},
    "what.add": {"es": "añadir la capa «{name}»", "en": "add the layer “{name}”"},
    "what.remove": {"es": "quitar la capa «{name}»", "en": "remove the layer “{name}”"},
    "what.detect": {"es": "detectar {object}", "en": "detect {object}"},
    "what.search": {"es": "buscar servicios de «{q}»", "en": "search services for “{q}”"},
    "what.detectors": {"es": "listar los detectores", "en": "list the detectors"},
    "not_found": {
        "es": "No he encontrado «{q}»{detail}.",
        "en": "I could not find “{q}”{detail}.",
    },
    "goto.ok": {
        "es": "Te he llevado a {name} (zoom {zoom}).",
        "en": "I moved the map to {name} (zoom {zoom}).",
    },
    "goto.coords": {
        "es": "He centrado el mapa en {lat}, {lon} (zoom {zoom}).",
        "en": "I centred the map on {lat}, {lon} (zoom {zoom}).",
    },
    "boundary.ok": {
        "es": "He dibujado el contorno de {kind} {name} y he encuadrado el mapa en él.",
        "en": "I drew the outline of {kind} {name} and fitted the map to it.",
    },
    "boundary.no_outline": {
        "es": "He encontrado {name}, pero el servicio no devolvió su contorno; he centrado el mapa allí.",
        "en": "I found {name}, but the service returned no outline; I centred the map there.",
    },
    "boundary.framed": {
        "es": "He encuadrado el mapa en {name}; el servicio no devolvió su contorno, así que no lo he dibujado.",
        "en": "I fitted the map to {name}; the service returned no outline, so none is drawn.",
    },
    "zoom.set": {"es": "He puesto el zoom en {level}.", "en": "I set the zoom to {level}."},
    "zoom.changed": {
        "es": "He cambiado el zoom de {old} a {new}.",
        "en": "I changed the zoom from {old} to {new}.",
    },
    "zoom.limit": {
        "es": "El mapa ya está en el zoom {level}, el límite en esa dirección.",
        "en": "The map is already at zoom {level}, the limit in that direction.",
    },
    "zoom.range": {
        "es": "El zoom debe estar entre 0 y 22 (pediste {level}).",
        "en": "The zoom must be between 0 and 22 (you asked for {level}).",
    },
    "zoom.current": {"es": "El zoom actual es {level}.", "en": "The current zoom is {level}."},
    "center": {
        "es": "El mapa está centrado en lat {lat}, lon {lon}{near}.",
        "en": "The map is centred on lat {lat}, lon {lon}{near}.",
    },
    "center.near": {"es": ", cerca de {place}", "en": ", near {place}"},
    "extent": {
        "es": "La vista abarca longitudes de {minX} a {maxX} y latitudes de {minY} a {maxY} ({srs}).",
        "en": "The view spans longitudes {minX} to {maxX} and latitudes {minY} to {maxY} ({srs}).",
    },
    # layers
    "layers.none": {"es": "No hay capas cargadas en el mapa.", "en": "No layers are loaded."},
    "layers.list": {"es": "Capas cargadas:", "en": "Loaded layers:"},
    "layers.base": {"es": " (mapa base)", "en": " (base map)"},
    "layer.added": {
        "es": "He añadido la capa «{name}»{kind}.",
        "en": "I added the layer “{name}”{kind}.",
    },
    "layer.which": {
        "es": "Hay varias capas que coinciden con «{q}». ¿Cuál quieres?",
        "en": "Several layers match “{q}”. Which one do you want?",
    },
    "layer.maybe": {
        "es": "No encuentro «{q}» en el catálogo. ¿Te refieres a alguna de estas?",
        "en": "I cannot find “{q}” in the catalog. Do you mean one of these?",
    },
    "layer.removed": {"es": "He quitado la capa «{name}».", "en": "I removed the layer “{name}”."},
    "layer.not_loaded": {
        "es": "No encuentro ninguna capa «{q}» en el mapa.",
        "en": "I cannot find a layer “{q}” on the map.",
    },
    "layer.is_base": {
        "es": "«{name}» es el mapa base; solo lo quito si me lo pides expresamente («quita el mapa base»).",
        "en": "“{name}” is the base map; I only remove it if you ask explicitly (“remove the base map”).",
    },
    "layer.which_remove": {
        "es": "¿Qué capa quieres quitar?",
        "en": "Which layer do you want to remove?",
    },
    "layer.nothing_to_remove": {
        "es": "No hay capas que quitar (solo el mapa base).",
        "en": "There are no layers to remove (only the base map).",
    },
    "layer.search_hint": {
        "es": "Prueba «busca servicios de {q}» para buscarla en la IDEE.",
        "en": "Try “search services about {q}” to look for it in the IDEE.",
    },
    # detection
    "detect.ok": {
        "es": "He detectado {count} {object} en la vista (método {method}); están en la capa «{layer}».",
        "en": "I detected {count} {object} in the view (method {method}); they are in the layer “{layer}”.",
    },
    "detect.unknown": {
        "es": "No tengo un detector para «{object}».",
        "en": "I have no detector for “{object}”.",
    },
    "detectors.list": {"es": "Detectores disponibles:", "en": "Available detectors:"},
    # services
    "search.found": {
        "es": "He encontrado {count} servicios de «{q}» en la IDEE:",
        "en": "I found {count} services for “{q}” in the IDEE:",
    },
    "search.found_one": {
        "es": "He encontrado 1 servicio de «{q}» en la IDEE:",
        "en": "I found 1 service for “{q}” in the IDEE:",
    },
    "search.more": {"es": "(y {n} más)", "en": "(and {n} more)"},
    "search.none": {
        "es": "No he encontrado servicios de «{q}» en la IDEE.",
        "en": "I found no services for “{q}” in the IDEE.",
    },
    "search.errors": {
        "es": "{n} búsquedas fallaron, p. ej.: {first}",
        "en": "{n} searches failed, e.g.: {first}",
    },
    "search.hint": {
        "es": "Para cargar uno, pídemelo por su número («carga el 1»).",
        "en": "To load one, ask me by its number (“load number 1”).",
    },
    "ask.pick": {
        "es": "Dime el número o el nombre.",
        "en": "Tell me the number or the name.",
    },
}


def t(lang: str, key: str, **values: Any) -> str:
    """The message ``key`` in ``lang`` (Spanish when missing), filled with ``values``."""
    table = MESSAGES[key]
    template = table.get(lang) or table["es"]
    text = template.format(**values)
    if lang != "en":  # Spanish contractions ("de el municipio" → "del municipio")
        text = text.replace(" de el ", " del ").replace(" a el ", " al ")
    return text


def capabilities(lang: str) -> str:
    return CAPABILITIES.get(lang, CAPABILITIES["es"])


def configure(lang: str) -> str:
    return CONFIGURE.get(lang, CONFIGURE["es"])


def compose(lines: list[str]) -> str:
    """The final answer: one sentence per line, empty lines dropped."""
    return "\n".join(line for line in lines if line and line.strip())
