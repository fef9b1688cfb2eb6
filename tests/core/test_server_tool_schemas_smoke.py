"""Every server tool runs with arguments generated from its own schema, against the fakes.

Random but schema-valid arguments (often nonsense places, bboxes or URLs) must always come back
as JSON the model can read — a result, or ``success: false`` with a reason — never an exception.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.conversation import ToolCall
from idee_notebook_agent.toolbox.registry import SERVER_SIDE_TOOLS, ToolContext, ToolRegistry
from tests.fakes.cartociudad_server import CartoCiudadFake
from tests.fakes.idee_catalog_server import IdeeCatalogFake
from tests.fakes.wms_server import start_wms_server

from .schema_args import example

POOLS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "pools"


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    if not POOLS.is_dir():
        pytest.skip(f"shared pool imagery not found at {POOLS}")
    with CartoCiudadFake() as carto, IdeeCatalogFake() as catalog:
        wms = start_wms_server(POOLS)
        try:
            yield Settings(
                _env_file=None,
                CARTOCIUDAD_URL=carto.url,
                IDEE_CATALOG_URL=catalog.url,
                PNOA_WMS_URL=wms.url,
                IDEE_ALLOW_HOSTS="127.0.0.1",
                IDEE_HTTP_TIMEOUT=5,
                IDEE_CACHE_DIR=str(tmp_path_factory.mktemp("cache")),
                IDEE_DATA_DIR=str(tmp_path_factory.mktemp("data")),
            )
        finally:
            wms.close()


@pytest.mark.parametrize("name", SERVER_SIDE_TOOLS)
@pytest.mark.parametrize("seed", range(4))
async def test_server_tool_accepts_schema_valid_arguments(settings, name, seed):
    registry = ToolRegistry.load(settings)
    spec = registry.specs[name]
    args = example(spec.parameters, random.Random(seed), full=seed % 2 == 0)
    if name == "detectObjects":
        args["detector"] = "pools"  # the only free-text value with a fixed vocabulary
        args["bbox"] = {"minX": -3.9405, "minY": 40.4645, "maxX": -3.9395, "maxY": 40.4652}
        args.pop("wms_url", None)
        args.pop("wms_layer", None)
    if name == "fetchWebPage":
        args["url"] = ["http://127.0.0.1:9/", "file:///etc/passwd", "http://169.254.169.254/"][
            seed % 3
        ]
    call = ToolCall(name, args)
    assert registry.check_call(call) is None, args
    emitted: list = []
    ctx = ToolContext(settings, None, emitted.append)
    result, success = await registry.execute(call, ctx)
    json.dumps(result, default=str)
    if not success:
        assert isinstance(result, dict) and result.get("error"), result
    if name in ("listDetectors", "detectObjects"):
        assert success, result  # no free text involved: these must work on the fakes
