/* datasette-capsem: the trace explorer — span tree with its timeline, detail panel, search.
 *
 * The page is a skeleton: the tree comes from tree.json, a node's row and bodies from
 * node.json?id=… when it is selected. Every string from those URLs may be attacker-controlled
 * (it comes from a ledger): text goes in through textContent only, links are followed only
 * when they are same-origin paths, and no HTML is ever parsed from data (the page runs under
 * a CSP without inline script or eval).
 *
 * The bar column is the timeline: each span's bar on the trace's time axis, nested as the tree
 * is. It zooms and pans (wheel over the bars zooms about the pointer, Shift+wheel or a drag
 * pans; the +, − and Fit buttons; keys + − 0, Shift+arrows and Z for "zoom to this span"), and
 * the spans on the critical path (tree.json `critical`, graph/waterfall.py defines it) are
 * marked.
 *
 * The selection lives in the URL (#node=model_calls:12) so it can be shared; the graph script
 * (capsem-graph.js) selects through the same "capsem:select" event and is told what is
 * selected and what matches a search through "capsem:selected" and "capsem:matches".
 */
(function () {
  "use strict";

  var el = window.capsemDom.el;
  var safeHref = window.capsemDom.safeHref;
  var getJson = window.capsemDom.getJson;
  /* The toggleable lanes ([lane, name]) and the kinds' short labels come with the data
     (tree.json's timeline_lanes and kinds, from the registry of ledger tables). */
  var LANES = [];
  var KIND_LABEL = Object.create(null);
  var HIDDEN_BY_DEFAULT = {item: true};
  var CRITICAL_TITLE = "The critical path: the chain of spans that determines when the trace " +
    "ends. From the span that ends last, step back again and again to the span that ends last " +
    "among those that had ended when the current one started. Model calls, tool calls, MCP " +
    "calls and processes are candidates; a span off the path could have taken longer without " +
    "moving the end.";
  var ZOOM_STEP = 1.6;
  /* A tick's time, as precise as the window needs (a 3-minute window reads "117 s"). */
  function fmtTick(ms, window) {
    if (window >= 20000) {
      return Math.round(ms / 1000) + " s";
    }
    return fmtMs(ms);
  }

  function fmtMs(ms) {
    if (ms === null || ms === undefined) {
      return "";
    }
    return ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : Math.round(ms) + " ms";
  }

  /* As toLocaleString("en-US"), which builds a formatter on every call (2,000 calls took
     70 ms of a 500-call trace's first draw): an integer's groups are put in here. */
  function fmtNum(value) {
    if (value === null || value === undefined) {
      return "\u2014";
    }
    var number = Number(value);
    if (Number.isSafeInteger(number) && !Object.is(number, -0)) {
      return (number < 0 ? "-" : "") + String(Math.abs(number)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    }
    return number.toLocaleString("en-US");
  }

  /* A table keyed by ids from the ledger: no prototype, so an id such as "constructor" or
     "__proto__" is an ordinary key (and lookups stay fast with 8,000 of them). */
  function table() {
    return Object.create(null);
  }

  function tokenText(figures) {
    return [fmtNum(figures.input_tokens), fmtNum(figures.output_tokens),
      fmtNum(figures.cache_read_tokens), fmtNum(figures.thinking_tokens)].join(" / ");
  }

  function fmtCost(value) {
    return value === null || value === undefined ? "\u2014" : "$" + Number(value).toFixed(4);
  }

  /* What a model call did, in a few words: the tools it called, else how its reply began
     (tree.json's `tools` and `response_preview`, masked for a viewer). */
  function preview(span) {
    if (span.tools && span.tools.length) {
      return "\u2192 " + span.tools.join(", ");
    }
    var text = span.response_preview;
    if (!text) {
      return "";
    }
    return /^\[hidden/.test(text) ? "[hidden]" : "\u201C" + text + "\u201D";
  }

  function nodeLink(id, text, parent) {
    var link = el("a", "capsem-node-link", text || id, parent);
    link.href = "#node=" + encodeURIComponent(id);
    link.setAttribute("data-node", id);
    return link;
  }

  function Explorer(root, tree) {
    LANES = tree.timeline_lanes || [];
    Object.keys(tree.kinds || {}).forEach(function (kind) {
      KIND_LABEL[kind] = tree.kinds[kind];
    });
    this.root = root;
    this.tree = tree;
    this.spans = table();
    this.parent = table();
    this.open = table();
    this.hiddenLanes = {};
    this.matches = null;
    this.matchList = [];
    this.matchAt = -1;
    this.selected = null;
    this.rows = table();
    var self = this;
    Object.keys(HIDDEN_BY_DEFAULT).forEach(function (lane) { self.hiddenLanes[lane] = true; });
    (function walk(span, parent) {
      span.children = span.children || [];  /* tree.json leaves empty keys out */
      span.findings = span.findings || [];
      self.spans[span.id] = span;
      if (parent) {
        self.parent[span.id] = parent.id;
      }
      for (var i = 0; i < span.children.length; i++) {
        walk(span.children[i], span);
      }
    }(tree.root, null));
    this.open[tree.root.id] = true;
    tree.root.children.forEach(function (child) {
      if (child.type === "turn") {
        self.open[child.id] = true;
      }
    });
    var total = tree.totals && tree.totals.duration_ms;
    this.t0 = (tree.totals && tree.totals.start) || 0;
    this.span = total && total > 0 ? total : 1;
    this.from = 0;  /* the time window the bars show, in ms from t0 */
    this.to = this.span;
    this.bars = table();
    this.build();
  }

  Explorer.prototype.build = function () {
    var self = this;
    var bar = el("div", "capsem-explorer-toolbar", null, this.root);
    var label = el("label", "capsem-search-label", "Search this trace ", bar);
    this.search = el("input", "capsem-trace-search", null, label);
    this.search.type = "search";
    this.search.placeholder = "tool, text, kind, status, finding\u2026";
    this.search.setAttribute("aria-label", "Search this trace");
    this.matchNote = el("span", "capsem-match-note", "", bar);
    var lanes = el("span", "capsem-lanes", "Lanes: ", bar);
    LANES.forEach(function (lane) {
      var box = el("label", "capsem-lane-toggle", null, lanes);
      var input = el("input", null, null, box);
      input.type = "checkbox";
      input.checked = !self.hiddenLanes[lane[0]];
      input.setAttribute("data-lane", lane[0]);
      el("span", null, " " + lane[1], box);
      input.addEventListener("change", function () {
        self.hiddenLanes[lane[0]] = !input.checked;
        self.render();
      });
    });
    var expand = el("button", "capsem-tree-expand", "Expand all", bar);
    expand.type = "button";
    var collapse = el("button", "capsem-tree-collapse", "Collapse", bar);
    collapse.type = "button";
    expand.addEventListener("click", function () {
      Object.keys(self.spans).forEach(function (id) { self.open[id] = true; });
      self.render();
    });
    collapse.addEventListener("click", function () {
      self.open = table();
      self.open[self.tree.root.id] = true;
      self.render();
    });
    this.timelineControls(bar);
    var main = el("div", "capsem-explorer-main", null, this.root);
    var left = el("div", "capsem-tree-wrap", null, main);
    var head = el("div", "capsem-tree-head", null, left);
    el("span", "capsem-col-name", "Span", head);
    el("span", "capsem-col-dur", "Duration", head);
    el("span", "capsem-col-tok", "Tokens in / out / cache / think", head);
    el("span", "capsem-col-cost", "Cost", head);
    this.scale = el("span", "capsem-col-bar capsem-scale", null, head);
    this.scale.title = "Wheel: zoom; Shift+wheel or drag: pan";
    this.drawScale();
    window.addEventListener("resize", function () { self.drawScale(); });
    this.list = el("div", "capsem-tree", null, left);
    this.list.setAttribute("role", "tree");
    this.list.setAttribute("aria-label", "Spans of the trace");
    this.panel = el("aside", "capsem-detail", null, main);
    this.panel.setAttribute("aria-live", "polite");
    el("p", "capsem-meta", "Select a span (click, or arrows and Enter) to see its detail here.", this.panel);
    this.search.addEventListener("input", function () {
      clearTimeout(self.searchTimer);
      self.searchTimer = setTimeout(function () { self.find(self.search.value); }, 120);
    });
    this.search.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && self.matchList.length) {
        event.preventDefault();
        /* Enter: the next match (Shift+Enter: the previous one); the focus stays here, so
           Enter again goes on through every match. */
        var step = event.shiftKey ? self.matchList.length - 1 : 1;
        self.matchAt = (self.matchAt + step) % self.matchList.length;
        self.select(self.matchList[self.matchAt], true, true);
        self.matchNote.textContent = (self.matchAt + 1) + " of " + self.matchList.length +
          " matches (Enter: next, Shift+Enter: previous)";
      }
    });
    this.list.addEventListener("keydown", function (event) { self.key(event); });
    this.panAndZoom(left);
    this.list.addEventListener("click", function (event) {
      var target = event.target;
      if (self.dragged) {
        self.dragged = false;
        event.preventDefault();
        return;
      }
      var row = target.closest ? target.closest("[data-span]") : null;
      if (!row) {
        return;
      }
      var id = row.getAttribute("data-span");
      if (target.classList.contains("capsem-toggle")) {
        self.open[id] = !self.open[id];
        self.render();
        self.focus(id);
        return;
      }
      if (target.tagName === "A" && (event.ctrlKey || event.metaKey || event.shiftKey)) {
        return;
      }
      event.preventDefault();
      self.select(id, true);
    });
    this.render();
  };

  Explorer.prototype.visible = function (span) {
    return !(span.lane && this.hiddenLanes[span.lane]);
  };

  Explorer.prototype.render = function () {
    var self = this;
    var list = this.list;
    while (list.firstChild) {
      list.removeChild(list.firstChild);
    }
    this.rows = table();
    this.bars = table();
    this.order = [];
    var fragment = document.createDocumentFragment();
    (function walk(span, depth) {
      if (!self.visible(span)) {
        return;
      }
      fragment.appendChild(self.row(span, depth));
      self.order.push(span.id);
      if (self.open[span.id]) {
        span.children.forEach(function (child) { walk(child, depth + 1); });
      }
    }(this.tree.root, 0));
    list.appendChild(fragment);
    this.fitTokens();
    var focusable = this.selected && this.rows[this.selected] ? this.selected : this.order[0];
    if (focusable) {
      this.rows[focusable].tabIndex = 0;
    }
  };

  /* The token column as wide as its widest figure (never cut: "5,910,312 / 48,113 / …"). */
  Explorer.prototype.fitTokens = function () {
    if (this.tokenChars) {
      return;
    }
    var widest = 12;
    Object.keys(this.spans).forEach(function (id) {
      var span = this.spans[id];
      var figures = span.totals || (span.type === "model_call" ? span : null);
      if (figures) {
        widest = Math.max(widest, tokenText(figures).length);
      }
    }, this);
    this.tokenChars = widest;
    this.root.style.setProperty("--capsem-tok", (widest + 1) + "ch");
  };

  Explorer.prototype.row = function (span, depth) {
    var row = el("div", "capsem-span capsem-span-" + span.type +
      (span.missing ? " missing" : "") + (span.findings.length ? " has-finding" : "") +
      (this.matches && this.matches[span.id] ? " match" : "") +
      (this.selected === span.id ? " selected" : "") + (span.critical ? " critical" : ""), null, null);
    row.setAttribute("role", "treeitem");
    row.setAttribute("data-span", span.id);
    row.setAttribute("aria-level", String(depth + 1));
    row.tabIndex = -1;
    var kids = span.children.filter(this.visible, this);
    if (kids.length) {
      row.setAttribute("aria-expanded", this.open[span.id] ? "true" : "false");
    }
    if (this.selected === span.id) {
      row.setAttribute("aria-selected", "true");
    }
    var name = el("span", "capsem-col-name", null, row);
    name.style.paddingLeft = (depth * 14) + "px";
    var toggle = el("span", "capsem-toggle", kids.length ? (this.open[span.id] ? "\u25BE" : "\u25B8") : "", name);
    toggle.setAttribute("aria-hidden", "true");
    el("span", "capsem-kind capsem-kind-" + span.kind, KIND_LABEL[span.kind] || span.kind, name);
    var link = nodeLink(span.id, span.name, name);
    link.tabIndex = -1;
    link.title = span.name + (span.detail ? " \u00B7 " + span.detail : "") + " (" + span.id + ")";
    var what = preview(span);
    /* The stop reason, unless the tools it called say it ("tool_use → Bash" reads "→ Bash"). */
    if (span.type === "model_call" && span.stop_reason &&
        !(span.tools && span.tools.length && span.stop_reason === "tool_use")) {
      el("span", "capsem-stop", span.stop_reason, name);
    }
    if (what) {
      el("span", "capsem-span-what", what, name);
      link.title += " \u00B7 " + what;
    }
    if (span.findings.length) {
      el("span", "capsem-finding-mark", "\u26A0 " + span.findings.length, name).title =
        span.findings.join(", ");
    }
    el("span", "capsem-col-dur", fmtMs(span.duration_ms), row);
    var figures = span.totals || (span.type === "model_call" ? span : null);
    var tokens = el("span", "capsem-col-tok", figures ? tokenText(figures) : "", row);
    tokens.title = tokens.textContent ? "in / out / cache read / thinking: " + tokens.textContent : "";
    el("span", "capsem-col-cost", figures ? fmtCost(figures.cost_usd) : "", row);
    var track = el("span", "capsem-col-bar", null, row);
    if (span.t !== null && span.t !== undefined) {
      var bar = el("span", "capsem-bar capsem-bar-" + span.kind + (span.critical ? " capsem-bar-critical" : ""),
        null, track);
      bar.title = "+" + fmtMs(span.t) + (span.duration_ms ? ", " + fmtMs(span.duration_ms) : "") +
        (span.critical ? " \u00B7 on the critical path" : "");
      this.bars[span.id] = bar;
      this.place(bar, span);
    }
    this.rows[span.id] = row;
    return row;
  };

  Explorer.prototype.focus = function (id) {
    var row = this.rows[id];
    if (!row) {
      return;
    }
    Object.keys(this.rows).forEach(function (key) { this.rows[key].tabIndex = -1; }, this);
    row.tabIndex = 0;
    row.focus({preventScroll: false});
  };

  Explorer.prototype.key = function (event) {
    var row = event.target.closest ? event.target.closest("[data-span]") : null;
    if (!row) {
      return;
    }
    var id = row.getAttribute("data-span");
    var at = this.order.indexOf(id);
    var span = this.spans[id];
    if (this.zoomKey(event, span)) {
      event.preventDefault();
      return;
    }
    var handled = true;
    if (event.key === "ArrowDown" && at < this.order.length - 1) {
      this.focus(this.order[at + 1]);
    } else if (event.key === "ArrowUp" && at > 0) {
      this.focus(this.order[at - 1]);
    } else if (event.key === "ArrowRight") {
      if (span.children.length && !this.open[id]) {
        this.open[id] = true;
        this.render();
        this.focus(id);
      } else if (span.children.length && at < this.order.length - 1) {
        this.focus(this.order[at + 1]);
      }
    } else if (event.key === "ArrowLeft") {
      if (this.open[id] && span.children.length) {
        this.open[id] = false;
        this.render();
        this.focus(id);
      } else if (this.parent[id]) {
        this.focus(this.parent[id]);
      }
    } else if (event.key === "Home") {
      this.focus(this.order[0]);
    } else if (event.key === "End") {
      this.focus(this.order[this.order.length - 1]);
    } else if (event.key === "Enter" || event.key === " ") {
      this.select(id, true);
    } else {
      handled = false;
    }
    if (handled) {
      event.preventDefault();
    }
  };

  Explorer.prototype.reveal = function (id) {
    var up = this.parent[id];
    var changed = false;
    while (up) {
      if (!this.open[up]) {
        this.open[up] = true;
        changed = true;
      }
      up = this.parent[up];
    }
    var span = this.spans[id];
    if (span && span.lane && this.hiddenLanes[span.lane]) {
      this.hiddenLanes[span.lane] = false;
      var box = this.root.querySelector("input[data-lane='" + span.lane + "']");
      if (box) {
        box.checked = true;
      }
      changed = true;
    }
    return changed;
  };

  /* Select a span: draw it selected and show its detail. `keepFocus`: leave the focus where it
     is (the search box stepping through matches), only scroll the row into view. */
  Explorer.prototype.select = function (id, record, keepFocus) {
    if (!this.spans[id]) {
      return;
    }
    this.selected = id;
    this.reveal(id);
    this.render();
    if (keepFocus) {
      var row = this.rows[id];
      if (row) {
        row.scrollIntoView({block: "nearest"});
      }
    } else {
      this.focus(id);
    }
    if (record) {
      history.replaceState(null, "", "#node=" + encodeURIComponent(id));
    }
    document.dispatchEvent(new CustomEvent("capsem:selected", {detail: {id: id}}));
    this.showDetail(this.spans[id]);
  };

  /* Search: every span whose name, kind, detail, status or findings contain the query. */
  Explorer.prototype.find = function (query) {
    var self = this;
    var needle = String(query || "").trim().toLowerCase();
    this.matches = null;
    this.matchList = [];
    this.matchAt = -1;
    if (needle) {
      this.matches = table();
      Object.keys(this.spans).forEach(function (id) {
        var s = self.spans[id];
        var hay = [s.name, s.kind, s.type, s.detail, s.id, s.stop_reason, s.model, s.provider,
          s.status_code, (s.findings || []).join(" "), (s.tools || []).join(" "),
          s.response_preview].join(" ").toLowerCase();
        if (hay.indexOf(needle) !== -1) {
          self.matches[id] = true;
          self.matchList.push(id);
        }
      });
      this.matchList.slice(0, 200).forEach(function (id) { self.reveal(id); });
    }
    this.matchNote.textContent = needle ? this.matchList.length + " match" +
      (this.matchList.length === 1 ? "" : "es") + (this.matchList.length ? " (Enter: next)" : "") : "";
    this.render();
    document.dispatchEvent(new CustomEvent("capsem:matches", {detail: {ids: this.matchList}}));
  };

  /* -- The timeline: the bar column's time window, zoom and pan ------------------------- */

  Explorer.prototype.timelineControls = function (bar) {
    var self = this;
    var box = el("span", "capsem-zoom", "Timeline: ", bar);
    [["\u2212", "capsem-zoom-out", "Zoom out (\u2212)", function () { self.zoom(ZOOM_STEP); }],
     ["+", "capsem-zoom-in", "Zoom in (+)", function () { self.zoom(1 / ZOOM_STEP); }],
     ["Fit", "capsem-zoom-fit", "Show the whole trace (0)", function () { self.setWindow(0, self.span); }],
     ["Zoom to selection", "capsem-zoom-selected", "Zoom to the selected span (Z)", function () {
       self.zoomTo(self.spans[self.selected]);
     }]].forEach(function (spec) {
      var button = el("button", spec[1], spec[0], box);
      button.type = "button";
      button.title = spec[2];
      button.addEventListener("click", spec[3]);
    });
    var label = el("label", "capsem-critical-toggle", null, bar);
    label.title = CRITICAL_TITLE;
    var input = el("input", null, null, label);
    input.type = "checkbox";
    input.checked = true;
    el("span", "capsem-critical-key", null, label);
    var count = (this.tree.critical_path || []).length;
    el("span", null, " critical path (" + count + " span" + (count === 1 ? "" : "s") + ")", label);
    this.root.classList.add("capsem-show-critical");
    input.addEventListener("change", function () {
      self.root.classList.toggle("capsem-show-critical", input.checked);
    });
  };

  /* Left and width of a bar in the current window; a bar outside it is hidden. */
  Explorer.prototype.place = function (bar, span) {
    var width = this.to - this.from;
    var start = span.t - this.t0;
    var end = start + (span.duration_ms || 0);
    if (end < this.from || start > this.to) {
      bar.style.display = "none";
      return;
    }
    var left = Math.max(0, 100 * (start - this.from) / width);
    var right = Math.min(100, 100 * (end - this.from) / width);
    bar.style.display = "";
    bar.style.left = left + "%";
    bar.style.width = Math.max(right - left, 0.3) + "%";
  };

  Explorer.prototype.drawScale = function () {
    var scale = this.scale;
    while (scale.firstChild) {
      scale.removeChild(scale.firstChild);
    }
    /* As many ticks as fit: one per 64 px of the column (at least 1), each label the
       width of its interval at most ("116.97 s" beside "175.45 s" never overlap). */
    var width = scale.getBoundingClientRect().width || 0;
    var count = Math.max(1, Math.min(4, Math.floor(width / 64)));
    for (var i = 0; i < count; i++) {
      var f = i / count;
      var tick = el("span", "capsem-tick", fmtTick(this.from + (this.to - this.from) * f,
        this.to - this.from), scale);
      tick.style.left = (f * 100) + "%";
      tick.style.maxWidth = (100 / count) + "%";
    }
  };

  /* Show [from, to] (ms from the trace's start), kept inside the trace and at least 1 ms. */
  Explorer.prototype.setWindow = function (from, to) {
    var width = Math.min(Math.max(to - from, Math.min(1, this.span)), this.span);
    from = Math.max(0, Math.min(from, this.span - width));
    this.from = from;
    this.to = from + width;
    var self = this;
    Object.keys(this.bars).forEach(function (id) { self.place(self.bars[id], self.spans[id]); });
    this.drawScale();
    this.root.setAttribute("data-zoom", (this.span / width).toFixed(2));
    this.root.setAttribute("data-window", Math.round(this.from) + "-" + Math.round(this.to));
  };

  /* Zoom by `factor` (below 1 zooms in) about `at`, a fraction of the bar column's width. */
  Explorer.prototype.zoom = function (factor, at) {
    var fraction = at === undefined ? 0.5 : at;
    var width = this.to - this.from;
    var pivot = this.from + width * fraction;
    var next = width * factor;
    this.setWindow(pivot - next * fraction, pivot - next * fraction + next);
  };

  Explorer.prototype.pan = function (fraction) {
    var width = this.to - this.from;
    this.setWindow(this.from + width * fraction, this.to + width * fraction);
  };

  Explorer.prototype.zoomTo = function (span) {
    if (!span || span.t === null || span.t === undefined) {
      return;
    }
    var start = span.t - this.t0;
    var length = Math.max(span.duration_ms || 0, 1);
    this.setWindow(start - length * 0.1, start + length * 1.1);
  };

  Explorer.prototype.zoomKey = function (event, span) {
    if (event.key === "+" || event.key === "=") {
      this.zoom(1 / ZOOM_STEP);
    } else if (event.key === "-" || event.key === "_") {
      this.zoom(ZOOM_STEP);
    } else if (event.key === "0") {
      this.setWindow(0, this.span);
    } else if (event.key === "z" || event.key === "Z") {
      this.zoomTo(span);
    } else if (event.shiftKey && (event.key === "ArrowLeft" || event.key === "ArrowRight")) {
      this.pan(event.key === "ArrowLeft" ? -0.2 : 0.2);
    } else {
      return false;
    }
    return true;
  };

  /* Wheel over the bar column zooms about the pointer (Shift+wheel pans); a drag pans. */
  Explorer.prototype.panAndZoom = function (area) {
    var self = this;
    function column(event) {
      var bar = event.target.closest ? event.target.closest(".capsem-col-bar") : null;
      return bar && area.contains(bar) ? bar : null;
    }
    area.addEventListener("wheel", function (event) {
      var track = column(event);
      if (!track) {
        return;
      }
      event.preventDefault();
      var box = track.getBoundingClientRect();
      var delta = event.deltaY || event.deltaX;
      if (event.shiftKey || Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
        self.pan((delta > 0 ? 1 : -1) * 0.1);
      } else {
        self.zoom(delta > 0 ? ZOOM_STEP : 1 / ZOOM_STEP, (event.clientX - box.left) / box.width);
      }
    }, {passive: false});
    area.addEventListener("pointerdown", function (event) {
      var track = column(event);
      if (!track || event.button !== 0) {
        return;
      }
      var startX = event.clientX;
      var from = self.from;
      var widthPx = track.getBoundingClientRect().width || 1;
      function move(e) {
        var dx = e.clientX - startX;
        if (Math.abs(dx) > 3) {
          self.dragged = true;
        }
        if (self.dragged) {
          var shift = -dx / widthPx * (self.to - self.from);
          self.setWindow(from + shift, from + shift + (self.to - self.from));
        }
      }
      function up() {
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", up);
        setTimeout(function () { self.dragged = false; }, 0);
      }
      self.dragged = false;
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", up);
    });
  };

  /* The detail panel: what the tree knows at once, the row and bodies once fetched. */
  Explorer.prototype.showDetail = function (span) {
    var self = this;
    var panel = this.panel;
    while (panel.firstChild) {
      panel.removeChild(panel.firstChild);
    }
    var head = el("h3", "capsem-detail-title", null, panel);
    el("span", "capsem-kind capsem-kind-" + span.kind, KIND_LABEL[span.kind] || span.kind, head);
    el("span", null, " " + span.name, head);
    var facts = el("dl", "capsem-facts", null, panel);
    function fact(name, value) {
      if (value === null || value === undefined || value === "") {
        return null;
      }
      el("dt", null, name, facts);
      return el("dd", null, String(value), facts);
    }
    el("dt", null, "Node", facts);
    nodeLink(span.id, span.id, el("dd", null, null, facts));
    if (span.missing) {
      fact("Row", "missing: the ledger has no row here (a broken link)");
    }
    fact("Start", span.t !== null && span.t !== undefined ? "+" + fmtMs(span.t) : null);
    fact("Duration", fmtMs(span.duration_ms));
    if (span.critical) {
      fact("Critical path", "on it: this span's time moves the end of the trace").title = CRITICAL_TITLE;
    }
    var figures = span.totals || (span.type === "model_call" ? span : null);
    if (span.type === "model_call") {
      fact("Model", span.model);
      fact("Provider", span.provider);
      fact("Stop reason", span.stop_reason);
    }
    if (figures) {
      if (span.totals) {
        fact("Model calls", span.totals.model_calls);
        fact("Tool calls", span.totals.tool_calls);
      }
      fact("Input tokens", fmtNum(figures.input_tokens));
      fact("Output tokens", fmtNum(figures.output_tokens));
      fact("Cache read", fmtNum(figures.cache_read_tokens));
      fact("Thinking", fmtNum(figures.thinking_tokens));
      fact("Cost (USD)", fmtCost(figures.cost_usd));
    }
    if (span.findings.length) {
      el("h4", null, "Findings on this row", panel);
      var list = el("ul", "capsem-detail-findings", null, panel);
      span.findings.forEach(function (kind) {
        var info = (self.tree.findings || {})[kind] || {};
        var item = el("li", "capsem-sev-" + (info.severity || "info"), null, list);
        el("strong", null, (info.severity || "") + " ", item);
        el("span", null, (info.title || kind) + " ", item);
        el("code", null, kind, item);
      });
    }
    /* A model call's chat comes first (what it was sent and answered), its relations after. */
    var early = span.type === "model_call" && !span.missing && /^[a-z_]+:[0-9]+$/.test(span.id) ?
      el("div", "capsem-detail-row", null, panel) : null;
    el("h4", null, "Relations", panel);
    var rel = el("ul", "capsem-relations", null, panel);
    function relation(label, id) {
      if (!id || !self.spans[id]) {
        return;
      }
      var item = el("li", null, label + ": ", rel);
      nodeLink(id, self.spans[id].name + " (" + id + ")", item);
    }
    relation("Parent", this.parent[span.id]);
    relation("Consumed by", span.consumed_by);
    span.children.slice(0, 30).forEach(function (child) {
      relation(KIND_LABEL[child.kind] || child.kind, child.id);
    });
    if (span.children.length > 30) {
      el("li", null, (span.children.length - 30) + " more in the tree", rel);
    }
    var links = el("p", "capsem-detail-links", null, panel);
    if (safeHref(span.href) && !span.missing) {
      var page = el("a", null, "open its page", links);
      page.href = span.href;
    }
    panel.removeAttribute("data-loaded");
    if (!/^[a-z_]+:[0-9]+$/.test(span.id) || span.missing) {
      panel.setAttribute("data-loaded", span.id);
      return;
    }
    var holder = early || el("div", "capsem-detail-row", null, panel);
    el("p", "capsem-meta", "Loading the row\u2026", holder);
    var url = this.root.getAttribute("data-node-url") + "?id=" + encodeURIComponent(span.id);
    getJson(url).then(function (detail) {
      if (self.selected !== span.id) {
        return;
      }
      while (holder.firstChild) {
        holder.removeChild(holder.firstChild);
      }
      self.renderRow(detail, holder);
      panel.setAttribute("data-loaded", span.id);
    }).catch(function (error) {
      holder.firstChild.textContent = "Could not load the row: " + error.message;
    });
  };

  Explorer.prototype.renderRow = function (detail, holder) {
    var links = el("p", "capsem-detail-links", null, holder);
    if (safeHref(detail.row)) {
      el("a", null, detail.table + " row " + detail.row_id, links).href = detail.row;
    }
    if (safeHref(detail.event)) {
      el("span", null, " \u00B7 ", links);
      el("a", null, "event " + detail.event_id, links).href = detail.event;
    }
    /* A model call reads as chat (its messages, reply and parameters); its row's columns
       follow, folded. */
    var fieldsHolder = holder;
    if (detail.chat && window.capsemChat) {
      window.capsemChat.renderCall(detail.chat, holder);
      fieldsHolder = el("details", "capsem-detail-columns", null, holder);
      el("summary", null, "All columns of the row (" + detail.fields.length + ")", fieldsHolder);
    }
    var table = el("table", "capsem-kv capsem-detail-fields", null, fieldsHolder);
    var cells = detail.cells || {};
    detail.fields.forEach(function (field) {
      var value = cells[field.name];
      var tr = el("tr", field.important ? "important" : null, null, table);
      el("th", null, field.name, tr);
      var td = el("td", null, null, tr);
      if (field.json) {
        el("pre", "capsem-body capsem-body-json", value, td);
      } else {
        td.textContent = value === null || value === undefined ? "" : String(value);
      }
      if (field.cut && safeHref(detail.row)) {
        el("a", "capsem-more", " (cut: the full value is on the row page)", td).href = detail.row;
      }
    });
    if (detail.bodies.length) {
      el("h4", null, "Bodies", holder);
    }
    /* The request before its response. */
    var sides = {request: 0, response: 1};
    detail.bodies.slice().sort(function (a, b) {
      return (sides[a.direction] === undefined ? 2 : sides[a.direction]) -
        (sides[b.direction] === undefined ? 2 : sides[b.direction]);
    }).forEach(function (body) { renderBody(body, holder); });
  };

  function renderBody(body, parent) {
    var box = el("section", "capsem-detail-body", null, parent);
    var owner = body.source_table === "net_events" ? "HTTP exchange" :
      body.source_table === "model_calls" ? "model call" : (body.source_table || "row");
    var title = el("h5", null, (body.direction || "") + " body of the " + owner + " \u00B7 " +
      (body.content_type || "unknown type") + " \u00B7 " + fmtNum(body.stored_bytes) + " bytes", box);
    title.setAttribute("data-body-id", String(body.id));
    if (body.hash_note) {
      el("p", {verified: "capsem-ok", unverifiable: "capsem-note"}[body.hash_verdict] || "capsem-bad",
        body.hash_note, box);
    }
    var links = el("p", "capsem-detail-links", null, box);
    if (safeHref(body.page)) {
      el("a", null, "raw body page", links).href = body.page;
    }
    if (safeHref(body.download)) {
      el("span", null, " \u00B7 ", links);
      var download = el("a", "capsem-download", "download in full (" + fmtNum(body.body_length) +
        " bytes" + (body.download_masked ? ", credentials masked" : ", as stored") + ")", links);
      download.href = body.download;
      download.setAttribute("download", "");
    }
    var target = el("div", "capsem-body-view", null, box);
    if (body.deferred) {
      var button = el("button", "capsem-load-body", "Load this body (" + fmtNum(body.body_length) + " bytes)", target);
      button.type = "button";
      button.addEventListener("click", function () {
        button.disabled = true;
        getJson(body.href).then(function (full) {
          button.remove();
          window.capsemBody.renderView(full.view, target, full.download);
        }).catch(function (error) {
          button.disabled = false;
          button.textContent = "Could not load (" + error.message + "); retry";
        });
      });
      return;
    }
    if (body.view) {
      window.capsemBody.renderView(body.view, target, body.download);
    }
  }

  function fromHash() {
    var match = /^#node=(.+)$/.exec(window.location.hash || "");
    if (!match) {
      return null;
    }
    try {
      return decodeURIComponent(match[1]);
    } catch (error) {
      return null;
    }
  }

  function start(root) {
    var url = root.getAttribute("data-tree-url");
    var status = root.querySelector(".capsem-explorer-status");
    getJson(url).then(function (tree) {
      if (status) {
        status.remove();
      }
      var explorer = new Explorer(root, tree);
      window.capsemExplorer = explorer;
      document.addEventListener("capsem:select", function (event) {
        explorer.select(event.detail.id, true);
      });
      document.addEventListener("click", function (event) {
        var link = event.target.closest ? event.target.closest("a[data-node]") : null;
        if (link && !root.querySelector(".capsem-tree").contains(link) &&
            !(event.ctrlKey || event.metaKey || event.shiftKey)) {
          event.preventDefault();
          explorer.select(link.getAttribute("data-node"), true);
          root.scrollIntoView({block: "start"});
        }
      });
      window.addEventListener("hashchange", function () {
        var id = fromHash();
        if (id && id !== explorer.selected) {
          explorer.select(id, false);
        }
      });
      var initial = fromHash();
      if (initial) {
        explorer.select(initial, false);
      }
      root.setAttribute("data-ready-ms", String(Math.round(performance.now())));
      root.setAttribute("data-ready", "1");
    }).catch(function (error) {
      if (status) {
        status.textContent = "Could not load the trace: " + error.message;
      }
      root.setAttribute("data-ready", "error");
    });
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll(".capsem-explorer[data-tree-url]"), start);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
