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

// Nodes in columns by their distance from the start node along FORWARD edges; loops
// (REBIND, FILTER, STAY) drawn as arcs above their node.
function drawAutomaton(automaton) {
  const depth = new Map([[automaton.nodes[0].id, 0]]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const edge of automaton.edges) {
      if (edge.source !== edge.target && depth.has(edge.source) && !depth.has(edge.target)) {
        depth.set(edge.target, depth.get(edge.source) + 1);
        grew = true;
      }
    }
  }
  const rows = new Map();
  const place = new Map();
  for (const node of automaton.nodes) {
    const column = depth.has(node.id) ? depth.get(node.id) : depth.size;
    const row = rows.get(column) || 0;
    rows.set(column, row + 1);
    place.set(node.id, { x: 70 + column * 190, y: 90 + row * 110 });
  }
  const width = 140 + Math.max(...[...place.values()].map((p) => p.x));
  const height = 60 + Math.max(...[...place.values()].map((p) => p.y));
  const drawing = svg("svg", {
    class: "automaton", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `automaton ${automaton.name}: ${automaton.nodes.length} nodes, ${automaton.edges.length} edges`,
  });
  drawing.append(svg("defs", {}), svg("title", {}, `automaton ${automaton.name}`));
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#444" }));
  drawing.firstChild.append(marker);
  automaton.edges.forEach((edge, index) => {
    const a = place.get(edge.source);
    const b = place.get(edge.target);
    const label = `${edge.kind} ${edge.stream || ""}`.trim();
    let d;
    let at;
    if (edge.source === edge.target) {
      d = `M ${a.x - 12} ${a.y - 20} C ${a.x - 40} ${a.y - 75}, ${a.x + 40} ${a.y - 75}, ${a.x + 12} ${a.y - 20}`;
      at = { x: a.x, y: a.y - 62 - (index % 2) * 12 };
    } else {
      d = `M ${a.x + 22} ${a.y} L ${b.x - 22} ${b.y}`;
      at = { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 8 };
    }
    drawing.append(svg("path", { d, class: edge.kind, "marker-end": "url(#arrow)", "data-edge": index }));
    drawing.append(svg("text", { x: at.x, y: at.y, "text-anchor": "middle" }, label));
  });
  for (const node of automaton.nodes) {
    const p = place.get(node.id);
    const final = node.id === automaton.final;
    drawing.append(svg("circle", { cx: p.x, cy: p.y, r: 20, class: final ? "final" : "", "data-node": node.id }));
    drawing.append(svg("text", { x: p.x, y: p.y + 4, "text-anchor": "middle" }, node.id));
  }
  return drawing;
}

function compiledView(compiled) {
  const parts = [el("p", {}, `Publishes ${compiled.publishes}; reads ${compiled.reads.join(", ")}; `,
    `placement: ${compiled.placement.text}.`)];
  for (const automaton of compiled.automata) {
    parts.push(el("h3", {}, `Automaton ${automaton.name}${automaton.internal ? " (internal)" : ""}`));
    parts.push(drawAutomaton(automaton));
  }
  parts.push(el("h3", {}, "Algebra"), el("pre", {}, compiled.algebra));
  return parts;
}

// ---------------------------------------------------------------- views

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
    el("td", {}, s.spec), el("td", {}, s.subscription ? `published by ${s.subscription}` : "input"),
    el("td", {}, s.owner), el("td", {}, (s.shared_with || []).join(", ") || "—")));
  return [el("h2", {}, `Subscriptions (${rows.length})`), el("label", { for: "search" }, "Search "), search,
    table(["id", "owner", "stream", "placement", "plan", "last seq", "query"], tbody),
    el("h2", {}, `Streams (${streams.length})`),
    table(["stream", "from", "owner", "shared with"], streamRows)];
}

async function subscriptionView(id) {
  const s = await api(`/api/subscriptions/${encodeURIComponent(id)}`);
  const parts = [el("h2", {}, `Subscription ${s.id}`),
    table(["owner", "stream", "output", "placement", "last seq"], [el("tr", {},
      el("td", {}, s.owner), el("td", {}, s.stream), el("td", {}, s.output),
      el("td", {}, s.placement), el("td", {}, s.last_seq))]),
    el("h3", {}, "Plan"), el("p", {}, s.plan || "one automaton (not a planned pattern)"),
    el("h3", {}, "Query"), el("pre", {}, s.query || "(an algebra subscription)")];
  parts.push(el("h3", {}, "Its place in the merged DAG"),
    el("p", {}, "The template edges its automata use on each shard, and how many subscriptions share each (the constants of each are its own)."),
    table(["shard", "lane", "edge", "from → to", "kind", "stream", "template", "shared by"],
      s.dag.map((e) => el("tr", { "data-edge": e.edge, "data-sharers": e.sharers },
        el("td", {}, e.shard), el("td", {}, e.lane), el("td", {}, e.edge),
        el("td", {}, `${e.source} → ${e.target}`), el("td", {}, e.kind.toLowerCase()),
        el("td", {}, e.stream), el("td", { class: "query" }, e.template),
        el("td", {}, `${e.sharers} subscription${e.sharers === 1 ? "" : "s"}`)))));
  if (s.compiled) parts.push(...compiledView(s.compiled));
  parts.push(el("h3", {}, `Latest alerts and notices (${s.recent.length})`),
    table(["seq", "time", "event"], s.recent.map((a) => el("tr", { "data-seq": a.seq },
      el("td", {}, a.seq), el("td", {}, a.notice ? "notice" : a.time || `${a.t0}/${a.t1}`),
      el("td", { class: "query" }, a.notice || JSON.stringify(a.attrs))))));
  return parts;
}

// Live charts: the counters polled every 2 s while the page is open; rates from the
// differences of counters, levels as they are; the last 60 samples (2 minutes).
// A client's token sees its own counters only (its alerts); an admin's, the server's.
const shardSum = (s, name) => s.shards.reduce((n, x) => n + Number((x.counters || {})[name] || 0), 0);
const CHARTS = [
  { id: "events", title: "events/s accepted", of: (s) => s.front.events_accepted, rate: true },
  { id: "alerts", title: "alerts/s", of: (s) => s.front.alerts, rate: true },
  { id: "latency", title: "batch latency, ms (mean)", mean: ["batch_latency_us_total", "batches_timed"],
    of: (s) => s.front.batches_timed === undefined ? undefined : Number(s.front.batch_latency_us_total) / 1000 },
  { id: "instances", title: "instances (all shards)", of: (s) => s.front.rss_bytes === undefined ? undefined : shardSum(s, "instances") },
  { id: "memory", title: "memory, MB (front and shards)", of: (s) => s.front.rss_bytes === undefined ? undefined : (Number(s.front.rss_bytes) + shardSum(s, "rss_bytes")) / 1e6 },
  { id: "open", title: "events waiting for their epoch", of: (s) => s.front.open_epoch_events },
  { id: "checkpoints", title: "checkpoint, MB", of: (s) => s.front.checkpoint_bytes === undefined ? undefined : Number(s.front.checkpoint_bytes) / 1e6 },
];

function sparkline(values) {
  const width = 320, height = 70;
  const top = Math.max(1, ...values);
  const span = Math.max(values.length - 1, 1);  // the samples so far fill the width
  const y = (v) => height - 4 - (v / top) * (height - 8);
  const points = values.length === 1 ? [`0,${y(values[0])}`, `${width},${y(values[0])}`]
    : values.map((v, i) => `${(i / span) * width},${y(v)}`);
  const drawing = svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `last ${values.length} samples, up to ${top.toFixed(1)}` });
  drawing.append(svg("polyline", { points: points.join(" "), fill: "none", stroke: "#0645ad", "stroke-width": 2 }));
  return drawing;
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
        if (values.length > 60) values.shift();
      }
      previous = { stats, at: now };
      charts.replaceChildren(...CHARTS.filter((chart) => chart.of(stats) !== undefined).map((chart) => {
        const values = history.get(chart.id);
        const last = values.length ? values[values.length - 1] : 0;
        return el("figure", { "data-chart": chart.id }, el("figcaption", {}, `${chart.title}: ${last.toFixed(1)}`), sparkline(values));
      }));
      const front = Object.entries(stats.front).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)));
      const parts = [el("h2", {}, "Front"), table(["counter", "value"], front)];
      for (const shard of stats.shards) {
        const counters = Object.entries(shard.counters || {}).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)));
        parts.push(el("h2", {}, `Shard ${shard.shard || 0}`), table(["counter", "value"], counters));
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

function tryView() {
  const text = el("textarea", { id: "query", "aria-label": "query", spellcheck: "false" });
  const button = el("button", { type: "submit" }, "Explain");
  const subscribe = el("button", { type: "button", id: "subscribe" }, "Subscribe");
  const sample = el("button", { type: "button", id: "run-sample" }, "Run on the sample");
  const out = el("div", { id: "explained" });
  const form = el("form", {}, el("label", { for: "query" }, "CEL query or pattern"), text,
    button, " ", sample, " ", subscribe);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    out.replaceChildren();
    try {
      out.append(...compiledView(await api("/api/explain", { query: text.value })));
    } catch (error) {
      out.append(failure(error));
    }
  });
  sample.addEventListener("click", async () => {
    out.replaceChildren(el("p", { class: "muted" }, "running on the bundled day of quotes…"));
    try {
      const ran = await api("/api/try", { query: text.value });
      out.replaceChildren(el("p", { id: "sample-result" },
        `${ran.alerts} alerts on the bundled day (${ran.quotes} one-minute quotes of six stocks, stream Stock)`,
        ran.alerts > ran.shown.length ? `; the first ${ran.shown.length}:` : ":"),
        table(["stream", "time", "event"], ran.shown.map((a) => el("tr", { class: "sample-alert" },
          el("td", {}, a.stream), el("td", {}, a.time || `${a.t0}/${a.t1}`),
          el("td", { class: "query" }, JSON.stringify(a.attrs))))));
    } catch (error) {
      out.replaceChildren(failure(error));
    }
  });
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
  const filter = el("input", { id: "alert-filter", type: "search", placeholder: "subscription id, e.g. s1" });
  const pause = el("button", { type: "button", id: "pause", "aria-pressed": "false" }, "Pause");
  const status = el("span", { id: "alert-status", class: "muted", "aria-live": "polite" }, "connecting…");
  const list = el("tbody", { id: "alerts" });
  const show = (record) => {
    const wanted = filter.value.trim();
    const row = el("tr", { "data-subscription": record.subscription, "data-seq": record.seq },
      el("td", {}, record.subscription), el("td", {}, record.seq),
      el("td", {}, record.notice ? "notice" : record.time || `${record.t0}/${record.t1}`),
      el("td", { class: "query" }, record.notice || JSON.stringify(record.attrs)));
    row.hidden = wanted !== "" && record.subscription !== wanted;
    list.prepend(row);
    while (list.children.length > 500) list.lastChild.remove();
  };
  filter.addEventListener("input", () => {
    const wanted = filter.value.trim();
    for (const row of list.children) row.hidden = wanted !== "" && row.dataset.subscription !== wanted;
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
  (async () => {
    while (!controller.signal.aborted) {
      const after = [...seen].map(([sub, seq]) => `after=${encodeURIComponent(`${sub}:${seq}`)}`);
      try {
        const headers = token() ? { "Authorization": "Bearer " + token() } : {};
        const response = await fetch(`/api/alerts?${after.join("&")}`, { headers, signal: controller.signal });
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
      }
      status.textContent = "reconnecting…";
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  })();
  return [el("h2", {}, "Live alerts"),
    el("p", {}, el("label", { for: "alert-filter" }, "Subscription "), filter, " ", pause, " ", status),
    el("table", {}, el("thead", {}, el("tr", {},
      ...["subscription", "seq", "time", "event"].map((h) => el("th", { scope: "col" }, h)))), list)];
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
