/* datasette-capsem: draws a trace's identity graph as SVG, left to right in time.
 *
 * Data comes from the graph.json URL in the container's data-graph-url attribute. Every
 * string in it may be attacker-controlled (it comes from a ledger), so text is only ever set
 * through textContent / setAttribute on elements made with createElementNS, and a link is
 * followed only when it is a same-origin path. No innerHTML, no inline handlers (the page
 * runs under a Content-Security-Policy without 'unsafe-inline' scripts).
 *
 * Layout: one column per group (a model call and everything it owns, in time order; group 0
 * holds the trace and its turns), one horizontal lane per node kind. Long traces keep the
 * first and last `keep` groups and every group with a broken link; the others collapse into
 * blocks of at most `chunk` groups that expand when clicked.
 *
 * Zoom and pan: the −, +, Fit and 100% buttons, Ctrl+wheel (about the pointer), a drag on the
 * picture, and keys + − 0 1 and the arrows when the picture has the focus. A minimap in the
 * corner shows the whole picture (broken links red, matches yellow, the selection blue) and
 * the part in view; clicking or dragging in it moves the view.
 */
(function () {
  "use strict";

  var SVG_NS = "http://www.w3.org/2000/svg";
  var NODE_W = 184;
  var NODE_H = 24;
  var GAP_Y = 6;
  var COL_W = 214;
  var CLUSTER_W = 142;
  var CLUSTER_COL_W = 166;
  var LEFT = 150;
  var TOP = 28;
  var LANE_PAD = 10;
  function svg(name, attrs, parent) {
    var node = document.createElementNS(SVG_NS, name);
    Object.keys(attrs || {}).forEach(function (key) {
      node.setAttribute(key, String(attrs[key]));
    });
    if (parent) {
      parent.appendChild(node);
    }
    return node;
  }

  var html = window.capsemDom.el;

  /* A table keyed by node ids from the ledger: no prototype, so an id such as
     "constructor" is an ordinary key. */
  function table() {
    return Object.create(null);
  }

  function shortNumber(value) {
    if (value >= 1e6) {
      return (value / 1e6).toFixed(1) + "M";
    }
    return value >= 1e3 ? (value / 1e3).toFixed(1) + "k" : String(value);
  }

  var safeHref = window.capsemDom.safeHref;
  var NODE_FONT = "11px system-ui, sans-serif";
  var BOLD_FONT = "bold 11px system-ui, sans-serif";
  var EDGE_FONT = "bold 10px system-ui, sans-serif";
  var LABEL_ROW_H = 15;
  var MIN_SCALE = 0.05;
  var MAX_SCALE = 4;
  var MINIMAP_W = 220;
  var MINIMAP_H = 110;
  var MINIMAP_DEFAULT = "#8895a7";
  var measurer = null;

  /* Width in px of `text` drawn in `font` (a canvas measures without a layout pass). */
  function textWidth(text, font) {
    if (!measurer) {
      measurer = document.createElement("canvas").getContext("2d");
    }
    measurer.font = font;
    return measurer.measureText(text).width;
  }

  /* `text`, cut with an ellipsis so that it fits in `width` px: no label leaves its box. */
  function fit(text, width, font) {
    var value = text === null || text === undefined ? "" : String(text);
    if (textWidth(value, font) <= width) {
      return value;
    }
    var lo = 0;
    var hi = value.length;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (textWidth(value.slice(0, mid) + "\u2026", font) <= width) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return value.slice(0, lo) + "\u2026";
  }

  function CapsemGraph(container, data) {
    this.container = container;
    this.data = data;
    this.expanded = {};
    this.expandAll = false;
    this.scale = 1;
    this.matches = table();
    this.matchGroups = {};
    this.nodesById = table();
    var self = this;
    data.nodes.forEach(function (node) {
      self.nodesById[node.id] = node;
    });
    /* The lanes' names and spine slots come with the data (graph.json's lane_info, from the
       graph's one list of lanes); a node's minimap colour is its box's stroke in the CSS. */
    this.laneName = table();
    this.spineSlot = table();
    (data.lane_info || []).forEach(function (lane) {
      self.laneName[lane.lane] = lane.name;
      self.spineSlot[lane.lane] = lane.slot;
    });
    this.fills = table();
    this.groups = data.groups.map(function (g) { return g.index; });
    this.groupInfo = {};
    data.groups.forEach(function (g) { self.groupInfo[g.index] = g; });
  }

  /* Columns to draw: {type: "group", index} or {type: "cluster", groups: [...]} */
  CapsemGraph.prototype.columns = function () {
    var hints = this.data.collapse || {threshold: 16, keep: 6, chunk: 50};
    var groups = this.groups;
    var self = this;
    if (this.expandAll || groups.length <= hints.threshold) {
      return groups.map(function (index) { return {type: "group", index: index}; });
    }
    var shown = {};
    groups.forEach(function (index, position) {
      var info = self.groupInfo[index];
      if (index === 0 || position <= hints.keep || position >= groups.length - hints.keep ||
          (info && info.broken) || self.expanded[index]) {
        shown[index] = true;
      }
    });
    var columns = [];
    var run = [];
    function flush() {
      for (var i = 0; i < run.length; i += hints.chunk) {
        columns.push({type: "cluster", groups: run.slice(i, i + hints.chunk)});
      }
      run = [];
    }
    groups.forEach(function (index) {
      if (shown[index]) {
        flush();
        columns.push({type: "group", index: index});
      } else {
        run.push(index);
      }
    });
    flush();
    return columns;
  };

  CapsemGraph.prototype.render = function () {
    var columns = this.columns();
    var self = this;
    var columnOfGroup = {};
    var clusters = [];
    columns.forEach(function (column, position) {
      if (column.type === "group") {
        columnOfGroup[column.index] = {position: position};
      } else {
        var id = "cluster:" + column.groups[0] + "-" + column.groups[column.groups.length - 1];
        var cluster = {id: id, position: position, groups: column.groups, lane: "model_call"};
        column.groups.forEach(function (index) { columnOfGroup[index] = {position: position, cluster: cluster}; });
        clusters.push(cluster);
      }
    });
    var visible = [];
    var representative = table();
    this.data.nodes.forEach(function (node) {
      var place = columnOfGroup[node.group] || {position: 0};
      if (place.cluster) {
        representative[node.id] = place.cluster.id;
      } else {
        representative[node.id] = node.id;
        visible.push({node: node, position: place.position, lane: node.lane});
      }
    });
    clusters.forEach(function (cluster) {
      visible.push({cluster: cluster, position: cluster.position, lane: cluster.lane});
    });
    var left = [];
    var x = LEFT;
    columns.forEach(function (column) {
      left.push(x);
      x += column.type === "cluster" ? CLUSTER_COL_W : COL_W;
    });
    var layout = this.layout(visible, left, x);
    this.draw(layout, representative);
  };

  CapsemGraph.prototype.layout = function (visible, left, right) {
    var lanes = this.data.lanes;
    var stacks = {};
    var depth = {};
    visible.forEach(function (item) {
      var key = item.position + "|" + item.lane;
      var slots = item.cluster ? 2 : 1;
      stacks[key] = (stacks[key] || 0) + slots;
      item.slot = stacks[key] - slots;
      depth[item.lane] = Math.max(depth[item.lane] || 0, stacks[key]);
    });
    var laneTop = {};
    var y = TOP;
    var usedLanes = [];
    lanes.forEach(function (lane) {
      if (!depth[lane]) {
        return;
      }
      laneTop[lane] = y;
      usedLanes.push({lane: lane, top: y, height: depth[lane] * (NODE_H + GAP_Y) + LANE_PAD});
      y += depth[lane] * (NODE_H + GAP_Y) + LANE_PAD;
    });
    var position = table();
    visible.forEach(function (item) {
      item.x = left[item.position];
      item.w = item.cluster ? CLUSTER_W : NODE_W;
      item.y = laneTop[item.lane] + LANE_PAD / 2 + item.slot * (NODE_H + GAP_Y);
      position[item.node ? item.node.id : item.cluster.id] = item;
    });
    return {
      items: visible,
      position: position,
      lanes: usedLanes,
      width: right + 20,
      height: y + 8
    };
  };

  CapsemGraph.prototype.draw = function (layout, representative) {
    var self = this;
    var holder = this.container.querySelector(".capsem-graph-canvas");
    while (holder.firstChild) {
      holder.removeChild(holder.firstChild);
    }
    var root = svg("svg", {
      width: layout.width,
      height: layout.height,
      viewBox: "0 0 " + layout.width + " " + layout.height,
      role: "img",
      "aria-label": "Identity graph of the trace",
      "class": "capsem-graph-svg"
    }, holder);
    var defs = svg("defs", {}, root);
    [["capsem-arrow", "arrow"], ["capsem-arrow-broken", "arrow arrow-broken"]].forEach(function (m) {
      var marker = svg("marker", {id: m[0], viewBox: "0 0 6 6", refX: 5, refY: 3,
        markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse"}, defs);
      svg("path", {d: "M0 0 L6 3 L0 6 z", "class": m[1]}, marker);
    });
    layout.lanes.forEach(function (lane, i) {
      svg("rect", {x: 0, y: lane.top, width: layout.width, height: lane.height,
        "class": i % 2 ? "lane lane-odd" : "lane"}, root);
      var label = svg("text", {x: 6, y: lane.top + 17, "class": "lane-label"}, root);
      label.textContent = fit(self.laneName[lane.lane] || lane.lane, LEFT - 22, BOLD_FONT);
    });
    var labels = this.drawEdges(root, layout, representative);
    layout.items.forEach(function (item) {
      if (item.cluster) {
        self.drawCluster(root, item);
      } else {
        self.drawNode(root, item);
      }
    });
    this.drawEdgeLabels(root, layout, labels);
    this.layoutDrawn = layout;
    this.natural = {w: Number(root.getAttribute("width")), h: Number(root.getAttribute("height"))};
    this.svgRoot = root;
    this.applyScale();
  };

  /* -- Zoom, pan and the minimap ---------------------------------------------------------- */

  CapsemGraph.prototype.canvas = function () {
    return this.container.querySelector(".capsem-graph-canvas");
  };

  CapsemGraph.prototype.applyScale = function () {
    if (!this.svgRoot) {
      return;
    }
    this.svgRoot.setAttribute("width", Math.round(this.natural.w * this.scale));
    this.svgRoot.setAttribute("height", Math.round(this.natural.h * this.scale));
    this.container.setAttribute("data-scale", this.scale.toFixed(3));
    var note = this.container.querySelector(".capsem-zoom-level");
    if (note) {
      note.textContent = Math.round(this.scale * 100) + "%";
    }
    this.drawMinimap();
  };

  /* Scale by `factor`, keeping the point at (x, y) px of the visible canvas where it is. */
  CapsemGraph.prototype.zoom = function (factor, x, y) {
    var canvas = this.canvas();
    var next = Math.min(MAX_SCALE, Math.max(MIN_SCALE, this.scale * factor));
    var cx = x === undefined ? canvas.clientWidth / 2 : x;
    var cy = y === undefined ? canvas.clientHeight / 2 : y;
    var px = (canvas.scrollLeft + cx) / this.scale;
    var py = (canvas.scrollTop + cy) / this.scale;
    this.scale = next;
    this.applyScale();
    canvas.scrollLeft = px * next - cx;
    canvas.scrollTop = py * next - cy;
    this.drawViewport();
  };

  CapsemGraph.prototype.fit = function () {
    var canvas = this.canvas();
    var height = parseFloat(window.getComputedStyle(canvas).maxHeight) || canvas.clientHeight;
    this.scale = Math.max(MIN_SCALE, Math.min(1, canvas.clientWidth / this.natural.w,
      height / this.natural.h));
    this.applyScale();
    canvas.scrollLeft = 0;
    canvas.scrollTop = 0;
    this.drawViewport();
  };

  CapsemGraph.prototype.panAndZoom = function () {
    var self = this;
    var canvas = this.canvas();
    canvas.tabIndex = 0;
    canvas.setAttribute("aria-label", "Identity graph: + and − zoom, 0 fits, 1 is 100%, arrows pan");
    canvas.addEventListener("wheel", function (event) {
      if (!(event.ctrlKey || event.metaKey)) {
        return;  /* a plain wheel scrolls the picture (and the page past its ends) */
      }
      event.preventDefault();
      var box = canvas.getBoundingClientRect();
      self.zoom(event.deltaY > 0 ? 1 / 1.25 : 1.25, event.clientX - box.left, event.clientY - box.top);
    }, {passive: false});
    canvas.addEventListener("keydown", function (event) {
      var step = {ArrowLeft: [-80, 0], ArrowRight: [80, 0], ArrowUp: [0, -80], ArrowDown: [0, 80]}[event.key];
      if (event.target !== canvas) {
        return;
      }
      if (event.key === "+" || event.key === "=") {
        self.zoom(1.25);
      } else if (event.key === "-" || event.key === "_") {
        self.zoom(1 / 1.25);
      } else if (event.key === "0") {
        self.fit();
      } else if (event.key === "1") {
        self.zoom(1 / self.scale);
      } else if (step) {
        canvas.scrollLeft += step[0];
        canvas.scrollTop += step[1];
      } else {
        return;
      }
      event.preventDefault();
    });
    var drag = null;
    canvas.addEventListener("pointerdown", function (event) {
      if (event.button !== 0) {
        return;
      }
      drag = {x: event.clientX, y: event.clientY, left: canvas.scrollLeft, top: canvas.scrollTop, moved: false};
    });
    window.addEventListener("pointermove", function (event) {
      if (!drag) {
        return;
      }
      var dx = event.clientX - drag.x;
      var dy = event.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 4) {
        drag.moved = true;
        canvas.classList.add("dragging");
      }
      if (drag.moved) {
        canvas.scrollLeft = drag.left - dx;
        canvas.scrollTop = drag.top - dy;
      }
    });
    window.addEventListener("pointerup", function () {
      if (drag && drag.moved) {
        self.justDragged = true;
        setTimeout(function () { self.justDragged = false; }, 0);
      }
      drag = null;
      canvas.classList.remove("dragging");
    });
    /* A drag that ends on a node is not a click on it. */
    canvas.addEventListener("click", function (event) {
      if (self.justDragged) {
        event.preventDefault();
        event.stopPropagation();
      }
    }, true);
    canvas.addEventListener("scroll", function () { self.drawViewport(); });
  };

  CapsemGraph.prototype.drawMinimap = function () {
    var map = this.container.querySelector(".capsem-minimap canvas");
    var layout = this.layoutDrawn;
    if (!map || !layout) {
      return;
    }
    var ratio = Math.min(MINIMAP_W / this.natural.w, MINIMAP_H / this.natural.h);
    this.mapRatio = ratio;
    map.width = Math.max(1, Math.round(this.natural.w * ratio));
    map.height = Math.max(1, Math.round(this.natural.h * ratio));
    var context = map.getContext("2d");
    context.fillStyle = "#fafafa";
    context.fillRect(0, 0, map.width, map.height);
    var self = this;
    layout.items.forEach(function (item) {
      var node = item.node;
      var type = node ? node.type : "cluster";
      var id = node ? node.id : item.cluster.id;
      var broken = node && (node.missing || (self.brokenNodes && self.brokenNodes[id]));
      var matched = node ? self.matches[id] : item.cluster.groups.some(function (g) { return self.matchGroups[g]; });
      context.fillStyle = id === self.selected ? "#0b5cd5" : matched ? "#e0b400" :
        broken ? "#c62828" : self.fillOf(type);
      var height = item.cluster ? NODE_H * 2 + GAP_Y : NODE_H;
      context.fillRect(item.x * ratio, item.y * ratio, Math.max(item.w * ratio, 1.5), Math.max(height * ratio, 1.5));
    });
    this.drawViewport();
  };

  /* The minimap colour of a node type: the stroke capsem-graph.css gives its box, read once
     from a probe drawn in the picture (one home for the colours: the stylesheet). */
  CapsemGraph.prototype.fillOf = function (type) {
    if (!(type in this.fills)) {
      var root = this.svgRoot;
      var colour = "";
      if (root) {
        var probe = svg("g", {"class": type === "cluster" ? "node cluster" : "node node-" + type,
          visibility: "hidden"}, root);
        colour = window.getComputedStyle(svg("rect", {width: 1, height: 1}, probe)).stroke;
        root.removeChild(probe);
      }
      this.fills[type] = colour && colour !== "none" ? colour : MINIMAP_DEFAULT;
    }
    return this.fills[type];
  };

  CapsemGraph.prototype.drawViewport = function () {
    var view = this.container.querySelector(".capsem-minimap-view");
    var canvas = this.canvas();
    if (!view || !this.mapRatio) {
      return;
    }
    var factor = this.mapRatio / this.scale;
    view.style.left = (canvas.scrollLeft * factor) + "px";
    view.style.top = (canvas.scrollTop * factor) + "px";
    view.style.width = Math.min(canvas.clientWidth * factor, this.natural.w * this.mapRatio) + "px";
    view.style.height = Math.min(canvas.clientHeight * factor, this.natural.h * this.mapRatio) + "px";
  };

  CapsemGraph.prototype.minimap = function () {
    var self = this;
    var box = html("div", "capsem-minimap", null, this.container);
    box.title = "The whole picture: click or drag to move the view";
    html("canvas", null, null, box);
    html("div", "capsem-minimap-view", null, box);
    var dragging = false;
    function moveTo(event) {
      var rect = box.getBoundingClientRect();
      var canvas = self.canvas();
      var factor = self.scale / self.mapRatio;
      canvas.scrollLeft = (event.clientX - rect.left) * factor - canvas.clientWidth / 2;
      canvas.scrollTop = (event.clientY - rect.top) * factor - canvas.clientHeight / 2;
      self.drawViewport();
    }
    box.addEventListener("pointerdown", function (event) {
      dragging = true;
      moveTo(event);
      event.preventDefault();
    });
    window.addEventListener("pointermove", function (event) {
      if (dragging) {
        moveTo(event);
      }
    });
    window.addEventListener("pointerup", function () { dragging = false; });
  };

  /* Broken-link labels go in a band under the lanes, one row each where they would collide,
     with a leader to their edge: a label never covers a node or another label. Clicking one
     selects the row that carries the finding. */
  CapsemGraph.prototype.drawEdgeLabels = function (root, layout, labels) {
    if (!labels.length) {
      return;
    }
    var top = layout.height + 6;
    var rowEnds = [];
    var right = layout.width;
    var group = svg("g", {"class": "edge-labels"}, root);
    labels.sort(function (a, b) { return a.x - b.x; });
    labels.forEach(function (label) {
      var text = fit(label.text, 360, EDGE_FONT);
      var width = textWidth(text, EDGE_FONT) + 4;
      var x = Math.max(LEFT, label.x - width / 2);
      var row = 0;
      while (rowEnds[row] !== undefined && rowEnds[row] + 10 > x) {
        row += 1;
      }
      rowEnds[row] = x + width;
      right = Math.max(right, x + width + 10);
      var y = top + (row + 1) * LABEL_ROW_H;
      svg("path", {d: "M" + label.x + " " + label.y + " V" + (y - 11),
        "class": "edge-leader broken-" + label.severity}, group);
      var node = svg("text", {x: x, y: y, "class": "edge-label broken-" + label.severity,
        "data-node-id-ref": label.node, tabindex: 0, role: "button"}, group);
      node.textContent = text;
      var title = svg("title", {}, node);
      title.textContent = label.text;
      function pick() {
        if (window.capsemExplorer && label.node) {
          document.dispatchEvent(new CustomEvent("capsem:select", {detail: {id: label.node}}));
        }
      }
      node.addEventListener("click", pick);
      node.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          pick();
        }
      });
    });
    var height = top + (rowEnds.length + 1) * LABEL_ROW_H;
    root.setAttribute("height", height);
    root.setAttribute("width", right);
    root.setAttribute("viewBox", "0 0 " + right + " " + height);
    Array.prototype.forEach.call(root.querySelectorAll("rect.lane"), function (lane) {
      lane.setAttribute("width", right);
    });
  };

  CapsemGraph.prototype.drawEdges = function (root, layout, representative) {
    var seen = table();
    var labels = [];
    var self = this;
    var group = svg("g", {"class": "edges"}, root);
    var firstCall = null;
    this.drawSequence(group, layout);
    this.data.edges.forEach(function (edge) {
      var source = representative[edge.source];
      var target = representative[edge.target];
      if (!source || !target || source === target) {
        return;
      }
      /* A turn contains every model call; drawing each of those edges makes a fan over the
         whole picture. Draw the first; the sequence line carries the rest. */
      if (edge.type === "contains" && String(edge.target).indexOf("model_calls:") === 0) {
        if (firstCall !== null && firstCall !== target) {
          return;
        }
        firstCall = target;
      }
      var key = source + ">" + target + ">" + edge.type + ">" + (edge.broken ? 1 : 0);
      if (seen[key]) {
        return;
      }
      seen[key] = true;
      var a = layout.position[source];
      var b = layout.position[target];
      if (!a || !b) {
        return;
      }
      var sy = a.y + NODE_H / 2;
      var ty = b.y + NODE_H / 2;
      var d;
      if (b.x > a.x) {
        var sx = a.x + a.w;
        var bend = Math.max(30, (b.x - sx) / 2);
        d = "M" + sx + " " + sy + " C" + (sx + bend) + " " + sy + " " + (b.x - bend) + " " + ty +
          " " + (b.x - 3) + " " + ty;
      } else if (b.x === a.x) {
        /* Same column: an elbow down a spine left of the column, one spine per source lane,
           so a parent's children read as a bracket instead of a bundle of curves. */
        var spine = a.x - 5 - 5 * (self.spineSlot[a.lane] || 0);
        d = "M" + a.x + " " + sy + " H" + spine + " V" + ty + " H" + (b.x - 3);
      } else {
        d = "M" + a.x + " " + sy + " C" + (a.x - 40) + " " + sy + " " + (b.x - 40) + " " + ty +
          " " + (b.x - 3) + " " + ty;
      }
      var classes = "edge edge-" + edge.type + (edge.broken ? " broken broken-" + edge.severity : "") +
        (edge.cross_trace ? " cross-trace" : "");
      var path = svg("path", {
        d: d,
        "class": classes,
        "data-edge-type": edge.type,
        "data-source": source,
        "data-target": target,
        "marker-end": edge.broken ? "url(#capsem-arrow-broken)" : "url(#capsem-arrow)"
      }, group);
      var title = svg("title", {}, path);
      title.textContent = edge.type + (edge.broken ? ": " + edge.title : "");
      if (edge.broken) {
        /* The row that carries the finding: the end that is not a placeholder. */
        var carrier = self.nodesById[edge.source] && !self.nodesById[edge.source].missing
          ? edge.source : edge.target;
        var mid = b.x === a.x ? Math.min(a.x, b.x) - 8 : (Math.min(a.x + a.w, b.x) + Math.max(a.x + a.w, b.x)) / 2;
        labels.push({text: edge.title, x: mid, y: (sy + ty) / 2, severity: edge.severity,
          node: carrier});
      }
    });
    return labels;
  };

  /* A line through the model calls (and collapsed blocks) in time order. */
  CapsemGraph.prototype.drawSequence = function (group, layout) {
    var points = layout.items.filter(function (item) {
      return item.cluster || (item.node.type === "model_call" && !item.node.external && !item.node.missing);
    }).sort(function (a, b) { return a.x - b.x || a.y - b.y; });
    var seenColumn = {};
    var coordinates = [];
    points.forEach(function (item) {
      if (seenColumn[item.x]) {
        return;
      }
      seenColumn[item.x] = true;
      coordinates.push([item.x, item.y + NODE_H / 2, item.x + item.w]);
    });
    for (var i = 1; i < coordinates.length; i++) {
      var from = coordinates[i - 1];
      var to = coordinates[i];
      svg("path", {
        d: "M" + from[2] + " " + from[1] + " H" + (to[0] - 3),
        "class": "edge edge-sequence",
        "marker-end": "url(#capsem-arrow)"
      }, group);
    }
  };

  CapsemGraph.prototype.drawNode = function (root, item) {
    var node = item.node;
    var classes = "node node-" + node.type + (node.missing ? " missing" : "") +
      (node.external ? " external" : "") + (node.findings && node.findings.length ? " has-finding" : "");
    var parent = root;
    if (!node.missing && safeHref(node.href)) {
      parent = svg("a", {href: node.href, "class": "node-link"}, root);
    }
    var g = svg("g", {
      "class": classes,
      transform: "translate(" + item.x + "," + item.y + ")",
      "data-node-id": node.id,
      "data-type": node.type
    }, parent);
    svg("rect", {width: NODE_W, height: NODE_H, rx: 4, ry: 4}, g);
    var text = svg("text", {x: 6, y: 16}, g);
    text.textContent = fit(node.label, NODE_W - 12, NODE_FONT);
    var title = svg("title", {}, g);
    var lines = [node.type + ": " + node.label];
    if (node.detail) {
      lines.push(node.detail);
    }
    if (node.title) {
      lines.push(node.title);
    }
    if (node.findings && node.findings.length) {
      lines.push("findings: " + node.findings.join(", "));
    }
    title.textContent = lines.join("\n");
    if (this.selected === node.id) {
      g.classList.add("selected");
    }
    if (this.matches && this.matches[node.id]) {
      g.classList.add("match");
    }
    if (parent !== root) {
      /* With the explorer on the page, a click selects the node (its detail opens beside the
         tree); a modified click still follows the link. */
      parent.addEventListener("click", function (event) {
        if (!window.capsemExplorer || event.ctrlKey || event.metaKey || event.shiftKey) {
          return;
        }
        event.preventDefault();
        document.dispatchEvent(new CustomEvent("capsem:select", {detail: {id: node.id}}));
      });
    }
  };

  /* Show `id` (expanding the block that folds it) and mark it selected. */
  CapsemGraph.prototype.highlight = function (id) {
    this.selected = id;
    var node = this.nodesById[id];
    if (node && !this.expandAll) {
      this.expanded[node.group] = true;
    }
    this.render();
    Array.prototype.forEach.call(this.container.querySelectorAll("path[data-source]"), function (path) {
      if (path.getAttribute("data-source") === id || path.getAttribute("data-target") === id) {
        path.classList.add("focus");
      }
    });
    var drawn = null;
    Array.prototype.forEach.call(this.container.querySelectorAll("g[data-node-id]"), function (g) {
      if (g.getAttribute("data-node-id") === id) {
        drawn = g;
      }
    });
    if (drawn && drawn.scrollIntoView) {
      var canvas = this.container.querySelector(".capsem-graph-canvas");
      var box = drawn.getBoundingClientRect();
      var frame = canvas.getBoundingClientRect();
      canvas.scrollLeft += box.left - frame.left - frame.width / 2;
      canvas.scrollTop += box.top - frame.top - frame.height / 2;
    }
  };

  /* Search matches: the nodes, and the folded blocks that hold one. */
  CapsemGraph.prototype.mark = function (ids) {
    var self = this;
    this.matches = table();
    this.matchGroups = {};
    ids.forEach(function (id) {
      self.matches[id] = true;
      var node = self.nodesById[id];
      if (node) {
        self.matchGroups[node.group] = true;
      }
    });
    Array.prototype.forEach.call(this.container.querySelectorAll("g[data-node-id]"), function (g) {
      var id = g.getAttribute("data-node-id");
      var match = !!self.matches[id];
      if (g.getAttribute("data-type") === "cluster") {
        var range = g.getAttribute("data-groups").split("-").map(Number);
        match = self.groups.some(function (index) {
          return index >= range[0] && index <= range[1] && self.matchGroups[index];
        });
      }
      g.classList.toggle("match", match);
    });
    this.drawMinimap();
  };


  CapsemGraph.prototype.drawCluster = function (root, item) {
    var cluster = item.cluster;
    var self = this;
    var tokens = 0;
    var nodes = 0;
    cluster.groups.forEach(function (index) {
      var info = self.groupInfo[index] || {};
      tokens += info.tokens || 0;
      nodes += info.nodes || 0;
    });
    var first = cluster.groups[0];
    var last = cluster.groups[cluster.groups.length - 1];
    var matched = cluster.groups.some(function (index) { return self.matchGroups[index]; });
    var g = svg("g", {
      "class": "node cluster" + (matched ? " match" : ""),
      transform: "translate(" + item.x + "," + item.y + ")",
      role: "button",
      tabindex: 0,
      "data-node-id": cluster.id,
      "data-type": "cluster",
      "data-groups": first + "-" + last
    }, root);
    svg("rect", {width: CLUSTER_W, height: NODE_H * 2 + GAP_Y, rx: 4, ry: 4}, g);
    var line1 = svg("text", {x: 6, y: 16}, g);
    var unit = this.data.group_unit === "row" ? "rows" : "calls";
    line1.textContent = fit("\u25B8 " + unit + " #" + first + "\u2013#" + last, CLUSTER_W - 12, NODE_FONT);
    var line2 = svg("text", {x: 6, y: 16 + NODE_H, "class": "detail"}, g);
    line2.textContent = fit(nodes + " nodes \u00B7 " + shortNumber(tokens) + " tok", CLUSTER_W - 12, NODE_FONT);
    var title = svg("title", {}, g);
    title.textContent = "Collapsed: click to expand " + unit + " #" + first + " to #" + last;
    function expand() {
      cluster.groups.forEach(function (index) { self.expanded[index] = true; });
      self.render();
    }
    g.addEventListener("click", expand);
    g.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        expand();
      }
    });
  };

  function toolbar(container, graph) {
    var bar = html("div", "capsem-graph-toolbar", null, null);
    var expand = html("button", "capsem-expand-all", "Expand all", bar);
    expand.type = "button";
    var collapse = html("button", "capsem-collapse", "Collapse", bar);
    collapse.type = "button";
    var zoom = html("span", "capsem-graph-zoom", null, bar);
    [["\u2212", "capsem-gzoom-out", "Zoom out (\u2212, Ctrl+wheel)", function () { graph.zoom(1 / 1.25); }],
     ["+", "capsem-gzoom-in", "Zoom in (+, Ctrl+wheel)", function () { graph.zoom(1.25); }],
     ["Fit", "capsem-gzoom-fit", "Fit the picture in view (0)", function () { graph.fit(); }],
     ["100%", "capsem-gzoom-reset", "Actual size (1)", function () { graph.zoom(1 / graph.scale); }]
    ].forEach(function (spec) {
      var button = html("button", spec[1], spec[0], zoom);
      button.type = "button";
      button.title = spec[2];
      button.addEventListener("click", spec[3]);
    });
    html("span", "capsem-zoom-level", "100%", zoom);
    var broken = graph.brokenList();
    if (broken.length) {
      var next = html("button", "capsem-next-broken", "Next broken link (" + broken.length + ")", bar);
      next.type = "button";
      var at = -1;
      next.addEventListener("click", function () {
        at = (at + 1) % broken.length;
        document.dispatchEvent(new CustomEvent("capsem:select", {detail: {id: broken[at]}}));
        if (!window.capsemExplorer) {
          graph.highlight(broken[at]);
        }
      });
    }
    var findings = graph.data.findings || [];
    var summary = findings.length
      ? findings.map(function (f) { return f.title + " (" + f.count + ")"; }).join("; ")
      : "no broken links";
    html("span", "capsem-graph-summary", graph.data.nodes.length + " nodes, " +
      graph.data.edges.length + " edges; " + summary, bar);
    expand.addEventListener("click", function () {
      graph.expandAll = true;
      graph.render();
    });
    collapse.addEventListener("click", function () {
      graph.expandAll = false;
      graph.expanded = {};
      graph.render();
    });
    container.insertBefore(bar, container.firstChild);
  }

  /* The rows that carry a broken link (the end that is not a placeholder), in graph order. */
  CapsemGraph.prototype.brokenList = function () {
    var self = this;
    var seen = table();
    this.brokenNodes = table();
    this.data.edges.forEach(function (edge) {
      if (!edge.broken) {
        return;
      }
      var source = self.nodesById[edge.source];
      var carrier = source && !source.missing ? edge.source : edge.target;
      seen[carrier] = true;
      self.brokenNodes[edge.source] = true;
      self.brokenNodes[edge.target] = true;
    });
    return this.data.nodes.map(function (n) { return n.id; }).filter(function (id) { return seen[id]; });
  };

  function explorerSettled() {
    var explorer = document.querySelector(".capsem-explorer[data-tree-url]");
    return new Promise(function (resolve) {
      if (!explorer || explorer.hasAttribute("data-ready")) {
        resolve();
        return;
      }
      var watch = new MutationObserver(function () {
        if (explorer.hasAttribute("data-ready")) {
          watch.disconnect();
          resolve();
        }
      });
      watch.observe(explorer, {attributes: true, attributeFilter: ["data-ready"]});
    });
  }

  function start(container) {
    var url = container.getAttribute("data-graph-url");
    var status = container.querySelector(".capsem-graph-status");
    if (!safeHref(url)) {
      return;
    }
    /* The span tree is what makes the page usable: the picture is read and drawn once it
       is, so the two do not compete for the main thread. Its answer is asked for at once
       (the page preloads it; the server prepared it with the page), so it is here by then. */
    var answer = fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}});
    answer.catch(function () {});  /* reported below, once the tree is settled */
    explorerSettled()
      .then(function () { return answer; })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json();
      })
      .then(function (data) {
        if (status) {
          status.remove();
        }
        html("div", "capsem-graph-canvas", null, container);
        var graph = new CapsemGraph(container, data);
        toolbar(container, graph);
        graph.minimap();
        graph.panAndZoom();
        graph.render();
        if (window.capsemExplorer && window.capsemExplorer.selected) {
          graph.highlight(window.capsemExplorer.selected);  /* chosen before the picture came */
        }
        document.addEventListener("capsem:selected", function (event) {
          graph.highlight(event.detail.id);
        });
        document.addEventListener("capsem:matches", function (event) {
          graph.mark(event.detail.ids);
        });
        container.setAttribute("data-ready-ms", String(Math.round(performance.now())));
        container.setAttribute("data-ready", "1");
      })
      .catch(function (error) {
        if (status) {
          status.textContent = "Could not load the graph: " + error.message;
        }
        container.setAttribute("data-ready", "error");
      });
  }

  function init() {
    var containers = document.querySelectorAll(".capsem-graph[data-graph-url]");
    Array.prototype.forEach.call(containers, start);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
