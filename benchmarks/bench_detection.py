"""Detection pipeline speed on this machine, against baselines measured in the same run.

1. ONNX: per-tile time of the whole pipeline (letterbox, inference, decode, NMS, georeferencing,
   merge, GeoJSON) versus raw ``session.run`` on the same letterboxed tiles, with the YOLO11n
   graph of ../shared/models (random weights, real cost). Tiles come from memory, so the WMS fetch
   is excluded. Target: ratio ≤ 1.15.
2. OpenCV fallback: tiles/s of the whole pipeline and of ``segment_pools`` alone.

Run: ``.venv/bin/python benchmarks/bench_detection.py [--repeat 3]`` (needs ../shared).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))


def ms(values: list[float]) -> str:
    return (
        f"min {min(values) * 1000:6.1f}  median {statistics.median(values) * 1000:6.1f}"
        f"  (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed runs of each measurement")
    args = parser.parse_args()
    pools = SHARED / "data" / "pools"
    yolo = SHARED / "models" / "yolo11n-untrained" / "model.onnx"
    if not (pools / "manifest.json").exists() or not yolo.exists():
        sys.exit(f"Faltan los datos compartidos en {SHARED}")

    import os

    from idee_notebook_agent.config import Settings
    from idee_notebook_agent.detection.base import clear_instances, get_detector
    from idee_notebook_agent.detection.models import model_path
    from idee_notebook_agent.detection.opencv_pools import segment_pools
    from idee_notebook_agent.detection.pipeline import detect_objects
    from idee_notebook_agent.detection.wms import CachingTileSource, WmsTileSource
    from tests.fakes.wms_server import NATIVE_CRS, start_wms_server

    tmp = Path(tempfile.mkdtemp(prefix="bench-detection-"))
    fake = start_wms_server(pools)
    try:
        onnx_settings = Settings(IDEE_ALLOW_HOSTS="127.0.0.1", IDEE_MODELS_DIR=str(tmp / "onnx"))
        cv_settings = Settings(IDEE_ALLOW_HOSTS="127.0.0.1", IDEE_MODELS_DIR=str(tmp / "none"))
        target = model_path("pools", onnx_settings)
        target.parent.mkdir(parents=True)
        shutil.copy(yolo, target)
        bbox = fake.extent_native
        source = CachingTileSource(
            WmsTileSource(fake.url, "OI.OrthoimageCoverage", onnx_settings).open(), maxsize=256
        )
        t0 = time.perf_counter()
        warm = detect_objects(
            "pools", bbox, NATIVE_CRS, source=source, settings=cv_settings, progress=False
        )
        fetch_s = time.perf_counter() - t0
        tiles = list(source._tiles.values())
        print(
            f"machine: {os.cpu_count()} CPUs; area {bbox}; {warm.tiles} tiles of 640 px at 0.25 m/px"
        )
        print(
            f"first run incl. loopback WMS fetch: {fetch_s:.2f} s ({fetch_s / warm.tiles * 1000:.1f} ms/tile)"
        )

        # ---- ONNX: raw inference baseline on the same letterboxed tiles
        clear_instances()
        det = get_detector("pools", onnx_settings)
        assert det.method == "onnx"
        model = det._ensure_model()
        tensors = [model.preprocess(img)[0] for img in tiles]
        model.infer(tensors[0])  # warm-up
        detect_objects(
            "pools", bbox, NATIVE_CRS, source=source, settings=onnx_settings, progress=False
        )
        # interleaved, so load from other processes on this shared machine hits both alike
        raw, whole, raw_cpu, whole_cpu = [], [], [], []
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            for tensor in tensors:
                model.infer(tensor)
            raw.append((time.perf_counter() - t0) / len(tensors))
            raw_cpu.append((time.process_time() - c0) / len(tensors))
            t0, c0 = time.perf_counter(), time.process_time()
            run = detect_objects(
                "pools", bbox, NATIVE_CRS, source=source, settings=onnx_settings, progress=False
            )
            whole.append((time.perf_counter() - t0) / run.tiles)
            whole_cpu.append((time.process_time() - c0) / run.tiles)
        assert run.method == "onnx"
        ratios = [w / r for w, r in zip(whole, raw, strict=True)]
        print(f"ONNX raw session.run:      wall {ms(raw)} ms/tile; CPU {ms(raw_cpu)}")
        print(f"ONNX whole pipeline:       wall {ms(whole)} ms/tile; CPU {ms(whole_cpu)}")
        best = min(whole) / min(raw)
        verdict = "OK" if best <= 1.15 else "ABOVE TARGET"
        print(
            f"ratio pipeline / raw:      {best:.3f} (best wall vs best wall), median of paired "
            f"ratios {statistics.median(ratios):.3f}, CPU {min(whole_cpu) / min(raw_cpu):.3f}  "
            f"(target ≤ 1.15: {verdict})"
        )
        print(
            f"load average now: {os.getloadavg()[0]:.2f} (figures are noisy when it exceeds the cores)"
        )

        # ---- OpenCV fallback
        clear_instances()
        assert get_detector("pools", cv_settings).method == "opencv"
        seg = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for img in tiles:
                segment_pools(img, 0.25, min_score=0.5)
            seg.append(len(tiles) / (time.perf_counter() - t0))
        pipe = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            run = detect_objects(
                "pools", bbox, NATIVE_CRS, source=source, settings=cv_settings, progress=False
            )
            pipe.append(run.tiles / (time.perf_counter() - t0))
        print(f"OpenCV segment_pools only: {statistics.median(seg):7.1f} tiles/s (1 thread)")
        print(
            f"OpenCV whole pipeline:     {statistics.median(pipe):7.1f} tiles/s ({run.count} pools)"
        )
    finally:
        fake.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
