"""A real browser on a real JupyterLab: type in the chat, the Leaflet map obeys.

JupyterLab runs on 127.0.0.1 with a token (hermetic config dirs); the notebook is one plain
``MapChat()`` cell, whose default agent talks through the real OpenAI client to the loopback
OpenAI-compatible fake (``OPENAI_BASE_URL``), with the key typed into the chat's settings. The
base map comes from a loopback tile server (``IDEE_BASEMAP_URL``); requests to
https://www.ign.es are answered by the page route with a PNG, so the test sees the real WMTS
GetTile URLs Leaflet builds; any other non-loopback request is aborted. Debian chromium is driven
by Playwright. Recipe: ../shared/E2E-NOTES.md.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.e2e.browser import ARGS
from tests.e2e.browser import CHROMIUM as BROWSER_PATH
from tests.fakes.openai_server import FakeOpenAIServer, FakeToolCall, OpenAIReply
from tests.fakes.tile_server import TileServer, tile_png

CHROMIUM = str(BROWSER_PATH)
TOKEN = "e2e-token-idee"
SECRET = "sk-e2e-" + secrets.token_hex(12)  # typed in the browser only, never in the notebook
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed"),
]

SETUP = """
import ipykernel
from idee_notebook_agent import MapChat

chat = MapChat(height="520px")
print("ipykernel", ipykernel.__version__)
chat
"""
IGN_GRIS = {
    "type": "WMTS",
    "url": "https://www.ign.es/wmts/ign-base?",
    "name": "IGNBase-gris",
    "legend": "Mapa Base de España – IGNBaseGris",
    "format": "image/jpeg",
    "matrixSet": "GoogleMapsCompatible",
}
HTML_REPLY = '<img src=x onerror="window.__xss=1"> **negrita** <script>window.__xss=2</script>'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_settings(directory: Path) -> None:
    """User settings: every cell in the DOM, widget state saved, no news or update checks."""
    files = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyter-widgets/jupyterlab-manager/plugin.jupyterlab-settings": {"saveState": True},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
    }
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content), encoding="utf-8")


@pytest.fixture
def tiles() -> Iterator[TileServer]:
    with TileServer() as server:
        yield server


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer(valid_keys={SECRET}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def jupyterlab(tmp_path: Path, tiles: TileServer, model: FakeOpenAIServer) -> Iterator[dict[str, Any]]:  # fmt: skip
    root = tmp_path / "nb"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(SETUP)]
    nbformat.write(nb, root / "chat.ipynb")
    write_settings(tmp_path / "settings")

    unset = ("LLM_PROVIDER", "LLM_MODEL", "IDEE_PROVIDERS_FILE", "PROVIDERS_CONFIG_PATH")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in unset}
    env.update(
        JUPYTER_CONFIG_DIR=str(tmp_path / "jcfg"),
        JUPYTER_DATA_DIR=str(tmp_path / "jdata"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jrun"),
        IPYTHONDIR=str(tmp_path / "ipy"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"),
        IDEE_BASEMAP_URL=tiles.url,
        OPENAI_BASE_URL=model.url,
        IDEE_DATA_DIR=str(tmp_path / "data"),
        IDEE_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONPATH=str(REPO),
    )
    port = free_port()
    log = open(tmp_path / "jlab.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            f"--IdentityProvider.token={TOKEN}",
            "--ServerApp.ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            f"--LabApp.workspaces_dir={tmp_path / 'ws'}",
        ],
        env=env,
        cwd=str(tmp_path),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError((tmp_path / "jlab.log").read_text(errors="replace")[-3000:])
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield {"base": base, "root": root, "log": tmp_path / "jlab.log"}
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


@pytest.fixture
def page(jupyterlab: dict[str, Any]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.ign_requests = []  # type: ignore[attr-defined]
        page.stray_requests = []  # type: ignore[attr-defined]
        png = tile_png("IGN")

        def route(r: Any) -> None:
            url = r.request.url
            if url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:")):
                r.continue_()
            elif url.startswith("https://www.ign.es/"):
                page.ign_requests.append(url)  # type: ignore[attr-defined]
                r.fulfill(status=200, content_type="image/png", body=png)
            else:
                page.stray_requests.append(url)  # type: ignore[attr-defined]
                r.abort()

        page.route("**/*", route)
        try:
            yield page
        finally:
            context.close()
            browser.close()


def test_chat_drives_the_map_in_jupyterlab(
    page: Any, jupyterlab: dict[str, Any], tiles: TileServer, model: FakeOpenAIServer
) -> None:
    from playwright.sync_api import expect

    base = jupyterlab["base"]
    page.goto(f"{base}/lab/tree/chat.ipynb?token={TOKEN}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    expect(page.locator(".jp-StatusBar-TextItem", has_text="| Idle")).to_be_visible(timeout=60_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator("li.lm-Menu-item[data-command='runmenu:run-all']").click()

    expect(page.locator(".idee-chat-root")).to_be_visible(timeout=60_000)
    expect(page.locator(".leaflet-container")).to_be_visible()
    page.wait_for_function(
        "() => document.querySelectorAll('.leaflet-container img.leaflet-tile-loaded').length > 0",
        timeout=30_000,
    )
    assert tiles.requests, "the base map tiles come from the loopback tile server"
    expect(page.locator(".leaflet-control-attribution")).to_contain_text("Instituto Geográfico")
    expect(page.locator(".jp-OutputArea-output", has_text="ipykernel 7.")).to_be_visible()

    # 0. the key: tested against the provider's model list, then kept in kernel memory only
    page.locator(".idee-settings-toggle").click()
    expect(page.locator(".idee-provider-select")).to_have_value("openai")
    page.locator(".idee-key-input").fill("sk-mala")
    page.locator(".idee-key-test").click()
    expect(page.locator(".idee-key-status")).to_contain_text("✗", timeout=20_000)
    page.locator(".idee-key-input").fill(SECRET)
    page.locator(".idee-key-test").click()
    expect(page.locator(".idee-key-status")).to_contain_text("Clave válida", timeout=20_000)
    expect(page.locator(".idee-key-badge")).to_contain_text("clave en memoria")
    expect(page.locator(".idee-key-input")).to_have_value("")
    page.locator(".idee-settings-toggle").click()

    # 1. "carga la capa IGNBaseGris": the answer streams and the WMTS layer is on the map
    model.queue(
        OpenAIReply(tool_calls=[FakeToolCall("addLayer", IGN_GRIS)]),
        OpenAIReply(text="He cargado la capa **IGNBaseGris** del IGN."),
    )
    box = page.locator(".idee-chat-input")
    box.fill("carga la capa IGNBaseGris")
    box.press("Enter")
    expect(page.locator(".idee-msg-user", has_text="carga la capa IGNBaseGris")).to_be_visible()
    saved = ".idee-msg-assistant:not(.idee-draft) .idee-bubble"  # in the history, not streaming
    answer = page.locator(saved, has_text="He cargado la capa")
    expect(answer).to_be_visible(timeout=30_000)
    expect(page.locator(".idee-chat")).to_have_attribute("data-status", "idle")
    expect(answer.locator("strong")).to_have_text("IGNBaseGris")  # Markdown rendered
    chip = page.locator(".idee-chip[data-tool='addLayer']")
    expect(chip).to_have_attribute("data-status", "done")
    chip.click()
    expect(page.locator(".idee-chip-detail").first).to_contain_text("IGNBase-gris")
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.leaflet-container img.leaflet-tile'))"
        ".some(i => i.src.includes('LAYER=IGNBase-gris'))",
        timeout=30_000,
    )
    srcs = page.evaluate(
        "() => Array.from(document.querySelectorAll('.leaflet-container img.leaflet-tile'))"
        ".map(i => i.src)"
    )
    wmts = [s for s in srcs if s.startswith("https://www.ign.es/wmts/ign-base?")]
    assert wmts and all("TILEMATRIXSET=GoogleMapsCompatible" in s for s in wmts)
    assert any("LAYER=IGNBase-gris" in u for u in page.ign_requests)
    chip.click()  # fold the details again for a clean picture (docs/img/mapchat.png)
    page.wait_for_timeout(400)
    page.locator(".idee-mapchat").screenshot(path=str(_artifact("notebook_chat_layer.png")))
    chats = [
        k for r, k in zip(model.requests, model.bearer_keys(), strict=True) if "chat" in r.path
    ]
    assert chats == [SECRET, SECRET]  # the typed key, used by the kernel for the turn

    # Shift+Enter is a new line in the chat, not "run cell" in JupyterLab
    box.fill("línea 1")
    box.press("Shift+Enter")
    box.press_sequentially("línea 2")
    expect(box).to_have_value("línea 1\nlínea 2")
    expect(page.locator(".jp-InputPrompt", has_text="[1]")).to_be_visible()
    assert page.locator(".idee-chat-root").count() == 1

    # 2. Stop during a slow reply: the HTTP stream is closed, the partial answer stays
    words = " ".join(f"palabra{i}" for i in range(400))
    model.queue(OpenAIReply(text=words, chunk_size=12, delay=0.05))
    box.fill("cuéntame algo largo")
    box.press("Enter")
    expect(page.locator(".idee-draft .idee-bubble")).to_contain_text("palabra5", timeout=30_000)
    stop = page.locator(".idee-stop")
    expect(stop).to_be_enabled()
    stop.click()
    expect(page.locator(".idee-notice[data-code='stopped']")).to_be_visible(timeout=15_000)
    expect(page.locator(".idee-chat")).to_have_attribute("data-status", "idle")
    assert model.disconnected.wait(10), "the model's stream was not closed"
    kept = page.locator(saved, has_text="palabra0")
    expect(kept).to_be_visible()
    length = len(kept.inner_text())
    page.wait_for_timeout(800)
    assert len(kept.inner_text()) == length, "no more text after Stop"
    assert "palabra399" not in kept.inner_text()

    # 3. raw HTML from the model is shown as text, never executed
    model.queue(OpenAIReply(text=HTML_REPLY))
    box.fill("responde con html")
    box.press("Enter")
    unsafe = page.locator(saved, has_text="negrita")
    expect(unsafe).to_be_visible(timeout=30_000)
    expect(page.locator(".idee-chat")).to_have_attribute("data-status", "idle")
    expect(unsafe).to_contain_text('<img src=x onerror="window.__xss=1">')
    assert page.evaluate("() => window.__xss") is None
    assert unsafe.locator("img, script").count() == 0

    page.add_style_tag(content=".leaflet-tile{transition:none!important}")
    page.locator(".idee-mapchat").scroll_into_view_if_needed()
    page.locator(".idee-mapchat").screenshot(path=str(_artifact("notebook_chat.png")))

    # 4. the saved notebook keeps the widget state (the conversation) but not the key
    page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
    page.locator("li.lm-Menu-item[data-command='docmanager:save']").click()
    saving = page.locator(".jp-StatusBar-TextItem", has_text="Saving completed")
    expect(saving).to_be_visible(timeout=20_000)
    notebook = _wait_for_saved_widget_state(jupyterlab["root"] / "chat.ipynb")
    assert SECRET not in notebook
    assert "carga la capa IGNBaseGris" in notebook
    assert page.stray_requests == [], page.stray_requests


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


def _wait_for_saved_widget_state(path: Path, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = path.read_text(encoding="utf-8")
        if '"widgets"' in text and "application/vnd.jupyter.widget-state+json" in text:
            return text
        time.sleep(0.2)
    raise AssertionError("the notebook was not saved with its widget state")
