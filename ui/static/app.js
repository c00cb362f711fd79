// The dashboard's only script: it follows the page's Server-Sent Event stream and swaps in the
// sections the server re-rendered (already escaped by html/template). window.rbUpdates records
// when each update reached the page, for measuring latency.
(function () {
  "use strict";
  var body = document.body;
  window.rbUpdates = [];
  var src = body.dataset.events;
  if (!src || !window.EventSource) return;
  var es = new EventSource(src + "?v=" + encodeURIComponent(body.dataset.version || "0"));
  es.addEventListener("update", function (ev) {
    var d = JSON.parse(ev.data);
    Object.keys(d.sections).forEach(function (k) {
      var el = document.getElementById("sec-" + k);
      if (el) el.innerHTML = d.sections[k];
    });
    body.dataset.version = d.version;
    body.dataset.seq = d.seq;
    window.rbUpdates.push({ version: d.version, seq: d.seq, t: performance.timeOrigin + performance.now() });
  });
})();
