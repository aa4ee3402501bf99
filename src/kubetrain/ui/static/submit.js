// kubetrain ui: the submit form. Every change is checked by the server with the same validation as
// `kubetrain validate`; findings are shown in a list and under the field their path names.
"use strict";

const Submit = (() => {
  let form, timer = null, seq = 0;

  function values() {
    const out = {};
    for (const node of form.elements) if (node.name) out[node.name] = node.value;
    return out;
  }

  // The form field a finding's path belongs to: the longest data-path that is the path or a parent of it.
  function fieldFor(path) {
    let best = null, bestLen = -1;
    for (const field of form.querySelectorAll(".form-field[data-path]")) {
      const p = field.dataset.path;
      if ((path === p || path.startsWith(p + ".") || path.startsWith(p + "[")) && p.length > bestLen) {
        best = field; bestLen = p.length;
      }
    }
    return best;
  }

  function show(result) {
    for (const node of form.querySelectorAll(".field-error, .field-warning")) node.remove();
    for (const node of form.querySelectorAll(".form-field.invalid")) node.classList.remove("invalid");
    const list = document.getElementById("findings");
    const items = [];
    for (const [kind, findings] of [["error", result.errors || []], ["warning", result.warnings || []]]) {
      for (const f of findings) {
        const li = KT.el("li", {class: kind === "error" ? "field-error" : "field-warning"},
          KT.el("b", {text: `${kind}: `}), f.path ? KT.el("span", {class: "path", text: `${f.path}: `}) : null, f.message);
        if (f.fix) li.append(KT.el("div", {class: "muted small", text: `fix: ${f.fix}`}));
        items.push(li);
        const field = f.path ? fieldFor(f.path) : null;
        if (field) {
          if (kind === "error") field.classList.add("invalid");
          const where = field.dataset.path === f.path ? "" : `${f.path}: `;
          field.append(KT.el("span", {class: kind === "error" ? "field-error" : "field-warning", text: `${where}${f.message}${f.fix ? ` (fix: ${f.fix})` : ""}`}));
        }
      }
    }
    if (items.length) list.replaceChildren(KT.el("ul", {class: "findings"}, ...items));
    else list.replaceChildren(KT.el("p", {class: "small", text: `No errors: the ${values().parameters.trim() ? "OptimizationJob" : "TrainJob"} is valid for this runtime.`}));
    if (result.yaml !== undefined) document.getElementById("preview").textContent = result.yaml;
    const errors = (result.errors || []).length;
    document.getElementById("check-state").textContent = errors ? `${errors} error${errors === 1 ? "" : "s"}` : "valid";
  }

  async function check() {
    const mine = ++seq;
    document.getElementById("check-state").textContent = "checking…";
    const result = await KT.post("/api/validate", values());
    if (mine !== seq) return; // a later change is being checked already
    if (result.ok) {
      document.getElementById("submit-error").replaceChildren();
      show(result.body);
    } else {
      document.getElementById("submit-error").replaceChildren(KT.errorNotice({status: result.status, message: result.body.error, fix: result.body.fix}));
      document.getElementById("check-state").textContent = "";
    }
  }

  function later() { clearTimeout(timer); timer = setTimeout(check, 300); }

  async function submit(ev) {
    ev.preventDefault();
    clearTimeout(timer);
    const button = document.getElementById("submit-button");
    button.disabled = true;
    const result = await KT.post("/api/submit", values());
    button.disabled = false;
    if (result.ok) {
      KT.toast(result.body.message);
      window.location.href = result.body.url;
      return;
    }
    document.getElementById("submit-error").replaceChildren(KT.errorNotice({status: result.status, message: result.body.error, fix: result.body.fix}));
    if (result.body.errors) show(result.body);
  }

  function start() {
    form = document.getElementById("submit-form");
    if (!form) return;
    form.addEventListener("input", later);
    form.addEventListener("change", later);
    form.addEventListener("submit", submit);
    check();
  }

  return {start};
})();

document.addEventListener("DOMContentLoaded", () => Submit.start());
