/* Home page charts: Vega-Lite specs over the plugin's JSON endpoints.
 *
 * Runs under a Content-Security-Policy without 'unsafe-eval', so Vega parses expressions to
 * an AST and evaluates them with vega-interpreter (ast: true, expr: vega.expressionInterpreter).
 * vega-embed's action menu (export, "open in editor" links to the internet) is turned off.
 * Each chart is a <div class="capsem-chart" data-chart="tokens|cost|sessions" data-src="URL">.
 */
(function () {
  "use strict";

  var SPECS = {
    tokens: function (rows, range) {
      return bars(rows, "tokens", "Tokens (in + out)", "provider", "Provider", range);
    },
    cost: function (rows, range) {
      return bars(rows, "cost_usd", "Cost (USD)", "provider", "Provider", range);
    },
    sessions: function (rows, range) {
      return bars(rows, "sessions", "Sessions", "kind", "Kind", range);
    },
  };

  var DAY_MS = 86400000;
  var SPARSE_SPAN_DAYS = 14; // a time axis longer than this...
  var SPARSE_SHARE = 1 / 3; // ...with data on fewer than this share of its days is mostly empty

  // The days with data, and whether a time axis over them would be mostly empty: then the
  // chart draws only those days, side by side, and says so (`sparse`).
  function dayRange(rows) {
    var days = {};
    rows.forEach(function (row) {
      if (row.day) days[String(row.day).slice(0, 10)] = true;
    });
    var list = Object.keys(days).sort();
    var span = list.length
      ? Math.round((Date.parse(list[list.length - 1]) - Date.parse(list[0])) / DAY_MS) + 1
      : 0;
    return {
      days: list,
      span: span,
      sparse: span > SPARSE_SPAN_DAYS && list.length < span * SPARSE_SHARE,
    };
  }

  function bars(rows, field, title, colour, colourTitle, range) {
    var x = range.sparse
      ? { field: "day", type: "ordinal", title: "Days with data (UTC)", axis: { labelAngle: -45 } }
      : { field: "day", type: "temporal", timeUnit: "utcyearmonthdate", title: "Day (UTC)" };
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      data: { values: rows },
      width: "container",
      height: 180,
      mark: { type: "bar", tooltip: true },
      encoding: {
        x: x,
        y: { field: field, type: "quantitative", aggregate: "sum", title: title },
        color: { field: colour, type: "nominal", title: colourTitle },
      },
    };
  }

  // A line under the chart saying why its axis skips days (text only: no markup from data).
  function noteRange(element, range) {
    var figure = element.parentNode;
    var old = figure && figure.querySelector(".capsem-chart-note");
    if (old) old.remove();
    if (!figure || !range.sparse) return;
    var note = document.createElement("p");
    note.className = "capsem-chart-note capsem-meta";
    note.textContent =
      "Only the " + range.days.length + " days with data are drawn, side by side: they " +
      "spread over " + range.span + " days (" + range.days[0] + " to " +
      range.days[range.days.length - 1] + "), which a time axis would show mostly empty.";
    figure.appendChild(note);
  }

  // A line under the chart when its rows cover only part of the sessions (JSON `partial`:
  // a big home's list still being prepared), in the server's words (text only).
  function notePartial(element, data) {
    var figure = element.parentNode;
    if (!figure || !data.partial || !data.note) return;
    var note = document.createElement("p");
    note.className = "capsem-chart-partial capsem-meta";
    note.textContent = data.note;
    figure.appendChild(note);
  }

  function say(element, text) {
    var note = document.createElement("p");
    note.className = "capsem-chart-empty";
    note.textContent = text;
    element.replaceChildren(note);
  }

  function draw(element, cache) {
    var kind = element.getAttribute("data-chart");
    var src = element.getAttribute("data-src");
    if (!SPECS[kind] || !src) return;
    if (!cache[src]) {
      cache[src] = fetch(src, { headers: { Accept: "application/json" } }).then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      });
    }
    cache[src]
      .then(function (data) {
        if (!data.rows || data.rows.length === 0) {
          say(element, "Nothing to chart for these sessions.");
          return null;
        }
        var range = dayRange(data.rows);
        noteRange(element, range);
        notePartial(element, data);
        return window.vegaEmbed(element, SPECS[kind](data.rows, range), {
          actions: false,
          ast: true,
          expr: window.vega.expressionInterpreter,
          renderer: "svg",
        });
      })
      .catch(function (error) {
        say(element, "Chart unavailable: " + error.message);
      });
  }

  function start() {
    if (!window.vegaEmbed || !window.vega || !window.vega.expressionInterpreter) return;
    var cache = {};
    document.querySelectorAll(".capsem-chart").forEach(function (element) {
      draw(element, cache);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
