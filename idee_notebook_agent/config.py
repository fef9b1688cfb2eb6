"""Settings from the environment and a ``.env`` file (pydantic-settings).

Every external endpoint has the real service as default and can be pointed elsewhere, which is how
the tests reach their loopback fakes. API keys are ``SecretStr`` so they never show in a repr or log.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "idee-notebook-agent"


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "idee-notebook-agent"


class Settings(BaseSettings):
    """All configuration; see the README's configuration table."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    # --- language models -------------------------------------------------------------------
    llm_provider: str | None = Field(None, validation_alias="LLM_PROVIDER")
    """Provider name (``openai``, ``gemini``, ``offline`` or a providers.json entry)."""
    llm_model: str | None = Field(None, validation_alias="LLM_MODEL")
    openai_api_key: SecretStr | None = Field(None, validation_alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(None, validation_alias="OPENAI_BASE_URL")
    google_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("GOOGLE_API_KEY", "GEMINI_API_KEY")
    )
    gemini_base_url: str | None = Field(None, validation_alias="GEMINI_BASE_URL")
    providers_file: Path | None = Field(
        None, validation_alias=AliasChoices("IDEE_PROVIDERS_FILE", "PROVIDERS_CONFIG_PATH")
    )
    llm_timeout: float = Field(60.0, validation_alias="IDEE_LLM_TIMEOUT")
    llm_max_retries: int = Field(2, validation_alias="IDEE_LLM_MAX_RETRIES")
    llm_temperature: float = Field(0.1, validation_alias="IDEE_LLM_TEMPERATURE")

    # --- agent, tools, skills ----------------------------------------------------------------
    max_tool_rounds: int = Field(8, validation_alias="IDEE_MAX_TOOL_ROUNDS")
    tools_dirs: str = Field("", validation_alias="IDEE_TOOLS_DIRS")
    """Extra folders of tool JSON files, separated by ``os.pathsep``."""
    skills_dirs: str = Field("", validation_alias="IDEE_SKILLS_DIRS")
    """Extra folders of skill YAML files, separated by ``os.pathsep``."""
    active_skills: str = Field("", validation_alias="IDEE_SKILLS")
    """Comma-separated skill names to activate; empty means all loaded skills."""
    language: str = Field("es", validation_alias="IDEE_LANGUAGE")

    # --- Spanish geo services ----------------------------------------------------------------
    cartociudad_url: str = Field(
        "https://www.cartociudad.es/geocoder/api/geocoder", validation_alias="CARTOCIUDAD_URL"
    )
    idee_catalog_url: str = Field(
        "https://www.idee.es/csw-inspire-idee/srv/spa", validation_alias="IDEE_CATALOG_URL"
    )
    pnoa_wms_url: str = Field(
        "https://www.ign.es/wms-inspire/pnoa-ma", validation_alias="PNOA_WMS_URL"
    )
    allow_hosts: str = Field("", validation_alias="IDEE_ALLOW_HOSTS")
    """Comma-separated hosts or CIDRs the SSRF guard may reach although private/loopback."""
    http_timeout: float = Field(10.0, validation_alias="IDEE_HTTP_TIMEOUT")
    fetch_max_bytes: int = Field(5_000_000, validation_alias="IDEE_FETCH_MAX_BYTES")
    basemap_url: str = Field(
        "https://tms-ign-base.idee.es/1.0.0/IGNBaseTodo/{z}/{x}/{-y}.jpeg",
        validation_alias="IDEE_BASEMAP_URL",
    )

    # --- knowledge (RAG) ---------------------------------------------------------------------
    embeddings_provider: str = Field("auto", validation_alias="EMBEDDINGS_PROVIDER")
    embeddings_model: str | None = Field(None, validation_alias="EMBEDDINGS_MODEL")
    embeddings_model_path: Path | None = Field(None, validation_alias="EMBEDDINGS_MODEL_PATH")
    data_dir: Path = Field(default_factory=_default_data_dir, validation_alias="IDEE_DATA_DIR")
    cache_dir: Path = Field(default_factory=_default_cache_dir, validation_alias="IDEE_CACHE_DIR")
    rag_top_k: int = Field(5, validation_alias="IDEE_RAG_TOP_K")
    rag_max_chars: int = Field(6000, validation_alias="IDEE_RAG_MAX_CHARS")

    # --- detection ---------------------------------------------------------------------------
    models_dir: Path | None = Field(None, validation_alias="IDEE_MODELS_DIR")
    pool_model_url: str | None = Field(None, validation_alias="IDEE_POOL_MODEL_URL")
    pool_model_sha256: str | None = Field(None, validation_alias="IDEE_POOL_MODEL_SHA256")
    detection_max_tiles: int = Field(64, validation_alias="IDEE_DETECTION_MAX_TILES")

    # --- MCP ---------------------------------------------------------------------------------
    mcp_servers_path: Path | None = Field(None, validation_alias="MCP_SERVERS_PATH")

    # --- REST server -------------------------------------------------------------------------
    database_url: str | None = Field(None, validation_alias="DATABASE_URL")
    allowed_origins: str = Field("*", validation_alias="ALLOWED_ORIGINS")
    conversation_ttl_hours: float = Field(24, validation_alias="CONVERSATION_TTL_HOURS")
    conversation_max_per_client: int = Field(10, validation_alias="CONVERSATION_MAX_PER_CLIENT")
    conversation_cleanup_interval_seconds: int = Field(
        3600, validation_alias="CONVERSATION_CLEANUP_INTERVAL_SECONDS"
    )
    chatagent_plugin_url: str | None = Field(None, validation_alias="IDEE_CHATAGENT_PLUGIN_URL")
    """Folder URL with the API-IDEE ChatAgent plugin (chatagent.js/.css) for the demo page."""

    def split_dirs(self, value: str) -> list[Path]:
        return [Path(p).expanduser() for p in value.split(os.pathsep) if p.strip()]

    def allowed_host_list(self) -> list[str]:
        return [h.strip() for h in self.allow_hosts.split(",") if h.strip()]


_settings: Settings | None = None
_lock = threading.Lock()


def get_settings() -> Settings:
    """The process-wide settings, read once (a documented, thread-safe cache)."""
    global _settings
    with _lock:
        if _settings is None:
            _settings = Settings()
        return _settings


def reset_settings() -> None:
    """Forget the cached settings (tests and notebooks that change the environment)."""
    global _settings
    with _lock:
        _settings = None
