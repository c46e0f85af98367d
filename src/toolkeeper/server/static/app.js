// Live updates of the inbox: a stream of change events (resumable: the browser sends
// Last-Event-ID when it reconnects), each followed by a fresh server-rendered list of cards.
// Everything works without this script; it only saves reloading the page, and opens the folds
// around a flagged character when its link is followed.
"use strict";
(function () {
  const root = document.body.dataset.root || "";

  function reveal() {
    const id = decodeURIComponent(location.hash.slice(1));
    const target = id && document.getElementById(id);
    if (!target) return;
    for (let node = target.parentElement; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    target.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", reveal);
  document.addEventListener("DOMContentLoaded", reveal);

  const inbox = document.getElementById("inbox");
  if (!inbox || !window.EventSource) return;
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(root + "/fragments/inbox", { credentials: "same-origin", cache: "no-store" });
      if (response.ok) {
        const focused = document.activeElement && inbox.contains(document.activeElement) &&
          document.activeElement.tagName === "INPUT";
        if (!focused) inbox.innerHTML = await response.text();  // server-rendered, escaped
        else again = true;
      }
    } finally {
      busy = false;
      if (again) { again = false; setTimeout(refresh, 300); }
    }
  }
  const events = new EventSource(root + "/api/approvals/events?after=" + encodeURIComponent(inbox.dataset.cursor || "0"));
  events.addEventListener("approval", refresh);
  events.addEventListener("open", refresh);
})();
