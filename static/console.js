// Console enhancements. Every page works without them: forms post normally,
// and the copy buttons stay hidden.
(function () {
  "use strict";

  function showCopyButtons(root) {
    root.querySelectorAll("[data-copy]").forEach(function (b) { b.hidden = false; });
  }
  document.addEventListener("DOMContentLoaded", function () { showCopyButtons(document); });
  document.addEventListener("htmx:load", function (e) { showCopyButtons(e.detail.elt.parentNode || document); });

  // On a phone a table's rows are cards (console.css) whose cells each say
  // which column they are: the column's heading is copied to data-label, again
  // after every swap, as a swapped row or table arrives unlabelled.
  function labelCells() {
    document.querySelectorAll("main table").forEach(function (table) {
      if (!table.tHead || !table.tHead.rows.length) return;
      var labels = [];
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
        for (var i = 0; i < th.colSpan; i++) labels.push(th.textContent.trim());
      });
      Array.prototype.forEach.call(table.tBodies, function (body) {
        Array.prototype.forEach.call(body.rows, function (tr) {
          var col = 0;
          Array.prototype.forEach.call(tr.cells, function (cell) {
            if (cell.tagName === "TD" && labels[col] && !cell.hasAttribute("data-label")) {
              cell.setAttribute("data-label", labels[col]);
            }
            col += cell.colSpan;
          });
        });
      });
    });
  }
  document.addEventListener("DOMContentLoaded", labelCells);
  document.addEventListener("htmx:load", labelCells);

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
  // here and the element is connected afresh, its swap targets with it. A
  // stream whose session has ended says "signedout" instead: the page goes to
  // sign-in rather than reconnecting to no avail.
  document.addEventListener("htmx:sseOpen", function (e) {
    var source = e.detail.source, elt = e.detail.elt;
    if (source.tollgateEnd) return;
    source.tollgateEnd = true;
    source.addEventListener("signedout", function (ev) {
      source.close();
      window.location.assign(ev.data);
    });
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

  // A live section (sse-connect) says so when its figures stop arriving: the
  // server pushes every second, so after data-stale-after milliseconds without
  // an event the section is marked stale and its status line (an aria-live
  // region) says it is reconnecting; the next event clears both. Reconnecting
  // itself is the EventSource's (retry: 1000 from the server) and the SSE
  // extension's (after the stream is closed for good).
  var loaded = Date.now();
  function utcTime(ms) { return new Date(ms).toISOString().slice(11, 19) + " UTC"; }
  // Before the swap: the element an event replaces (outerHTML) is detached by
  // the time htmx:sseMessage fires.
  document.addEventListener("htmx:sseBeforeMessage", function (e) {
    var live = e.target.closest("[sse-connect]");
    if (live) live.tollgateLastEvent = Date.now();
  });
  setInterval(function () {
    document.querySelectorAll("[sse-connect][data-stale-after]").forEach(function (live) {
      var last = live.tollgateLastEvent || loaded;
      var stale = Date.now() - last > Number(live.getAttribute("data-stale-after"));
      var state = live.querySelector("[data-live-state]");
      if (stale === live.classList.contains("stale")) return;
      live.classList.toggle("stale", stale);
      if (state) {
        state.textContent = stale ? "Reconnecting to the gateway… These figures are from " + utcTime(last) +
          " and are not live until it answers again." : "";
      }
      if (stale) {
        live.querySelectorAll("[data-live-updated]").forEach(function (u) {
          u.textContent = "Not live · last updated " + utcTime(last);
        });
      }
    });
  }, 1000);
})();
