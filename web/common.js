// Shared by the chat page and the dashboard: the API key (kept in this browser's storage and sent
// as a Bearer token) and JSON calls to this server. Nothing here talks to any other host.
"use strict";

const strata = {
  keyName: "strata.apiKey",

  key() { return localStorage.getItem(strata.keyName) || ""; },

  headers(extra) {
    const h = Object.assign({ "Content-Type": "application/json" }, extra || {});
    const k = strata.key();
    if (k) h["Authorization"] = "Bearer " + k;
    return h;
  },

  /** GET or POST JSON; resolves to the parsed body, rejects with the server's error message. */
  async json(path, body) {
    const res = await fetch(path, body === undefined
      ? { headers: strata.headers() }
      : { method: "POST", headers: strata.headers(), body: JSON.stringify(body) });
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
    if (!res.ok) {
      const msg = data && data.error && data.error.message ? data.error.message : res.status + " " + res.statusText;
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    return data;
  },

  /** Wires the header's API-key field to the browser's storage. */
  bindKeyField(input, onChange) {
    input.value = strata.key();
    input.addEventListener("change", () => {
      localStorage.setItem(strata.keyName, input.value.trim());
      if (onChange) onChange();
    });
  },

  fmtBytes(n) {
    if (n === null || n === undefined) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + u[i];
  },

  fmtMs(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    return seconds < 1 ? (seconds * 1000).toFixed(0) + " ms" : seconds.toFixed(2) + " s";
  },

  el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null) e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  },
};
