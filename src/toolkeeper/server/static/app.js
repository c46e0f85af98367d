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
  // New cards without losing the reader's place: open folds stay open, scrolled blocks stay.
  function replace(html) {
    const open = new Set([...inbox.querySelectorAll("details[open][data-key]")].map(d => d.dataset.key));
    const scrolled = new Map([...inbox.querySelectorAll(".lines[data-key]")]
      .filter(e => e.scrollTop).map(e => [e.dataset.key, e.scrollTop]));
    const typed = new Map([...inbox.querySelectorAll("form.decide input[name=message]")]
      .filter(i => i.value).map(i => [i.closest("article").id, i.value]));
    inbox.innerHTML = html;  // server-rendered, escaped
    for (const [card, value] of typed) {  // a message being written to the model stays
      const input = document.getElementById(card)?.querySelector("form.decide input[name=message]");
      if (input) input.value = value;
    }
    for (const d of inbox.querySelectorAll("details[data-key]")) if (open.has(d.dataset.key)) d.open = true;
    for (const e of inbox.querySelectorAll(".lines[data-key]")) {
      if (scrolled.has(e.dataset.key)) e.scrollTop = scrolled.get(e.dataset.key);
    }
  }
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(root + "/fragments/inbox", { credentials: "same-origin", cache: "no-store" });
      if (response.ok) {
        // not under the hands of someone deciding: typing a message, pressing a button
        const focused = document.activeElement && inbox.contains(document.activeElement) &&
          document.activeElement.closest("form.decide") !== null;
        if (!focused) replace(await response.text());
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
