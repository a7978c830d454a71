/* datasette-capsem: follow a live session without reloading the page.
 *
 * The panel marked data-capsem-follow carries the delta endpoint and the cursor (max id per
 * table) the page was drawn at. Every few seconds this asks delta.json for the rows beyond the
 * cursor, puts them at the top of the panel's table (newest first, highlighted), bumps the row
 * counts of the overview, and stops when the server says the session is no longer live.
 * Ledger values go in through textContent only; links only when they are same-origin paths.
 */
(function () {
  "use strict";

  var MAX_ROWS = 500;

  function start(root) {
    var dom = window.capsemDom;
    var url = root.getAttribute("data-delta-url") || "";
    var cursor = root.getAttribute("data-cursor") || "";
    var interval = parseInt(root.getAttribute("data-interval"), 10) || 3000;
    var indicator = root.querySelector(".capsem-live-indicator");
    var body = root.querySelector("tbody");
    var failures = 0;
    if (!dom || !url || !body || root.getAttribute("data-live") !== "true") {
      return;
    }

    function say(text, state) {
      if (indicator) {
        indicator.textContent = text;
      }
      root.setAttribute("data-state", state);
    }

    function bumpCount(kind) {
      var cells = document.querySelectorAll("[data-capsem-count]");
      for (var i = 0; i < cells.length; i++) {
        if (cells[i].getAttribute("data-capsem-count") === kind) {
          var n = parseInt(cells[i].textContent, 10);
          cells[i].textContent = String((isNaN(n) ? 0 : n) + 1);
          cells[i].classList.add("capsem-new");
        }
      }
    }

    function rowFor(r) {
      var tr = dom.el("tr", "capsem-new");
      tr.setAttribute("data-kind", String(r.kind));
      dom.el("td", null, r.at || "", tr);
      dom.el("td", null, r.kind, tr);
      var cell = dom.el("td", null, null, tr);
      if (dom.safeHref(r.href)) {
        var a = dom.el("a", null, r.id, cell);
        a.setAttribute("href", r.href);
      } else {
        cell.textContent = String(r.id);
      }
      dom.el("td", "capsem-snippet", r.summary || "", tr);
      return tr;
    }

    function show(rows) {
      var old = root.querySelectorAll("tr.capsem-new");
      for (var i = 0; i < old.length; i++) {
        old[i].classList.remove("capsem-new");
      }
      for (var j = rows.length - 1; j >= 0; j--) {
        body.insertBefore(rowFor(rows[j]), body.firstChild);
        bumpCount(String(rows[j].kind));
      }
      while (body.children.length > MAX_ROWS) {
        body.removeChild(body.lastChild);
      }
    }

    function poll() {
      var sep = url.indexOf("?") === -1 ? "?" : "&";
      fetch(url + sep + "since=" + encodeURIComponent(cursor), {
        credentials: "same-origin",
        headers: {"Accept": "application/json"}
      }).then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json();
      }).then(function (data) {
        failures = 0;
        if (typeof data.cursor === "string") {
          cursor = data.cursor;
        }
        if (Array.isArray(data.rows) && data.rows.length) {
          show(data.rows);
        }
        if (data.live) {
          say("● live: following new rows", "live");
          window.setTimeout(poll, interval);
        } else {
          root.classList.add("capsem-stopped");
          say("stopped: the session is no longer being written", "stopped");
        }
      }).catch(function (error) {
        failures += 1;
        say("live: retrying (" + String(error && error.message || error) + ")", "retrying");
        window.setTimeout(poll, interval * Math.min(failures + 1, 10));
      });
    }

    say("● live: following new rows", "live");
    window.setTimeout(poll, interval);
  }

  function init() {
    var roots = document.querySelectorAll("[data-capsem-follow]");
    for (var i = 0; i < roots.length; i++) {
      start(roots[i]);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
