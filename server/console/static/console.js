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
  return [el("h2", {}, `Subscriptions (${rows.length})`), el("label", { for: "search" }, "Search "), search,
    table(["id", "owner", "stream", "placement", "plan", "last seq", "query"], tbody)];
}

async function subscriptionView(id) {
  const s = await api(`/api/subscriptions/${encodeURIComponent(id)}`);
  const parts = [el("h2", {}, `Subscription ${s.id}`),
    table(["owner", "stream", "output", "placement", "last seq"], [el("tr", {},
      el("td", {}, s.owner), el("td", {}, s.stream), el("td", {}, s.output),
      el("td", {}, s.placement), el("td", {}, s.last_seq))]),
    el("h3", {}, "Plan"), el("p", {}, s.plan || "one automaton (not a planned pattern)"),
    el("h3", {}, "Query"), el("pre", {}, s.query || "(an algebra subscription)")];
  if (s.compiled) parts.push(...compiledView(s.compiled));
  return parts;
}

async function shardsView() {
  const stats = await api("/api/shards");
  const front = Object.entries(stats.front).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)));
  const parts = [el("h2", {}, "Front"), table(["counter", "value"], front)];
  for (const shard of stats.shards) {
    const counters = Object.entries(shard.counters || {}).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)));
    parts.push(el("h2", {}, `Shard ${shard.shard || 0}`), table(["counter", "value"], counters));
  }
  return parts;
}

function tryView() {
  const text = el("textarea", { id: "query", "aria-label": "query", spellcheck: "false" });
  const button = el("button", { type: "submit" }, "Explain");
  const out = el("div", { id: "explained" });
  const form = el("form", {}, el("label", { for: "query" }, "CEL query or pattern"), text, button);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    out.replaceChildren();
    try {
      out.append(...compiledView(await api("/api/explain", { query: text.value })));
    } catch (error) {
      out.append(failure(error));
    }
  });
  return [el("h2", {}, "Try a query"), form, out];
}

async function route() {
  const [, page, id] = (location.hash || "#/subscriptions").split("/");
  for (const link of document.querySelectorAll("nav a")) {
    link.toggleAttribute("aria-current", link.getAttribute("href") === `#/${page}`);
    if (link.hasAttribute("aria-current")) link.setAttribute("aria-current", "page");
  }
  let parts;
  try {
    if (page === "subscription") parts = await subscriptionView(decodeURIComponent(id));
    else if (page === "shards") parts = await shardsView();
    else if (page === "try") parts = tryView();
    else parts = await subscriptionsView();
  } catch (error) {
    parts = [failure(error)];
  }
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
