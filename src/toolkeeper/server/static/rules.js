// "Allow similar" / "forbid similar" on a card: fetch the rule the server proposes for the
// choices made (who, for how long, which arguments), show it as Cedar text the person can
// edit, and keep it in step with the choices. The server checks whatever is sent again (never
// wider than the request); without this script the form still works, the rule then made from
// the choices alone.
"use strict";
(function () {
  const root = document.body.dataset.root || "";

  function params(form) {
    const query = new URLSearchParams();
    for (const name of ["effect", "client", "for"]) query.set(name, form.elements[name].value);
    if (form.dataset.ready) query.set("args_given", "1");  // else: every argument, as sent
    for (const box of form.querySelectorAll(".rule-args input[type=checkbox]:checked")) {
      const value = form.querySelector(`.rule-args input[data-value-of="${CSS.escape(box.value)}"]`);
      query.set("arg." + box.value, value ? value.value : "");
    }
    return query;
  }

  // An argument the rule language cannot test piece by piece (an object, a list, a decimal)
  // is taken exactly as sent, by its digest: its field cannot be edited, only unticked.
  function argument(fieldset, name, value, pinned) {
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox"; box.checked = true; box.value = name; box.name = "arg_on";
    const text = document.createElement("input");
    text.type = "text"; text.name = "arg." + name; text.value = String(value);
    text.dataset.valueOf = name;
    if (pinned) { text.readOnly = true; label.classList.add("pinned"); }
    const key = document.createElement("code");
    key.textContent = name;
    label.append(box, key, text);
    fieldset.append(label);
  }

  // The button says what it will do, and posts it: the server refuses a rule whose effect is
  // not that decision (a forbid rule never approves the call).
  function button(form) {
    const save = form.querySelector("button.save-rule");
    const forbid = form.elements.effect.value === "forbid";
    save.name = "decision";
    save.value = forbid ? "deny" : "approve";
    save.textContent = forbid ? "Deny this call and save the forbid rule"
                              : "Approve this call and save the allow rule";
    save.classList.toggle("deny", forbid);
  }

  async function propose(form, first) {
    button(form);
    const query = params(form);
    const response = await fetch(`${root}/api/approvals/${encodeURIComponent(form.dataset.id)}/proposal?${query}`,
      { credentials: "same-origin", cache: "no-store" });
    const body = await response.json();
    const area = form.elements.text;
    if (!response.ok) { area.setCustomValidity(body.message || "no rule"); area.reportValidity(); return; }
    area.setCustomValidity("");
    if (first) {
      const fieldset = form.querySelector(".rule-args");
      const pinned = new Set(body.pinned || []);
      for (const [name, value] of Object.entries(body.args || {})) argument(fieldset, name, value, pinned.has(name));
      if (pinned.size) {
        const why = document.createElement("p");
        why.className = "hint pinned-note";
        why.textContent = `${[...pinned].join(", ")}: an object, a list or a decimal cannot be tested ` +
          "piece by piece, so the rule takes it exactly as sent (by its SHA-256 digest); a call " +
          "with any other value still asks. Untick it only to let every value through.";
        fieldset.append(why);
      }
      const given = document.createElement("input");
      given.type = "hidden"; given.name = "args_given"; given.value = "1";
      fieldset.append(given);
      fieldset.hidden = Object.keys(body.args || {}).length === 0;
    }
    area.value = body.text;
    form.dataset.ready = "1";
    if (form.dataset.stale) {  // a choice changed while the first proposal was on its way
      delete form.dataset.stale;
      propose(form, false);
    }
  }

  document.addEventListener("toggle", event => {
    const details = event.target;
    if (!(details instanceof HTMLDetailsElement) || !details.open || !details.classList.contains("rule")) return;
    const form = details.querySelector("form.rule-form");
    // also when the inbox is re-rendered: the page opens the fold again, the form is new
    if (form && !form.dataset.ready && !form.dataset.loading) {
      form.dataset.loading = "1";
      propose(form, true);
    }
  }, true);

  function changed(event) {
    const form = event.target.closest && event.target.closest("form.rule-form");
    if (!form || event.target.name === "text" || event.target.name === "rule_message") return;
    if (event.target.name === "effect") button(form);
    if (!form.dataset.ready) { form.dataset.stale = "1"; return; }
    // a text field reports each keystroke as "input" (and its "change" on leaving it would
    // overwrite a rule being edited by hand); a select or a box reports "change"
    if (event.type === "change" && event.target.type === "text") return;
    clearTimeout(form._timer);
    form._timer = setTimeout(() => propose(form, false), 150);
  }
  document.addEventListener("change", changed);
  document.addEventListener("input", changed);
})();
