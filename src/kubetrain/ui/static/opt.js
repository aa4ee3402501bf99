// kubetrain ui: OptimizationJobs. The list refreshes itself; a search's page follows one server-sent event stream
// (`view`: the trials best first, as `kubetrain describe optimizationjob -o json` gives them) and draws the objective
// against each parameter with plotly.js. Everything the server sends is shown as text.
"use strict";

const OptimizationJobList = (() => {
  function render(r, all) {
    const best = r.best ? KT.el("a", {href: `/trainjobs/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.best)}`, text: r.best})
      : KT.el("span", {class: "muted", text: "–"});
    return KT.el("tr", {"data-key": `${r.namespace}/${r.name}`},
      KT.el("td", {class: "ns" + (all ? "" : " hidden"), text: r.namespace}),
      KT.el("td", {class: "name"}, KT.el("a", {href: `/optimizationjobs/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.name)}`, text: r.name})),
      KT.el("td", {class: "state-cell"}, KT.stateBadge(r.state, r.reason, r.message)),
      KT.el("td", {class: "metric", text: r.metric}),
      KT.el("td", {class: "best"}, best),
      KT.el("td", {class: "trials num", text: String(r.trials)}),
      KT.el("td", {class: "parallel num", text: String(r.parallel)}),
      KT.el("td", {class: "age num", "data-created": r.created || "", text: KT.age(r.created)}));
  }

  async function refresh(table) {
    const params = new URLSearchParams();
    if (table.dataset.all) params.set("all", "1"); else params.set("namespace", table.dataset.namespace);
    try {
      const resp = await fetch(`/api/optimizationjobs?${params}`, {credentials: "same-origin"});
      const body = await resp.json();
      if (!resp.ok) throw Object.assign(new Error(body.error), {body, status: resp.status});
      table.querySelector("tbody").replaceChildren(...body.rows.map((r) => render(r, !!table.dataset.all)));
      document.getElementById("empty").classList.toggle("hidden", body.rows.length > 0);
      document.getElementById("list-error").replaceChildren();
      KT.live("on");
    } catch (e) {
      KT.live("off");
      if (e.body) document.getElementById("list-error").replaceChildren(KT.errorNotice({status: e.status, message: e.body.error, fix: e.body.fix}));
    }
  }

  function start() {
    const table = document.getElementById("optimizationjobs");
    if (!table) return;
    refresh(table);
    setInterval(() => refresh(table), 2000);
  }

  return {start};
})();

const OptimizationJobPage = (() => {
  let data, base, view, deleted = false;
  const charts = new Map();
  let queue = Promise.resolve();

  function cell(text, cls) { return KT.el("td", {class: cls || "", text: text === null || text === undefined ? "" : String(text)}); }

  function showView(v) {
    view = v;
    const s = v.state;
    document.getElementById("state").replaceChildren(KT.stateBadge(s.state, s.reason, s.message));
    const best = document.getElementById("best");
    if (v.best) {
      const t = v.trials[0];
      best.replaceChildren("Best: ", KT.el("a", {href: `/trainjobs/${encodeURIComponent(data.namespace)}/${encodeURIComponent(v.best)}`, text: v.best}),
        ` with ${v.metric} ${fmt(t.objective)} (${Object.entries(t.parameters).map(([k, x]) => `${k}=${x}`).join(", ")})`);
    } else {
      best.replaceChildren(KT.el("span", {class: "muted", text: `No trial has completed with ${v.metric} yet.`}));
    }
    const rows = v.trials.map((t) => {
      const name = t.state === "Pending" ? cell(t.name, "name")
        : KT.el("td", {class: "name"}, KT.el("a", {href: `/trainjobs/${encodeURIComponent(data.namespace)}/${encodeURIComponent(t.name)}`, text: t.name}));
      return KT.el("tr", {"data-trial": t.name, class: t.name === v.best ? "best" : ""}, name,
        KT.el("td", {class: "state-cell"}, KT.el("span", {class: `state state-${t.state}`, text: t.state})),
        cell(fmt(t.objective), "objective num"),
        ...data.spaces.map((sp) => cell(t.parameters[sp.name] === undefined ? "–" : t.parameters[sp.name], "param")),
        cell(t.note, "note muted small"));
    });
    document.querySelector("#trials tbody").replaceChildren(...rows);
    KT.live(["Complete", "Failed"].includes(s.state) ? "done" : "on");
    draw();
  }

  function fmt(x) { return x === null || x === undefined ? "–" : Number(x.toPrecision(6)).toString(); }

  // One chart per parameter: each trial with the objective as a point (completed filled, running hollow).
  function draw() { queue = queue.then(drawNow, drawNow); return queue; }

  async function drawNow() {
    const scored = view.trials.filter((t) => t.objective !== null && t.state !== "Failed");
    const box = document.getElementById("charts");
    for (const sp of data.spaces) {
      if (charts.has(sp.name)) continue;
      const plot = KT.el("div", {class: "plot"});
      const holder = KT.el("div", {class: "chart", "data-parameter": sp.name}, KT.el("div", {class: "chart-title", text: `${view.metric} · ${sp.name}`}), plot);
      holder.plot = plot;
      box.append(holder);
      charts.set(sp.name, holder);
    }
    if (!scored.length) return;
    let Plotly;
    try { Plotly = await KT.plotly(); } catch (e) {
      document.getElementById("charts-note").textContent = `Charts unavailable: ${e.message}.`;
      return;
    }
    for (const sp of data.spaces) {
      const holder = charts.get(sp.name);
      const numeric = sp.kind !== "categorical";
      const xs = scored.map((t) => (numeric ? Number(t.parameters[sp.name]) : t.parameters[sp.name]));
      const trace = {
        x: xs, y: scored.map((t) => t.objective), text: scored.map((t) => t.name), type: "scatter", mode: "markers",
        hovertemplate: `%{text}<br>${sp.name}=%{x}<br>${view.metric}=%{y}<extra></extra>`,
        marker: {size: 10, color: scored.map((t) => (t.name === view.best ? "#1f8a4c" : "#2458d6")),
          symbol: scored.map((t) => (t.state === "Complete" ? "circle" : "circle-open"))},
      };
      const xaxis = numeric ? {type: sp.kind === "logUniform" ? "log" : "linear", title: {text: sp.name}}
        : {type: "category", categoryorder: "array", categoryarray: sp.choices, title: {text: sp.name}};
      const layout = {height: 260, margin: {l: 56, r: 12, t: 8, b: 44}, showlegend: false, xaxis,
        yaxis: {automargin: true, title: {text: view.metric}}, paper_bgcolor: "#fff", plot_bgcolor: "#fff"};
      await Plotly.react(holder.plot, [trace], layout, {displaylogo: false, responsive: true, displayModeBar: "hover"});
      holder.dataset.drawn = String(scored.length);
    }
  }

  function connect() {
    KT.follow(() => `${base}/watch`, {view: showView},
      {box: () => document.getElementById("summary"), gone: () => deleted, onDeleted: markDeleted});
  }

  function markDeleted() {
    deleted = true;
    document.getElementById("deleted").classList.remove("hidden");
    document.getElementById("delete").disabled = true;
    KT.live("done");
    document.getElementById("live").textContent = "deleted";
  }

  async function remove() {
    if (!window.confirm(`Delete ${data.name} and its ${view.trials.length} trials? Running trials are stopped.`)) return;
    const result = await KT.post(`${base}/delete`, {});
    if (result.ok) {
      KT.toast(result.body.message);
      markDeleted();
    } else {
      document.getElementById("summary").prepend(KT.errorNotice({status: result.status, message: result.body.error, fix: result.body.fix}));
    }
  }

  function start() {
    const node = document.getElementById("page-data");
    if (!node || document.body.dataset.page !== "optimizationjob") return;
    data = JSON.parse(node.textContent);
    base = `/api/optimizationjobs/${encodeURIComponent(data.namespace)}/${encodeURIComponent(data.name)}`;
    document.getElementById("delete").addEventListener("click", remove);
    showView(data.view);
    connect();
  }

  return {start};
})();

document.addEventListener("DOMContentLoaded", () => { OptimizationJobList.start(); OptimizationJobPage.start(); });
