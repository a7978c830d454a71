/* datasette-capsem: renders a decoded body (the one renderer: the event page's large bodies,
 * loaded on demand, and the trace page's detail panel, through window.capsemBody).
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

  function fmtNum(value) {
    return value === null || value === undefined ? "\u2014" : Number(value).toLocaleString("en-US");
  }

  /* A PNG, JPEG, GIF or WebP (the server knows it by its bytes: view.image) is shown as an
     image, loaded from the body's download URL, which serves it as that image type; SVG and
     anything else is never an image here (SVG can carry script), it stays text or hex. */
  function renderImage(view, target, imageUrl) {
    if (!view.image || !safeHref(imageUrl)) {
      return;
    }
    var figure = el("figure", "capsem-body-image", null, target);
    var image = el("img", null, null, figure);
    image.alt = "Image body (" + view.image + ", " + fmtNum(view.bytes) + " bytes)";
    image.loading = "lazy";
    image.addEventListener("error", function () {
      figure.textContent = "";
      el("p", "capsem-note", "The image could not be loaded (it may be hidden on this instance).", figure);
    });
    image.src = imageUrl;
    el("figcaption", "capsem-meta", view.image + " \u00B7 " + fmtNum(view.bytes) + " bytes", figure);
  }

  /* One decoded body (graph/bodies.py decode_body): JSON and text as text, an SSE stream as
     the text it assembles to with its events one click away, bytes as hex (and as an image
     when they are one). `imageUrl` is the body's download URL. */
  function renderView(view, target, imageUrl) {
    if (view.display_truncated) {
      el("p", "capsem-note capsem-size-note", "Showing the first " + fmtNum(view.display_bytes) + " of " +
        fmtNum(view.bytes) + " bytes; the full body is a download (link above).", target);
    }
    if (view.valid_utf8 === false) {
      el("p", "capsem-note", "Not valid UTF-8: invalid bytes are shown as U+FFFD.", target);
    }
    if (view.kind === "json" || view.kind === "text") {
      el("pre", "capsem-body capsem-body-" + view.kind, view.text, target);
    } else if (view.kind === "sse") {
      var assembled = view.assembled || {};
      if (assembled.thinking) {
        el("p", "capsem-meta", "Thinking (decoded from the stream):", target);
        el("pre", "capsem-body capsem-sse-thinking", assembled.thinking, target);
      }
      el("p", "capsem-meta", "Text (decoded from " + view.events.length + " events):", target);
      el("pre", "capsem-body capsem-sse-text", assembled.text || "", target);
      var more = el("details", null, null, target);
      el("summary", null, "The " + view.events.length + " events", more);
      var list = el("ol", "capsem-sse", null, more);
      view.events.forEach(function (event) {
        var item = el("li", null, null, list);
        if (event.event) {
          el("strong", null, event.event, item);
        }
        el("pre", "capsem-body", event.data, item);
      });
    } else if (view.kind === "hex") {
      renderImage(view, target, imageUrl);
      var dump = view.image ? el("details", null, null, target) : target;
      if (view.image) {
        el("summary", null, "The first bytes, in hex", dump);
      }
      el("pre", "capsem-body capsem-hex", view.hex.map(hexLine).join(""), dump);
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
        renderView(body.view, holder, body.download);
        holder.setAttribute("data-loaded", "1");
      })
      .catch(function (error) {
        if (button) {
          button.disabled = false;
          button.textContent = "Could not load the body (" + error.message + "); retry";
        }
      });
  }

  window.capsemBody = Object.freeze({renderView: renderView});

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
