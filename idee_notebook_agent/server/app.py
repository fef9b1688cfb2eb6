"""``create_app``: the FastAPI application of ``idee-agent serve``.

``/api`` speaks to the classic API-IDEE chat plugin, ``/api/v2`` to the current one (CONTRACT 14.1);
the OpenAPI schema is at ``/api/openapi.json`` and the docs at ``/api/docs``; ``GET /`` is a demo
viewer. Run it with ``idee-agent serve`` or ``uvicorn --factory idee_notebook_agent.server.app:create_app``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from .. import __version__
from ..config import Settings, get_settings
from ..core.agent import Agent
from . import http_errors
from .demo import demo_page
from .middleware import RequestGuard
from .profiles import CLASSIC, CURRENT
from .routes import build_router
from .schemas import MAX_BODY_BYTES
from .service import ConversationService
from .store import Store

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
KEEPALIVE_SECONDS = 15.0

DESCRIPTION = """Agente de mapas IDEE/IGN sobre HTTP, compatible con el plugin ChatAgent de API-IDEE.

* `/api`: formato clásico (`content` texto, `tool_calls`), herramientas `addWMSLayer`, `zoomTo`...
* `/api/v2`: formato de bloques de contenido del plugin actual.
* `"stream": true` en `chat/` ⇒ eventos SSE `text_delta`, `tool_call`, `sources`, `layer`, `error`, `done`.

La `api_key` del usuario se usa solo en esa petición: nunca se guarda ni se registra.
"""


def _origins(settings: Settings) -> list[str]:
    items = [o.strip() for o in (settings.allowed_origins or "*").split(",") if o.strip()]
    return ["*"] if not items or "*" in items else items


_frozen = False


def _freeze_startup_objects() -> None:
    """Keep what exists at startup (modules, routes, schemas, tool specs: ~200k objects) out of
    the garbage collector's walks, once per process. Otherwise each full collection walks all of
    them, a pause of tens of milliseconds in the middle of every open stream; requests only
    create short-lived objects, which the young generations handle."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()
    gc.freeze()


def create_app(
    settings: Settings | None = None,
    agent: Agent | None = None,
    *,
    keepalive_seconds: float = KEEPALIVE_SECONDS,
) -> FastAPI:
    """Build the app. ``agent`` lets tests and notebooks inject their own (e.g. a scripted model)."""
    if settings is None:
        settings = agent.settings if agent is not None else get_settings()
    agent = agent or Agent(settings)
    store = Store.from_settings(settings)
    service = ConversationService(settings, agent, store)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        _freeze_startup_objects()
        yield
        for task in list(service.tasks):
            task.cancel()
        if service.tasks:
            await asyncio.gather(*service.tasks, return_exceptions=True)
        service.close()

    app = FastAPI(
        title="idee-notebook-agent",
        version=__version__,
        description=DESCRIPTION,
        openapi_url="/api/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.settings = settings
    http_errors.install(app)
    app.include_router(build_router(service, CLASSIC, keepalive=keepalive_seconds), prefix="/api")
    app.include_router(
        build_router(service, CURRENT, keepalive=keepalive_seconds), prefix="/api/v2"
    )

    @app.get("/", include_in_schema=False)
    async def index(request: Request) -> HTMLResponse:
        return HTMLResponse(
            demo_page(request.scope.get("root_path", ""), settings.chatagent_plugin_url)
        )

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(RequestGuard, max_body_bytes=MAX_BODY_BYTES)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=_origins(settings),
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        allow_headers=["content-type", "x-client-id"],
        expose_headers=["x-request-id"],
        allow_credentials=False,
        max_age=600,
    )
    log.info("Servidor listo (base de datos %s)", store.engine.url.render_as_string())
    return app


__all__ = ["create_app"]
