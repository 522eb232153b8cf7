// The chat page: conversations kept in this browser's storage, answers streamed from
// /v1/chat/completions (SSE) and rendered as Markdown with highlighted code, and under each answer
// the figures this server is about: time to first token, tokens per second, prompt tokens and how
// many of them came from the cache, per tier (usage.strata_cached_tokens).
"use strict";

const store = {
  key: "strata.conversations",
  load() {
    try { return JSON.parse(localStorage.getItem(store.key)) || []; } catch (e) { return []; }
  },
  save(convs) { localStorage.setItem(store.key, JSON.stringify(convs)); },
};

const ui = {
  messages: document.getElementById("messages"),
  input: document.getElementById("input"),
  send: document.getElementById("send"),
  stop: document.getElementById("stop"),
  convs: document.getElementById("convs"),
  system: document.getElementById("system"),
};

let convs = store.load();
let current = null;     // the conversation shown
let running = null;     // {controller} while an answer streams

function newConversation() {
  if (current && !current.messages.length && !running) return;  // the empty one shown is new already
  const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6), title: "New conversation",
              system: ui.system.value, messages: [] };
  convs.unshift(c);
  store.save(convs);
  select(c.id);
}

function select(id) {
  current = convs.find((c) => c.id === id) || null;
  if (current) ui.system.value = current.system || "";
  renderList();
  renderMessages();
}

function renderList() {
  ui.convs.replaceChildren(...convs.map((c) => strata.el("li",
    { class: c === current ? "current" : "", onclick: () => select(c.id) },
    strata.el("span", { title: c.title }, c.title),
    strata.el("button", { title: "Delete", onclick: (ev) => { ev.stopPropagation(); remove(c.id); } }, "×"))));
}

function remove(id) {
  convs = convs.filter((c) => c.id !== id);
  store.save(convs);
  if (current && current.id === id) {
    current = null;
    if (convs.length) select(convs[0].id); else newConversation();
  } else {
    renderList();
  }
}

// Markdown: raw HTML in a model's answer is shown as text, never run or rendered.
const escapeHtml = (s) => s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
if (window.marked) {
  marked.use({ renderer: { html: (html) => escapeHtml(typeof html === "string" ? html : html.text || "") } });
}

function renderMarkdown(target, text) {
  if (!window.marked) { target.textContent = text; return; }
  target.innerHTML = marked.parse(text, { breaks: true });
  if (window.hljs) target.querySelectorAll("pre code").forEach((b) => hljs.highlightElement ? hljs.highlightElement(b) : hljs.highlightBlock(b));
}

/** Splits <think>…</think> reasoning (also while still open) from the answer's text. */
function splitReasoning(text) {
  const open = text.indexOf("<think>");
  if (open < 0) return { reasoning: "", answer: text };
  const close = text.indexOf("</think>", open);
  if (close < 0) return { reasoning: text.slice(open + 7), answer: text.slice(0, open) };
  return { reasoning: text.slice(open + 7, close), answer: text.slice(0, open) + text.slice(close + 8) };
}

function statsLine(m) {
  const s = m.stats;
  if (!s) return null;
  const parts = [];
  if (s.ttft !== undefined) parts.push(strata.el("span", { class: "ttft" }, "TTFT " + strata.fmtMs(s.ttft)));
  if (s.tps !== undefined) parts.push(strata.el("span", { class: "tps" }, s.tps.toFixed(1) + " tok/s"));
  if (s.prompt !== undefined) parts.push(strata.el("span", { class: "prompt" }, s.prompt + " prompt tokens"));
  if (s.cached !== undefined) {
    const host = s.tiers && s.tiers.host ? `, host ${s.tiers.host}` : "";
    const tiers = s.tiers ? ` (RAM ${s.tiers.ram}${host}, SSD ${s.tiers.ssd})` : "";
    parts.push(strata.el("span", { class: "cached", "data-cached": String(s.cached) }, `${s.cached} cached${tiers}`));
  }
  if (s.completion !== undefined) parts.push(strata.el("span", { class: "completion" }, s.completion + " generated"));
  if (s.finish) parts.push(strata.el("span", { class: "finish" }, s.finish));
  return strata.el("div", { class: "stats" }, ...parts);
}

function messageView(m, i) {
  const isLast = i === current.messages.length - 1;
  const tools = strata.el("span", { class: "tools" });
  if (m.role === "user") tools.append(strata.el("button", { class: "edit-btn", onclick: () => editMessage(i) }, "Edit"));
  if (m.role === "assistant" && isLast && !running) tools.append(strata.el("button", { class: "regen-btn", onclick: regenerate }, "Regenerate"));
  const content = strata.el("div", { class: "content" });
  const view = strata.el("div", { class: "msg " + m.role }, strata.el("div", { class: "who" }, m.role, tools));
  const { reasoning, answer } = splitReasoning(m.content || "");
  const thought = (m.reasoning || "") + reasoning;
  if (thought) {
    view.append(strata.el("details", { class: "reasoning" }, strata.el("summary", {}, "Reasoning"), strata.el("div", {}, thought)));
  }
  if (m.role === "assistant") renderMarkdown(content, answer); else content.textContent = answer;
  view.append(content);
  for (const t of m.tool_calls || []) {
    view.append(strata.el("div", { class: "toolcall" },
      strata.el("div", {}, "Tool call ", strata.el("span", { class: "name" }, t.function.name)),
      strata.el("pre", {}, t.function.arguments)));
  }
  if (m.error) view.append(strata.el("div", { class: "error" }, m.error));
  const st = statsLine(m);
  if (st) view.append(st);
  return view;
}

function renderMessages() {
  if (!current) return;
  ui.messages.replaceChildren(...current.messages.map(messageView));
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

function editMessage(i) {
  if (running) return;
  const view = ui.messages.children[i];
  const box = strata.el("textarea", { class: "edit" });
  box.value = current.messages[i].content;
  const resend = strata.el("button", { class: "primary resend-btn", onclick: () => {
    current.messages.splice(i);  // the edited message and everything after it go
    current.messages.push({ role: "user", content: box.value });
    store.save(convs);
    renderMessages();
    answer();
  } }, "Send");
  view.querySelector(".content").replaceChildren(box, strata.el("div", {}, resend,
    strata.el("button", { onclick: renderMessages }, "Cancel")));
  box.focus();
}

function regenerate() {
  if (running || !current.messages.length) return;
  if (current.messages[current.messages.length - 1].role === "assistant") current.messages.pop();
  renderMessages();
  answer();
}

function settings() {
  const num = (id) => { const v = document.getElementById(id).value; return v === "" ? undefined : Number(v); };
  const out = { temperature: num("temperature"), top_p: num("top_p"), max_tokens: num("max_tokens"), seed: num("seed") };
  const extra = document.getElementById("extra").value.trim();
  if (extra) Object.assign(out, JSON.parse(extra));  // a typo shows as the answer's error
  return out;
}

function send() {
  const text = ui.input.value.trim();
  if (!text || running) return;
  if (!current) newConversation();
  if (!current.messages.length) current.title = text.slice(0, 40);
  current.system = ui.system.value;
  current.messages.push({ role: "user", content: text });
  ui.input.value = "";
  store.save(convs);
  renderList();
  renderMessages();
  answer();
}

/** Streams the next assistant message of the current conversation. */
async function answer() {
  const conv = current;
  const history = conv.messages.map((m) => {
    const o = { role: m.role, content: m.content || "" };
    if (m.tool_calls && m.tool_calls.length) o.tool_calls = m.tool_calls;
    return o;
  });
  if (conv.system && conv.system.trim()) history.unshift({ role: "system", content: conv.system });
  const msg = { role: "assistant", content: "", reasoning: "", tool_calls: [], stats: {} };
  conv.messages.push(msg);
  const controller = new AbortController();
  running = { controller };
  ui.send.disabled = true;
  ui.stop.disabled = false;
  renderMessages();
  const started = performance.now();
  let first = null, tokens = 0, lastPaint = 0;
  const paint = (force) => {
    const now = performance.now();
    if (!force && now - lastPaint < 50) return;
    lastPaint = now;
    if (current === conv) renderMessages();
  };
  try {
    const body = Object.assign({ messages: history, stream: true, stream_options: { include_usage: true } }, settings());
    const res = await fetch("/v1/chat/completions", { method: "POST", headers: strata.headers(), body: JSON.stringify(body),
                                                       signal: controller.signal });
    if (!res.ok) {
      let m = res.status + " " + res.statusText;
      try { m = (await res.json()).error.message; } catch (e) { /* not JSON */ }
      throw new Error(m);
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data === "[DONE]") continue;
          const chunk = JSON.parse(data);
          if (chunk.error) throw new Error(chunk.error.message);
          const choice = chunk.choices && chunk.choices[0];
          if (choice) {
            const d = choice.delta || {};
            if (d.content || d.reasoning_content || d.tool_calls) {
              if (first === null) first = performance.now();
              tokens++;
            }
            if (d.content) msg.content += d.content;
            if (d.reasoning_content) msg.reasoning += d.reasoning_content;
            for (const t of d.tool_calls || []) {
              const slot = msg.tool_calls[t.index] || (msg.tool_calls[t.index] = { id: t.id, type: "function", function: { name: "", arguments: "" } });
              if (t.function && t.function.name) slot.function.name += t.function.name;
              if (t.function && t.function.arguments) slot.function.arguments += t.function.arguments;
            }
            if (choice.finish_reason) msg.stats.finish = choice.finish_reason;
          }
          if (chunk.usage) usageInto(msg.stats, chunk.usage);
        }
      }
      if (first !== null) msg.stats.ttft = (first - started) / 1000;
      paint(false);
    }
  } catch (e) {
    if (e.name === "AbortError") msg.stats.finish = "stopped";
    else msg.error = String(e.message || e);
  } finally {
    const end = performance.now();
    if (first !== null) {
      msg.stats.ttft = (first - started) / 1000;
      const generated = msg.stats.completion || tokens;
      if (end > first && generated > 1) msg.stats.tps = (generated - 1) / ((end - first) / 1000);
    }
    running = null;
    ui.send.disabled = false;
    ui.stop.disabled = true;
    store.save(convs);
    paint(true);
  }
}

function usageInto(stats, u) {
  stats.prompt = u.prompt_tokens;
  stats.completion = u.completion_tokens;
  stats.cached = u.prompt_tokens_details ? u.prompt_tokens_details.cached_tokens : 0;
  if (u.strata_cached_tokens) stats.tiers = u.strata_cached_tokens;
}

ui.send.addEventListener("click", send);
ui.stop.addEventListener("click", () => { if (running) running.controller.abort(); });
ui.input.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); send(); }
});
// The settings stay in this browser across reloads.
for (const id of ["temperature", "top_p", "max_tokens", "seed", "extra"]) {
  const input = document.getElementById(id);
  const saved = localStorage.getItem("strata.setting." + id);
  if (saved !== null) input.value = saved;
  input.addEventListener("change", () => localStorage.setItem("strata.setting." + id, input.value));
}
ui.system.addEventListener("change", () => { if (current) { current.system = ui.system.value; store.save(convs); } });
document.getElementById("new-chat").addEventListener("click", newConversation);
strata.bindKeyField(document.getElementById("api-key"), showModel);

async function showModel() {
  try {
    const m = await strata.json("/v1/models");
    document.getElementById("model").textContent = m.data.length ? m.data[0].id : "no model";
  } catch (e) {
    document.getElementById("model").textContent = e.status === 401 ? "enter the API key" : e.message;
  }
}

if (convs.length) select(convs[0].id); else newConversation();
showModel();
