"""The chat's ES module in a real browser with a stand-in anywidget model (no JupyterLab).

The module is served from a routed origin and imported as it is; the model object implements the
few anywidget calls the module uses (get, on, off, send) and records what is sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.browser import ARGS
from tests.e2e.browser import CHROMIUM as BROWSER_PATH

CHROMIUM = str(BROWSER_PATH)
JS = Path(__file__).resolve().parents[2] / "widget_js"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed"),
]

HARNESS = """
<!doctype html><html><head><link rel="stylesheet" href="/chat.css"></head>
<body><div id="host"></div>
<script type="module">
import widget, { renderMarkdown } from "/chat.js";
window.renderMarkdown = renderMarkdown;
window.makeModel = (state) => {
  const handlers = {};
  return {
    sent: [],
    handlers,
    get: (k) => state[k],
    on(name, fn) { (handlers[name] ||= []).push(fn); },
    off(name, fn) { handlers[name] = (handlers[name] || []).filter((f) => f !== fn); },
    send(msg) { this.sent.push(msg); },
    emit(name, ...args) { for (const f of handlers[name] || []) f(...args); },
    change(key, value) { state[key] = value; this.emit("change:" + key); },
  };
};
window.mount = (state) => {
  const el = document.getElementById("host");
  window.model = window.makeModel(state);
  window.cleanup = widget.render({ model: window.model, el });
};
window.ready = true;
</script></body></html>
"""

STATE = {
    "messages": [],
    "status": "idle",
    "providers": [
        {"name": "scripted", "models": [{"id": "m1", "label": "Modelo 1"}], "default_model": "m1"},
        {"name": "openai", "models": [{"id": "gpt", "label": "GPT"}], "default_model": "gpt"},
    ],
    "provider": "scripted",
    "model": "",
    "keys_set": [],
    "key_status": {},
    "conversations": [],
    "conversation_id": "c1",
    "language": "es",
    "height": "500px",
    "width": "380px",
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page()
    files = {
        "/chat.js": ((JS / "chat.js").read_text(encoding="utf-8"), "text/javascript"),
        "/chat.css": ((JS / "chat.css").read_text(encoding="utf-8"), "text/css"),
        "/": (HARNESS, "text/html"),
    }

    def route(r: Any) -> None:
        path = "/" + r.request.url.split("://", 1)[1].split("/", 1)[1].split("?")[0]
        if r.request.url.startswith("http://idee.test/") and path in files:
            body, kind = files[path]
            r.fulfill(status=200, content_type=kind, body=body)
        else:
            r.abort()

    page.route("**/*", route)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("http://idee.test/")
    page.wait_for_function("() => window.ready === true")
    yield page
    assert errors == []
    page.close()


def md(page: Any, source: str) -> str:
    return page.evaluate(
        "(s) => { const d = document.createElement('div'); renderMarkdown(s, d); return d.innerHTML; }",
        source,
    )


# ---------------------------------------------------------------- Markdown
def test_markdown_blocks_and_inline(page: Any) -> None:
    html = md(
        page,
        "# Título\n**negrita** y *cursiva* con `código`\n\n- uno\n- dos\n\n1. primero\n\n"
        "```python\nprint('<b>')\n```\n> cita\n\n| a | b |\n|---|---|\n| 1 | 2 |",
    )
    assert "<h3>Título</h3>" in html
    assert "<strong>negrita</strong>" in html and "<em>cursiva</em>" in html
    assert "<code>código</code>" in html
    assert "<ul><li>uno</li><li>dos</li></ul>" in html and "<ol><li>primero</li></ol>" in html
    assert "<pre><code data-lang=\"python\">print('&lt;b&gt;')</code></pre>" in html
    assert "<blockquote><p>cita</p></blockquote>" in html
    assert "<th>a</th>" in html and "<td>2</td>" in html


def test_markdown_nested_and_streaming_fragments(page: Any) -> None:
    assert md(page, "**[IGN](https://www.ign.es)**") == (
        '<p><strong><a href="https://www.ign.es/" target="_blank" '
        'rel="noopener noreferrer nofollow">IGN</a></strong></p>'
    )
    assert md(page, "He cargado la capa **IGNBaseGris** del IGN.") == (
        "<p>He cargado la capa <strong>IGNBaseGris</strong> del IGN.</p>"
    )
    assert md(page, "una capa **sin cerrar") == "<p>una capa **sin cerrar</p>"
    assert md(page, "snake_case_name y _cursiva_") == "<p>snake_case_name y <em>cursiva</em></p>"
    assert md(page, "nombre__con__guiones **b** y __fuerte__") == (
        "<p>nombre__con__guiones <strong>b</strong> y <strong>fuerte</strong></p>"
    )


def test_markdown_never_interprets_html_or_unsafe_links(page: Any) -> None:
    html = md(
        page,
        '<img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>\n'
        "[clic](javascript:window.__xss=3) <javascript:alert(1)> https://www.idee.es/x.",
    )
    assert "<img" not in html and "<script" not in html
    assert "&lt;img src=x" in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html
    assert "[clic](javascript:window.__xss=3)" in html  # shown as text, not a link
    assert 'href="https://www.idee.es/x"' in html  # the final dot is not part of the link
    assert page.evaluate("() => window.__xss") is None


# ---------------------------------------------------------------- the widget
def mount(page: Any, **state: Any) -> None:
    page.evaluate("(s) => mount(s)", {**STATE, **state})


def sent(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("() => model.sent")


def test_enter_sends_and_shift_enter_adds_a_line(page: Any) -> None:
    mount(page)
    assert page.locator(".idee-welcome").is_visible()
    box = page.locator(".idee-chat-input")
    box.fill("Llévame")
    box.press("Shift+Enter")
    box.press_sequentially("a Toledo")
    assert box.input_value() == "Llévame\na Toledo"
    assert sent(page) == []
    box.press("Enter")
    assert sent(page) == [{"type": "user_message", "text": "Llévame\na Toledo"}]
    assert box.input_value() == ""
    box.press("Enter")  # empty input: nothing is sent
    assert len(sent(page)) == 1
    page.locator(".idee-chat-input").fill("otra")
    page.locator(".idee-send").click()
    assert sent(page)[-1] == {"type": "user_message", "text": "otra"}


def test_streaming_draft_then_history_and_stop(page: Any) -> None:
    mount(page)
    page.evaluate("() => model.change('status', 'running')")
    stop = page.locator(".idee-stop")
    assert stop.is_visible() and stop.is_enabled()
    assert page.locator(".idee-send").is_disabled()
    page.evaluate("() => model.emit('msg:custom', {type: 'text_delta', text: 'Hola, '})")
    page.evaluate("() => model.emit('msg:custom', {type: 'text_delta', text: '**mundo**'})")
    assert page.locator(".idee-draft strong").inner_text() == "mundo"
    stop.click()
    page.locator(".idee-chat-input").press("Escape")
    assert sent(page)[-2:] == [{"type": "stop"}, {"type": "stop"}]
    messages = [
        {"kind": "user", "id": "u1", "text": "hola"},
        {
            "kind": "assistant",
            "id": "a1",
            "text": "Hola, **mundo**",
            "calls": [
                {
                    "id": "c1",
                    "name": "zoomTo",
                    "summary": "lat=40.4, lon=-3.7",
                    "args": '{"lat": 40.4, "lon": -3.7}',
                    "status": "done",
                    "result": '{"success": true}',
                }
            ],
            "sources": [{"source": "docs/capas.md", "chunk_index": 3}],
        },
        {"kind": "notice", "id": "n1", "level": "error", "code": "auth", "text": "Clave no válida"},
    ]
    page.evaluate(
        "(m) => { model.change('messages', m); model.change('status', 'idle'); }", messages
    )
    assert page.locator(".idee-draft").count() == 0
    assert page.locator(".idee-msg-assistant strong").inner_text() == "mundo"
    assert page.locator(".idee-stop").is_hidden()
    chip = page.locator(".idee-chip[data-tool='zoomTo']")
    assert chip.get_attribute("data-status") == "done"
    assert page.locator(".idee-chip-detail").is_hidden()
    chip.click()
    assert chip.get_attribute("aria-expanded") == "true"
    assert '"success": true' in page.locator(".idee-chip-detail").inner_text()
    assert page.locator(".idee-sources summary").inner_text() == "Fuentes (1)"
    assert page.locator(".idee-notice-error[role='alert']").inner_text() == "Clave no válida"


def test_settings_key_provider_and_language(page: Any) -> None:
    mount(page)
    page.locator(".idee-settings-toggle").click()
    assert page.locator(".idee-chat-settings").is_visible()
    page.locator(".idee-key-test").click()
    assert "Escribe una clave" in page.locator(".idee-key-status").inner_text()
    page.locator(".idee-key-input").fill("sk-123")
    page.locator(".idee-key-test").click()
    assert sent(page)[-1] == {"type": "test_key", "provider": "scripted", "api_key": "sk-123"}
    page.evaluate(
        "() => { model.change('key_status', {provider: 'scripted', valid: true, message: 'ok', models: ['m9']});"
        " model.change('keys_set', ['scripted']);"
        " model.emit('msg:custom', {type: 'key_test', provider: 'scripted', valid: true}); }"
    )
    assert page.locator(".idee-key-input").input_value() == ""
    assert "clave en memoria" in page.locator(".idee-key-badge").inner_text()
    models = page.locator(".idee-model-select option").all_inner_texts()
    assert models == ["(por defecto)", "Modelo 1", "m9"]
    page.locator(".idee-provider-select").select_option("openai")
    assert sent(page)[-1] == {"type": "select_provider", "provider": "openai", "model": ""}
    page.locator(".idee-model-select").select_option("m1")
    assert sent(page)[-1] == {"type": "select_provider", "provider": "scripted", "model": "m1"}
    page.locator(".idee-language-select").select_option("en")
    assert sent(page)[-1] == {"type": "set_language", "language": "en"}
    page.evaluate("() => model.change('language', 'en')")
    assert page.locator(".idee-send").inner_text() == "Send"
    assert page.locator(".idee-chat-settings").is_visible()  # the open panel stays open


def test_history_new_conversation_and_cleanup(page: Any) -> None:
    mount(
        page,
        conversations=[
            {"id": "c2", "title": "Madrid", "updated_at": "2026-05-01T10:00:00Z", "count": 2},
            {"id": "c1", "title": "", "updated_at": "2026-05-01T09:00:00Z", "count": 1},
        ],
        conversation_id="c2",
    )
    page.locator(".idee-history-toggle").click()
    items = page.locator(".idee-history-item")
    assert items.count() == 2
    assert items.nth(0).get_attribute("aria-current") == "true"
    assert "Conversación sin título" in items.nth(1).inner_text()
    items.nth(1).click()
    assert sent(page)[-1] == {"type": "select_conversation", "id": "c1"}
    page.locator(".idee-new").click()
    assert sent(page)[-1] == {"type": "new_conversation"}
    for button in page.locator(".idee-chat button").all():
        if button.is_visible():
            assert button.get_attribute("aria-label") or button.inner_text().strip()
    page.evaluate("() => cleanup()")
    remaining = page.evaluate(
        "() => Object.values(model.handlers).reduce((n, list) => n + list.length, 0)"
    )
    assert remaining == 0
    assert page.evaluate("() => document.getElementById('host').children.length") == 0
