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

  window.capsemDom = Object.freeze({el: el, safeHref: safeHref});
})();
