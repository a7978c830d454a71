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
    tokens: function (rows) {
      return bars(rows, "tokens", "Tokens (in + out)", "provider", "Provider");
    },
    cost: function (rows) {
      return bars(rows, "cost_usd", "Cost (USD)", "provider", "Provider");
    },
    sessions: function (rows) {
      return bars(rows, "sessions", "Sessions", "kind", "Kind");
    },
  };

  function bars(rows, field, title, colour, colourTitle) {
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",
      data: { values: rows },
      width: "container",
      height: 180,
      mark: { type: "bar", tooltip: true },
      encoding: {
        x: { field: "day", type: "temporal", timeUnit: "utcyearmonthdate", title: "Day (UTC)" },
        y: { field: field, type: "quantitative", aggregate: "sum", title: title },
        color: { field: colour, type: "nominal", title: colourTitle },
      },
    };
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
        return window.vegaEmbed(element, SPECS[kind](data.rows), {
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
