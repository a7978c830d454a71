/* datasette-capsem: loads a large request/response body on demand on the event page.
 *
 * The body arrives as JSON (already decoded by the server: json, sse, text or hex). Ledger
 * bytes are attacker-controlled, so everything is inserted with textContent only.
 */
(function () {
  "use strict";

  var el = window.capsemDom.el;
  var safeHref = window.capsemDom.safeHref;

  function hexLine(line) {
    var offset = ("00000000" + line.offset.toString(16)).slice(-8);
    return offset + "  " + line.hex + "  " + line.ascii + "\n";
  }

  function renderView(view, target) {
    if (view.display_truncated) {
      el("p", "capsem-note capsem-size-note", "Showing the first " + view.display_bytes + " of " + view.bytes +
        " bytes; the full body is a download (link above).", target);
    }
    if (view.valid_utf8 === false) {
      el("p", "capsem-note", "Not valid UTF-8: invalid bytes are shown as U+FFFD.", target);
    }
    if (view.kind === "json" || view.kind === "text") {
      el("pre", "capsem-body capsem-body-" + view.kind, view.text, target);
    } else if (view.kind === "sse") {
      var list = el("ol", "capsem-sse", null, target);
      view.events.forEach(function (event) {
        var item = el("li", null, null, list);
        if (event.event) {
          el("strong", null, event.event, item);
        }
        el("pre", "capsem-body", event.data, item);
      });
    } else if (view.kind === "hex") {
      el("pre", "capsem-body capsem-hex", view.hex.map(hexLine).join(""), target);
    } else {
      el("p", "capsem-note", "Empty body.", target);
    }
  }

  function load(holder) {
    var url = holder.getAttribute("data-body-url");
    var button = holder.querySelector("button");
    if (!safeHref(url)) {
      return;
    }
    if (button) {
      button.disabled = true;
      button.textContent = "Loading\u2026";
    }
    fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json();
      })
      .then(function (body) {
        if (button) {
          button.remove();
        }
        var hash = document.querySelector('[data-hash-for="' + String(body.id).replace(/[^0-9]/g, "") + '"]');
        if (hash) {
          hash.textContent = body.hash_note;
          hash.className = {verified: "capsem-ok", unverifiable: "capsem-note"}[body.hash_verdict] || "capsem-bad";
        }
        renderView(body.view, holder);
        holder.setAttribute("data-loaded", "1");
      })
      .catch(function (error) {
        if (button) {
          button.disabled = false;
          button.textContent = "Could not load the body (" + error.message + "); retry";
        }
      });
  }

  function init() {
    var holders = document.querySelectorAll(".capsem-body-deferred[data-body-url]");
    Array.prototype.forEach.call(holders, function (holder) {
      var button = holder.querySelector("button");
      if (button) {
        button.addEventListener("click", function () { load(holder); });
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
