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
  var getJson = window.capsemDom.getJson;
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

  var FOLD_CHARS = 1200;  /* a system prompt or tool result longer than this starts folded */
  var FOLD_LINES = 20;
  var OPEN_STEPS = 3;  /* a conversation of more steps starts with its steps folded */

  /* Tool arguments as pretty JSON when they are JSON (else as they are). */
  function pretty(text) {
    var value = String(text === null || text === undefined ? "" : text);
    var head = value.replace(/^\s+/, "").charAt(0);
    if (head !== "{" && head !== "[") {
      return value;
    }
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch (error) {
      return value;
    }
  }

  function firstWords(text, size) {
    var words = String(text || "").replace(/\s+/g, " ").trim();
    return words.length > size ? words.slice(0, size - 1) + "\u2026" : words;
  }

  function long(text) {
    var value = String(text || "");
    return value.length > FOLD_CHARS || value.split("\n").length > FOLD_LINES;
  }

  /* One message: its role, its kind (tool call and its name, result, thinking), its text.
     Thinking is folded, and so is a long system prompt or tool result (its first words in the
     fold's summary). `step`: the step it is new in (a badge), or none. */
  function message(part, parent, step) {
    var box = el("div", "capsem-msg capsem-msg-" + (ROLE_LABEL[part.role] ? part.role : "other"),
      null, parent);
    box.setAttribute("data-role", String(part.role));
    box.setAttribute("data-type", String(part.type));
    var head = el("div", "capsem-msg-head", null, box);
    el("span", "capsem-msg-role", ROLE_LABEL[part.role] || String(part.role), head);
    if (part.type === "tool_call") {
      el("span", "capsem-msg-kind", "tool call", head);
      el("code", "capsem-msg-tool", String(part.name || "?"), head);
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
    if (part["new"] && step) {
      box.className += " capsem-msg-new";
      el("span", "capsem-badge", part.rewrites ? "rewritten in step " + step : "new in step " + step,
        head);
    }
    var code = part.type === "tool_call" || part.type === "tool_result";
    var shown = part.type === "tool_call" ? pretty(part.text) : String(part.type === "tool_result" ? pretty(part.text) : part.text);
    var holder = box;
    if (part.type === "thinking" || (part.role === "system" || part.type === "tool_result") && long(shown)) {
      holder = el("details", "capsem-msg-fold", null, box);
      var summary = el("summary", null, null, holder);
      el("span", "capsem-meta", (part.type === "thinking" ? "thinking" : "show all") + " (" +
        fmtNum(String(part.text || "").length) + " characters): ", summary);
      el("span", "capsem-msg-first", firstWords(part.text, 120), summary);
    }
    var text = el("pre", "capsem-msg-text", shown, holder);
    if (code) {
      text.className += " capsem-msg-code";
    }
    if (part.cut) {
      el("p", "capsem-meta", "Cut here: " + fmtNum(part.cut) + " characters in all (see the raw body).",
        box);
    }
    return box;
  }

  /* A model call read as chat (node.json's `chat`, for the trace page's detail panel): its
     input messages, its reply, its parameters, a link to its step of the conversation. */
  function renderCall(chat, parent) {
    var box = el("div", "capsem-call-chat", null, parent);
    var links = el("p", "capsem-detail-links", null, box);
    if (chat.step && safeHref(chat.conversation)) {
      var go = link(chat.conversation, "step " + chat.step + " in the conversation", links);
      go.className = "capsem-to-step";
      el("span", null, " \u00B7 ", links);
    }
    sideLinks(chat, links);
    var request = chat.request || {};
    el("h4", null, "Input" + (chat.format ? " (" + chat.format + ")" : ""), box);
    if (request.problem) {
      el("p", "capsem-note", "Request: " + request.problem + ".", box);
    }
    if (chat.earlier) {
      el("p", "capsem-meta", chat.earlier + " earlier message" + (chat.earlier === 1 ? "" : "s") +
        " of the history not shown here (they are in the conversation and the raw request).", box);
    }
    var input = el("div", "capsem-call-input", null, box);
    (chat.messages || []).forEach(function (part) { message(part, input, null); });
    el("h4", null, "Output" + (chat.stop_reason ? " (stop: " + chat.stop_reason + ")" : ""), box);
    var output = el("div", "capsem-call-output", null, box);
    if (chat.response && chat.response.problem && !(chat.reply || []).length) {
      el("p", "capsem-note", "Reply: " + chat.response.problem + ".", output);
    }
    (chat.reply || []).forEach(function (part) { message(part, output, null); });
    var names = Object.keys(chat.parameters || {});
    if (names.length) {
      el("h4", null, "Model parameters", box);
      var table = el("table", "capsem-kv capsem-call-parameters", null, box);
      names.forEach(function (name) {
        var tr = el("tr", null, null, table);
        el("th", null, name, tr);
        el("td", null, String(chat.parameters[name]), tr);
      });
    }
    return box;
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

  function stepSummary(step, number, head) {
    el("strong", null, "Step " + number + " ", head);
    link(step.href, step.model_call, head);
    el("span", null, " \u00b7 " + (step.model || step.provider || "model") +
      (step.format ? " \u00b7 " + step.format : "") +
      " \u00b7 in " + fmtNum(step.input_tokens) + " / out " + fmtNum(step.output_tokens) +
      (step.stop_reason ? " \u00b7 " + step.stop_reason : "") + " \u00b7 ", head);
    sideLinks(step, head);
    var tools = (step.reply || []).filter(function (p) { return p.type === "tool_call"; })
      .map(function (p) { return String(p.name || "?"); });
    var text = (step.reply || []).filter(function (p) { return p.type === "text"; })
      .map(function (p) { return p.text; }).join(" ");
    var what = tools.length ? "\u2192 " + tools.join(", ") : (text ? firstWords(text, 90) : "");
    if (what) {
      el("span", "capsem-conv-what", what, head);
    }
  }

  /* Open step `number` (its fold), and bring it into view. */
  function openStep(root, number) {
    var box = root.querySelector("[data-step='" + number + "']");
    if (!box) {
      return false;
    }
    window.capsemDom.fold(box, true);
    box.scrollIntoView({block: "start"});
    return true;
  }

  function stepFromHash() {
    var match = /^#conversation-step-([0-9]{1,9})$/.exec(window.location.hash || "");
    return match ? Number(match[1]) : null;
  }

  function index(data, root) {
    var nav = el("nav", "capsem-conv-index", null, root);
    nav.setAttribute("aria-label", "Steps of the conversation");
    el("span", "capsem-meta", "Steps: ", nav);
    data.steps.forEach(function (step, at) {
      var a = el("a", null, String(at + 1), nav);
      a.href = "#conversation-step-" + (at + 1);
      var tools = (step.reply || []).filter(function (p) { return p.type === "tool_call"; });
      a.title = (step.model || "") + (tools.length ? " \u2192 " + tools.map(function (p) {
        return String(p.name || "?");
      }).join(", ") : "");
      a.addEventListener("click", function (event) {
        event.preventDefault();
        window.history.replaceState(null, "", "#conversation-step-" + (at + 1));
        openStep(root, at + 1);
      });
    });
    var all = el("button", "capsem-conv-expand", "Expand all", nav);
    all.type = "button";
    var none = el("button", "capsem-conv-collapse", "Collapse all", nav);
    none.type = "button";
    function each(open) {
      Array.prototype.forEach.call(root.querySelectorAll(".capsem-conv-step"), function (box) {
        window.capsemDom.fold(box, open);
      });
    }
    all.addEventListener("click", function () { each(true); });
    none.addEventListener("click", function () { each(false); });
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
      "every request) and the model's reply." +
      (data.steps.length > OPEN_STEPS ? " Open a step to read it." : ""), root);
    index(data, root);
    var folded = data.steps.length > OPEN_STEPS;
    data.steps.forEach(function (step, at) {
      var number = at + 1;
      var box = el("details", "capsem-conv-step", null, root);
      box.id = "conversation-step-" + number;
      box.setAttribute("data-step", String(number));
      box.open = !folded;
      var head = el("summary", "capsem-conv-head", null, box);
      stepSummary(step, number, head);
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
    var wanted = stepFromHash();
    if (wanted) {
      openStep(root, wanted);
    }
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
    function fromHash() {
      if (window.location.hash.indexOf("conversation") === -1) {
        return;
      }
      holder.open = true;
      var wanted = stepFromHash();
      if (wanted && root.getAttribute("data-ready")) {
        openStep(root, wanted);
      }
    }
    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  window.capsemChat = Object.freeze({message: message, renderCall: renderCall});

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
