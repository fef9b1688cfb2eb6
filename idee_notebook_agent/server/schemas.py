"""Request bodies and documented replies of the REST contract (CONTRACT sections 3 and 4).

Unknown fields are ignored, like the original server; ``map_state: null`` and
``tool_call_id: ""`` are accepted (CONTRACT 14.4). ``api_key`` is write-only: used for the
request, never stored, logged or echoed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_MESSAGE_CHARS = 10_000
MAX_BODY_BYTES = 1_000_000


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _ModelChoice(_Body):
    provider: str | None = Field(None, max_length=100, description="Proveedor de /providers/.")
    model: str | None = Field(None, max_length=200, description="Id de modelo del proveedor.")
    api_key: str | None = Field(
        None,
        max_length=500,
        description="Clave del usuario para esta petición; nunca se guarda.",
        json_schema_extra={"writeOnly": True},
    )


class CreateConversationBody(_Body):
    title: str | None = Field(None, max_length=255)


class ChatBody(_ModelChoice):
    content: str = Field(..., max_length=MAX_MESSAGE_CHARS, description="Texto del usuario.")
    map_state: dict[str, Any] | None = Field(
        None, description="Estado del mapa en unidades del mapa: {center:{lat,lon}, zoom, srs}."
    )
    stream: bool = Field(False, description="true ⇒ respuesta SSE (text/event-stream).")

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("El mensaje no puede estar vacío. (This field may not be blank.)")
        return value


class ToolResultBody(_ModelChoice):
    tool_name: str = Field(..., min_length=1, max_length=200)
    tool_call_id: str = Field("", max_length=200)
    result: Any = Field(..., description="Lo que devolvió la herramienta (objeto o lista).")
    success: bool = True

    @field_validator("result")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("Este campo no puede ser nulo. (This field may not be null.)")
        return value


class ByIdsBody(_Body):
    ids: list[str] = Field(..., max_length=200)


class KeyTestBody(_Body):
    provider: str | None = Field(None, max_length=100)
    api_key: str | None = Field(None, max_length=500, json_schema_extra={"writeOnly": True})


# ---------------------------------------------------------------------- documented replies
class ModelOut(BaseModel):
    id: str
    label: str


class ProviderOut(BaseModel):
    name: str
    models: list[ModelOut]
    default_model: str


class ConversationOut(BaseModel):
    id: str
    title: str
    created_at: str
    updated_at: str
    message_count: int


class ConversationPage(BaseModel):
    count: int
    next: str | None
    previous: str | None
    results: list[ConversationOut]


class MessageOut(BaseModel):
    id: str
    role: Literal["user", "assistant", "system"]
    content: str | list[dict[str, Any]]
    created_at: str
    metadata: dict[str, Any]


class ReplyOut(MessageOut):
    type: Literal["text", "tool_call"]
    tool_calls: list[dict[str, Any]] | None = None


class ConfigOut(BaseModel):
    ttl_hours: float
    max_per_client: int
    cleanup_interval_seconds: int
    max_message_chars: int


class KeyTestOut(BaseModel):
    valid: bool
    provider: str | None = None
    models: list[str] | None = None
    error: str | None = None


class ErrorOut(BaseModel):
    detail: str
