// The dashboard: polls /admin/api/stats every second and shows the tiers, the requests, the
// throughput and latencies, with two small charts of what changed over the last minutes; its
// controls call the admin API (POST /admin/api/cache/mode, /admin/api/cache/clear).
"use strict";

const $ = (id) => document.getElementById(id);
const set = (id, text) => { const e = $(id); if (e) e.textContent = text; };
const num = (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US"));
const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(1) + " %");
const HISTORY = 120;  // points kept in the charts (seconds)

let previous = null;  // the last stats and when they came
let modeTouched = false;  // the user picked a mode not yet switched to: polling leaves the menu alone
let hitChart = null, useChart = null;

function makeChart(canvas, datasets, yOptions) {
  if (!window.Chart) return null;
  return new Chart(canvas, {
    type: "line",
    data: { labels: [], datasets },
    options: {
      animation: false, responsive: true, maintainAspectRatio: false, spanGaps: true,
      elements: { point: { radius: 2 }, line: { tension: 0.2, borderWidth: 2 } },
      scales: { x: { display: false }, y: yOptions },
      plugins: { legend: { position: "bottom", labels: { boxWidth: 12 } } },
    },
  });
}

function push(chart, label, values) {
  if (!chart) return;
  chart.data.labels.push(label);
  chart.data.datasets.forEach((d, i) => d.data.push(values[i]));
  if (chart.data.labels.length > HISTORY) {
    chart.data.labels.shift();
    chart.data.datasets.forEach((d) => d.data.shift());
  }
  chart.update("none");
}

function gauge(id, part, whole) {
  const w = whole > 0 ? Math.min(100, (100 * part) / whole) : 0;
  $(id).style.width = w.toFixed(1) + "%";
}

function show(s, now) {
  const ram = s.tiers.ram, ssd = s.tiers.ssd;
  set("model", s.model ? s.model.id : "");
  set("model-id", s.model ? s.model.id : "–");
  set("model-arch", s.model ? s.model.architecture : "–");
  set("model-shape", s.model ? `${s.model.layers} / ${num(s.model.context)}` : "–");
  set("kv-format", s.model ? s.model.kv_format : "–");
  set("block-tokens", s.block_tokens + " tokens");
  set("cache-mode", s.cache_mode);
  if (!modeTouched) $("mode-select").value = s.cache_mode;
  set("running", num(s.requests.running));
  set("waiting", num(s.requests.waiting));
  set("rejected", num(s.requests.rejected));
  set("prompt-tokens", num(s.tokens ? s.tokens.prompt : null));
  set("generated", num(s.tokens ? s.tokens.generated : null));
  const lat = s.latency_seconds || {};
  for (const [key, id] of [["ttft", "ttft"], ["inter_token", "itl"]]) {
    const h = lat[key] || {};
    for (const p of ["p50", "p90", "p99"]) set(`${id}-${p}`, strata.fmtMs(h[p]));
  }

  set("ram-in-use", strata.fmtBytes(ram.bytes_in_use));
  set("ram-cached", strata.fmtBytes(ram.bytes_cached));
  $("ram-cached").dataset.bytes = String(ram.bytes_cached);
  set("ram-budget", `${strata.fmtBytes(ram.budget_bytes)} (hot ${strata.fmtBytes(ram.cached_budget_bytes)})`);
  set("ram-evictions", num(ram.evictions));
  gauge("ram-gauge", ram.bytes_in_use + ram.bytes_cached, ram.budget_bytes);
  gauge("ram-cached-gauge", ram.bytes_cached, ram.cached_budget_bytes);

  const state = ssd ? ssd.state : "off";
  const st = $("ssd-state");
  st.textContent = state;
  st.className = "state-" + state;
  set("ssd-records", ssd ? num(ssd.records) : "–");
  if (ssd) $("ssd-records").dataset.records = String(ssd.records);
  set("ssd-bytes", ssd ? `${strata.fmtBytes(ssd.bytes)} / ${strata.fmtBytes(ssd.max_bytes)}` : "–");
  set("ssd-restored", ssd ? num(ssd.restored_tokens) : "–");
  set("ssd-io", ssd ? `${num(ssd.reads)} / ${num(ssd.writes)}` : "–");
  gauge("ssd-gauge", ssd ? ssd.bytes : 0, ssd ? ssd.max_bytes : 0);

  showSnapshots(s);

  const pc = s.prefix_cache;
  const ssdHits = ssd ? ssd.restored_tokens : 0;
  set("hit-rate", pct(pc.query_tokens ? pc.hit_rate : null));
  set("ram-hits", num(pc.hit_tokens - ssdHits));
  set("ssd-hits", num(ssdHits));
  set("query-tokens", num(pc.query_tokens));

  // Rates over the interval since the last poll.
  const label = new Date(now).toLocaleTimeString();
  if (previous) {
    const dt = (now - previous.at) / 1000;
    const p = previous.stats;
    const gen = (s.tokens ? s.tokens.generated : 0) - (p.tokens ? p.tokens.generated : 0);
    set("tps", dt > 0 ? (gen / dt).toFixed(1) : "–");
    const dq = pc.query_tokens - p.prefix_cache.query_tokens;
    const dssd = ssdHits - (p.tiers.ssd ? p.tiers.ssd.restored_tokens : 0);
    const dhit = pc.hit_tokens - p.prefix_cache.hit_tokens;
    push(hitChart, label, dq > 0 ? [(dhit - dssd) / dq, dssd / dq] : [null, null]);
  }
  push(useChart, label, [ram.bytes_in_use / 1048576, ram.bytes_cached / 1048576, ssd ? ssd.bytes / 1048576 : null]);
  previous = { stats: s, at: now };
}

/** Whatever the stats report about boundary snapshots, field by field. */
function showSnapshots(s) {
  const dl = $("snapshots");
  const rows = [["Bytes", strata.fmtBytes(s.snapshot_bytes)]];
  const snap = s.snapshots || (s.tiers && s.tiers.snapshots);
  if (snap && typeof snap === "object") {
    for (const [k, v] of Object.entries(snap)) {
      if (typeof v === "number" || typeof v === "string") rows.push([k.replace(/_/g, " "), k.endsWith("bytes") ? strata.fmtBytes(v) : num(v)]);
    }
  }
  dl.replaceChildren(...rows.flatMap(([k, v]) => [strata.el("dt", {}, k), strata.el("dd", {}, v)]));
}

function showLoading(l) {
  const b = $("banner");
  if (!l) { b.hidden = true; return; }
  b.hidden = false;
  b.textContent = `Loading: ${l.stage}` + (l.progress !== undefined && l.progress !== null ? ` (${(100 * l.progress).toFixed(0)} %)` : "");
}

async function poll() {
  try {
    const s = await strata.json("/admin/api/stats");
    showLoading(s.loading);
    if (s.tiers) show(s, Date.now());
    set("updated", "updated " + new Date().toLocaleTimeString());
  } catch (e) {
    set("updated", e.status === 401 ? "enter the API key" : e.status === 503 ? "loading…" : "error: " + e.message);
  } finally {
    setTimeout(poll, 1000);
  }
}

async function control(noteId, path, body, done) {
  set(noteId, "…");
  try {
    const r = await strata.json(path, body);
    set(noteId, done(r));
  } catch (e) {
    set(noteId, "refused: " + e.message);
  }
}

$("mode-select").addEventListener("change", () => { modeTouched = true; });
$("mode-apply").addEventListener("click", () =>
  control("mode-note", "/admin/api/cache/mode", { mode: $("mode-select").value }, (r) => {
    modeTouched = false;
    return "cache mode switched to " + r.cache_mode;
  }));
$("clear-hot").addEventListener("click", () =>
  control("clear-note", "/admin/api/cache/clear", { tier: "hot" }, () => "RAM tier cleared"));
$("clear-ssd").addEventListener("click", () => {
  if (!confirm("Delete every KV block stored in the SSD tier? Later requests recompute what they would have restored.")) return;
  control("clear-note", "/admin/api/cache/clear", { tier: "ssd" }, () => "SSD tier cleared");
});
strata.bindKeyField($("api-key"));

hitChart = makeChart($("hit-chart"), [
  { label: "RAM hit rate", data: [], borderColor: "#2f6fde" },
  { label: "SSD hit rate", data: [], borderColor: "#f79009" },
], { min: 0, max: 1, ticks: { callback: (v) => (100 * v).toFixed(0) + "%" } });
useChart = makeChart($("use-chart"), [
  { label: "RAM in use (MiB)", data: [], borderColor: "#2f6fde" },
  { label: "RAM cached (MiB)", data: [], borderColor: "#7a5af8" },
  { label: "SSD (MiB)", data: [], borderColor: "#f79009" },
], { beginAtZero: true });
poll();
