// Console enhancements. Every page works without them: forms post normally,
// and the copy buttons stay hidden.
(function () {
  "use strict";

  function showCopyButtons(root) {
    root.querySelectorAll("[data-copy]").forEach(function (b) { b.hidden = false; });
  }
  document.addEventListener("DOMContentLoaded", function () { showCopyButtons(document); });
  document.addEventListener("htmx:load", function (e) { showCopyButtons(e.detail.elt.parentNode || document); });

  function selectText(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // <button data-copy="id"> copies the text of the element with that id. The
  // Clipboard API needs a secure context; elsewhere the text is selected so
  // Ctrl-C works.
  document.addEventListener("click", function (e) {
    var button = e.target.closest("[data-copy]");
    if (!button) return;
    var target = document.getElementById(button.getAttribute("data-copy"));
    if (!target) return;
    var label = button.textContent;
    function say(text) {
      button.textContent = text;
      setTimeout(function () { button.textContent = label; }, 1500);
    }
    selectText(target);
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(target.textContent).then(function () { say("Copied"); },
        function () { say("Press Ctrl-C"); });
    } else {
      say(document.execCommand("copy") ? "Copied" : "Press Ctrl-C");
    }
  });

  // An event stream ends by design every so often (the server says "end"
  // first), so the session is checked again. Left to itself the EventSource
  // would see the close as an error, log it and retry; instead it is closed
  // here and the element is connected afresh, its swap targets with it.
  document.addEventListener("htmx:sseOpen", function (e) {
    var source = e.detail.source, elt = e.detail.elt;
    if (source.tollgateEnd) return;
    source.tollgateEnd = true;
    source.addEventListener("end", function () {
      source.close();
      setTimeout(function () {
        if (!document.body.contains(elt)) return;
        var fresh = elt.cloneNode(true);
        elt.replaceWith(fresh);
        htmx.process(fresh);
      }, 1000);
    });
  });

  // Responses HTMX does not swap (403, 404, 5xx) carry a one-line message.
  function flash(text) {
    var el = document.getElementById("flash");
    if (!el) return;
    el.textContent = text;
    el.hidden = !text;
  }
  document.addEventListener("htmx:beforeRequest", function () { flash(""); });
  document.addEventListener("htmx:responseError", function (e) {
    flash(e.detail.xhr.responseText.slice(0, 300) || "Something went wrong (" + e.detail.xhr.status + ").");
  });
  document.addEventListener("htmx:sendError", function () {
    flash("Could not reach the gateway. Check your connection and try again.");
  });
})();
