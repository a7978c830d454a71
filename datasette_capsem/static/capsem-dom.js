/* datasette-capsem: the two DOM helpers every plugin script uses, in one place.
 *
 * Ledger values are attacker-controlled: text only ever goes in through textContent, and a
 * link is followed only when it is a same-origin path (no scheme, no "//host", no "\").
 */
(function () {
  "use strict";

  function el(name, className, text, parent) {
    var node = document.createElement(name);
    if (className) {
      node.className = className;
    }
    if (text !== undefined && text !== null) {
      node.textContent = String(text);
    }
    if (parent) {
      parent.appendChild(node);
    }
    return node;
  }

  function safeHref(href) {
    return typeof href === "string" && href.charAt(0) === "/" && href.charAt(1) !== "/" &&
      href.indexOf("\\") === -1;
  }

  /* Datasette's pages close every open <details> a click lands outside of (its menus:
     _close_open_menus.html, on document.body). The plugin's folds (a conversation, its steps,
     a long message) are not menus: they stay as the reader left them. Which are open is noted
     before the click reaches the body, and they are opened again after it; a script that opens
     or closes one on a click does it through fold. */
  var kept = [];
  function ours(details) {
    return /(^|\s)capsem-/.test(details.className) || /^capsem-/.test(details.id);
  }
  window.addEventListener("click", function () {
    kept = Array.prototype.filter.call(document.querySelectorAll("details[open]"), ours);
  }, true);
  document.addEventListener("click", function () {
    kept.forEach(function (details) {
      if (!details.open) {
        details.open = true;
      }
    });
    kept = [];
  });

  /* Open or close one of the plugin's folds from a click handler (a click's end would
     otherwise undo it). */
  function fold(details, open) {
    details.open = open;
    var at = kept.indexOf(details);
    if (open && at === -1) {
      kept.push(details);
    } else if (!open && at !== -1) {
      kept.splice(at, 1);
    }
  }

  /* A JSON answer of the plugin's own (a same-origin path only). A 202 is a big ledger's
     answer being computed (views/pending.py): asked again after the seconds it names. */
  function getJson(url) {
    if (!safeHref(url)) {
      return Promise.reject(new Error("refused URL"));
    }
    return fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json().then(function (data) {
          if (response.status === 202 && data && data.checking) {
            var seconds = Number(data.reload_seconds) || 2;
            return new Promise(function (resolve) {
              setTimeout(resolve, seconds * 1000);
            }).then(function () {
              return getJson(url);
            });
          }
          return data;
        });
      });
  }

  window.capsemDom = Object.freeze({el: el, safeHref: safeHref, fold: fold, getJson: getJson});
})();
