// platter's console: a live page (<main data-live>) follows the fleet. The coordinator
// sends the page's <main> anew whenever it changed (a `main` server-sent event on
// /events?page=…), rendered once for every open page alike; this script puts it in
// place and gives its forms this session's CSRF token. The page reads fully without this
// script; it only saves the reloads.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !main.dataset.live || !window.EventSource) return;
  var csrf = document.querySelector("header input[name=csrf]");
  var page = main.dataset.live + "?page=" + encodeURIComponent(location.pathname + location.search);
  // The <main> this page shows, by its hash, while it shows the one it was loaded with.
  var seen = main.dataset.seen || "";
  var events = null;
  function follow() {
    events = new EventSource(page + "&seen=" + encodeURIComponent(seen));
    events.addEventListener("main", show);
    // The session ended (signed out elsewhere, expired): the page asks the sign-in.
    events.addEventListener("gone", function () { events.close(); location.reload(); });
  }
  function show(e) {
    var parsed = new DOMParser().parseFromString(
      "<!doctype html><main id=\"main\">" + e.data + "</main>", "text/html");
    var fresh = parsed.getElementById("main");
    if (!fresh) return;
    main.replaceChildren.apply(main, Array.from(fresh.childNodes));
    seen = "";
    if (csrf) {
      main.querySelectorAll("input[name=csrf]").forEach(function (i) { i.value = csrf.value; });
    }
    document.documentElement.dataset.reloads = String(Number(document.documentElement.dataset.reloads || 0) + 1);
  }
  follow();
  // A page left for another closes its stream: the browser may keep the page (back/forward
  // cache), and an open stream would hold one of the few connections it makes to a site.
  window.addEventListener("pagehide", function () { if (events) { events.close(); events = null; } });
  window.addEventListener("pageshow", function (e) { if (e.persisted && !events) follow(); });
})();
