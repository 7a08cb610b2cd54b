// app.js: the chain cockpit. State, persistence and the /chat and /readyz
// traffic; the DOM of a message lives in view.js.
//
// The page talks only to the proxy that served it (relative URLs, so it
// also works behind a path prefix). The conversation (messages and their
// traces) is kept in localStorage and restored on reload.

import { SSEParser } from "./sse.js";
import { MessageView, renderNodes } from "./view.js";
import { TracesView } from "./traces.js";

const STORE_KEY = "chain-cockpit:v1";
const KEY_KEY = "chain-cockpit:api-key";
const READY_EVERY_MS = 15000;
const HISTORY_MAX = 40;
const MODES = ["auto", "simple", "reflexive"];
/** How long the page "runs" its demo tool, so the chain's wait shows. */
const CLIENT_TOOL_MS = 1200;

/**
 * The page's own client tool, for the demo's weather story: offered to the
 * chain, run here, its result sent back so that the chain resumes. A demo:
 * the weather is made up, and says so.
 */
const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather of a city (the cockpit's demo tool)",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

function runWeather(call) {
  let city = "?";
  try {
    city = JSON.parse(call.function?.arguments ?? "{}").city ?? "?";
  } catch {
    // the model's arguments are not JSON: the tool says so, as a tool would
    return "Error: the arguments are not JSON";
  }
  return `sunny, 24°C in ${city} (made up by the cockpit's demo get_weather tool)`;
}

const $ = (sel) => document.querySelector(sel);
const ui = {
  app: $("#app"),
  convo: $("#conversation"),
  empty: $("#empty"),
  form: $("#composer"),
  input: $("#input"),
  mode: $("#mode"),
  send: $("#send"),
  stop: $("#stop"),
  clear: $("#clear"),
  nodes: $("#nodes"),
  store: $("#store"),
  demo: $("#demo"),
  clientTool: $("#client-tool"),
};

/** @type {{session: string, mode: string, seq: number, messages: object[]}} */
const state = load();
/** @type {Map<string, MessageView>} */
const views = new Map();
/** @type {{controller: AbortController, msg: object} | null} */
let running = null;
/** The client tool the next message offers (the weather example), or "". */
let offerTool = "";

function newID() {
  // crypto.randomUUID needs a secure context; getRandomValues does not, and
  // the cockpit is often opened over plain http on a LAN address.
  const b = crypto.getRandomValues(new Uint8Array(16));
  return "ck-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function load() {
  let s = null;
  try {
    s = JSON.parse(localStorage.getItem(STORE_KEY) ?? "null");
  } catch {
    s = null;
  }
  if (!s || !Array.isArray(s.messages)) s = { messages: [] };
  s.session ||= newID();
  s.mode = MODES.includes(s.mode) ? s.mode : "auto";
  s.seq = Number.isInteger(s.seq) ? s.seq : s.messages.length;
  for (const m of s.messages) {
    // A reply that was still streaming when the page went away.
    if (m.role === "assistant" && m.state === "streaming") {
      m.state = "interrupted";
      for (const st of m.stages ?? []) if (st?.status === "running") st.status = "interrupted";
    }
  }
  return s;
}

function save() {
  const data = () => JSON.stringify(state);
  for (;;) {
    try {
      localStorage.setItem(STORE_KEY, data());
      return;
    } catch (err) {
      // Over quota (traces can be large): drop the oldest exchange and retry.
      if (state.messages.length <= 2) {
        console.warn("cockpit: cannot persist the conversation", err);
        return;
      }
      const drop = state.messages.splice(0, 2);
      for (const m of drop) {
        views.get(m.id)?.root.remove();
        views.delete(m.id);
      }
    }
  }
}

function api(path) {
  return new URL(path, document.baseURI).toString();
}

// ---- rendering -------------------------------------------------------------

const hooks = { onRetry: retry, onSaveKey: saveKey };

function viewFor(msg) {
  let v = views.get(msg.id);
  if (!v) {
    v = new MessageView(msg, hooks);
    views.set(msg.id, v);
    ui.convo.append(v.root);
  }
  return v;
}

function renderAll() {
  for (const v of views.values()) v.root.remove();
  views.clear();
  for (const m of state.messages) viewFor(m);
  ui.empty.hidden = state.messages.length > 0 || (ui.app.dataset.view ?? "chat") !== "chat";
}

let frame = 0;
let pending = null;

/** paint updates msg's view on the next frame (many deltas, one paint). */
function paint(msg) {
  pending = msg;
  if (frame) return;
  const flush = () => {
    frame = 0;
    if (pending) paintNow(pending);
  };
  frame = requestAnimationFrame(flush);
}

function paintNow(msg) {
  if (frame) {
    cancelAnimationFrame(frame);
    frame = 0;
  }
  pending = null;
  // A request stopped by Clear finishes after its message is gone.
  if (!state.messages.includes(msg)) return;
  const stick = nearBottom();
  viewFor(msg).update(msg);
  ui.empty.hidden = state.messages.length > 0 || (ui.app.dataset.view ?? "chat") !== "chat";
  if (stick) scrollToBottom();
}

function nearBottom() {
  const el = document.scrollingElement;
  return el.scrollHeight - el.scrollTop - el.clientHeight < 120;
}

function scrollToBottom() {
  document.scrollingElement.scrollTop = document.scrollingElement.scrollHeight;
}

function setBusy(busy) {
  ui.app.dataset.state = busy ? "running" : "idle";
  // Screen readers hear the answer once it is complete, not every delta.
  ui.convo.setAttribute("aria-busy", String(busy));
  ui.stop.disabled = !busy;
  updateSend();
}

function updateSend() {
  ui.send.disabled = !!running || ui.input.value.trim() === "";
}

// ---- sending ---------------------------------------------------------------

function history(before) {
  // Previous turns the server should see: every user message, and the
  // assistant replies that completed (not errors or cut-off answers).
  const out = [];
  for (const m of state.messages) {
    if (m === before) break;
    if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.state === "done" && m.content) out.push({ role: "assistant", content: m.content });
  }
  return out.slice(-HISTORY_MAX);
}

function nextID() {
  state.seq += 1;
  return "m" + state.seq;
}

function send(raw) {
  // Leading and trailing blank lines are never meant.
  const text = raw.replace(/^\s*\n|\s+$/g, "");
  if (running || text.trim() === "") return;
  const user = { id: nextID(), role: "user", content: text };
  if (offerTool) user.clientTool = offerTool;
  setOfferTool("");
  const hist = history(null);
  state.messages.push(user);
  viewFor(user);
  ui.input.value = "";
  autosize();
  start(user, hist);
}

function setOfferTool(name) {
  offerTool = name;
  ui.clientTool.hidden = !name;
  ui.clientTool.querySelector(".ct-name").textContent = name;
}

function start(user, hist) {
  const msg = {
    id: nextID(),
    role: "assistant",
    state: "streaming",
    content: "",
    mode: "",
    reasons: [],
    turns: 0,
    stages: [],
    deltas: 0,
    requestMode: MODES.includes(ui.mode.value) ? ui.mode.value : "auto",
    replyTo: user.id,
  };
  state.messages.push(msg);
  save();
  paintNow(msg);
  scrollToBottom();
  if (user.clientTool) runClientTool(msg, user.content, hist);
  else run(msg, user.content, hist);
}

function retry(msg) {
  if (running) return;
  const i = state.messages.indexOf(msg);
  const user = state.messages.find((m) => m.id === msg.replyTo) ?? state.messages[i - 1];
  if (i < 0 || !user || user.role !== "user") return;
  if (i !== state.messages.length - 1) {
    // An older failure: ask again at the end of the conversation.
    send(user.content);
    return;
  }
  state.messages.splice(i, 1);
  views.get(msg.id)?.root.remove();
  views.delete(msg.id);
  start(user, history(user));
}

function saveKey(key, msg) {
  setKey(key);
  retry(msg);
}

/**
 * setKey keeps the API key the user gave (or forgets it), and asks /readyz
 * again with it: refused without one, the header would show no node until
 * its next check.
 */
function setKey(key) {
  if (key) localStorage.setItem(KEY_KEY, key);
  else localStorage.removeItem(KEY_KEY);
  refreshReady();
}

async function run(msg, text, hist) {
  const controller = new AbortController();
  running = { controller, msg };
  setBusy(true);
  const started = performance.now();
  const headers = {
    "Content-Type": "application/json",
    Accept: "text/event-stream",
    "X-Chain-Session": state.session,
  };
  const key = localStorage.getItem(KEY_KEY);
  if (key) headers.Authorization = `Bearer ${key}`;
  const body = { message: text, history: hist, stream: true };
  if (msg.requestMode && msg.requestMode !== "auto") body.mode = msg.requestMode;
  let failed = false;
  try {
    const res = await fetch(api("chat"), {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!res.ok) {
      failed = true;
      await applyHTTPError(msg, res);
    } else if ((res.headers.get("Content-Type") ?? "").includes("text/event-stream") && res.body) {
      await readStream(msg, res.body);
    } else {
      applyDone(msg, await res.json());
    }
    if (msg.state === "streaming") {
      // The stream closed without "done".
      msg.state = "error";
      msg.error ??= { message: "The stream ended before the answer was complete." };
    }
  } catch (err) {
    if (err?.name === "AbortError") {
      msg.state = "stopped";
    } else if (err instanceof TypeError) {
      // fetch and the body reader fail with a TypeError when the connection
      // does ("Failed to fetch", "network error", "Load failed").
      failed = true;
      msg.state = "error";
      msg.error = {
        message: `Network error: could not reach the proxy (${err.message}).`,
        code: "network_error",
      };
    } else {
      failed = true;
      msg.state = "error";
      msg.error = { message: `The proxy's answer could not be read: ${err?.message ?? err}`, code: "bad_response" };
    }
  } finally {
    // Stages still running when the stream ended: stopped by the user, or
    // cut short by a failure.
    const cut = msg.state === "stopped" ? "cancelled" : "interrupted";
    for (const st of msg.stages) if (st?.status === "running") st.status = cut;
    msg.durationMs = Math.round(performance.now() - started);
    running = null;
    save();
    paintNow(msg);
    setBusy(false);
    if (failed || msg.error) refreshReady();
    if (document.activeElement === document.body || document.activeElement === ui.stop) ui.input.focus();
  }
}

/**
 * runClientTool asks the chain with the page's own tool offered, through
 * the OpenAI API (POST /chat takes no tools): when the chain calls it, the
 * answer ends with the call (OL1 waiting for the client), the page runs
 * the tool and sends the result back, and the chain resumes where it
 * waited. The traces view shows both requests.
 */
async function runClientTool(msg, text, hist) {
  const controller = new AbortController();
  running = { controller, msg };
  setBusy(true);
  const started = performance.now();
  const headers = { "Content-Type": "application/json", "X-Chain-Session": state.session };
  const key = localStorage.getItem(KEY_KEY);
  if (key) headers.Authorization = `Bearer ${key}`;
  const messages = [...hist, { role: "user", content: text }];
  let failed = false;
  try {
    // A chain may call the tool again in a later turn: a few round trips.
    for (let round = 0; round < 4 && msg.state === "streaming"; round++) {
      const res = await fetch(api("v1/chat/completions"), {
        method: "POST",
        headers,
        body: JSON.stringify({ model: "chain/reflexive", messages, tools: [WEATHER_TOOL] }),
        signal: controller.signal,
      });
      if (!res.ok) {
        failed = true;
        await applyHTTPError(msg, res);
        break;
      }
      const r = await res.json();
      msg.traceId = res.headers.get("X-Chain-Trace-Id") ?? msg.traceId;
      if (r.chain) applyChain(msg, r.chain);
      msg.usage = r.usage ?? msg.usage;
      const choice = r.choices?.[0] ?? {};
      const m = choice.message ?? {};
      const calls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
      if (choice.finish_reason !== "tool_calls" || calls.length === 0) {
        msg.content = typeof m.content === "string" ? m.content : "";
        msg.state = "done";
        break;
      }
      messages.push({ role: "assistant", content: m.content ?? "", tool_calls: calls });
      msg.liveNote = `The chain waits for this page to run ${calls.map((c) => c.function?.name).join(", ")}…`;
      paintNow(msg);
      await new Promise((resolve) => setTimeout(resolve, CLIENT_TOOL_MS));
      controller.signal.throwIfAborted();
      for (const c of calls) {
        const out = c.function?.name === WEATHER_TOOL.function.name ? runWeather(c) : `Error: this page has no tool ${c.function?.name}`;
        messages.push({ role: "tool", tool_call_id: c.id, content: out });
      }
      msg.liveNote = "Sent the tool's result: the chain resumes…";
      paintNow(msg);
    }
    if (msg.state === "streaming") {
      msg.state = "error";
      msg.error ??= { message: "The chain kept calling the page's tool: stopped after four round trips." };
    }
  } catch (err) {
    if (err?.name === "AbortError") msg.state = "stopped";
    else {
      failed = true;
      msg.state = "error";
      msg.error = { message: `Network error: could not reach the proxy (${err?.message ?? err}).`, code: "network_error" };
    }
  } finally {
    delete msg.liveNote;
    msg.durationMs = Math.round(performance.now() - started);
    running = null;
    save();
    paintNow(msg);
    setBusy(false);
    if (failed) refreshReady();
  }
}

async function applyHTTPError(msg, res) {
  const raw = await res.text().catch(() => "");
  let e = null;
  try {
    e = JSON.parse(raw)?.error ?? null;
  } catch {
    e = null;
  }
  if (typeof e === "string") e = { message: e };
  msg.state = "error";
  msg.error = {
    status: res.status,
    message: typeof e?.message === "string" && e.message ? e.message : raw.trim().slice(0, 300) || res.statusText || "request failed",
    code: e?.code ?? null,
    type: e?.type ?? null,
    retryAfter: res.headers.get("Retry-After") ?? undefined,
  };
  // A 502 after every stage failed carries the chain inside the error.
  if (e?.chain) applyChain(msg, e.chain);
}

function applyChain(msg, chain) {
  msg.mode = chain.mode ?? msg.mode;
  msg.reasons = Array.isArray(chain.reasons) ? chain.reasons : msg.reasons;
  msg.turns = chain.turns ?? msg.turns;
  if (Array.isArray(chain.stages)) msg.stages = mergeStages(msg.stages, chain.stages);
}

function mergeStages(old, fresh) {
  // The final trace is the truth; what only the live events knew (max
  // turns, the turn a tool ran in) is kept when the stage is the same.
  return fresh.map((s, i) => {
    const prev = old[i]?.node === s.node ? old[i] : {};
    const tools = (Array.isArray(s.tools_used) ? s.tools_used : []).map((t, k) => ({ ...(prev.tools_used?.[k] ?? {}), ...t }));
    return { ...prev, ...s, tools_used: tools };
  });
}

function applyDone(msg, r) {
  if (!r || typeof r !== "object") throw new Error("not a /chat response");
  msg.traceId = r.trace_id ?? msg.traceId;
  msg.mode = r.mode ?? msg.mode;
  msg.reasons = Array.isArray(r.reasons) ? r.reasons : msg.reasons;
  msg.turns = r.turns ?? msg.turns;
  msg.usage = r.usage ?? msg.usage;
  if (Array.isArray(r.chain)) msg.stages = mergeStages(msg.stages, r.chain);
  msg.content = typeof r.reply === "string" ? r.reply : msg.content;
  msg.state = "done";
}

async function readStream(msg, body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SSEParser((ev) => onEvent(msg, ev));
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(decoder.decode(value, { stream: true }));
    }
    parser.push(decoder.decode());
    parser.end();
  } finally {
    reader.releaseLock();
  }
}

function onEvent(msg, ev) {
  let d;
  try {
    d = JSON.parse(ev.data);
  } catch {
    return; // not ours
  }
  if (!d || typeof d !== "object") return;
  const stage = (i) => (msg.stages[i] ??= { node: d.node ?? "?", turns: 0, status: "running", tools_used: [] });
  const staged = ["stage_start", "turn", "tool", "stage_end"].includes(ev.event);
  if (staged && !(Number.isInteger(d?.index) && d.index >= 0 && d.index < 64)) return;
  switch (ev.event) {
    case "classified":
      msg.traceId = d.trace_id ?? msg.traceId;
      msg.mode = d.mode ?? msg.mode;
      msg.reasons = Array.isArray(d.reasons) ? d.reasons : [];
      break;
    case "stage_start":
      msg.stages[d.index] = {
        node: d.node,
        model: d.model,
        max_turns: d.max_turns,
        tools: d.tools,
        turns: 0,
        status: "running",
        tools_used: [],
      };
      break;
    case "turn": {
      const s = stage(d.index);
      s.turns = Math.max(s.turns ?? 0, d.turn ?? 0);
      msg.turns = msg.stages.reduce((n, x) => n + (x?.turns ?? 0), 0);
      break;
    }
    case "tool": {
      const s = stage(d.index);
      (s.tools_used ??= []).push({ ...d.tool, turn: d.turn });
      break;
    }
    case "stage_end": {
      const prev = msg.stages[d.index] ?? {};
      msg.stages[d.index] = mergeStages([prev], [d.stage])[0];
      msg.turns = msg.stages.reduce((n, x) => n + (x?.turns ?? 0), 0);
      save();
      break;
    }
    case "delta":
      if (typeof d.content === "string") {
        msg.content += d.content;
        msg.deltas = (msg.deltas ?? 0) + 1;
      }
      break;
    case "error":
      msg.error = { message: d.error?.message ?? "the chain failed", code: d.error?.code ?? null, type: d.error?.type ?? null };
      break;
    case "done":
      applyDone(msg, d);
      break;
    default:
      return;
  }
  paint(msg);
}

function stop() {
  running?.controller.abort();
}

// ---- header: node reachability ---------------------------------------------

let readyTimer = 0;
let readyBusy = false;

async function refreshReady() {
  clearTimeout(readyTimer);
  if (!readyBusy) {
    readyBusy = true;
    try {
      // /readyz needs the key when the server has keys (and no public_metrics).
      const headers = { Accept: "application/json" };
      const key = localStorage.getItem(KEY_KEY);
      if (key) headers.Authorization = `Bearer ${key}`;
      const res = await fetch(api("readyz"), { cache: "no-store", headers });
      const j = await res.json();
      renderNodes(ui.nodes, ui.store, j, null);
      // Scripted models only: the -demo, whose scenarios the page lists.
      const nodes = Array.isArray(j?.nodes) ? j.nodes : [];
      ui.demo.hidden = !(nodes.length && nodes.every((n) => n.provider === "mock"));
    } catch (err) {
      renderNodes(ui.nodes, ui.store, null, err?.message ?? err);
    } finally {
      readyBusy = false;
    }
  }
  readyTimer = setTimeout(refreshReady, READY_EVERY_MS);
}

// ---- composer ----------------------------------------------------------------

function autosize() {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight + 2, 240)}px`;
  updateSend();
}

let clearArmed = 0;

function clearConversation() {
  // Two steps, so a stray click does not wipe the conversation.
  if (!clearArmed) {
    ui.clear.textContent = "Confirm clear";
    ui.clear.dataset.armed = "true";
    clearArmed = setTimeout(disarmClear, 4000);
    return;
  }
  disarmClear();
  stop();
  state.messages = [];
  state.session = newID();
  state.seq = 0;
  save();
  renderAll();
  ui.input.focus();
}

function disarmClear() {
  clearTimeout(clearArmed);
  clearArmed = 0;
  ui.clear.textContent = "Clear";
  delete ui.clear.dataset.armed;
}

ui.form.addEventListener("submit", (e) => {
  e.preventDefault();
  send(ui.input.value);
});
ui.input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !e.altKey && !e.ctrlKey && !e.metaKey) {
    e.preventDefault();
    send(ui.input.value);
  }
});
ui.input.addEventListener("input", autosize);
ui.stop.addEventListener("click", stop);
ui.clear.addEventListener("click", clearConversation);
ui.clear.addEventListener("blur", disarmClear);
ui.mode.value = state.mode;
ui.mode.addEventListener("change", () => {
  state.mode = MODES.includes(ui.mode.value) ? ui.mode.value : "auto";
  save();
});
for (const b of document.querySelectorAll("[data-example]")) {
  b.addEventListener("click", () => {
    ui.input.value = b.dataset.example;
    setOfferTool(b.dataset.clientTool ?? "");
    autosize();
    ui.input.focus();
  });
}
ui.clientTool.querySelector("button").addEventListener("click", () => setOfferTool(""));
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && running) stop();
});
window.addEventListener("storage", (e) => {
  // Another tab changed the conversation: follow it when idle.
  if (e.key === STORE_KEY && !running) {
    Object.assign(state, load());
    ui.mode.value = state.mode;
    renderAll();
  }
});

// ---- views: the chat, and the traces (#/traces, #/traces/{id}) ---------------

const traces = new TracesView({
  api,
  key: () => localStorage.getItem(KEY_KEY),
  onKey: setKey,
});

function route() {
  const h = location.hash;
  const one = /^#\/traces\/([A-Za-z0-9_-]{1,128})$/.exec(h);
  const view = one ? "trace" : h === "#/traces" ? "traces" : "chat";
  ui.app.dataset.view = view;
  ui.form.hidden = view !== "chat";
  ui.convo.hidden = view !== "chat";
  if (view === "chat") ui.empty.hidden = state.messages.length > 0;
  else ui.empty.hidden = true;
  for (const a of document.querySelectorAll("nav.views a")) {
    const current = a.dataset.view === (view === "trace" ? "traces" : view);
    if (current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  traces.show(view === "chat" ? null : view === "trace" ? "trace" : "list", one?.[1]);
  if (view !== "chat") document.scrollingElement.scrollTop = 0;
}
window.addEventListener("hashchange", route);

renderAll();
route();
setBusy(false);
refreshReady();
requestAnimationFrame(scrollToBottom);
ui.app.dataset.ready = "true";
