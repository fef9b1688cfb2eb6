"""HTTP errors as JSON ``{"detail": ...}`` with meaningful 4xx codes (CONTRACT 2 and 14.7).

Validation errors are 400 with the DRF-style field map (``{"content": ["..."]}``) next to
``detail``. Request input is never echoed back: a rejected body may carry an ``api_key``.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)

NOT_FOUND = "No encontrado. (Not found.)"
CONVERSATION_NOT_FOUND = (
    "La conversación no existe o ha caducado; empieza una nueva. "
    "(No Conversation matches the given query.)"
)


class ApiError(Exception):
    """An error with its status code and a message the user (or the plugin's author) can act on."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.extra = extra

    def response(self) -> JSONResponse:
        return JSONResponse({"detail": self.detail, **self.extra}, status_code=self.status)


def _field_message(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "Este campo es obligatorio. (This field is required.)"
    if kind == "string_too_long":
        n = ctx.get("max_length")
        return f"Como máximo {n} caracteres. (Ensure this field has no more than {n} characters.)"
    if kind == "too_long":
        n = ctx.get("max_length")
        return f"Como máximo {n} elementos. (Ensure this field has no more than {n} items.)"
    if kind in ("string_type", "str_type"):
        return "Debe ser un texto. (Not a valid string.)"
    if kind in ("bool_type", "bool_parsing"):
        return "Debe ser true o false. (Must be a valid boolean.)"
    if kind in ("list_type",):
        return "Debe ser una lista. (Expected a list of items.)"
    if kind in ("dict_type", "model_attributes_type", "model_type"):
        return "Debe ser un objeto JSON. (Expected a JSON object.)"
    if kind == "json_invalid":
        return "El cuerpo no es JSON válido. (JSON parse error.)"
    if kind == "value_error":
        message = str(ctx.get("error") or error.get("msg") or "")
        return message or "Valor no válido. (Invalid value.)"
    return f"Valor no válido: {error.get('msg', '')}".strip()


def validation_fields(exc: RequestValidationError) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for error in exc.errors():
        loc = [str(p) for p in error.get("loc", ()) if p != "body"]
        name = ".".join(loc) or "non_field_errors"
        fields.setdefault(name, []).append(_field_message(error))
    return fields


def install(app: FastAPI) -> None:
    """Register the handlers: 400 for validation, JSON 404/405, logged 500 with a request id."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = validation_fields(exc)
        if request.url.path.endswith("/test-key/"):
            first = next(iter(fields.values()))[0] if fields else "Petición no válida."
            return JSONResponse({"valid": False, "error": first}, status_code=400)
        summary = "; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items())
        body = {"detail": f"Datos no válidos. {summary}", **fields}
        return JSONResponse(body, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            detail = NOT_FOUND if exc.detail in (None, "Not Found") else str(exc.detail)
        elif exc.status_code == 405:
            method = request.method
            detail = f'Método "{method}" no permitido. (Method "{method}" not allowed.)'
        else:
            detail = str(exc.detail)
        return JSONResponse(
            {"detail": detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None)
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        request_id = request.scope.get("request_id", "-")
        log.error(
            "Error interno en %s %s (request %s)",
            request.method,
            request.url.path,
            request_id,
            exc_info=exc,
        )
        return JSONResponse(
            {
                "detail": f"Error interno del servidor (petición {request_id}). Inténtalo de nuevo; "
                "si persiste, avisa al administrador con ese identificador. (Internal server error.)"
            },
            status_code=500,
        )


__all__ = ["CONVERSATION_NOT_FOUND", "NOT_FOUND", "ApiError", "install"]
