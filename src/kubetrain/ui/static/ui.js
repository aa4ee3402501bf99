// kubetrain ui: helpers every page uses, and the TrainJobs list kept live by server-sent events.
// Text from the server (names, reasons, log lines) only ever goes into textContent, never into HTML.
"use strict";

const KT = (() => {
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("data-")) node.setAttribute(k, v);
      else node[k] = v;
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function csrf() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  // POST JSON; resolves to {ok, status, body}. Network failures become {ok: false, status: 0, body: {error}}.
  async function post(url, body) {
    try {
      const resp = await fetch(url, {
        method: "POST",
        headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf()},
        body: JSON.stringify(body || {}),
        credentials: "same-origin",
      });
      let data = {};
      try { data = await resp.json(); } catch (e) { data = {error: `the server answered ${resp.status} without a body`}; }
      return {ok: resp.ok, status: resp.status, body: data};
    } catch (e) {
      return {ok: false, status: 0, body: {error: "the UI server cannot be reached (is `kubetrain ui` still running?)"}};
    }
  }

  function duration(seconds) {
    let s = Math.max(0, Math.floor(seconds));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
    if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
    return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, "0")}h`;
  }

  function age(created) {
    if (!created) return "–";
    const t = Date.parse(created);
    if (isNaN(t)) return "–";
    const s = Math.max(0, Math.floor((Date.now() - t) / 1000));
    for (const [unit, n] of [["d", 86400], ["h", 3600], ["m", 60]]) if (s >= n) return `${Math.floor(s / n)}${unit}`;
    return `${s}s`;
  }

  // The reported ETA, counted down since the report was made.
  function etaText(eta, reported, finished) {
    if (eta === null || eta === undefined || eta === "" || finished) return "";
    let left = Number(eta);
    const t = reported ? Date.parse(reported) : NaN;
    if (!isNaN(t)) left -= (Date.now() - t) / 1000;
    return `ETA ${duration(left)}`;
  }

  function stateBadge(state, reason, message) {
    const frag = document.createDocumentFragment();
    frag.append(el("span", {class: `state state-${state}`, text: state}));
    const why = [reason, message].filter(Boolean).join(": ");
    if (why) frag.append(el("span", {class: "reason", text: why}));
    return frag;
  }

  function progressCell(progress, eta, reported, finished) {
    if (progress === null || progress === undefined) return el("span", {class: "muted", text: "–"});
    const bar = el("progress", {max: 100, value: progress, text: `${progress}%`});
    const etaSpan = el("span", {class: "eta", "data-eta": finished || eta === null || eta === undefined ? "" : String(eta),
      "data-reported": reported || ""});
    etaSpan.textContent = etaText(eta, reported, finished);
    return el("div", {class: "progress" + (progress >= 100 ? " done" : "")}, bar, el("span", {class: "pct", text: `${progress}%`}), etaSpan);
  }

  function errorNotice(error) {
    const box = el("div", {class: "notice error", role: "alert"});
    if (error.status) box.append(el("span", {class: "code", text: String(error.status)}));
    box.append(document.createTextNode(error.message || error.error || "something went wrong"));
    if (error.fix) box.append(el("span", {class: "fix", text: `Fix: ${error.fix}`}));
    return box;
  }

  let toastTimer = null;
  function toast(text, bad) {
    let box = document.getElementById("toast");
    if (!box) { box = el("div", {id: "toast", role: "status"}); document.body.append(box); }
    box.className = "toast" + (bad ? " bad" : "");
    box.textContent = text;
    box.classList.remove("hidden");
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => box.classList.add("hidden"), 6000);
  }

  // Ages and ETAs move on by themselves; redraw them every few seconds.
  function tick() {
    for (const node of document.querySelectorAll("[data-created].age")) node.textContent = age(node.dataset.created);
    for (const node of document.querySelectorAll(".eta[data-eta]")) {
      node.textContent = node.dataset.eta === "" ? "" : etaText(node.dataset.eta, node.dataset.reported, false);
    }
  }

  // plotly.js (served from the installed plotly package), loaded once, only by pages that draw charts.
  let plotlyLoading = null;
  function plotly() {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (!plotlyLoading) {
      plotlyLoading = new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = `/static/plotly.min.js?v=${document.querySelector('link[rel="stylesheet"]').href.split("v=")[1] || ""}`;
        script.onload = () => resolve(window.Plotly);
        script.onerror = () => reject(new Error("plotly.js could not be loaded"));
        document.head.append(script);
      });
    }
    return plotlyLoading;
  }

  // A page's event stream: each named event (data parsed) to its handler; `deleted` and `failure` end it (the
  // failure shown at the top of `box()`); a dropped connection is opened again after 2 s unless `gone()`. `url` is
  // a function: a reconnect may ask for less (what arrived meanwhile).
  function follow(url, handlers, {box, gone, onDeleted}) {
    const source = new EventSource(url());
    for (const [name, handler] of Object.entries(handlers)) {
      source.addEventListener(name, (e) => handler(e.data === undefined ? null : JSON.parse(e.data)));
    }
    source.addEventListener("deleted", () => { source.close(); onDeleted(); });
    source.addEventListener("failure", (e) => {
      source.close();
      live("off");
      box().prepend(errorNotice(JSON.parse(e.data)));
    });
    source.addEventListener("error", () => {
      source.close();
      if (gone()) return;
      live("off");
      setTimeout(() => follow(url, handlers, {box, gone, onDeleted}), 2000);
    });
  }

  function live(state) {
    const node = document.getElementById("live");
    if (!node) return;
    node.className = "live " + state;
    node.textContent = {on: "live", off: "reconnecting…", done: "finished"}[state] || "connecting…";
  }

  return {el, csrf, post, duration, age, etaText, stateBadge, progressCell, errorNotice, toast, tick, live, plotly, follow};
})();

// -- The TrainJobs list ------------------------------------------------------------------------------------------
const TrainJobList = (() => {
  let table, tbody, version, allNamespaces;

  function key(row) { return `${row.namespace}/${row.name}`; }

  // Newest first, then namespace and name: the order the server renders.
  function before(a, b) {
    const ca = a.created || "", cb = b.created || "";
    if (ca !== cb) return ca > cb;
    return key(a) < key(b);
  }

  function render(row) {
    const tr = KT.el("tr", {"data-key": key(row), "data-created": row.created || ""});
    tr.append(
      KT.el("td", {class: "ns" + (allNamespaces ? "" : " hidden"), text: row.namespace}),
      KT.el("td", {class: "name"}, KT.el("a", {href: `/trainjobs/${encodeURIComponent(row.namespace)}/${encodeURIComponent(row.name)}`, text: row.name})),
      KT.el("td", {class: "runtime", text: row.runtime}),
      KT.el("td", {class: "state-cell"}, KT.stateBadge(row.state, row.reason, row.message)),
      KT.el("td", {class: "progress-cell"}, KT.progressCell(row.progress, row.eta, row.reported, row.finished)),
      KT.el("td", {class: "nodes num", text: row.nodes === null || row.nodes === undefined ? "–" : String(row.nodes)}),
      KT.el("td", {class: "age num", "data-created": row.created || "", text: KT.age(row.created)}),
    );
    tr.rowData = row;
    return tr;
  }

  function rowOf(tr) {
    if (tr.rowData) return tr.rowData;
    return {namespace: tr.dataset.key.split("/")[0], name: tr.dataset.key.split("/").slice(1).join("/"), created: tr.dataset.created};
  }

  function upsert(row, index) {
    const old = index.get(key(row));
    const tr = render(row);
    if (old) {
      const was = old.querySelector(".state") ? old.querySelector(".state").textContent : "";
      old.replaceWith(tr);
      if (was !== row.state) tr.classList.add("flash");
    } else {
      tr.classList.add("flash");
      let next = null;
      for (const other of tbody.children) {
        if (before(row, rowOf(other))) { next = other; break; }
      }
      tbody.insertBefore(tr, next);
    }
    index.set(key(row), tr);
  }

  function apply(changes) {
    const box = document.getElementById("list-error");
    box.replaceChildren(changes.error ? KT.errorNotice(changes.error) : "");
    if (changes.reset) {
      const frag = document.createDocumentFragment();
      for (const row of changes.rows) frag.append(render(row));
      tbody.replaceChildren(frag);
    } else {
      const index = new Map();
      for (const tr of tbody.children) index.set(tr.dataset.key, tr);
      for (const k of changes.deleted) {
        const tr = index.get(k.join("/"));
        if (tr) { tr.remove(); index.delete(k.join("/")); }
      }
      for (const row of changes.rows) upsert(row, index);
    }
    version = changes.version;
    table.dataset.version = String(version);
    const n = tbody.children.length;
    document.getElementById("count").textContent = `${n} TrainJob${n === 1 ? "" : "s"}`;
    document.getElementById("empty").classList.toggle("hidden", n > 0);
  }

  function connect() {
    const params = new URLSearchParams();
    if (table.dataset.all) params.set("all", "1"); else params.set("namespace", table.dataset.namespace);
    if (table.dataset.selector) params.set("selector", table.dataset.selector);
    params.set("since", String(version));
    const source = new EventSource(`/api/trainjobs/watch?${params}`);
    source.addEventListener("open", () => KT.live("on"));
    source.addEventListener("changes", (e) => { KT.live("on"); apply(JSON.parse(e.data)); });
    source.addEventListener("failure", (e) => {
      document.getElementById("list-error").replaceChildren(KT.errorNotice(JSON.parse(e.data)));
      source.close();
      KT.live("off");
    });
    source.addEventListener("error", () => {
      // The browser reconnects by itself; the next request asks for the changes since the version shown.
      KT.live("off");
      source.close();
      setTimeout(connect, 2000);
    });
  }

  function start() {
    table = document.getElementById("trainjobs");
    if (!table) return;
    tbody = table.tBodies[0];
    version = Number(table.dataset.version);
    allNamespaces = Boolean(table.dataset.all);
    const all = document.getElementById("all-namespaces");
    all.addEventListener("change", () => { document.getElementById("namespace").disabled = all.checked; });
    if (table.dataset.live) connect(); else KT.live("off");
  }

  return {start};
})();

document.addEventListener("DOMContentLoaded", () => {
  TrainJobList.start();
  setInterval(KT.tick, 2000);
  const all = document.getElementById("all-namespaces");
  const ns = document.getElementById("namespace");
  if (all && ns && document.body.dataset.page !== "trainjobs") {
    all.addEventListener("change", () => { ns.disabled = all.checked; });
  }
});
