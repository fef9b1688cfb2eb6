"""idee-notebook-agent: an AI map assistant for Spanish national spatial data.

Asistente de mapas con IA para los datos espaciales nacionales de España (IGN, IDEE,
CartoCiudad, PNOA, Catastro): chat en JupyterLab sobre un mapa ipyleaflet, servidor REST/SSE
compatible con el plugin de API-IDEE, y CLI ``idee-agent``.

Heavy or widget modules load on first use, so ``import idee_notebook_agent`` stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Agent": "idee_notebook_agent.core.agent",
    "AgentReply": "idee_notebook_agent.core.agent",
    "Conversation": "idee_notebook_agent.core.conversation",
    "HeadlessMapPort": "idee_notebook_agent.core.headless_map",
    "Settings": "idee_notebook_agent.config",
    "ScriptedProvider": "idee_notebook_agent.llm.scripted",
    "ChatWidget": "idee_notebook_agent.notebook.widget",
    "MapChat": "idee_notebook_agent.notebook.mapchat",
    "LeafletMapPort": "idee_notebook_agent.notebook.leaflet_port",
}

__all__ = [*_LAZY, "__version__", "load_ipython_extension", "unload_ipython_extension"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'idee_notebook_agent' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext idee_notebook_agent`` registers the ``%idee_agent`` magics."""
    from .notebook.magic import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .notebook.magic import unload_ipython_extension as unload

    unload(ipython)
