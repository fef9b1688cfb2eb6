// idee-notebook-agent chat panel: a plain ES module for anywidget (no imports, works offline).
//
// Protocol: user input goes to Python as custom messages ({type: "user_message", text}, "stop",
// "new_conversation", "select_conversation", "select_provider", "test_key", "clear_key",
// "set_language"); the answer streams back as {type: "text_delta", text} messages; the history is
// the synced `messages` trait. Model text is rendered as Markdown by building DOM nodes (text
// nodes and a fixed set of elements): raw HTML from the model or tools is never interpreted.

const TEXT = {
  es: {
    title: "Asistente IDEE",
    placeholder: "Escribe tu petición (Enter envía, Mayús+Enter nueva línea)",
    input: "Mensaje para el asistente",
    send: "Enviar",
    stop: "Detener",
    newConversation: "Nueva conversación",
    history: "Historial de conversaciones",
    settings: "Ajustes: proveedor, modelo y clave",
    provider: "Proveedor",
    model: "Modelo",
    modelDefault: "(por defecto)",
    apiKey: "Clave de API",
    keyPlaceholder: "Pega tu clave (solo en la memoria del kernel)",
    testKey: "Probar clave",
    clearKey: "Olvidar clave",
    keyInMemory: "• clave en memoria",
    testing: "Probando la clave…",
    keyMissing: "Escribe una clave antes de probarla.",
    keyValid: "✓",
    keyInvalid: "✗",
    language: "Idioma",
    thinking: "Pensando…",
    sources: "Fuentes",
    chunk: "fragmento",
    args: "Argumentos",
    result: "Resultado",
    noConversations: "Todavía no hay conversaciones.",
    untitled: "Conversación sin título",
    messages: "Mensajes de la conversación",
    welcome:
      "Hola. Pídeme acciones sobre el mapa: «Llévame a Toledo», «carga la capa IGNBaseGris», «¿qué capas hay?».",
    status: { running: "en curso", done: "hecho", failed: "falló", cancelled: "cancelada" },
    toolChip: "Herramienta",
  },
  en: {
    title: "IDEE assistant",
    placeholder: "Type your request (Enter sends, Shift+Enter new line)",
    input: "Message to the assistant",
    send: "Send",
    stop: "Stop",
    newConversation: "New conversation",
    history: "Conversation history",
    settings: "Settings: provider, model and key",
    provider: "Provider",
    model: "Model",
    modelDefault: "(default)",
    apiKey: "API key",
    keyPlaceholder: "Paste your key (kept only in kernel memory)",
    testKey: "Test key",
    clearKey: "Forget key",
    keyInMemory: "• key in memory",
    testing: "Testing the key…",
    keyMissing: "Type a key before testing it.",
    keyValid: "✓",
    keyInvalid: "✗",
    language: "Language",
    thinking: "Thinking…",
    sources: "Sources",
    chunk: "chunk",
    args: "Arguments",
    result: "Result",
    noConversations: "No conversations yet.",
    untitled: "Untitled conversation",
    messages: "Conversation messages",
    welcome:
      "Hello. Ask me for map actions: “Take me to Toledo”, “load the IGNBaseGris layer”, “which layers are on?”.",
    status: { running: "running", done: "done", failed: "failed", cancelled: "cancelled" },
    toolChip: "Tool",
  },
};

const STATUS_ICON = { running: "⏳", done: "✓", failed: "✗", cancelled: "⏹" };

// ------------------------------------------------------------------ small DOM helpers
function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function safeUrl(raw) {
  const text = String(raw || "").trim();
  if (!/^(https?:\/\/|mailto:)/i.test(text)) return null;
  try {
    const url = new URL(text);
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

// ------------------------------------------------------------------ safe Markdown → DOM
const INLINE = new RegExp(
  [
    "(?<tick>`+)(?<code>[\\s\\S]*?[^`])\\k<tick>(?!`)",
    "\\*\\*(?<strong>[\\s\\S]+?)\\*\\*",
    "(?<pre2>^|[^\\w])__(?<strong2>[^_\\s][\\s\\S]*?)__(?!\\w)",
    "\\*(?<em>[^*\\s][^*]*?)\\*",
    "(?<pre1>^|[^\\w])_(?<em2>[^_\\s][^_]*?)_(?!\\w)",
    '\\[(?<label>[^\\]]+)\\]\\((?<href>[^)\\s]+)(?:\\s+"[^"]*")?\\)',
    "<(?<auto>(?:https?:\\/\\/|mailto:)[^>\\s]+)>",
    "(?<bare>https?:\\/\\/[^\\s<>()]*[^\\s<>().,;:!?'\"])",
  ].join("|"),
  "g",
);

function link(href, label, parent) {
  const a = h("a", { href, target: "_blank", rel: "noopener noreferrer nofollow" });
  if (typeof label === "string") a.textContent = label;
  else renderInline(label.text, a);
  parent.append(a);
}

function renderInline(text, parent) {
  const re = new RegExp(INLINE.source, "g"); // one per call: this function recurses
  let last = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const g = m.groups;
    const start = m.index + (g.pre1 || g.pre2 || "").length; // _em_ keeps its boundary char
    if (start > last) parent.append(document.createTextNode(text.slice(last, start)));
    if (g.code !== undefined) parent.append(h("code", { text: g.code.trim() || g.code }));
    else if (g.strong !== undefined || g.strong2 !== undefined) {
      renderInline(g.strong ?? g.strong2, parent.appendChild(h("strong")));
    } else if (g.em !== undefined || g.em2 !== undefined) {
      renderInline(g.em ?? g.em2, parent.appendChild(h("em")));
    } else if (g.label !== undefined) {
      const href = safeUrl(g.href);
      if (href) link(href, { text: g.label }, parent);
      else parent.append(document.createTextNode(m[0]));
    } else {
      const raw = g.auto ?? g.bare;
      const href = safeUrl(raw);
      if (href) link(href, raw, parent);
      else parent.append(document.createTextNode(raw));
    }
    last = re.lastIndex;
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

const RE_FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+#.-]*)\s*$/;
const RE_HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RE_HR = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const RE_QUOTE = /^\s{0,3}>\s?/;
const RE_UL = /^\s{0,3}[-*+]\s+/;
const RE_OL = /^\s{0,3}\d{1,9}[.)]\s+/;
const RE_TABLE_SEP = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

function isBlockStart(line) {
  return RE_FENCE.test(line) || RE_HEADING.test(line) || RE_HR.test(line) || RE_QUOTE.test(line) || RE_UL.test(line) || RE_OL.test(line);
}

function tableCells(line) {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
}

export function renderMarkdown(source, target) {
  target.replaceChildren();
  const lines = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(RE_FENCE);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1;
      const code = h("code", { text: body.join("\n") });
      if (fence[2]) code.dataset.lang = fence[2];
      target.append(h("pre", {}, code));
      continue;
    }
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const heading = line.match(RE_HEADING);
    if (heading) {
      const level = Math.min(heading[1].length + 2, 6);
      renderInline(heading[2], target.appendChild(h(`h${level}`)));
      i += 1;
      continue;
    }
    if (RE_HR.test(line)) {
      target.append(h("hr"));
      i += 1;
      continue;
    }
    if (RE_QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && RE_QUOTE.test(lines[i])) body.push(lines[i++].replace(RE_QUOTE, ""));
      const quote = h("blockquote");
      renderMarkdown(body.join("\n"), quote);
      target.append(quote);
      continue;
    }
    if (RE_UL.test(line) || RE_OL.test(line)) {
      const ordered = RE_OL.test(line);
      const marker = ordered ? RE_OL : RE_UL;
      const list = h(ordered ? "ol" : "ul");
      while (i < lines.length && marker.test(lines[i])) {
        const parts = [lines[i++].replace(marker, "")];
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !marker.test(lines[i])) parts.push(lines[i++].trim());
        const item = h("li");
        renderInline(parts.join(" "), item);
        list.append(item);
      }
      target.append(list);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && RE_TABLE_SEP.test(lines[i + 1])) {
      const table = h("table");
      const headRow = h("tr");
      for (const cell of tableCells(line)) renderInline(cell, headRow.appendChild(h("th")));
      table.append(h("thead", {}, headRow));
      const body = h("tbody");
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
        const row = h("tr");
        for (const cell of tableCells(lines[i++])) renderInline(cell, row.appendChild(h("td")));
        body.append(row);
      }
      table.append(body);
      target.append(h("div", { class: "idee-table-wrap" }, table));
      continue;
    }
    const para = h("p");
    const body = [line];
    i += 1;
    while (i < lines.length && lines[i].trim() && !isBlockStart(lines[i])) body.push(lines[i++]);
    body.forEach((text, index) => {
      if (index) para.append(h("br"));
      renderInline(text, para);
    });
    target.append(para);
  }
  return target;
}

// ------------------------------------------------------------------ the widget
function render({ model, el }) {
  const state = { draft: "", expanded: new Set(), panel: null };
  const cleanups = [];
  const listen = (name, fn) => {
    model.on(name, fn);
    cleanups.push(() => model.off(name, fn));
  };
  const t = () => TEXT[model.get("language")] || TEXT.es;
  const send = (content) => model.send(content);

  el.classList.add("idee-chat-root");
  el.setAttribute("data-lm-suppress-shortcuts", "true");
  const root = h("div", { class: "idee-chat" });
  const historyId = `idee-history-${Math.random().toString(36).slice(2, 10)}`;
  el.replaceChildren(root);
  let ui = {};

  function build() {
    const tx = t();
    root.setAttribute("lang", model.get("language") || "es");
    root.style.setProperty("--idee-chat-height", model.get("height") || "560px");
    root.style.setProperty("--idee-chat-width", model.get("width") || "380px");
    const historyBtn = h("button", { class: "idee-icon-btn idee-history-toggle", type: "button", "aria-label": tx.history, title: tx.history, "aria-expanded": "false", "aria-controls": historyId }, "☰");
    const newBtn = h("button", { class: "idee-icon-btn idee-new", type: "button", "aria-label": tx.newConversation, title: tx.newConversation }, "+");
    const settingsBtn = h("button", { class: "idee-icon-btn idee-settings-toggle", type: "button", "aria-label": tx.settings, title: tx.settings, "aria-expanded": "false" }, "⚙");
    const header = h("div", { class: "idee-chat-header" }, h("span", { class: "idee-chat-title", text: tx.title }), h("span", { class: "idee-spacer" }), historyBtn, newBtn, settingsBtn);

    const providerSelect = h("select", { class: "idee-provider-select", "aria-label": tx.provider });
    const modelSelect = h("select", { class: "idee-model-select", "aria-label": tx.model });
    const keyInput = h("input", { class: "idee-key-input", type: "password", autocomplete: "off", spellcheck: "false", "aria-label": tx.apiKey, placeholder: tx.keyPlaceholder });
    const keyTest = h("button", { class: "idee-btn idee-key-test", type: "button" }, tx.testKey);
    const keyClear = h("button", { class: "idee-btn idee-key-clear", type: "button" }, tx.clearKey);
    const keyStatus = h("div", { class: "idee-key-status", role: "status", "aria-live": "polite" });
    const keyBadge = h("span", { class: "idee-key-badge" });
    const langSelect = h("select", { class: "idee-language-select", "aria-label": tx.language }, h("option", { value: "es" }, "Español"), h("option", { value: "en" }, "English"));
    const settings = h(
      "div",
      { class: "idee-chat-settings", hidden: true },
      h("label", {}, h("span", { text: tx.provider }), providerSelect),
      h("label", {}, h("span", { text: tx.model }), modelSelect),
      h("label", {}, h("span", {}, tx.apiKey, " ", keyBadge), keyInput),
      h("div", { class: "idee-key-actions" }, keyTest, keyClear),
      keyStatus,
      h("label", {}, h("span", { text: tx.language }), langSelect),
    );
    const historyList = h("ul", { class: "idee-history-list" });
    const history = h("nav", { class: "idee-chat-history", id: historyId, hidden: true, "aria-label": tx.history }, historyList);

    const list = h("div", { class: "idee-chat-messages", role: "log", "aria-live": "polite", "aria-label": tx.messages, tabindex: "0" });
    const status = h("div", { class: "idee-status", role: "status", "aria-live": "polite" });
    const input = h("textarea", { class: "idee-chat-input", rows: "2", "aria-label": tx.input, placeholder: tx.placeholder, "data-lm-suppress-shortcuts": "true" });
    const sendBtn = h("button", { class: "idee-btn idee-send", type: "button", "aria-label": tx.send, title: tx.send }, tx.send);
    const stopBtn = h("button", { class: "idee-btn idee-stop", type: "button", "aria-label": tx.stop, title: tx.stop }, "■ " + tx.stop);
    const footer = h("div", { class: "idee-chat-footer" }, input, h("div", { class: "idee-chat-actions" }, sendBtn, stopBtn));
    root.replaceChildren(header, settings, history, list, status, footer);

    const toggle = (panel, button, other, otherButton) => {
      const open = panel.hidden;
      panel.hidden = !open;
      button.setAttribute("aria-expanded", String(open));
      other.hidden = true;
      otherButton.setAttribute("aria-expanded", "false");
      state.panel = open ? panel.className : null;
    };
    historyBtn.addEventListener("click", () => toggle(history, historyBtn, settings, settingsBtn));
    settingsBtn.addEventListener("click", () => toggle(settings, settingsBtn, history, historyBtn));
    if (state.panel === settings.className) toggle(settings, settingsBtn, history, historyBtn);
    if (state.panel === history.className) toggle(history, historyBtn, settings, settingsBtn);
    newBtn.addEventListener("click", () => {
      state.draft = "";
      send({ type: "new_conversation" });
      input.focus();
    });
    const submit = () => {
      const text = input.value.trim();
      if (!text || model.get("status") === "running") return;
      input.value = "";
      state.draft = "";
      send({ type: "user_message", text });
    };
    sendBtn.addEventListener("click", submit);
    stopBtn.addEventListener("click", () => send({ type: "stop" }));
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        event.stopPropagation();
        submit();
      } else if (event.key === "Escape" && model.get("status") === "running") {
        event.preventDefault();
        event.stopPropagation();
        send({ type: "stop" });
      } else if (event.key === "Enter" && !event.isComposing) {
        // Shift+Enter: a new line. Inserted here because JupyterLab cancels line breaks typed
        // inside a cell's output (its Shift+Enter "run cell" guard).
        event.preventDefault();
        event.stopPropagation();
        input.setRangeText("\n", input.selectionStart, input.selectionEnd, "end");
        input.dispatchEvent(new Event("input", { bubbles: true }));
      }
    });
    providerSelect.addEventListener("change", () => send({ type: "select_provider", provider: providerSelect.value, model: "" }));
    modelSelect.addEventListener("change", () => send({ type: "select_provider", provider: model.get("provider"), model: modelSelect.value }));
    keyTest.addEventListener("click", () => {
      const key = keyInput.value.trim();
      if (!key) {
        keyStatus.textContent = t().keyMissing;
        return;
      }
      keyStatus.textContent = t().testing;
      send({ type: "test_key", provider: model.get("provider"), api_key: key });
    });
    keyClear.addEventListener("click", () => {
      keyInput.value = "";
      send({ type: "clear_key", provider: model.get("provider") });
    });
    langSelect.value = model.get("language") || "es";
    langSelect.addEventListener("change", () => send({ type: "set_language", language: langSelect.value }));

    ui = { list, status, input, sendBtn, stopBtn, providerSelect, modelSelect, keyInput, keyStatus, keyBadge, historyList, history, historyBtn };
    drawProviders();
    drawKeyStatus();
    drawHistory();
    drawMessages();
    drawStatus();
  }

  // ---- drawing from the synced state
  function drawProviders() {
    const providers = model.get("providers") || [];
    const current = model.get("provider");
    ui.providerSelect.replaceChildren(...providers.map((p) => h("option", { value: p.name, selected: p.name === current }, p.name)));
    ui.providerSelect.value = current;
    const entry = providers.find((p) => p.name === current) || { models: [] };
    const ids = (entry.models || []).map((m) => ({ id: m.id, label: m.label || m.id }));
    const status = model.get("key_status") || {};
    if (status.valid && status.provider === current) {
      for (const id of status.models || []) if (!ids.some((m) => m.id === id)) ids.push({ id, label: id });
    }
    const chosen = model.get("model");
    if (chosen && !ids.some((m) => m.id === chosen)) ids.unshift({ id: chosen, label: chosen });
    ui.modelSelect.replaceChildren(h("option", { value: "" }, t().modelDefault), ...ids.map((m) => h("option", { value: m.id }, m.label)));
    ui.modelSelect.value = chosen || "";
    const hasKey = (model.get("keys_set") || []).includes(current);
    ui.keyBadge.textContent = hasKey ? t().keyInMemory : "";
  }

  function drawKeyStatus() {
    const status = model.get("key_status") || {};
    if (!status.provider) return;
    const prefix = status.valid ? t().keyValid : t().keyInvalid;
    ui.keyStatus.textContent = `${prefix} ${status.message || ""}`.trim();
    ui.keyStatus.dataset.valid = String(Boolean(status.valid));
  }

  function drawHistory() {
    const items = model.get("conversations") || [];
    const current = model.get("conversation_id");
    if (!items.length || items.every((c) => !c.count)) {
      ui.historyList.replaceChildren(h("li", { class: "idee-history-empty", text: t().noConversations }));
      return;
    }
    ui.historyList.replaceChildren(
      ...items
        .filter((c) => c.count || c.id === current)
        .map((c) => {
          const button = h("button", { type: "button", class: "idee-history-item", "aria-current": c.id === current ? "true" : null, "data-id": c.id }, h("span", { class: "idee-history-title", text: (c.title || t().untitled).slice(0, 60) }), h("span", { class: "idee-history-date", text: formatDate(c.updated_at) }));
          button.addEventListener("click", () => {
            state.draft = "";
            send({ type: "select_conversation", id: c.id });
          });
          return h("li", {}, button);
        }),
    );
  }

  function formatDate(iso) {
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? "" : date.toLocaleString(model.get("language") === "en" ? "en-GB" : "es-ES", { dateStyle: "short", timeStyle: "short" });
  }

  function chip(call) {
    const tx = t();
    const statusText = tx.status[call.status] || call.status;
    const button = h(
      "button",
      { type: "button", class: "idee-chip", "data-status": call.status, "data-tool": call.name, "aria-expanded": String(state.expanded.has(call.id)), title: `${tx.toolChip} ${call.name}: ${statusText}` },
      h("span", { class: "idee-chip-icon", "aria-hidden": "true", text: STATUS_ICON[call.status] || "•" }),
      h("span", { class: "idee-chip-name", text: call.name }),
      call.summary ? h("span", { class: "idee-chip-args", text: call.summary }) : null,
      h("span", { class: "idee-visually-hidden", text: ` (${statusText})` }),
    );
    const detail = h("pre", { class: "idee-chip-detail", hidden: !state.expanded.has(call.id) }, `${tx.args}: ${call.args}\n${tx.result}: ${call.result || "—"}`);
    button.addEventListener("click", () => {
      const open = detail.hidden;
      detail.hidden = !open;
      button.setAttribute("aria-expanded", String(open));
      if (open) state.expanded.add(call.id);
      else state.expanded.delete(call.id);
    });
    return h("div", { class: "idee-chip-wrap" }, button, detail);
  }

  function sourcesBlock(sources) {
    if (!sources || !sources.length) return null;
    const items = sources.map((s) => {
      const label = `${s.title || s.source || "?"}${s.chunk_index !== undefined ? ` (${t().chunk} ${s.chunk_index})` : ""}`;
      const href = safeUrl(s.url || s.source);
      return h("li", {}, href ? h("a", { href, target: "_blank", rel: "noopener noreferrer nofollow", text: label }) : label);
    });
    return h("details", { class: "idee-sources" }, h("summary", {}, `${t().sources} (${sources.length})`), h("ul", {}, ...items));
  }

  function messageNode(item) {
    if (item.kind === "user") {
      return h("div", { class: "idee-msg idee-msg-user", "data-id": item.id }, h("div", { class: "idee-bubble", text: item.text }));
    }
    if (item.kind === "notice") {
      return h("div", { class: `idee-msg idee-notice idee-notice-${item.level}`, role: item.level === "error" ? "alert" : null, "data-code": item.code }, item.text);
    }
    const node = h("div", { class: "idee-msg idee-msg-assistant", "data-id": item.id });
    if (item.text) node.append(renderMarkdown(item.text, h("div", { class: "idee-bubble idee-markdown" })));
    if (item.calls && item.calls.length) node.append(h("div", { class: "idee-chips" }, ...item.calls.map(chip)));
    const sources = sourcesBlock(item.sources);
    if (sources) node.append(sources);
    return node;
  }

  function nearBottom() {
    const list = ui.list;
    return list.scrollHeight - list.scrollTop - list.clientHeight < 60;
  }

  function scrollDown(force) {
    if (force || nearBottom()) ui.list.scrollTop = ui.list.scrollHeight;
  }

  function drawMessages() {
    const stick = nearBottom();
    const items = model.get("messages") || [];
    const nodes = items.map(messageNode);
    if (!items.length) nodes.push(h("div", { class: "idee-msg idee-welcome" }, t().welcome));
    ui.list.replaceChildren(...nodes);
    drawDraft();
    scrollDown(stick);
  }

  function drawDraft() {
    let node = ui.list.querySelector(".idee-draft");
    if (!state.draft) {
      if (node) node.remove();
      return;
    }
    if (!node) {
      node = h("div", { class: "idee-msg idee-msg-assistant idee-draft", "aria-busy": "true" }, h("div", { class: "idee-bubble idee-markdown" }));
      ui.list.append(node);
    }
    renderMarkdown(state.draft, node.firstChild);
  }

  function drawStatus() {
    const running = model.get("status") === "running";
    ui.status.textContent = running ? t().thinking : "";
    ui.status.classList.toggle("idee-running", running);
    ui.stopBtn.disabled = !running;
    ui.stopBtn.hidden = !running;
    ui.sendBtn.disabled = running;
    root.dataset.status = running ? "running" : "idle";
  }

  // ---- model events
  listen("change:messages", () => {
    state.draft = "";
    drawMessages();
  });
  listen("change:status", drawStatus);
  listen("change:providers", drawProviders);
  listen("change:provider", drawProviders);
  listen("change:model", drawProviders);
  listen("change:keys_set", drawProviders);
  listen("change:key_status", () => {
    drawKeyStatus();
    drawProviders();
  });
  listen("change:conversations", drawHistory);
  listen("change:conversation_id", drawHistory);
  listen("change:language", build);
  listen("change:height", () => root.style.setProperty("--idee-chat-height", model.get("height") || "560px"));
  listen("msg:custom", (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "text_delta") {
      const stick = nearBottom();
      state.draft += msg.text || "";
      drawDraft();
      scrollDown(stick);
    } else if (msg.type === "turn_start" || msg.type === "turn_end") {
      state.draft = "";
      drawDraft();
    } else if (msg.type === "key_test") {
      if (msg.valid) ui.keyInput.value = "";
    }
  });

  // Leaflet re-measures on window resize: tell it when the user drags the chat's width.
  let pending = 0;
  const observer = typeof ResizeObserver === "function"
    ? new ResizeObserver(() => {
        if (pending) return;
        pending = requestAnimationFrame(() => {
          pending = 0;
          window.dispatchEvent(new Event("resize"));
        });
      })
    : null;
  if (observer) observer.observe(root);

  build();
  return () => {
    for (const fn of cleanups) fn();
    if (observer) observer.disconnect();
    if (pending) cancelAnimationFrame(pending);
    el.replaceChildren();
  };
}

export default { render };
