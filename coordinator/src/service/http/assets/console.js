// platter's console: a live page (<main data-live>) reloads its <main> when the
// coordinator says something changed (server-sent events on /events). The page reads
// fully without this script; it only saves the reloads.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !main.dataset.live || !window.EventSource || !window.fetch) return;
  var busy = false, again = false;
  function reload() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "X-Platter-Live": "1" } })
      .then(function (r) {
        if (r.redirected || !r.ok) { if (r.status === 401 || r.redirected) location.reload(); return null; }
        return r.text();
      })
      .then(function (text) {
        if (text === null) return;
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        if (fresh) main.replaceChildren.apply(main, Array.from(fresh.childNodes));
        document.documentElement.dataset.reloads = String(Number(document.documentElement.dataset.reloads || 0) + 1);
      })
      .catch(function () {})
      .finally(function () {
        busy = false;
        if (again) { again = false; setTimeout(reload, 300); }
      });
  }
  var events = new EventSource(main.dataset.live);
  events.addEventListener("change", reload);
  // After the stream was down (a restarted coordinator), what changed meanwhile.
  events.addEventListener("open", function () { if (document.documentElement.dataset.reloads) reload(); });
})();
