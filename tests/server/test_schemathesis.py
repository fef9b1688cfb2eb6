"""Property-based requests from the OpenAPI schema (schemathesis): no input produces a 5xx."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.server.app import create_app
from tests.fakes.server_agent import build_agent, server_settings

_tmp = Path(tempfile.mkdtemp(prefix="idee-schemathesis-"))
atexit.register(shutil.rmtree, _tmp, True)
_settings = server_settings(_tmp, conversation_max_per_client=0)
_provider = ScriptedProvider(default="Respuesta del modelo de pruebas.")
app = create_app(_settings, build_agent(_settings, _provider), keepalive_seconds=0.5)

schema = schemathesis.openapi.from_asgi("/api/openapi.json", app)


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_input_makes_the_server_fail(case):
    case.call_and_validate(checks=[not_a_server_error])
