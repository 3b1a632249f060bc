// The cesar console: one page, its views chosen by the address's #fragment.
// Data comes from the console's JSON API with the token the person gave (kept for this tab
// only, in sessionStorage); nothing is loaded from anywhere else.
"use strict";

const main = () => document.getElementById("main");

function token() { return sessionStorage.getItem("cesar-token") || ""; }

async function api(path, body) {
  const headers = { "Accept": "application/json" };
  if (token()) headers["Authorization"] = "Bearer " + token();
  const init = { headers };
  if (body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json();
  if (!response.ok) throw Object.assign(new Error(data.message), { code: data.code });
  return data;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function table(headings, rows) {
  const head = el("tr", {}, ...headings.map((h) => el("th", { scope: "col" }, h)));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
}

function failure(error) {
  return el("pre", { class: "error", role: "alert" }, `${error.code || "ERROR"}: ${error.message}`);
}

// ---------------------------------------------------------------- automata, drawn in SVG

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// A graph drawn in layers: nodes in columns by their distance from the first node along
// edges between two nodes, in rows within a column; edges between the same two nodes bend
// apart; the loops of one node nest, each higher than the last. Each edge is labelled with
// its kind and stream, and under that its condition (cut at LABEL characters; the whole in
// its tooltip). graph: {name, nodes: [{id, label, final}], edges: [{source, target, kind,
// stream, condition}]}; node ids are drawn as the labels say, so a page can use its own.
const LABEL = 44;
const LOOP = 40;  // how much higher each further loop of a node rises: room for its label
const CHAR = 7;  // the width of a label's character, about, in pixels

function cut(text) { return text.length > LABEL ? text.slice(0, LABEL - 1) + "…" : text; }

function drawGraph(graph, kindOfDrawing) {
  const first = graph.nodes[0].id;
  const depth = new Map([[first, 0]]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const edge of graph.edges) {
      if (edge.source !== edge.target && depth.has(edge.source) && !depth.has(edge.target)) {
        depth.set(edge.target, depth.get(edge.source) + 1);
        grew = true;
      }
    }
  }
  const loops = new Map();
  const pairs = new Map();
  for (const edge of graph.edges) {
    if (edge.source === edge.target) loops.set(edge.source, (loops.get(edge.source) || 0) + 1);
    else {
      const pair = [edge.source, edge.target].sort().join(" ");
      pairs.set(pair, (pairs.get(pair) || 0) + 1);
    }
  }
  const bent = 34 * Math.ceil((Math.max(1, ...pairs.values()) - 1) / 2);  // the most bent edge
  const above = 50 + Math.max(LOOP * Math.max(0, ...loops.values()), bent + 20);  // labels fit
  const columns = Math.max(0, ...depth.values()) + 1;
  const widest = Math.max(0, ...graph.edges.map((e) =>
    Math.max(`${e.kind} ${e.stream || ""}`.length, cut(e.condition).length)));
  const spacing = Math.max(220, widest * CHAR + 60);  // a label fits between two columns
  const rows = new Map();
  const place = new Map();
  for (const node of graph.nodes) {
    const column = depth.has(node.id) ? depth.get(node.id) : columns;
    const row = rows.get(column) || 0;
    rows.set(column, row + 1);
    place.set(node.id, { x: 40 + spacing / 2 + column * spacing, y: above + row * (above + 90) });
  }
  const width = 40 + spacing / 2 + Math.max(...[...place.values()].map((p) => p.x));
  const height = 70 + Math.max(...[...place.values()].map((p) => p.y));
  const drawing = svg("svg", {
    class: kindOfDrawing, viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `${graph.name}: ${graph.nodes.length} nodes, ${graph.edges.length} edges`,
  });
  const markerId = `arrow-${kindOfDrawing}-${graph.name}`.replace(/[^A-Za-z0-9_-]/g, "_");
  drawing.append(svg("defs", {}), svg("title", {}, graph.name));
  const marker = svg("marker", { id: markerId, viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#444" }));
  drawing.firstChild.append(marker);
  const seenLoops = new Map();
  const seenPairs = new Map();
  graph.edges.forEach((edge, index) => {
    const a = place.get(edge.source);
    const b = place.get(edge.target);
    let d;
    let at;
    if (edge.source === edge.target) {
      const k = seenLoops.get(edge.source) || 0;
      seenLoops.set(edge.source, k + 1);
      const rise = 34 + LOOP * k;  // the arc's top, above the node's centre
      const spread = 22 + 12 * k;
      d = `M ${a.x - 12} ${a.y - 18} C ${a.x - spread} ${a.y - rise * 4 / 3}, ` +
        `${a.x + spread} ${a.y - rise * 4 / 3}, ${a.x + 12} ${a.y - 18}`;
      at = { x: a.x + spread + 8, y: a.y - rise - 4, anchor: "start" };  // right of its top
    } else {
      const pair = [edge.source, edge.target].sort().join(" ");
      const k = seenPairs.get(pair) || 0;
      seenPairs.set(pair, k + 1);
      const bend = (k % 2 ? -1 : 1) * Math.ceil(k / 2) * 34;  // 0, +34, -34, +68, …
      const mid = { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
      const length = Math.hypot(b.x - a.x, b.y - a.y) || 1;
      const normal = { x: -(b.y - a.y) / length, y: (b.x - a.x) / length };
      const control = { x: mid.x + normal.x * bend * 2, y: mid.y + normal.y * bend * 2 };
      const from = { x: a.x + (b.x - a.x) * 22 / length, y: a.y + (b.y - a.y) * 22 / length };
      const to = { x: b.x - (b.x - a.x) * 22 / length, y: b.y - (b.y - a.y) * 22 / length };
      d = `M ${from.x} ${from.y} Q ${control.x} ${control.y}, ${to.x} ${to.y}`;
      const up = normal.y * bend < 0;  // a curve bent up is labelled above it, others below
      at = { x: mid.x + normal.x * bend, y: mid.y + normal.y * bend + (up ? -20 : 16) };
    }
    const kind = edge.kind.toLowerCase();
    const path = svg("path", { d, class: kind, "marker-end": `url(#${markerId})`, "data-edge": index });
    const label = svg("text", { x: at.x, y: at.y, "text-anchor": at.anchor || "middle", "data-label": index });
    label.append(svg("tspan", { x: at.x, class: "kind" }, `${kind} ${edge.stream || ""}`.trim()));
    label.append(svg("tspan", { x: at.x, dy: 14, class: "condition" }, cut(edge.condition)));
    const group = svg("g", { class: "edge" });  // its tooltip: the whole condition
    group.append(svg("title", {}, `${kind} ${edge.stream || ""}: ${edge.condition}`), path, label);
    drawing.append(group);
  });
  for (const node of graph.nodes) {
    const p = place.get(node.id);
    drawing.append(svg("circle", { cx: p.x, cy: p.y, r: 20, class: node.final ? "final" : "", "data-node": node.id }));
    drawing.append(svg("text", { x: p.x, y: p.y + 4, "text-anchor": "middle", class: "node" }, node.label));
  }
  return drawing;
}

// An edge's condition as `cesar explain` prints it: its conjuncts (static AND dynamic), OR'd.
function condition(edge) {
  const parts = (edge.conjuncts || []).map((c) =>
    [c.static, c.dynamic].filter((p) => p && p !== "TRUE").join(" AND ") || "TRUE");
  return parts.length ? parts.join(" OR ") : "TRUE";
}

// A compiled automaton; its states are q0, q1, … (numbered within the automaton: the
// merged DAG numbers its own nodes, drawn apart under "Its place in the merged DAG").
function drawAutomaton(automaton) {
  return drawGraph({
    name: `automaton ${automaton.name}`,
    nodes: automaton.nodes.map((n) => ({ id: n.id, label: `q${n.id}`, final: n.id === automaton.final })),
    edges: automaton.edges.map((e) => ({ ...e, condition: condition(e) })),
  }, "automaton");
}

// A subscription's edges on one lane of one shard's DAG, its nodes numbered as the DAG
// numbers them (the table beside it): the template conditions, constants as ?0, ?1, ….
function drawPlace(edges, name) {
  const ids = [...new Set(edges.flatMap((e) => [e.source, e.target]))].sort((x, y) => x - y);
  const targets = new Set(edges.filter((e) => e.source !== e.target).map((e) => e.target));
  const sources = new Set(edges.map((e) => e.source));
  return drawGraph({
    name,
    nodes: ids.map((id) => ({ id, label: String(id), final: targets.has(id) && !sources.has(id) })),
    edges: edges.map((e) => ({ ...e, condition: e.template || "TRUE" })),
  }, "place");
}

function compiledView(compiled) {
  const parts = [el("p", {}, `Publishes ${compiled.publishes}; reads ${compiled.reads.join(", ")}; `,
    `placement: ${compiled.placement.text}.`)];
  for (const automaton of compiled.automata) {
    parts.push(el("h3", {}, `Automaton ${automaton.name}${automaton.internal ? " (internal)" : ""}`));
    parts.push(drawAutomaton(automaton));
  }
  if (compiled.pattern) parts.push(el("h3", {}, "Pattern"), el("pre", { id: "pattern" }, compiled.pattern));
  if (compiled.algebra) parts.push(el("h3", {}, "Algebra"), el("pre", { id: "algebra" }, compiled.algebra));
  return parts;
}

// ---------------------------------------------------------------- views

// Seconds for people: 42 s, 5 min, 3 h, 2 days (negative: ahead of the clock).
function duration(seconds) {
  const size = Math.abs(seconds);
  const [unit, per] = size < 120 ? ["s", 1] : size < 7200 ? ["min", 60] : size < 172800 ? ["h", 3600] : ["days", 86400];
  return `${seconds < 0 ? "ahead " : ""}${Math.round(size / per)} ${unit}`;
}

async function subscriptionsView() {
  const rows = await api("/api/subscriptions");
  const search = el("input", { id: "search", type: "search", placeholder: "id, stream, owner or query" });
  const tbody = rows.map((s) => {
    const row = el("tr", { "data-subscription": s.id },
      el("td", {}, el("a", { href: `#/subscription/${encodeURIComponent(s.id)}` }, s.id)),
      el("td", {}, s.owner), el("td", {}, s.stream), el("td", {}, s.placement),
      el("td", {}, s.plan || "—"), el("td", {}, s.last_seq),
      el("td", { class: "query" }, s.query || "(algebra)"));
    row.dataset.text = [s.id, s.owner, s.stream, s.query].join(" ").toLowerCase();
    return row;
  });
  search.addEventListener("input", () => {
    const words = search.value.toLowerCase();
    for (const row of tbody) row.hidden = !row.dataset.text.includes(words);
  });
  const streams = await api("/api/streams");
  const streamRows = streams.map((s) => el("tr", { "data-stream": s.name },
    el("td", { class: "query" }, s.spec), el("td", {}, s.subscription ? `published by ${s.subscription}` : "input"),
    el("td", {}, s.owner), el("td", {}, (s.shared_with || []).join(", ") || "—"),
    el("td", { "data-newest": s.newest_t1 ?? "" }, s.newest_t1 === undefined ? "—" : s.newest || String(s.newest_t1)),
    el("td", { "data-lag": s.lag_seconds ?? "" }, s.lag_seconds == null ? "—" : duration(s.lag_seconds)),
    el("td", { "data-settled": s.settled_t1 ?? "" }, s.settled_t1 === undefined ? "—" : s.settled || String(s.settled_t1)),
    el("td", { class: "number", "data-accepted": s.accepted ?? "" }, s.accepted === undefined ? "—" : figure(s.accepted)),
    el("td", { "data-rejected": JSON.stringify(s.rejected || {}) }, rejections(s.rejected))));
  return [el("h2", {}, `Subscriptions (${rows.length})`), el("label", { for: "search" }, "Search "), search,
    table(["id", "owner", "stream", "placement", "plan", "last seq", "query"], tbody),
    el("h2", {}, `Streams (${streams.length})`),
    table(["stream", "from", "owner", "shared with", "newest event", "behind the clock",
      "watermark (settled through)", "events accepted", "events rejected, by reason"], streamRows)];
}

// An input stream's rejections since the server started, by reason: "late 5, invalid Price 2".
function rejections(rejected) {
  if (rejected === undefined) return "—";
  const reasons = Object.entries(rejected);
  return reasons.length ? reasons.map(([reason, n]) => `${reason} ${figure(n)}`).join(", ") : "none";
}

// What runs a subscription: the plan a shard chose for a planned pattern, else what
// `cesar explain` says of it (a pattern's planner), else a CEL query's automata.
function planOf(s) {
  if (s.plan) return s.plan;
  if (s.compiled && s.compiled.plan) return s.compiled.plan;
  return "its automata on the shared DAG (a CEL query is not planned)";
}

// What a subscription does now, polled every EVERY seconds while its page is open: its
// alerts (and their rate), and per shard the partial matches it holds and the steps charged
// to it in the latest epoch, each against its budget.
function runtimeView(s) {
  const of = (n, limit) => limit ? `${figure(n)} of ${Number(limit).toLocaleString("en")}` : `${figure(n)} (no budget)`;
  const body = el("tbody", { id: "runtime" });
  const alerts = el("p", { id: "alert-rate" }, `${s.last_seq} alerts`);
  const inflow = el("p", { id: "events-in" });
  const latency = el("p", { id: "latency" });
  let previous = { seq: s.last_seq, events: s.events_in, at: performance.now() };
  const draw = (data) => {
    const now = performance.now();
    const seconds = (now - previous.at) / 1000 || 1;
    const rate = Math.max(0, data.last_seq - previous.seq) / seconds;
    const events = Math.max(0, data.events_in - previous.events) / seconds;
    previous = { seq: data.last_seq, events: data.events_in, at: now };
    alerts.textContent = `${data.last_seq} alerts, ${figure(rate)} alerts/s now`;
    inflow.textContent = `${figure(data.events_in)} events in (on the input streams it reads, since the server started), ${figure(events)} events/s now`;
    const l = data.latency_ms;
    latency.textContent = l ? `alert latency (publish request to alerts logged): last ${figure(l.last)} ms, mean ${figure(l.mean)} ms, peak ${figure(l.peak)} ms over ${l.batches} batches`
      : "alert latency: no alert yet";
    body.replaceChildren(...data.runtime.map((r) => el("tr", { "data-shard": r.shard },
      el("td", {}, r.shard), el("td", { "data-held": r.held }, of(r.held, r.instance_limit)),
      el("td", { "data-steps": r.steps }, of(r.steps, r.step_limit)))));
  };
  draw({ last_seq: s.last_seq, events_in: s.events_in, latency_ms: s.latency_ms, runtime: s.runtime || [] });
  const controller = new AbortController();
  watching = controller;
  const timer = setInterval(async () => {
    try {
      draw(await api(`/api/subscriptions/${encodeURIComponent(s.id)}/runtime`));
    } catch (error) {
      alerts.replaceChildren(failure(error));
    }
  }, EVERY * 1000);
  controller.signal.addEventListener("abort", () => clearInterval(timer));
  const headings = ["shard", "partial matches held (of its budget)", "steps in the latest epoch (of its budget)"];
  return el("div", {}, alerts, inflow, latency, el("table", {},
    el("thead", {}, el("tr", {}, ...headings.map((h) => el("th", { scope: "col" }, h)))), body));
}

async function subscriptionView(id) {
  const s = await api(`/api/subscriptions/${encodeURIComponent(id)}`);
  const parts = [el("h2", {}, `Subscription ${s.id}`),
    table(["owner", "stream", "output", "placement", "last seq"], [el("tr", {},
      el("td", {}, s.owner), el("td", {}, s.stream), el("td", {}, s.output),
      el("td", {}, s.placement), el("td", {}, s.last_seq))]),
    el("h3", {}, "Now"), runtimeView(s),
    el("h3", {}, "Plan"), el("p", { id: "plan" }, planOf(s)),
    el("h3", {}, "Query"), el("pre", {}, s.query || "(an algebra subscription)")];
  parts.push(el("h3", {}, "Its place in the merged DAG"),
    el("p", {}, "The template edges its automata use on each shard, and how many subscriptions share each (the constants of each are its own); the DAG's nodes as the DAG numbers them."),
    table(["shard", "lane", "edge", "from → to", "kind", "stream", "template", "shared by"],
      s.dag.map((e) => el("tr", { "data-edge": e.edge, "data-sharers": e.sharers },
        el("td", {}, e.shard), el("td", {}, e.lane), el("td", {}, e.edge),
        el("td", {}, `${e.source} → ${e.target}`), el("td", {}, e.kind.toLowerCase()),
        el("td", {}, e.stream), el("td", { class: "query" }, e.template),
        el("td", {}, `${e.sharers} subscription${e.sharers === 1 ? "" : "s"}`)))));
  const lanes = new Map();
  for (const e of s.dag) {
    const name = `shard ${e.shard}, lane ${e.lane}`;
    lanes.set(name, [...(lanes.get(name) || []), e]);
  }
  for (const [name, edges] of lanes) parts.push(drawPlace(edges, name));
  if (s.compiled) parts.push(...compiledView(s.compiled));
  parts.push(el("h3", {}, `Latest alerts and notices (${s.recent.length})`),
    table(["seq", "time", "event"], s.recent.map((a) => el("tr", { "data-seq": a.seq },
      el("td", {}, a.seq), el("td", {}, a.notice ? "notice" : a.time || `${a.t0}/${a.t1}`),
      el("td", { class: "query" }, a.notice || JSON.stringify(a.attrs))))));
  return parts;
}

// Live charts: the counters polled every 2 s while the page is open; rates from the
// differences of counters, levels as they are; the last 60 samples (2 minutes).
// A client's token sees its own counters only (its alerts, its events in open epochs); an
// admin's, the server's.
const shardSum = (s, name) => s.shards.reduce((n, x) => n + Number((x.counters || {})[name] || 0), 0);
const CHARTS = [
  { id: "events", title: "events accepted", unit: "events/s", of: (s) => s.front.events_accepted, rate: true },
  { id: "alerts", title: "alerts", unit: "alerts/s", of: (s) => s.front.alerts, rate: true },
  { id: "latency", title: "batch latency (mean)", unit: "ms", mean: ["batch_latency_us_total", "batches_timed"],
    of: (s) => s.front.batches_timed === undefined ? undefined : Number(s.front.batch_latency_us_total) / 1000 },
  { id: "instances", title: "instances (all shards)", unit: "instances", of: (s) => s.front.rss_bytes === undefined ? undefined : shardSum(s, "instances") },
  { id: "memory", title: "memory (front and shards)", unit: "MB", of: (s) => s.front.rss_bytes === undefined ? undefined : (Number(s.front.rss_bytes) + shardSum(s, "rss_bytes")) / 1e6 },
  { id: "open", title: "events waiting for their epoch", unit: "events", of: (s) => s.front.open_epoch_events },
  { id: "checkpoints", title: "checkpoint size", unit: "MB", of: (s) => s.front.checkpoint_bytes === undefined ? undefined : Number(s.front.checkpoint_bytes) / 1e6 },
  { id: "backlog", title: "Apply calls in flight (all shards)", unit: "calls", of: (s) => s.checkpoints === undefined ? undefined : shardSum(s, "applies_in_flight") },
];
const SAMPLES = 60;  // kept per chart: 2 minutes at one sample per 2 s
const EVERY = 2;  // seconds between samples

// The smallest of 1, 2, 5 times a power of ten at or above v: an axis's top.
function nice(v) {
  if (v <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * power).find((m) => m >= v);
}

// A number for people: whole numbers as they are, others to three figures or so.
function figure(v) {
  if (Number.isInteger(v) || v >= 100) return Math.round(v).toLocaleString("en");
  return v.toFixed(v >= 10 ? 1 : 2);
}

// A chart with axes: the value (its unit, 0 to a round top, a line at half) against time
// (the last two minutes, now at the right); the samples so far end at now.
function chart(values, unit) {
  const width = 380, height = 160, left = 56, bottom = 24, top = 24, right = 10;
  const plotW = width - left - right, plotH = height - top - bottom;
  const max = nice(Math.max(0, ...values));
  const x = (i) => left + plotW - (values.length - 1 - i) * (plotW / (SAMPLES - 1));
  const y = (v) => top + plotH - (v / max) * plotH;
  const drawing = svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `${unit}: last ${values.length} samples, 0 to ${figure(max)}` });
  for (const [v, label] of [[0, "0"], [max / 2, figure(max / 2)], [max, figure(max)]]) {
    drawing.append(svg("line", { x1: left, x2: left + plotW, y1: y(v), y2: y(v), class: "grid" }));
    drawing.append(svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, label));
  }
  for (const [seconds, label] of [[SAMPLES * EVERY - EVERY, "−2 min"], [60, "−1 min"], [0, "now"]]) {
    const at = left + plotW - (seconds / EVERY) * (plotW / (SAMPLES - 1));
    drawing.append(svg("text", { x: at, y: height - 6, "text-anchor": "middle", class: "tick" }, label));
  }
  drawing.append(svg("text", { x: 4, y: 12, class: "unit" }, unit));  // above the axis
  drawing.append(svg("line", { x1: left, x2: left, y1: top, y2: top + plotH, class: "axis" }));
  drawing.append(svg("line", { x1: left, x2: left + plotW, y1: top + plotH, y2: top + plotH, class: "axis" }));
  if (values.length) {
    const points = values.length === 1 ? [`${x(0) - 4},${y(values[0])}`, `${x(0)},${y(values[0])}`]
      : values.map((v, i) => `${x(i)},${y(v)}`);
    drawing.append(svg("polyline", { points: points.join(" "), class: "series" }));
  }
  return drawing;
}

// Counters named for people, in groups; bytes in MB, microseconds in ms.
const GROUPS = [
  ["Events", /^(events|epoch|open_epoch|late|batch|publish|duplicate|pieces|arrow)/],
  ["Alerts and listeners", /(alert|listen|notice)/],
  ["Subscriptions and streams", /(subscri|stream|compile|shape|template|bound)/],
  ["Work and state", /(instance|node|edge|work|step|run|plan|window|probe|predicate)/],
  ["Memory, log and checkpoints", /(bytes|rss|checkpoint|snapshot|compact|log)/],
];

function counterRows(counters) {
  const rows = Object.entries(counters || {}).map(([key, raw]) => {
    const group = (GROUPS.find(([, pattern]) => pattern.test(key)) || ["Other"])[0];
    let name = key.replaceAll("_", " ");
    let value = Number(raw);
    if (key.endsWith("_bytes")) { name = name.replace(/ bytes$/, ", MB"); value /= 1e6; }
    else if (key.endsWith("_us_total")) { name = name.replace(/ us total$/, ", ms in all"); value /= 1000; }
    return { group, name, key, value: Number.isFinite(value) ? figure(value) : String(raw) };
  });
  const order = [...GROUPS.map(([g]) => g), "Other"];
  rows.sort((a, b) => order.indexOf(a.group) - order.indexOf(b.group) || a.name.localeCompare(b.name));
  return rows.map((r) => el("tr", { "data-counter": r.key },
    el("td", {}, r.group), el("td", {}, r.name), el("td", { class: "number" }, r.value)));
}

function shardsView() {
  const history = new Map(CHARTS.map((c) => [c.id, []]));
  let previous = null;
  const charts = el("div", { id: "charts", class: "charts" });
  const tables = el("div", { id: "counters" });
  const controller = new AbortController();
  watching = controller;
  const sample = async () => {
    try {
      const stats = await api("/api/shards");
      const now = performance.now();
      for (const chart of CHARTS) {
        const level = Number(chart.of(stats) || 0);
        const values = history.get(chart.id);
        if (chart.mean) {  // the mean over the interval: Δ total / Δ count
          const [total, count] = chart.mean;
          const done = previous ? Number(stats.front[count]) - Number(previous.stats.front[count]) : 0;
          if (previous) values.push(done > 0 ? (Number(stats.front[total]) - Number(previous.stats.front[total])) / done / 1000 : 0);
        } else if (!chart.rate) values.push(level);
        else if (previous) values.push(Math.max(0, level - Number(chart.of(previous.stats) || 0)) / ((now - previous.at) / 1000));
        if (values.length > SAMPLES) values.shift();
      }
      previous = { stats, at: now };
      charts.replaceChildren(...CHARTS.filter((c) => c.of(stats) !== undefined).map((c) => {
        const values = history.get(c.id);
        const last = values.length ? values[values.length - 1] : 0;
        const peak = Math.max(0, ...values);
        return el("figure", { "data-chart": c.id },
          el("figcaption", {}, `${c.title}: now ${figure(last)} ${c.unit}, peak ${figure(peak)} over 2 min`),
          chart(values, c.unit));
      }));
      const parts = [];
      if (stats.checkpoints) parts.push(...operatorTables(stats));
      parts.push(el("h2", {}, "Front"), table(["group", "counter", "value"], counterRows(stats.front)));
      for (const shard of stats.shards) {
        parts.push(el("h2", {}, `Shard ${shard.shard || 0}`),
          table(["group", "counter", "value"], counterRows(shard.counters)));
      }
      tables.replaceChildren(...parts);
    } catch (error) {
      tables.replaceChildren(failure(error));
    }
  };
  const timer = setInterval(() => { if (!controller.signal.aborted) sample(); }, 2000);
  controller.signal.addEventListener("abort", () => clearInterval(timer));
  sample();
  return [el("h2", {}, "Shards, live"), charts, tables];
}

// An admin's view of the shards' backlog (events waiting for each in open epochs, Apply
// calls sent and unanswered: a count that stays up is a shard behind) and the checkpoints.
function operatorTables(stats) {
  const count = (shard, name) => Number((shard.counters || {})[name] || 0);
  return [el("h2", {}, "Backpressure"),
    table(["shard", "events waiting in open epochs", "Apply calls in flight", "live partial matches"],
      stats.shards.map((shard) => el("tr", { "data-backlog": shard.shard || 0 },
        el("td", {}, shard.shard || 0),
        el("td", { class: "number", "data-waiting": count(shard, "events_waiting") }, figure(count(shard, "events_waiting"))),
        el("td", { class: "number", "data-in-flight": count(shard, "applies_in_flight") }, figure(count(shard, "applies_in_flight"))),
        el("td", { class: "number" }, figure(count(shard, "instances")))))),
    el("h2", {}, `Checkpoints (the latest ${stats.checkpoints.length} since the server started)`),
    stats.checkpoints.length ? table(["taken at", "log position (batches)", "size, MB", "took, ms", "log compacted to"],
      stats.checkpoints.map((c) => el("tr", { "data-checkpoint": c.position },
        el("td", {}, c.at), el("td", { class: "number" }, figure(c.position)),
        el("td", { class: "number" }, figure(c.bytes / 1e6)), el("td", { class: "number" }, figure(c.ms)),
        el("td", { class: "number" }, figure(c.compacted_to)))))
      : el("p", {}, "none yet: one is taken every --snapshot-every-batches batches or --snapshot-every-seconds seconds")];
}

function tryView() {
  const text = el("textarea", { id: "query", "aria-label": "query", spellcheck: "false" });
  const button = el("button", { type: "submit" }, "Explain");
  const subscribe = el("button", { type: "button", id: "subscribe" }, "Subscribe");
  const sample = el("button", { type: "button", id: "run-sample" }, "Run on the sample");
  const recent = el("button", { type: "button", id: "run-recent" }, "Run on recent events");
  const out = el("div", { id: "explained" });
  const form = el("form", {}, el("label", { for: "query" }, "CEL query or pattern"), text,
    button, " ", sample, " ", recent, " ", subscribe);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    out.replaceChildren();
    try {
      out.append(...compiledView(await api("/api/explain", { query: text.value })));
    } catch (error) {
      out.append(failure(error));
    }
  });
  const run = async (on) => {
    out.replaceChildren(el("p", { class: "muted" }, on === "recent"
      ? "running on the server's recent events…" : "running on the bundled day of quotes…"));
    try {
      const ran = await api("/api/try", { query: text.value, on });
      const source = ran.source === "recent"
        ? `the server's latest ${ran.quotes} events of the streams it reads`
        : `the bundled day (${ran.quotes} one-minute quotes of six stocks, stream Stock)`;
      out.replaceChildren(el("p", { id: "sample-result" }, `${ran.alerts} alerts on ${source}`,
        ran.alerts > ran.shown.length ? `; the first ${ran.shown.length}:` : ":"),
        table(["stream", "time", "event"], ran.shown.map((a) => el("tr", { class: "sample-alert" },
          el("td", {}, a.stream), el("td", {}, a.time || `${a.t0}/${a.t1}`),
          el("td", { class: "query" }, JSON.stringify(a.attrs))))));
    } catch (error) {
      out.replaceChildren(failure(error));
    }
  };
  sample.addEventListener("click", () => run("sample"));
  recent.addEventListener("click", () => run("recent"));
  subscribe.addEventListener("click", async () => {
    out.replaceChildren();
    try {
      const made = await api("/api/subscribe", { query: text.value });
      location.hash = `#/subscription/${encodeURIComponent(made.id)}`;
    } catch (error) {
      out.append(failure(error));
    }
  });
  return [el("h2", {}, "Try a query"), form, out];
}

// Live alerts: the caller's alerts as Server-Sent Events, read with fetch (EventSource cannot
// send the token); resumed after the last seq of each subscription when the stream breaks.
let watching = null;

function alertsView() {
  const seen = new Map();  // subscription -> last seq shown
  let paused = false;
  let held = [];
  let connection = null;  // the open alert stream: "Show from" closes it to ask again
  const filter = el("input", { id: "alert-filter", type: "search", placeholder: "subscription id, e.g. s1" });
  const from = el("input", { id: "alert-from", type: "number", min: "1", placeholder: "seq", "aria-label": "from seq" });
  const back = el("button", { type: "button", id: "alert-back" }, "Show from");
  const pause = el("button", { type: "button", id: "pause", "aria-pressed": "false" }, "Pause");
  const status = el("span", { id: "alert-status", class: "muted", "aria-live": "polite" }, "connecting…");
  const columns = [];  // the attributes seen so far, a column each, in the order they came
  const headings = el("tr", {}, ...["subscription", "seq", "time"].map((h) => el("th", { scope: "col" }, h)));
  const list = el("tbody", { id: "alerts" });
  const cells = (record) => columns.map((name) => el("td", { "data-attribute": name },
    record.attrs && name in record.attrs ? String(record.attrs[name]) : ""));
  const show = (record) => {
    const fresh = Object.keys(record.attrs || {}).filter((name) => !columns.includes(name));
    for (const name of fresh) {
      columns.push(name);
      headings.append(el("th", { scope: "col" }, name));
      for (const row of list.children) if (!row.dataset.notice) row.append(el("td", { "data-attribute": name }, ""));
    }
    const wanted = filter.value.trim();
    const row = el("tr", { "data-subscription": record.subscription, "data-seq": record.seq },
      el("td", {}, record.subscription), el("td", {}, record.seq),
      el("td", {}, record.notice ? "notice" : record.time || `${record.t0}/${record.t1}`));
    if (record.notice) {
      row.dataset.notice = "1";
      row.append(el("td", { colspan: Math.max(1, columns.length), class: "query" }, record.notice));
    } else row.append(...cells(record));
    row.hidden = wanted !== "" && record.subscription !== wanted;
    list.prepend(row);
    while (list.children.length > 500) list.lastChild.remove();
  };
  filter.addEventListener("input", () => {
    const wanted = filter.value.trim();
    for (const row of list.children) row.hidden = wanted !== "" && row.dataset.subscription !== wanted;
  });
  back.addEventListener("click", () => {  // the backlog: one subscription's alerts from a seq on
    const sub = filter.value.trim();
    const seq = Number(from.value);
    if (!sub || !Number.isInteger(seq) || seq < 1) {
      status.textContent = "give a subscription and a seq from 1";
      return;
    }
    for (const row of [...list.children]) if (row.dataset.subscription === sub) row.remove();
    seen.set(sub, seq - 1);
    if (connection) connection.abort();
  });
  pause.addEventListener("click", () => {
    paused = !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    pause.setAttribute("aria-pressed", String(paused));
    if (!paused) { held.forEach(show); held = []; }
    status.textContent = paused ? "paused" : "live";
  });
  const controller = new AbortController();
  watching = controller;
  controller.signal.addEventListener("abort", () => { if (connection) connection.abort(); });
  (async () => {
    while (!controller.signal.aborted) {
      const after = [...seen].map(([sub, seq]) => `after=${encodeURIComponent(`${sub}:${seq}`)}`);
      connection = new AbortController();
      try {
        const headers = token() ? { "Authorization": "Bearer " + token() } : {};
        const response = await fetch(`/api/alerts?${after.join("&")}`, { headers, signal: connection.signal });
        if (!response.ok) {
          const error = await response.json();
          status.replaceChildren(failure(error));
          return;
        }
        status.textContent = paused ? "paused" : "live";
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
            if (!data) continue;
            const record = JSON.parse(data);
            if (block.startsWith("event: error")) { status.replaceChildren(failure(record)); return; }
            seen.set(record.subscription, record.seq);
            if (paused) held.push(record); else show(record);
          }
        }
      } catch (error) {
        if (controller.signal.aborted) return;
        if (connection.signal.aborted) continue;  // "Show from": ask again at once
      }
      status.textContent = "reconnecting…";
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  })();
  return [el("h2", {}, "Live alerts"),
    el("p", {}, el("label", { for: "alert-filter" }, "Subscription "), filter, " ",
      el("label", { for: "alert-from" }, "from seq "), from, " ", back, " ", pause, " ", status),
    el("table", {}, el("thead", {}, headings), list)];
}

let routed = 0;  // the latest route asked for: a slower earlier one must not draw over it

async function route() {
  const mine = ++routed;
  const [, page, id] = (location.hash || "#/subscriptions").split("/");
  for (const link of document.querySelectorAll("nav a")) {
    link.toggleAttribute("aria-current", link.getAttribute("href") === `#/${page}`);
    if (link.hasAttribute("aria-current")) link.setAttribute("aria-current", "page");
  }
  if (watching) { watching.abort(); watching = null; }
  let parts;
  try {
    if (page === "alerts") parts = alertsView();
    else if (page === "subscription") parts = await subscriptionView(decodeURIComponent(id));
    else if (page === "shards") parts = shardsView();
    else if (page === "try") parts = tryView();
    else parts = await subscriptionsView();
  } catch (error) {
    parts = [failure(error)];
  }
  if (mine !== routed) return;
  main().replaceChildren(...parts);
  main().dataset.view = page || "subscriptions";
}

async function login() {
  try {
    const who = await api("/api/whoami");
    document.getElementById("who").textContent = `${who.client}${who.admin ? " (admin)" : ""}`;
  } catch (error) {
    document.getElementById("who").textContent = "no access: give a token";
  }
  await route();
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("cesar-token", document.getElementById("token").value);
    login();
  });
  login();
});
