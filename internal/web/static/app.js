// Progressive enhancement only: every page works without this script.
// A run page follows its run live: the server sends the live part of the
// page (already escaped HTML it rendered) as server-sent events.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !live.dataset.events || !window.EventSource) {
    return;
  }
  var es = new EventSource(live.dataset.events);
  es.addEventListener("update", function (e) {
    live.innerHTML = e.data;
    live.setAttribute("data-updated", String(Date.now()));
  });
  es.addEventListener("end", function () {
    es.close();
    var cancel = document.querySelector("form.cancel");
    if (cancel) {
      cancel.remove();
    }
  });
})();
