// Live updates of the inbox: a stream of change events (resumable: the browser sends
// Last-Event-ID when it reconnects), each followed by a fresh server-rendered list of cards
// (the same filter and page). The keyboard: j/k move, a/d/e approve, deny or edit the current
// card, x selects it, A/D decide the selected ones, ? lists the keys. Decisions go to the JSON
// API by POST with the page's CSRF token in X-CSRF-Token, each bound to its card's digest;
// the current card is a request id, not a place in the list (see HOLD_MS).
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
  let busy = false, again = false;
  // The keyboard's cursor is a card (its request id), never a place in the list: when cards
  // before it come or go, it stays on the card the person chose; when that card leaves,
  // nothing is current until the person moves again. A key that decides, within HOLD_MS of
  // the list changing under the cursor, does nothing and says so.
  const HOLD_MS = 1500;
  let currentId = null, lastIndex = 0, movedAt = 0, holding = 0;
  const mine = new Set();  // the cards this page decided with a key (their leaving moves nothing)
  const notice = document.getElementById("notice");
  const cards = () => [...inbox.querySelectorAll("article.card[data-state=pending]")];
  const currentCard = () => cards().find(c => c.dataset.id === currentId) || null;
  function say(text) {
    if (!notice) return;
    notice.textContent = text;
    notice.hidden = !text;
  }
  function show(card, { scroll = false, focus = false } = {}) {
    for (const c of inbox.querySelectorAll("article.card.current")) {
      c.classList.remove("current");
      c.removeAttribute("aria-current");
    }
    currentId = card ? card.dataset.id : null;
    if (!card) return;
    card.classList.add("current");
    card.setAttribute("aria-current", "true");
    card.tabIndex = -1;
    lastIndex = cards().indexOf(card);
    if (focus) card.focus({ preventScroll: true });
    if (scroll) card.scrollIntoView({ block: "nearest" });
  }
  function move(step) {
    const all = cards();
    if (!all.length) return;
    const at = all.findIndex(c => c.dataset.id === currentId);
    const index = at >= 0 ? at + step : step > 0 ? lastIndex : lastIndex - 1;
    movedAt = 0;
    say("");
    show(all[Math.max(0, Math.min(index, all.length - 1))], { scroll: true, focus: true });
  }
  const above = () => {  // the cards before the current one, but those this page decided
    const all = cards().map(c => c.dataset.id);
    const at = all.indexOf(currentId);
    return at < 0 ? null : all.slice(0, at).filter(id => !mine.has(id)).join(" ");
  };
  function hold(text) {
    movedAt = Date.now();
    inbox.dataset.hold = "1";
    say(text);
    clearTimeout(holding);
    holding = setTimeout(() => { delete inbox.dataset.hold; }, HOLD_MS);
  }
  function keep(before, focused) {  // after a redraw: the same card, or none
    const card = currentCard();
    if (currentId !== null && !card) {
      const decidedHere = mine.has(currentId);  // by this page (a batch): nothing to warn of
      show(null);
      if (!decidedHere) {
        hold("The card you were on left the list (decided elsewhere, or expired): no card " +
             "is current. Press j or k to choose one.");
      }
    } else if (card) {
      if (before !== null && above() !== before) {
        hold("Cards above the current one came or went, so it moved: keys wait a moment. " +
             "Check the highlighted card, then press again.");
      }
      show(card, { focus: focused });
    }
  }
  // The card a deciding key acts on, or null (and why, on the page).
  function ready(what) {
    const card = currentCard();
    if (!card) {
      say(`Nothing was ${what}: no card is current. Press j or k to choose one.`);
      return null;
    }
    if (Date.now() - movedAt < HOLD_MS) {
      say(`Nothing was ${what}: the list changed under the cursor just now. Check the ` +
          "highlighted card, then press again.");
      return null;
    }
    return card;
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
    const before = above();
    const focused = document.activeElement?.matches?.("article.card.current") || false;
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
    keep(before, focused);
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
    const said = await response.json().catch(() => ({}));
    if (!response.ok) window.alert("Not decided: " + (said.message || response.status));
    await refresh();
    return response.ok ? said : null;
  }
  // A card whose arguments the inbox could not show whole is approved only from its own page.
  const cut = (card, what) => {
    if (!card.dataset.cut) return false;
    say(`Nothing was ${what}: this card's arguments are too long to show here. Open "View ` +
        "the full arguments\" on the card to read all of them and approve it there.");
    return true;
  };
  function decideCurrent(decision) {
    const card = ready(decision === "approve" ? "approved" : "denied");
    if (!card || (decision === "approve" && cut(card, "approved"))) return;
    const form = card.querySelector("form.decide");
    const message = form ? form.querySelector("input[name=message]").value : "";
    const digest = form ? form.querySelector("input[name=digest]").value : "";
    const all = cards(), at = all.indexOf(card);
    mine.add(card.dataset.id);
    show(all[at + 1] || all[at - 1] || null, { focus: true });  // the next card, at once
    post("/api/approvals/" + encodeURIComponent(card.dataset.id) + "/decision",
         { decision: decision, args_digest: digest, message: message });
  }
  async function decideSelected(decision) {
    const chosen = [...picked].map(v => v.split(":"));
    if (!chosen.length) return;
    const message = document.querySelector("#batch input[name=batch_message]")?.value || "";
    picked.clear();
    for (const [id] of chosen) mine.add(id);
    const said = await post("/api/approvals/decisions", { decisions: chosen.map(([id, digest]) =>
      ({ id: id, decision: decision, args_digest: digest, message: message })) });
    // each one is decided on its own: name those refused, as the "selected" buttons' page does
    const refused = (said?.results || []).filter(r => r.error);
    if (refused.length) {
      say(`Not all decided: ${chosen.length - refused.length} of ${chosen.length} ` +
          `${decision === "approve" ? "approved" : "denied"}; refused: ` +
          refused.map(r => `${r.id}: ${r.message}`).join(" · "));
    }
  }
  function edit() {
    const card = ready("opened for editing");
    const details = card && card.querySelector("details.edit");
    if (!details) return;
    details.open = true;
    details.querySelector("textarea").focus();
  }
  function select() {
    const card = ready("selected");
    if (card && cut(card, "selected")) return;
    const box = card?.querySelector("input.pick");
    if (!box) return;
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change", { bubbles: true }));
  }
  const keys = {
    j: () => move(1), k: () => move(-1),
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
  show(cards()[0] || null);

  if (!window.EventSource) return;
  const events = new EventSource(root + "/api/approvals/events?after=" + encodeURIComponent(inbox.dataset.cursor || "0"));
  events.addEventListener("approval", refresh);
  events.addEventListener("open", refresh);
})();
