/*
 * chatagent-lite.js: a small chat panel that speaks the idee-notebook-agent REST/SSE contract
 * (the classic API-IDEE ChatAgent protocol: /api, string content, tool_calls run on the map).
 *
 * Usage:  IdeeChatLite.attach(map, { backendUrl: "http://127.0.0.1:8000/api", stream: false })
 * `map` is an API-IDEE map (IDEE.map(...)) or any object with the same few methods:
 * getCenter() -> {x, y}, getZoom(), getProjection() -> {code}, getBbox() -> {x:{min,max}, y:{min,max}},
 * getLayers(), setCenter({x, y}), setZoom(n), addLayers(layer|[...]), removeLayers(layer|[...]).
 * The server sends zoomTo already reprojected into the map's SRS, so coordinates are used as-is.
 * Plain script, no dependencies, no CDN: it works offline.
 */
(function (global) {
  "use strict";

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function mapTools(map) {
    function srs() {
      try { return map.getProjection().code; } catch (e) { return "EPSG:3857"; }
    }
    function findLayer(name) {
      return (map.getLayers() || []).filter(function (l) { return l && l.name === name; })[0];
    }
    return {
      getMapCenter: function () { var c = map.getCenter(); return { lat: c.y, lon: c.x, srs: srs() }; },
      getCurrentZoom: function () { return { level: map.getZoom() }; },
      getMapExtent: function () {
        var b = map.getBbox();
        return { minX: b.x.min, minY: b.y.min, maxX: b.x.max, maxY: b.y.max, srs: srs() };
      },
      listActiveLayers: function () {
        return (map.getLayers() || []).map(function (l) {
          return {
            name: l.name || "", type: l.type || "", legend: l.legend || "",
            visible: typeof l.isVisible === "function" ? l.isVisible() : true
          };
        });
      },
      addWMSLayer: function (a) {
        var opts = { url: a.url, name: a.name, legend: a.legend || a.name,
                     transparent: a.transparent !== false, tiled: false };
        map.addLayers(new global.IDEE.layer.WMS(opts));
        return { success: true, name: a.name };
      },
      zoomTo: function (a) {
        map.setCenter({ x: a.lon, y: a.lat });
        if (a.zoom !== undefined && a.zoom !== null) map.setZoom(a.zoom);
        return { success: true };
      },
      setZoom: function (a) { map.setZoom(a.level); return { success: true, level: a.level }; },
      removeLayer: function (a) {
        var layer = findLayer(a.name);
        if (!layer) return { success: false, error: "Layer not found: " + a.name };
        map.removeLayers(layer);
        return { success: true, name: a.name };
      }
    };
  }

  function Chat(map, options) {
    this.map = map;
    this.base = (options.backendUrl || "/api").replace(/\/$/, "");
    this.stream = !!options.stream;
    this.tools = mapTools(map);
    this.conversationId = null;
    this.build(options.container || document.body);
    this.loadProviders();
  }

  Chat.prototype.build = function (parent) {
    var root = el("div", { id: "chatagent-lite", class: "chatagent-lite" });
    var head = el("div", { class: "chatagent-lite-head" });
    this.providerSelect = el("select", { id: "chatagent-provider-select", "aria-label": "Proveedor" });
    this.modelSelect = el("select", { id: "chatagent-model-select", "aria-label": "Modelo" });
    head.append(this.providerSelect, this.modelSelect);
    this.messages = el("div", { id: "chatagent-messages", class: "chatagent-messages" });
    this.loading = el("div", { id: "chatagent-loading" }, "…");
    var form = el("div", { class: "chatagent-lite-form" });
    this.input = el("textarea", { id: "chatagent-input", rows: "2",
                                  placeholder: "Pregunta o pide algo sobre el mapa…" });
    this.send = el("button", { id: "chatagent-send", type: "button" }, "Enviar");
    form.append(this.input, this.send);
    root.append(head, this.messages, this.loading, form);
    parent.appendChild(root);
    var self = this;
    this.send.addEventListener("click", function () { self.submit(); });
    this.input.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); self.submit(); }
    });
    this.providerSelect.addEventListener("change", function () { self.fillModels(); });
  };

  Chat.prototype.loadProviders = function () {
    var self = this;
    this.providers = [];
    return fetch(this.base + "/providers/").then(function (r) { return r.ok ? r.json() : []; })
      .catch(function () { return []; })
      .then(function (list) {
        self.providers = Array.isArray(list) ? list : [];
        self.providerSelect.replaceChildren.apply(self.providerSelect, self.providers.map(function (p) {
          return el("option", { value: p.name }, p.name);
        }));
        self.fillModels();
        self.bubble("assistant", "¡Hola! Pídeme que mueva el mapa o añada una capa.");
      });
  };

  Chat.prototype.fillModels = function () {
    var name = this.providerSelect.value;
    var p = this.providers.filter(function (x) { return x.name === name; })[0];
    var models = p ? p.models : [];
    this.modelSelect.replaceChildren.apply(this.modelSelect, models.map(function (m) {
      var o = el("option", { value: m.id }, m.label);
      if (p.default_model === m.id) o.selected = true;
      return o;
    }));
  };

  Chat.prototype.choice = function () {
    var out = {};
    if (this.providerSelect.value) out.provider = this.providerSelect.value;
    if (this.modelSelect.value) out.model = this.modelSelect.value;
    return out;
  };

  Chat.prototype.mapState = function () {
    try {
      var c = this.map.getCenter();
      return { center: { lat: c.y, lon: c.x }, zoom: this.map.getZoom(),
               srs: this.map.getProjection().code };
    } catch (e) { return null; }
  };

  Chat.prototype.bubble = function (role, html, isText) {
    var wrap = el("div", { class: "chatagent-message-wrapper " + role });
    var body = el("div", { class: "chatagent-message" });
    if (isText) body.textContent = html; else body.innerHTML = html || "";  // server escapes (CONTRACT 14.5)
    wrap.appendChild(body);
    this.messages.appendChild(wrap);
    this.messages.scrollTop = this.messages.scrollHeight;
    return body;
  };

  Chat.prototype.sources = function (body, sources) {
    if (!sources || !sources.length) return;
    var details = el("details", { class: "chatagent-sources" });
    details.appendChild(el("summary", {}, "Fuentes citadas"));
    var ul = el("ul");
    sources.forEach(function (s) { ul.appendChild(el("li", {}, s.source + " (chunk " + s.chunk_index + ")")); });
    details.appendChild(ul);
    body.appendChild(details);
  };

  Chat.prototype.post = function (path, payload) {
    return fetch(this.base + path, { method: "POST", headers: { "Content-Type": "application/json" },
                                     body: JSON.stringify(payload) });
  };

  Chat.prototype.busy = function (on) {
    this.loading.classList.toggle("visible", on);
    this.send.disabled = on;
  };

  Chat.prototype.submit = function () {
    var text = this.input.value.trim();
    if (!text) return Promise.resolve();
    this.input.value = "";
    var self = this;
    this.bubble("user", text, true);
    this.busy(true);
    var ready = this.conversationId ? Promise.resolve() :
      this.post("/conversations/", {}).then(function (r) {
        if (!r.ok) throw new Error("create");
        return r.json();
      }).then(function (c) { self.conversationId = c.id; });
    return ready.then(function () {
      var payload = Object.assign({ content: text, map_state: self.mapState() }, self.choice());
      if (self.stream) return self.streamChat(payload);
      return self.post("/conversations/" + self.conversationId + "/chat/", payload)
        .then(function (r) { if (!r.ok) throw new Error("chat"); return r.json(); })
        .then(function (reply) { return self.handle(reply); });
    }).catch(function (err) {
      self.bubble("system", err && err.message === "create" ? "Error al iniciar la conversacion."
                                                            : "Error al enviar el mensaje.", true);
    }).then(function () { self.busy(false); });
  };

  Chat.prototype.handle = function (reply) {
    if (reply.type === "tool_call" && reply.tool_calls && reply.tool_calls.length) {
      if (reply.content) this.bubble("assistant", reply.content);
      return this.runCalls(reply.tool_calls);
    }
    var body = this.bubble("assistant", reply.content);
    this.sources(body, reply.metadata && reply.metadata.sources);
    return Promise.resolve();
  };

  Chat.prototype.runTool = function (call) {
    var fn = this.tools[call.name];
    if (!fn) return { success: false, error: "Unknown tool: " + call.name };
    try { return fn(call.args || {}); } catch (e) { return { success: false, error: String(e && e.message || e) }; }
  };

  Chat.prototype.runCalls = function (calls) {
    var self = this;
    return calls.reduce(function (prev, call) {
      return prev.then(function () {
        var result = self.runTool(call);
        var success = !(result && result.success === false);
        var payload = Object.assign({ tool_name: call.name, tool_call_id: call.id || "", result: result,
                                      success: success }, self.choice());
        return self.post("/conversations/" + self.conversationId + "/tool-result/", payload)
          .then(function (r) { if (!r.ok) throw new Error("tool"); return r.json(); })
          .then(function (reply) { return self.handle(reply); })
          .catch(function () { self.bubble("system", "Error al ejecutar la herramienta.", true); });
      });
    }, Promise.resolve());
  };

  Chat.prototype.streamChat = function (payload) {
    var self = this;
    payload.stream = true;
    return this.post("/conversations/" + this.conversationId + "/chat/", payload).then(function (r) {
      if (!r.ok || !r.body) throw new Error("chat");
      var reader = r.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "", eventName = null, text = "";
      var bubble = self.bubble("assistant", "", true);
      function dispatch(name, data) {
        if (name === "text_delta") { text += data.text; bubble.textContent = text; return null; }
        if (name === "tool_call") return self.runCalls(data.toolCalls || []);
        if (name === "error") { self.bubble("system", data.message, true); return null; }
        if (name === "layer" && self.onLayer) self.onLayer(data.layer);
        return null;
      }
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) return null;
          buffer += decoder.decode(chunk.value, { stream: true });
          var lines = buffer.split("\n");
          buffer = lines.pop();
          var chain = Promise.resolve();
          lines.forEach(function (line) {
            if (line.indexOf("event: ") === 0) { eventName = line.slice(7); return; }
            if (line.indexOf("data: ") !== 0) return;
            var data;
            try { data = JSON.parse(line.slice(6)); } catch (e) { return; }
            var name = eventName || data.type;
            chain = chain.then(function () { return dispatch(name, data); });
          });
          return chain.then(pump);
        });
      }
      return pump();
    });
  };

  global.IdeeChatLite = {
    attach: function (map, options) { return new Chat(map, options || {}); },
    mapTools: mapTools
  };
})(window);
