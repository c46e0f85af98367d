// Live updates of the inbox: a stream of change events (resumable: the browser sends
// Last-Event-ID when it reconnects), each followed by a fresh server-rendered list of cards
// (the same filter and page). The keyboard: j/k move, a/d/e approve, deny or edit the current
// card, x selects it, A/D decide the selected ones, ? lists the keys. Decisions go to the JSON
// API by POST with the page's CSRF token in X-CSRF-Token, each bound to its card's digest.
// Everything but the keys works without this script; it only saves reloading the page, and
// opens the folds around a flagged character when its link is followed.
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

  // "Preview the edit": the edited arguments through the card's own views, rendered (and
  // escaped) by the server after checking them against the tool's schema.
  document.addEventListener("click", async (e) => {
    const button = e.target.closest && e.target.closest("button.preview");
    if (!button) return;
    const form = button.closest("form");
    const body = new URLSearchParams({ csrf: form.querySelector("input[name=csrf]").value,
                                       arguments: form.querySelector("textarea[name=arguments]").value });
    const response = await fetch(button.dataset.action, { method: "POST", body: body,
                                                          credentials: "same-origin", cache: "no-store" });
    form.querySelector(".preview-out").innerHTML = await response.text();  // server-rendered, escaped
  });
  const inbox = document.getElementById("inbox");
  if (!inbox) return;
  let busy = false, again = false, current = 0;
  const cards = () => [...inbox.querySelectorAll("article.card[data-state=pending]")];
  function mark(index, scroll) {
    const all = cards();
    for (const c of all) c.classList.remove("current");
    if (!all.length) return;
    current = Math.max(0, Math.min(index, all.length - 1));
    all[current].classList.add("current");
    if (scroll) all[current].scrollIntoView({ block: "nearest" });
  }
  // New cards without losing the reader's place: open folds stay open, scrolled blocks stay.
  function replace(html) {
    const open = new Set([...inbox.querySelectorAll("details[open][data-key]")].map(d => d.dataset.key));
    const scrolled = new Map([...inbox.querySelectorAll(".lines[data-key]")]
      .filter(e => e.scrollTop).map(e => [e.dataset.key, e.scrollTop]));
    // What the reader is writing stays, with the caret where it was: a message to the model,
    // arguments being edited, a rule being drafted.
    const field = f => f.closest("article")?.id + "\u0000" + f.name + "\u0000" + (f.type === "checkbox" ? f.value : "");
    const fields = () => inbox.querySelectorAll("article[id] input[name]:not([type=hidden]):not(.pick), article[id] textarea[name], article[id] select[name]");
    const changed = f => f.tagName === "SELECT" ? [...f.options].some(o => o.selected !== o.defaultSelected)
      : f.type === "checkbox" ? f.checked !== f.defaultChecked : f.value !== f.defaultValue;
    const typed = new Map([...fields()].filter(changed).map(f => [field(f), f.type === "checkbox" ? f.checked : f.value]));
    // A rule being drafted keeps its whole fold (its choices, the arguments it lists, its
    // text): a fresh fold would propose again from the defaults ("allow similar"), and the
    // person would save a rule they did not choose.
    const drafts = new Map([...inbox.querySelectorAll("details.rule[data-key]")]
      .filter(d => { const f = d.querySelector("form.rule-form"); return f && (f.dataset.ready || f.dataset.loading); })
      .map(d => [d.dataset.key, d]));
    const active = inbox.contains(document.activeElement) && document.activeElement.name
      ? { key: field(document.activeElement), start: document.activeElement.selectionStart,
          end: document.activeElement.selectionEnd } : null;
    inbox.innerHTML = html;  // server-rendered, escaped
    for (const d of inbox.querySelectorAll("details.rule[data-key]")) {
      if (drafts.has(d.dataset.key)) d.replaceWith(drafts.get(d.dataset.key));
    }
    for (const f of fields()) {
      const key = field(f);
      if (typed.has(key) && !f.closest("details.rule")) {
        if (f.type === "checkbox") f.checked = typed.get(key); else f.value = typed.get(key);
      }
      if (active && key === active.key) {
        f.focus();
        if (active.start !== null && active.start !== undefined) f.setSelectionRange(active.start, active.end);
      }
    }
    for (const d of inbox.querySelectorAll("details[data-key]")) if (open.has(d.dataset.key)) d.open = true;
    for (const e of inbox.querySelectorAll(".lines[data-key]")) {
      if (scrolled.has(e.dataset.key)) e.scrollTop = scrolled.get(e.dataset.key);
    }
    for (const box of inbox.querySelectorAll("input.pick")) box.checked = picked.has(box.value);
    mark(current, false);
  }
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(root + "/fragments/inbox" + location.search, { credentials: "same-origin", cache: "no-store" });
      if (response.ok) {
        const html = await response.text();
        // not under the hands of someone deciding: typing a message, pressing a button (asked
        // after the body is read: a key pressed meanwhile may have put the reader in a form)
        const focused = document.activeElement && inbox.contains(document.activeElement) &&
          document.activeElement.closest("form.decide") !== null;
        if (!focused) replace(html);
        else again = true;
      }
    } finally {
      busy = false;
      if (again) { again = false; setTimeout(refresh, 300); }
    }
  }
  const picked = new Set();  // the selection outlives a refresh of the cards
  inbox.addEventListener("change", (e) => {
    const box = e.target;
    if (box.classList && box.classList.contains("pick")) {
      if (box.checked) picked.add(box.value); else picked.delete(box.value);
    }
  });
  async function post(path, body) {
    const response = await fetch(root + path, {
      method: "POST", credentials: "same-origin", cache: "no-store",
      headers: { "content-type": "application/json", "x-csrf-token": inbox.dataset.csrf || "" },
      body: JSON.stringify(body) });
    if (!response.ok) {
      const said = await response.json().catch(() => ({}));
      window.alert("Not decided: " + (said.message || response.status));
    }
    await refresh();
  }
  function decideCurrent(decision) {
    const card = cards()[current];
    if (!card) return;
    const form = card.querySelector("form.decide");
    const message = form ? form.querySelector("input[name=message]").value : "";
    const digest = form ? form.querySelector("input[name=digest]").value : "";
    post("/api/approvals/" + encodeURIComponent(card.dataset.id) + "/decision",
         { decision: decision, args_digest: digest, message: message });
  }
  function decideSelected(decision) {
    const chosen = [...picked].map(v => v.split(":"));
    if (!chosen.length) return;
    const message = document.querySelector("#batch input[name=batch_message]")?.value || "";
    picked.clear();
    post("/api/approvals/decisions", { decisions: chosen.map(([id, digest]) =>
      ({ id: id, decision: decision, args_digest: digest, message: message })) });
  }
  function edit() {
    const card = cards()[current];
    const details = card && card.querySelector("details.edit");
    if (!details) return;
    details.open = true;
    details.querySelector("textarea").focus();
  }
  function select() {
    const box = cards()[current]?.querySelector("input.pick");
    if (!box) return;
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change", { bubbles: true }));
  }
  const keys = {
    j: () => mark(current + 1, true), k: () => mark(current - 1, true),
    a: () => decideCurrent("approve"), d: () => decideCurrent("deny"), e: edit, x: select,
    A: () => decideSelected("approve"), D: () => decideSelected("deny"),
    "?": () => { const help = document.getElementById("keys"); if (help) help.hidden = !help.hidden; },
  };
  document.addEventListener("keydown", (e) => {
    const typing = e.target.closest && e.target.closest("input, textarea, select");
    if (typing) { if (e.key === "Escape") e.target.blur(); return; }
    if (e.ctrlKey || e.metaKey || e.altKey || !Object.hasOwn(keys, e.key)) return;
    e.preventDefault();
    keys[e.key]();
  });
  mark(0, false);

  if (!window.EventSource) return;
  const events = new EventSource(root + "/api/approvals/events?after=" + encodeURIComponent(inbox.dataset.cursor || "0"));
  events.addEventListener("approval", refresh);
  events.addEventListener("open", refresh);
})();
