"""How long each user notebook takes to run top to bottom offline, against the loopback fakes.

Baseline, measured in the same run: a one-cell notebook that only imports the package and shows
a ``MapChat`` (kernel start + imports + one widget). Each notebook is reported in seconds and as a
ratio to that baseline; the goal is "well under a minute" per notebook on 2 cores.
Run: ``.venv/bin/python benchmarks/bench_notebooks.py`` (needs ../shared beside the repo).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.notebooks import harness  # noqa: E402

BASELINE = "from idee_notebook_agent import MapChat\nMapChat()"


def run(name: str, fakes: harness.Fakes, extra: dict[str, str] | None = None) -> float:
    """Seconds to execute ``notebooks/<name>`` (or the baseline) in a fresh kernel."""
    import nbformat

    tmp = Path(tempfile.mkdtemp(prefix="bench-nb-"))
    saved = dict(os.environ)
    try:
        for key in list(os.environ):
            if key.endswith("_API_KEY") or key in harness.CLEARED:
                del os.environ[key]
        os.environ.update(harness.kernel_env(tmp, fakes, extra or {}))
        started = time.perf_counter()
        if name == "baseline":
            from nbclient import NotebookClient

            nb = nbformat.v4.new_notebook()
            nb.cells = [nbformat.v4.new_code_cell(BASELINE)]
            NotebookClient(nb, timeout=120, kernel_name="python3").execute()
            errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
        else:
            errors = harness.execute(name, tmp).errors()
        elapsed = time.perf_counter() - started
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if errors:
        raise SystemExit(f"{name} failed: {errors}")
    return elapsed


def main() -> None:
    from tests.fakes.cartociudad_server import CartoCiudadFake
    from tests.fakes.idee_catalog_server import IdeeCatalogFake
    from tests.fakes.openai_server import FakeOpenAIServer, FakeToolCall, OpenAIReply
    from tests.fakes.wms_server import start_wms_server

    fakes = harness.Fakes(
        CartoCiudadFake().start(),
        IdeeCatalogFake().start(),
        start_wms_server(harness.POOLS_DIR, resolution=0.4),
        FakeOpenAIServer().start(),
    )
    try:
        base = run("baseline", fakes)
        print(f"baseline (kernel + import + MapChat): {base:6.1f} s")
        total = 0.0
        for name in harness.notebook_names():
            extra = None
            if name.startswith("06_"):
                args = {"lat1": 40.4168, "lon1": -3.7038, "lat2": 39.8628, "lon2": -4.0273}
                fakes.openai.queue(
                    OpenAIReply(tool_calls=[FakeToolCall("distanciaKm", args)]),
                    OpenAIReply(text="Unos 67 km."),
                )
                extra = {"OPENAI_BASE_URL": fakes.openai.url}
            seconds = run(name, fakes, extra)
            total += seconds
            print(f"{name:<32} {seconds:6.1f} s  ×{seconds / base:4.1f} baseline")
        print(f"{'all notebooks':<32} {total:6.1f} s  ×{total / base:4.1f} baseline")
    finally:
        fakes.openai.stop()
        fakes.wms.close()
        fakes.catalog.stop()
        fakes.carto.stop()


if __name__ == "__main__":
    main()
