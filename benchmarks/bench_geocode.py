"""geocodePlace → boundary latency: our overhead over the CartoCiudad fake's own time.

For "dame el municipio de Madrid" the tool makes two requests (candidates, find), parses the WKT
with shapely, builds the GeoJSON layer and the result. Measured per call, median of N runs:
  fake      the fake server's own handler time for those two requests (its "service time");
  raw http  the same two GETs with a bare httpx.Client, no parsing (the HTTP floor);
  tool      geocode_place() with a cold cache (what the agent pays);
  cached    geocode_place() with a warm cache (a repeated question).
Overhead = tool − fake (everything that is not the service) and tool − raw http (our code alone).
The fake runs in this process (loopback, same interpreter), so the HTTP floor includes it.
Run: .venv/bin/python benchmarks/bench_geocode.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from idee_notebook_agent.config import Settings
from idee_notebook_agent.services import cartociudad
from idee_notebook_agent.services.geocoding import geocode_place
from tests.fakes.cartociudad_server import CartoCiudadFake

CASES = [
    ("Madrid (14 vértices, ILLUSTRATIVE)", "Madrid", "28079"),
    ("Humanes de Madrid (geometría real)", "Humanes de Madrid", "28073"),
]
_NO_PROCESS = ",".join(t for t in cartociudad.ALL_TYPES if t != "municipio")


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def fake_time(fake: CartoCiudadFake, before: int) -> float:
    return sum(fake.handler_seconds[before:])


def main(n: int = 200) -> None:
    with CartoCiudadFake() as fake, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            _env_file=None, cartociudad_url=fake.url, http_timeout=5, data_dir=Path(tmp)
        )
        geocode_place({"q": "Madrid", "type": "municipio"}, settings, lambda layer: None)  # warm
        print(f"geocodePlace(type=municipio) → boundary, {n} runs each, median in ms\n")
        header = f"{'case':38} {'fake':>7} {'raw http':>9} {'tool':>7} {'cached':>7} "
        header += f"{'tool-fake':>10} {'tool-raw':>9} {'tool/raw':>9}"
        print(header)
        for label, q, code in CASES:
            raw, raw_fake, tool, tool_fake, cached = [], [], [], [], []
            with httpx.Client(timeout=5) as client:
                client.get(f"{fake.url}/candidates", params={"q": q})  # open the connection
                for _ in range(n):  # interleaved, so machine load hits both alike
                    before = len(fake.handler_seconds)
                    start = time.perf_counter()
                    client.get(
                        f"{fake.url}/candidates",
                        params={"q": q, "limit": 10, "no_process": _NO_PROCESS},
                    ).raise_for_status()
                    client.get(
                        f"{fake.url}/find", params={"id": code, "type": "municipio"}
                    ).raise_for_status()
                    raw.append(time.perf_counter() - start)
                    raw_fake.append(fake_time(fake, before))

                    cartociudad.clear_cache()
                    before = len(fake.handler_seconds)
                    layers: list[dict] = []
                    start = time.perf_counter()
                    result = geocode_place({"q": q, "type": "municipio"}, settings, layers.append)
                    tool.append(time.perf_counter() - start)
                    tool_fake.append(fake_time(fake, before))
                    assert result["best"]["id"] == code and layers, result
            for _ in range(n):
                start = time.perf_counter()
                geocode_place({"q": q, "type": "municipio"}, settings, lambda layer: None)
                cached.append(time.perf_counter() - start)
            f, r, t, c = (median_ms(v) for v in (tool_fake, raw, tool, cached))
            print(
                f"{label:38} {f:7.2f} {r:9.2f} {t:7.2f} {c:7.2f} {t - f:10.2f} {t - r:9.2f} "
                f"{t / r:8.2f}x"
            )
            print(f"{'':38} (fake time in the raw runs: {median_ms(raw_fake):.2f} ms)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
