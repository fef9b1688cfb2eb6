from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "faiss",
    "onnxruntime",
    "cv2",
    "geopandas",
    "fastembed",
    "fastapi",
    "sqlalchemy",
    "ipyleaflet",
)


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "LLM_PROVIDER": "", **(env or {})}
    full_env.pop("OPENAI_API_KEY", None)
    full_env.pop("GOOGLE_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "idee_notebook_agent.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=ROOT,
        timeout=120,
    )


def test_import_is_light():
    code = f"import sys, idee_notebook_agent; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_ask_json_streams_events_offline():
    proc = run_cli("ask", "hola", "--json", "--provider", "offline")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert events[-1] == {"type": "done"}
    assert all(
        e["type"] in {"text_delta", "tool_call", "tool_result", "sources", "layer", "error", "done"}
        for e in events
    )


def test_cli_lists_tools_skills_providers():
    tools = run_cli("tools", "--json")
    assert tools.returncode == 0 and len(json.loads(tools.stdout)) >= 14
    assert "navigation" in run_cli("skills").stdout
    providers = json.loads(run_cli("providers", "--json").stdout)
    assert any(p["name"] == "offline" for p in providers)
    assert "api_key" not in json.dumps(providers)


def test_bad_configuration_is_one_clear_line(tmp_path):
    bad = tmp_path / "providers.json"
    bad.write_text("{not json")
    proc = run_cli("providers", env={"IDEE_PROVIDERS_FILE": str(bad)})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "providers.json" in proc.stderr
    proc = run_cli("ask", "hola", "--provider", "nadie")
    assert (
        proc.returncode == 2 and "no encontrado" in proc.stderr and "Traceback" not in proc.stderr
    )


@pytest.mark.slow
def test_wheel_ships_tools_skills_and_widget(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0 and "hatchling" in proc.stderr:
        pytest.skip("hatchling not installed in this environment")
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for folder in ("tools", "skills", "widget_js"):
        assert any(n.startswith(f"idee_notebook_agent/_data/{folder}/") for n in names), folder
    assert "idee_notebook_agent/_data/tools/zoomTo.json" in names
    # the installed wheel finds its data through importlib.resources, outside the repo
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    code = (
        "from idee_notebook_agent.resources import data_path;"
        "from idee_notebook_agent.toolbox.specs import load_tool_specs;"
        "p = data_path('tools'); print(p); print(len(load_tool_specs([p])))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
    )
    assert out.returncode == 0, out.stderr
    path, count = out.stdout.split()
    assert path.startswith(str(target)) and int(count) >= 14
