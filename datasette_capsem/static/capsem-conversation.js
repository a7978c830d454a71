/* datasette-capsem: the conversation of a trace, as chat (conversation.json).
 *
 * Fetched when its section is opened, so a big trace's page does not pay for it. Every string
 * is agent or model text, hostile by assumption: it goes in through textContent only, links are
 * followed only when they are same-origin paths, nothing is parsed as HTML (strict CSP: no
 * inline script, no eval).
 */
(function () {
  "use strict";

  var el = window.capsemDom.el;
  var safeHref = window.capsemDom.safeHref;
  var ROLE_LABEL = {system: "System", user: "User", assistant: "Assistant", tool: "Tool result"};

  function link(href, text, parent) {
    if (!safeHref(href)) {
      return el("span", null, text, parent);
    }
    var a = el("a", null, text, parent);
    a.href = href;
    return a;
  }

  function fmtNum(value) {
    return value === null || value === undefined ? "\u2014" : Number(value).toLocaleString("en-US");
  }

  function message(part, parent, step) {
    var box = el("div", "capsem-msg capsem-msg-" + (ROLE_LABEL[part.role] ? part.role : "other"),
      null, parent);
    box.setAttribute("data-role", String(part.role));
    box.setAttribute("data-type", String(part.type));
    var head = el("div", "capsem-msg-head", null, box);
    el("span", "capsem-msg-role", ROLE_LABEL[part.role] || String(part.role), head);
    if (part.type === "tool_call") {
      el("span", "capsem-msg-kind", "tool call " + (part.name || "?"), head);
    } else if (part.type === "tool_result") {
      el("span", "capsem-msg-kind", "result" + (part.name ? " of " + part.name : "") +
        (part.is_error ? " (error)" : ""), head);
    } else if (part.type !== "text") {
      el("span", "capsem-msg-kind", String(part.type), head);
    }
    if (part.call_id) {
      var id = link(part.href, "", head);
      id.className = "capsem-msg-id";
      el("code", null, String(part.call_id), id);
      if (part.row) {
        id.title = String(part.row);
      }
    }
    if (part["new"]) {
      box.className += " capsem-msg-new";
      el("span", "capsem-badge", part.rewrites ? "rewritten in step " + step : "new in step " + step,
        head);
    }
    var text = el("pre", "capsem-msg-text", part.text, box);
    if (part.type === "tool_call" || part.type === "tool_result") {
      text.className += " capsem-msg-code";
    }
    if (part.cut) {
      el("p", "capsem-meta", "Cut here: " + fmtNum(part.cut) + " characters in all (see the raw body).",
        box);
    }
  }

  function sideLinks(step, parent) {
    var links = el("span", "capsem-conv-raw", null, parent);
    [["request", step.request], ["response", step.response]].forEach(function (pair) {
      var side = pair[1] || {};
      if (side.page) {
        link(side.page, "raw " + pair[0], links).setAttribute("data-raw", pair[0]);
        el("span", null, " ", links);
      } else {
        el("span", "capsem-meta", "no " + pair[0] + " body ", links);
      }
    });
  }

  /* "N earlier messages repeated": a button that unfolds those messages, fetched when first
     opened (conversation.json?step=N), so the page never holds the quadratic history. */
  function history(root, number, request, box) {
    var holder = el("div", "capsem-conv-history", null, box);
    var label = request.repeated + " earlier message" + (request.repeated === 1 ? "" : "s") +
      " repeated" + (request.dropped ? ", " + request.dropped + " earlier message" +
        (request.dropped === 1 ? "" : "s") + " no longer sent" : "");
    var button = el("button", "capsem-conv-repeated", "\u25B8 " + label + " (show)", holder);
    button.type = "button";
    button.setAttribute("aria-expanded", "false");
    var list = el("div", "capsem-conv-history-list", null, holder);
    list.hidden = true;
    button.addEventListener("click", function () {
      var open = list.hidden;
      list.hidden = !open;
      button.setAttribute("aria-expanded", open ? "true" : "false");
      button.textContent = (open ? "\u25BE " : "\u25B8 ") + label + (open ? " (hide)" : " (show)");
      var url = root.getAttribute("data-conversation-url");
      if (!open || holder.getAttribute("data-state") || !safeHref(url)) {
        return;
      }
      holder.setAttribute("data-state", "loading");
      var note = el("p", "capsem-meta", "Loading the repeated messages\u2026", list);
      getJson(url + (url.indexOf("?") === -1 ? "?" : "&") + "step=" + number)
        .then(function (data) {
          note.remove();
          data.messages.forEach(function (part) { message(part, list, number); });
          holder.setAttribute("data-state", "ready");
        })
        .catch(function (error) {
          note.textContent = "Could not load them: " + error.message;
          holder.removeAttribute("data-state");
        });
    });
  }

  function getJson(url) {
    return fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json();
      });
  }

  function render(data, root) {
    root.textContent = "";
    if (!data.steps.length) {
      el("p", "capsem-meta", "This trace has no model call.", root);
      return;
    }
    el("p", "capsem-meta", data.steps.length + " model calls" +
      (data.formats.length ? ", body format " + data.formats.join(", ") : "") +
      ". Each step shows what is new in its request (the history before it is repeated in " +
      "every request) and the model's reply.", root);
    data.steps.forEach(function (step, index) {
      var number = index + 1;
      var box = el("section", "capsem-conv-step", null, root);
      box.setAttribute("data-step", String(number));
      var head = el("div", "capsem-conv-head", null, box);
      el("strong", null, "Step " + number + " ", head);
      link(step.href, step.model_call, head);
      el("span", null, " \u00b7 " + (step.model || step.provider || "model") +
        (step.format ? " \u00b7 " + step.format : "") +
        " \u00b7 in " + fmtNum(step.input_tokens) + " / out " + fmtNum(step.output_tokens) +
        (step.stop_reason ? " \u00b7 " + step.stop_reason : "") + " \u00b7 ", head);
      sideLinks(step, head);
      var request = step.request || {};
      if (request.problem) {
        el("p", "capsem-note", "Request: " + request.problem + ".", box);
      } else if (request.repeated) {
        history(root, number, request, box);
      }
      step.messages.forEach(function (part) { message(part, box, number); });
      if (step.response && step.response.problem && !step.reply.length) {
        el("p", "capsem-note", "Reply: " + step.response.problem + ".", box);
      }
      step.reply.forEach(function (part) { message(part, box, number); });
    });
  }

  function load(root) {
    var url = root.getAttribute("data-conversation-url");
    if (root.getAttribute("data-state") || !safeHref(url)) {
      return;
    }
    root.setAttribute("data-state", "loading");
    el("p", "capsem-meta", "Loading the conversation\u2026", root);
    getJson(url)
      .then(function (data) {
        render(data, root);
        root.setAttribute("data-ready", "1");
      })
      .catch(function (error) {
        root.textContent = "";
        el("p", "capsem-note", "The conversation could not be loaded: " + error.message, root);
        root.setAttribute("data-state", "");
      });
  }

  function start() {
    var root = document.getElementById("capsem-conversation");
    var holder = document.getElementById("capsem-conversation-section");
    if (!root || !holder) {
      return;
    }
    if (holder.open) {
      load(root);
    }
    holder.addEventListener("toggle", function () {
      if (holder.open) {
        load(root);
      }
    });
    if (window.location.hash.indexOf("conversation") !== -1) {
      holder.open = true;
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
