// kubetrain ui: a TrainJob's page. State, pods, conditions and events follow one server-sent event stream; the logs
// another; the metric charts are drawn with plotly.js (served from the installed plotly package) once there are
// numbers to draw. Log text is rendered as text: colour codes become classes, anything else stays characters.
"use strict";

const Job = (() => {
  const data = JSON.parse(document.getElementById("page-data").textContent);
  const base = `/api/trainjobs/${encodeURIComponent(data.namespace)}/${encodeURIComponent(data.name)}`;
  let details = data.details;
  let points = data.points.slice();
  let deleted = false;

  // -- details ------------------------------------------------------------------------------------------------
  function fillTable(id, rows, cells) {
    const tbody = document.querySelector(`#${id} tbody`);
    tbody.replaceChildren(...rows.map((r) => KT.el("tr", {}, ...cells(r).map((c) => (c instanceof Node ? KT.el("td", {}, c) : KT.el("td", {text: c === null || c === undefined ? "" : String(c)}))))));
    document.getElementById(`no-${id}`).classList.toggle("hidden", rows.length > 0);
  }

  function showDetails(d) {
    details = d;
    document.getElementById("state").replaceChildren(KT.stateBadge(d.state.state));
    const why = [d.state.reason, d.state.message].filter(Boolean).join(": ");
    document.getElementById("state-reason").textContent = why;
    document.getElementById("num-nodes").textContent = d.numNodes === null ? "–" : String(d.numNodes);
    fillTable("steps", d.steps, (s) => [s.name, KT.stateBadge(s.state), s.restarts, s.exitCode, [s.reason, s.message].filter(Boolean).join(": ")]);
    const stamp = (t) => KT.el("span", {class: "mono small nowrap", text: t});
    fillTable("conditions", d.conditions, (c) => [c.type, c.status, c.reason, c.message, stamp(c.time)]);
    fillTable("events", d.events, (e) => [stamp(e.time), e.type, e.reason, e.object, e.message]);
    showProgress(d);
    const failed = Object.entries(d.failureLogs || {});
    document.getElementById("failure-logs-panel").classList.toggle("hidden", failed.length === 0);
    document.getElementById("failure-logs").replaceChildren(...failed.flatMap(([step, lines]) => [
      KT.el("h3", {class: "small mono", text: step}), KT.el("pre", {class: "yaml", text: lines.join("\n")})]));
    const finished = d.state.finished;
    document.getElementById("suspend").classList.toggle("hidden", d.suspended || finished || deleted);
    document.getElementById("resume").classList.toggle("hidden", !d.suspended || finished || deleted);
    document.getElementById("scale").classList.toggle("hidden", !data.elastic || finished || deleted);
    Logs.steps(d.steps);
    if (finished) KT.live("done");
  }

  function showProgress(d) {
    const ts = d.trainerStatus || {};
    const box = document.getElementById("progress");
    if (ts.progressPercentage === undefined || ts.progressPercentage === null) {
      box.replaceChildren(KT.el("span", {class: "muted", text: "No progress reported yet."}));
    } else {
      box.replaceChildren(KT.progressCell(ts.progressPercentage, ts.estimatedRemainingSeconds, ts.lastUpdatedTime, d.state.finished));
    }
    document.getElementById("metrics").replaceChildren(...(ts.metrics || []).map((m) =>
      KT.el("span", {class: "metric"}, `${m.name} `, KT.el("b", {text: m.value}))));
    const parts = [];
    if (d.progressSource === "logs") parts.push("derived from log lines");
    else if (d.trainerStatus) parts.push("reported by the job");
    if (ts.lastUpdatedTime) parts.push(`last at ${ts.lastUpdatedTime}`);
    document.getElementById("progress-source").textContent = parts.join(" · ");
  }

  // -- charts -------------------------------------------------------------------------------------------------
  const Charts = (() => {
    const drawn = new Map();

    // One series per metric with at least one numeric value, and the progress percentage.
    function series() {
      const out = new Map();
      const add = (name, t, v) => {
        if (typeof v !== "number" || !isFinite(v)) return;
        if (!out.has(name)) out.set(name, {x: [], y: []});
        out.get(name).x.push(new Date(t * 1000));
        out.get(name).y.push(v);
      };
      for (const p of points) {
        for (const [name, v] of p.metrics || []) add(name, p.time, v);
      }
      for (const p of points) add("progress %", p.time, p.progress);
      return out;
    }

    let queue = Promise.resolve();

    // Draws run one after the other (a burst of reports must not interleave two redraws of a chart).
    function draw() {
      queue = queue.then(drawNow, drawNow);
      return queue;
    }

    async function drawNow() {
      const all = series();
      if (all.size === 0) return;
      const box = document.getElementById("charts");
      for (const name of all.keys()) {
        if (drawn.has(name)) continue;
        const plot = KT.el("div", {class: "plot"});
        const holder = KT.el("div", {class: "chart", "data-metric": name}, KT.el("div", {class: "chart-title", text: name}), plot);
        holder.plot = plot;
        box.append(holder);
        drawn.set(name, holder);
      }
      let Plotly;
      try { Plotly = await KT.plotly(); } catch (e) {
        document.getElementById("charts-note").textContent = `Charts unavailable: ${e.message}.`;
        return;
      }
      for (const [name, s] of all) {
        const holder = drawn.get(name);
        holder.dataset.points = String(s.y.length);
        const trace = {x: s.x, y: s.y, type: "scatter", mode: "lines+markers", name,
          line: {width: 2, color: name === "progress %" ? "#1f8a4c" : "#2458d6"}, marker: {size: 6}};
        const layout = {height: 220, margin: {l: 50, r: 12, t: 8, b: 36}, showlegend: false,
          xaxis: {type: "date"}, yaxis: {automargin: true, rangemode: name === "progress %" ? "tozero" : "normal"},
          paper_bgcolor: "#fff", plot_bgcolor: "#fff"};
        await Plotly.react(holder.plot, [trace], layout,
          {displaylogo: false, responsive: true, displayModeBar: "hover", modeBarButtonsToRemove: ["select2d", "lasso2d"]});
        holder.dataset.drawn = String(s.y.length);
      }
    }

    return {draw};
  })();

  function addPoints(fresh) {
    const seen = new Set(points.map((p) => `${p.time}`));
    for (const p of fresh) if (!seen.has(`${p.time}`)) points.push(p);
    points.sort((a, b) => a.time - b.time);
    Charts.draw();
  }

  // -- live updates -------------------------------------------------------------------------------------------
  function connect() {
    KT.follow(() => `${base}/watch?after=${points.length ? points[points.length - 1].time : 0}`, {
      open: () => KT.live(details.state.finished ? "done" : "on"),
      details: showDetails,
      points: addPoints,
    }, {box: () => document.getElementById("progress-panel"), gone: () => deleted, onDeleted: markDeleted});
  }

  function markDeleted() {
    deleted = true;
    document.getElementById("deleted").classList.remove("hidden");
    for (const id of ["suspend", "resume", "scale", "delete"]) document.getElementById(id).disabled = true;
    KT.live("done");
    document.getElementById("live").textContent = "deleted";
  }

  // -- actions ------------------------------------------------------------------------------------------------
  function confirmThen(title, text, action, withReplicas) {
    const dialog = document.getElementById("confirm");
    document.getElementById("confirm-title").textContent = title;
    document.getElementById("confirm-text").textContent = text;
    const field = document.getElementById("confirm-replicas-field");
    const input = document.getElementById("confirm-replicas");
    field.classList.toggle("hidden", !withReplicas);
    if (withReplicas) {
      input.min = String(data.elastic[0]);
      input.max = String(data.elastic[1]);
      input.value = String(details.numNodes === null ? data.elastic[0] : details.numNodes);
    }
    const error = document.getElementById("confirm-error");
    error.classList.add("hidden");
    const ok = document.getElementById("confirm-ok");
    ok.disabled = false;
    ok.className = title.startsWith("Delete") ? "danger primary" : "primary";
    ok.textContent = title.split(" ")[0];
    const form = document.getElementById("confirm-form");
    form.onsubmit = async (ev) => {
      ev.preventDefault();
      ok.disabled = true;
      const result = await action(input.value);
      if (result.ok) {
        dialog.close();
        KT.toast(result.body.message || "done");
        if (result.after) result.after();
      } else {
        ok.disabled = false;
        error.replaceChildren(KT.errorNotice({status: result.status, message: result.body.error, fix: result.body.fix}));
        error.classList.remove("hidden");
      }
    };
    document.getElementById("confirm-cancel").onclick = () => dialog.close();
    dialog.showModal();
  }

  function wireActions() {
    document.getElementById("suspend").addEventListener("click", () => confirmThen("Suspend TrainJob",
      `Suspend ${data.name}? Its pods are stopped; Resume starts them again.`, () => KT.post(`${base}/suspend`, {suspend: true})));
    document.getElementById("resume").addEventListener("click", () => confirmThen("Resume TrainJob",
      `Resume ${data.name}? Its pods are started again.`, () => KT.post(`${base}/suspend`, {suspend: false})));
    document.getElementById("scale").addEventListener("click", () => confirmThen("Scale TrainJob",
      `Set the number of trainer nodes of ${data.name} (its runtime is elastic: ${data.elastic ? data.elastic.join("–") : ""} nodes).`,
      (n) => KT.post(`${base}/scale`, {replicas: n}), true));
    document.getElementById("delete").addEventListener("click", () => confirmThen("Delete TrainJob",
      `Delete ${data.name} in namespace ${data.namespace}? Its pods are stopped and it is removed${data.cluster ? "" : " with its logs"}. This cannot be undone.`,
      async () => {
        const result = await KT.post(`${base}/delete`, {});
        if (result.ok) result.after = () => { window.location.href = `/trainjobs?namespace=${encodeURIComponent(data.namespace)}`; };
        return result;
      }));
  }

  function start() {
    wireActions();
    Logs.start(data, base);
    Logs.steps(details.steps);
    Charts.draw();
    if (details.state.finished) KT.live("done");
    connect();
  }

  return {start};
})();

// -- Logs ---------------------------------------------------------------------------------------------------------
const Logs = (() => {
  const MAX_LINES = 20000;
  let view, source = null, base = "", containers = {}, knownSteps = [];
  let lines = [];          // {el, text, segments, step}
  let partial = new Map(); // step -> {text, el}
  let query = "";
  let follow = true;
  let dropped = 0;
  let multi = true;
  let jobName = "";
  let lastTop = 0;

  // SGR colour state -> classes; other escape sequences are dropped (they move a terminal's cursor).
  const ESC = /\x1b\[([0-9;?]*)([A-Za-z])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>78]/g;

  function parseAnsi(text, state) {
    const out = [];
    let last = 0;
    ESC.lastIndex = 0;
    let m;
    while ((m = ESC.exec(text)) !== null) {
      if (m.index > last) out.push([text.slice(last, m.index), {...state}]);
      last = ESC.lastIndex;
      if (m[2] === "m") sgr(m[1], state);
    }
    if (last < text.length) out.push([text.slice(last), {...state}]);
    return out;
  }

  function sgr(params, st) {
    const codes = params === "" ? [0] : params.split(";").map((x) => Number(x) || 0);
    for (let i = 0; i < codes.length; i++) {
      const c = codes[i];
      if (c === 0) { for (const k of Object.keys(st)) delete st[k]; }
      else if (c === 1) st.bold = true;
      else if (c === 2) st.dim = true;
      else if (c === 3) st.italic = true;
      else if (c === 4) st.underline = true;
      else if (c === 22) { delete st.bold; delete st.dim; }
      else if (c === 23) delete st.italic;
      else if (c === 24) delete st.underline;
      else if (c >= 30 && c <= 37) { st.fg = c - 30; delete st.fgRgb; }
      else if (c >= 90 && c <= 97) { st.fg = c - 90 + 8; delete st.fgRgb; }
      else if (c === 39) { delete st.fg; delete st.fgRgb; }
      else if (c >= 40 && c <= 47) { st.bg = c - 40; delete st.bgRgb; }
      else if (c >= 100 && c <= 107) { st.bg = (c - 100) % 8; delete st.bgRgb; }
      else if (c === 49) { delete st.bg; delete st.bgRgb; }
      else if ((c === 38 || c === 48) && codes[i + 1] === 5) {
        const n = codes[i + 2] || 0;
        const rgb = xterm(n);
        if (c === 38) { st.fgRgb = rgb; delete st.fg; } else { st.bgRgb = rgb; delete st.bg; }
        i += 2;
      } else if ((c === 38 || c === 48) && codes[i + 1] === 2) {
        const rgb = `rgb(${codes[i + 2] & 255},${codes[i + 3] & 255},${codes[i + 4] & 255})`;
        if (c === 38) { st.fgRgb = rgb; delete st.fg; } else { st.bgRgb = rgb; delete st.bg; }
        i += 4;
      }
    }
  }

  function xterm(n) {
    const basic = ["#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
      "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"];
    if (n < 16) return basic[n];
    if (n < 232) { const i = n - 16, v = [0, 95, 135, 175, 215, 255]; return `rgb(${v[Math.floor(i / 36)]},${v[Math.floor(i / 6) % 6]},${v[i % 6]})`; }
    const g = 8 + (n - 232) * 10; return `rgb(${g},${g},${g})`;
  }

  // What a terminal leaves of a line rewritten with carriage returns: its last non-empty state.
  function collapseCr(line) {
    if (!line.includes("\r")) return line;
    const parts = line.split("\r");
    for (let i = parts.length - 1; i >= 0; i--) if (parts[i]) return parts[i];
    return "";
  }

  const colourState = new Map(); // step -> SGR state carried from one line to the next

  function segmentsOf(step, text) {
    if (!colourState.has(step)) colourState.set(step, {});
    return parseAnsi(text, colourState.get(step));
  }

  function renderInto(node, item) {
    const children = [];
    if (multi && item.prefix) children.push(KT.el("span", {class: "src", text: `[${item.prefix}]`}));
    const q = query.toLowerCase();
    for (const [text, st] of item.segments) {
      const cls = [];
      if (st.bold) cls.push("ansi-bold");
      if (st.dim) cls.push("ansi-dim");
      if (st.italic) cls.push("ansi-italic");
      if (st.underline) cls.push("ansi-underline");
      if (st.fg !== undefined) cls.push(`ansi-fg-${st.fg}`);
      if (st.bg !== undefined) cls.push(`ansi-bg-${st.bg}`);
      const span = KT.el("span", {class: cls.join(" ")});
      if (st.fgRgb) span.style.color = st.fgRgb;
      if (st.bgRgb) span.style.backgroundColor = st.bgRgb;
      if (q) {
        let at = 0;
        const low = text.toLowerCase();
        let hit;
        while ((hit = low.indexOf(q, at)) !== -1) {
          if (hit > at) span.append(document.createTextNode(text.slice(at, hit)));
          span.append(KT.el("mark", {text: text.slice(hit, hit + q.length)}));
          at = hit + q.length;
        }
        if (at < text.length) span.append(document.createTextNode(text.slice(at)));
      } else {
        span.textContent = text;
      }
      children.push(span);
    }
    node.replaceChildren(...children);
  }

  function matches(item) { return !query || item.text.toLowerCase().includes(query.toLowerCase()); }

  function addLine(step, prefix, raw) {
    const shown = collapseCr(raw.endsWith("\r") ? raw.slice(0, -1) : raw);
    const segments = segmentsOf(step, shown);
    const item = {step, prefix, segments, text: segments.map((s) => s[0]).join(""), el: KT.el("div", {class: "line"})};
    renderInto(item.el, item);
    item.el.classList.toggle("hidden", !matches(item));
    lines.push(item);
    return item;
  }

  function append(batch) {
    const frag = document.createDocumentFragment();
    for (const [step, prefix, text] of batch) {
      const held = partial.get(step);
      const all = (held ? held.text : "") + text;
      const pieces = all.split("\n");
      const rest = pieces.pop();
      if (held && held.el) held.el.remove();
      partial.delete(step);
      for (const piece of pieces) frag.append(addLine(step, prefix, piece).el);
      if (rest) {
        // An unfinished line (a progress bar being redrawn): shown in its current state, replaced as it grows.
        const live = {step, prefix, segments: parseAnsi(collapseCr(rest), {...(colourState.get(step) || {})}), text: collapseCr(rest)};
        live.el = KT.el("div", {class: "line live-line"});
        renderInto(live.el, live);
        partial.set(step, {text: rest, el: live.el});
        frag.append(live.el);
      }
    }
    view.append(frag);
    // Keep unfinished lines last, after the lines that completed in this batch.
    for (const held of partial.values()) if (held.el) view.append(held.el);
    trim();
    count();
    if (follow) view.scrollTop = view.scrollHeight;
  }

  function trim() {
    if (lines.length <= MAX_LINES) return;
    const drop = lines.splice(0, lines.length - MAX_LINES);
    for (const item of drop) item.el.remove();
    dropped += drop.length;
    let note = view.querySelector(".note.dropped");
    if (!note) { note = KT.el("div", {class: "note dropped"}); view.prepend(note); }
    note.textContent = `${dropped} earlier lines are not kept here; kubetrain logs ${jobName} shows them all.`;
  }

  function note(text) {
    view.append(KT.el("div", {class: "note", text}));
    if (follow) view.scrollTop = view.scrollHeight;
  }

  function count() {
    const total = lines.length;
    const shown = query ? lines.filter(matches).length : total;
    document.getElementById("log-count").textContent = query ? `${shown} of ${total} lines match` : `${total} lines`;
  }

  function applySearch() {
    for (const item of lines) {
      item.el.classList.toggle("hidden", !matches(item));
      renderInto(item.el, item);
    }
    count();
  }

  function connect() {
    if (source) source.close();
    view.replaceChildren();
    lines = []; partial = new Map(); colourState.clear(); dropped = 0;
    const step = document.getElementById("log-step").value;
    const container = document.getElementById("log-container").value;
    const tail = document.getElementById("log-tail").value;
    multi = !step || knownSteps.length === 0;
    const params = new URLSearchParams({tail});
    if (step) params.set("step", step);
    if (container) params.set("container", container);
    const es = new EventSource(`${base}/logs?${params}`);
    source = es;
    es.addEventListener("log", (e) => append(JSON.parse(e.data)));
    es.addEventListener("notice", (e) => note(JSON.parse(e.data).text));
    es.addEventListener("end", () => { es.close(); note("— the TrainJob has finished; these are all its logs —"); count(); });
    es.addEventListener("failure", (e) => {
      es.close();
      const err = JSON.parse(e.data);
      view.append(KT.el("div", {class: "note", text: `${err.status}: ${err.message}${err.fix ? ` (fix: ${err.fix})` : ""}`}));
    });
    es.addEventListener("error", () => {
      if (source !== es) return;
      es.close();
      note("— connection to the UI server lost; reconnecting —");
      setTimeout(() => { if (source === es) connect(); }, 2000);
    });
    count();
  }

  function fillContainers() {
    const select = document.getElementById("log-container");
    const step = document.getElementById("log-step").value;
    const chosen = select.value;
    let names = [];
    const rjobs = Object.entries(containers);
    for (const [rjob, info] of rjobs) {
      if (step && !step.startsWith(`${rjob}-`)) continue;
      for (const n of info.containers) if (!names.includes(n)) names.push(n);
    }
    select.replaceChildren(KT.el("option", {value: "", text: "default"}), ...names.map((n) => KT.el("option", {value: n, text: n})));
    if (names.includes(chosen)) select.value = chosen;
  }

  function steps(list) {
    const names = list.map((s) => s.name);
    const select = document.getElementById("log-step");
    const chosen = select.value;
    const had = knownSteps.join(",");
    knownSteps = names;
    if (had === names.join(",")) return;
    select.replaceChildren(KT.el("option", {value: "", text: "all pods"}), ...names.map((n) => KT.el("option", {value: n, text: n})));
    if (chosen && !names.includes(chosen)) select.append(KT.el("option", {value: chosen, text: chosen}));
    select.value = chosen;
  }

  function start(pageData, apiBase) {
    view = document.getElementById("log");
    base = apiBase;
    containers = pageData.containers || {};
    jobName = pageData.name;
    fillContainers();
    document.getElementById("log-step").addEventListener("change", () => { fillContainers(); connect(); });
    document.getElementById("log-container").addEventListener("change", connect);
    document.getElementById("log-tail").addEventListener("change", connect);
    const followBox = document.getElementById("log-follow");
    followBox.addEventListener("change", () => { follow = followBox.checked; if (follow) view.scrollTop = view.scrollHeight; });
    // Scrolling up stops following; scrolling back to the end follows again. Our own scrolling only goes down.
    view.addEventListener("scroll", () => {
      const atBottom = view.scrollTop + view.clientHeight >= view.scrollHeight - 24;
      if (view.scrollTop < lastTop - 4 && !atBottom) follow = false;
      else if (atBottom) follow = true;
      followBox.checked = follow;
      lastTop = view.scrollTop;
    });
    let timer = null;
    document.getElementById("log-search").addEventListener("input", (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => { query = e.target.value; applySearch(); }, 150);
    });
    connect();
  }

  return {start, steps};
})();

document.addEventListener("DOMContentLoaded", () => Job.start());
