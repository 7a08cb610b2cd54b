// traces.js: the traces view. Every chain that goes through the proxy, from
// any client (an SDK, Open WebUI, an agent, this page), listed newest first
// and kept live by one event stream of trace summaries (GET
// /v1/chain/traces with Accept: text/event-stream; no polling), and one
// trace opened by its address (#/traces/{id}) with its stages unfolded, its
// timeline and the prompt of each model call.
//
// The server scopes what a key sees: its own chains, or every chain for an
// admin key. The page sends the key the chat uses (localStorage).

import { SSEParser } from "./sse.js";
import { MessageView, STAGE_STATUS, statusChip, formatDuration } from "./view.js";

/** Chains kept in the page, as the server keeps them. */
const LIST_MAX = 500;
/** Wait before reconnecting a stream that ended. */
const RETRY_MS = 2000;
/**
 * A stream silent this long is dead: the proxy writes at least every 5 s
 * (keepalive comments), but a connection that dies without a FIN or RST
 * (a laptop that slept, a NAT or VPN that dropped it) never ends by itself.
 */
const SILENT_MS = 15000;

const numberFmt = new Intl.NumberFormat("en");
const clock = { hour: "2-digit", minute: "2-digit", second: "2-digit" };
const timeFmt = new Intl.DateTimeFormat(undefined, clock);
const dayFmt = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", ...clock });
const yearFmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric", ...clock });

/**
 * startedAt says when a chain started, in the user's locale: the time of
 * day for today's, with the day before it for older ones (the server keeps
 * its last 500 chains however old, and a tab stays open for days).
 */
function startedAt(ms) {
  const d = new Date(ms);
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return timeFmt.format(d);
  return (d.getFullYear() === now.getFullYear() ? dayFmt : yearFmt).format(d);
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Status filters: the chain's own status or one of its stages'. */
const FILTERS = {
  stopped: (s) => s.startsWith("stopped_"),
  degenerate: (s) => s === "degenerate",
  failed: (s) => s === "failed",
  awaiting_client: (s) => s === "awaiting_client",
  running: (s) => s === "running",
};

/**
 * TracesView owns the list (#traces) and the detail (#trace-detail)
 * sections, and the event stream that feeds them while either is shown.
 */
export class TracesView {
  /**
   * @param {{api: (path: string) => string, key: () => string | null, onKey: (key: string) => void}} env
   */
  constructor(env) {
    this.env = env;
    const $ = (s) => document.querySelector(s);
    this.list = $("#traces");
    this.rows = $("#trace-list");
    this.empty = $("#traces-empty");
    this.liveChip = $("#traces-live");
    this.fStatus = $("#f-status");
    this.fNode = $("#f-node");
    this.fText = $("#f-text");
    this.detail = $("#trace-detail");
    this.detailBody = $("#trace-body");
    this.problem = $("#traces-problem");
    /** @type {Map<string, object>} summaries by id */
    this.items = new Map();
    /** @type {Map<string, HTMLElement>} */
    this.rowEls = new Map();
    this.nodes = new Set();
    this.stream = null;
    this.retry = 0;
    this.openId = null;
    this.openSeq = 0;
    /** The open trace's status, as last shown. */
    this.openStatus = "";
    /** Ids the server listed since this connection started, until "ready". */
    this.snapshot = null;
    this.ticker = 0;
    /** The day the rows' times were written on (see tick). */
    this.day = new Date().toDateString();
    for (const f of [this.fStatus, this.fNode]) f.addEventListener("change", () => this.filter());
    this.fText.addEventListener("input", () => this.filter());
    $("#trace-filters").addEventListener("submit", (e) => e.preventDefault());
  }

  /** show brings up the list ("list"), one trace ("trace", id), or nothing. */
  show(what, id) {
    this.list.hidden = what !== "list";
    this.detail.hidden = what !== "trace";
    if (what === "list" || what === "trace") this.connect();
    else this.disconnect();
    if (what === "trace") this.open(id);
    else this.openId = null;
    clearInterval(this.ticker);
    this.ticker = what ? setInterval(() => this.tick(), 1000) : 0;
  }

  // ---- the stream ------------------------------------------------------------

  connect() {
    if (this.stream) return;
    const controller = new AbortController();
    this.stream = controller;
    this.setLive("connecting", "connecting…");
    this.read(controller)
      .catch((err) => {
        if (err?.name !== "AbortError") this.setLive("off", "offline: retrying");
      })
      .finally(() => {
        if (this.stream !== controller) return;
        this.stream = null;
        // Reconnect while the view is shown: the server restarted, or a
        // proxy in between cut the stream.
        if (!this.list.hidden || !this.detail.hidden) {
          clearTimeout(this.retry);
          this.retry = setTimeout(() => this.connect(), RETRY_MS);
        }
      });
  }

  disconnect() {
    clearTimeout(this.retry);
    this.stream?.abort();
    this.stream = null;
  }

  async read(controller) {
    const headers = { Accept: "text/event-stream" };
    const key = this.env.key();
    if (key) headers.Authorization = `Bearer ${key}`;
    const res = await fetch(this.env.api("v1/chain/traces"), { headers, signal: controller.signal, cache: "no-store" });
    if (!res.ok) {
      const body = await res.json().catch(() => null);
      this.showProblem(res.status, body?.error?.message ?? res.statusText);
      this.setLive("off", `HTTP ${res.status}`);
      // A refused key does not get better by retrying: wait for a new one.
      if (res.status === 401 || res.status === 403) this.stream = null;
      return;
    }
    this.showProblem(0, "");
    this.snapshot = new Set();
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SSEParser((ev) => this.onEvent(ev));
    let silent = 0;
    const listen = () => {
      clearTimeout(silent);
      silent = setTimeout(() => controller.abort(new Error("the stream went silent")), SILENT_MS);
    };
    try {
      listen();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        listen();
        parser.push(decoder.decode(value, { stream: true }));
      }
    } finally {
      clearTimeout(silent);
      reader.releaseLock();
    }
    this.setLive("off", "reconnecting…");
  }

  onEvent(ev) {
    if (ev.event === "ready") {
      this.dropUnlisted();
      this.setLive("live", "live");
      this.renderEmpty();
      return;
    }
    if (ev.event !== "trace") return;
    let s;
    try {
      s = JSON.parse(ev.data);
    } catch {
      return;
    }
    if (!s || typeof s.trace_id !== "string") return;
    this.snapshot?.add(s.trace_id);
    s.receivedAt = Date.now();
    this.items.delete(s.trace_id);
    this.items.set(s.trace_id, s); // newest last
    while (this.items.size > LIST_MAX) {
      const [old] = this.items.keys();
      this.items.delete(old);
      this.rowEls.get(old)?.remove();
      this.rowEls.delete(old);
    }
    this.renderRow(s);
    this.renderEmpty();
    if (s.trace_id === this.openId) this.refreshOpen();
  }

  /**
   * dropUnlisted makes the list what the server just listed, as a reload
   * would show it: after a reconnect, the chains it no longer lists (it
   * restarted, or another replica answered) would otherwise stay, those
   * that ran showing "running" forever. An open trace that ran is fetched
   * again, to say what became of it.
   */
  dropUnlisted() {
    const listed = this.snapshot;
    this.snapshot = null;
    if (!listed) return;
    for (const id of [...this.items.keys()]) {
      if (listed.has(id)) continue;
      this.items.delete(id);
      this.rowEls.get(id)?.remove();
      this.rowEls.delete(id);
    }
    if (this.openId && this.openStatus === "running" && !listed.has(this.openId)) this.refreshOpen();
  }

  setLive(state, text) {
    this.liveChip.dataset.state = state;
    this.liveChip.textContent = text;
  }

  showProblem(status, message) {
    this.problem.replaceChildren();
    this.problem.hidden = !status;
    if (!status) return;
    this.problem.append(el("p", "error-message", `HTTP ${status}: ${message}`));
    if (status === 401) this.problem.append(this.keyForm("traces-key"));
  }

  /**
   * keyForm asks for the API key the server wants, keeps it, and loads the
   * list and the open trace again with it.
   */
  keyForm(id) {
    const form = el("form", "key-form");
    const label = el("label", "", "API key");
    const input = el("input");
    input.type = "password";
    input.autocomplete = "off";
    input.id = id;
    label.htmlFor = input.id;
    const save = el("button", "btn btn-small", "Save and reconnect");
    save.type = "submit";
    form.append(label, input, save);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.env.onKey(input.value.trim());
      this.disconnect();
      this.connect();
      if (this.openId) this.refreshOpen();
    });
    return form;
  }

  // ---- the list --------------------------------------------------------------

  renderRow(s) {
    let li = this.rowEls.get(s.trace_id);
    if (!li) {
      li = el("li", "trace-row");
      li.dataset.id = s.trace_id;
      this.rowEls.set(s.trace_id, li);
    }
    // Newest first: a chain moves to the top when it starts, not when it
    // changes (a long chain would jump over newer ones).
    if (!li.isConnected) this.rows.prepend(li);
    li.dataset.status = s.status;
    li.dataset.mode = s.mode ?? "";
    li.replaceChildren();
    const a = el("a", "tr-link");
    a.href = `#/traces/${encodeURIComponent(s.trace_id)}`;
    const top = el("span", "tr-top");
    top.append(el("span", "tr-question", s.question || "(no question)"), statusChip(STAGE_STATUS, s.status));
    const badges = el("span", "tr-badges");
    for (const st of s.stages ?? []) {
      const info = STAGE_STATUS[st.status] ?? { icon: "?", word: st.status, tone: "off" };
      const b = el("span", "tr-badge");
      b.dataset.node = st.node;
      b.dataset.status = st.status;
      b.dataset.tone = info.tone;
      b.title = `${st.node}: ${info.word}`;
      b.append(el("span", "tr-badge-icon", info.icon), el("span", "", st.node));
      b.firstChild.setAttribute("aria-hidden", "true");
      b.append(el("span", "visually-hidden", ` ${info.word}`));
      badges.append(b);
      this.addNode(st.node);
    }
    const meta = el("span", "tr-meta");
    const dur = el("span", "tr-duration", formatDuration(this.duration(s)));
    const parts = [s.mode || "…", dur, s.tokens ? `${numberFmt.format(s.tokens)} tokens` : null, s.client || "unknown client", startedAt(s.started)];
    parts.filter(Boolean).forEach((p, i) => {
      if (i) meta.append(document.createTextNode(" · "));
      meta.append(p instanceof Node ? p : document.createTextNode(p));
    });
    if (s.resumed) meta.append(document.createTextNode(" · resumed"));
    a.append(top, badges, meta);
    li.append(a);
    li.hidden = !this.matches(s);
  }

  /** duration is a chain's duration; a running one's grows with the clock. */
  duration(s) {
    if (s.status !== "running") return s.duration_ms;
    return s.duration_ms + (Date.now() - (s.receivedAt ?? Date.now()));
  }

  tick() {
    // Past midnight, today's rows became yesterday's: they get their date.
    const day = new Date().toDateString();
    if (day !== this.day) {
      this.day = day;
      for (const s of this.items.values()) this.renderRow(s);
    }
    for (const [id, s] of this.items) {
      if (s.status !== "running") continue;
      const d = this.rowEls.get(id)?.querySelector(".tr-duration");
      if (d) d.textContent = formatDuration(this.duration(s));
    }
  }

  addNode(node) {
    if (!node || this.nodes.has(node)) return;
    this.nodes.add(node);
    const o = el("option", "", node);
    o.value = node;
    this.fNode.append(o);
  }

  matches(s) {
    const status = this.fStatus.value;
    if (status) {
      const ok = FILTERS[status] ?? ((x) => x === status);
      if (!ok(s.status) && !(s.stages ?? []).some((st) => ok(st.status))) return false;
    }
    const node = this.fNode.value;
    if (node && !(s.stages ?? []).some((st) => st.node === node)) return false;
    const text = this.fText.value.trim().toLowerCase();
    return !text || (s.question ?? "").toLowerCase().includes(text);
  }

  filter() {
    for (const [id, s] of this.items) {
      const li = this.rowEls.get(id);
      if (li) li.hidden = !this.matches(s);
    }
    this.renderEmpty();
  }

  renderEmpty() {
    const shown = [...this.rowEls.values()].some((li) => !li.hidden);
    this.empty.hidden = shown;
    this.empty.textContent =
      this.items.size === 0
        ? "No chains yet. Send a question from the chat, or point any OpenAI client at this proxy: its chains appear here as they run."
        : "No chain matches the filters.";
  }

  // ---- one trace -------------------------------------------------------------

  async open(id) {
    if (this.openId !== id) {
      this.openId = id;
      this.detailBody.replaceChildren(el("p", "td-loading", "Loading the trace…"));
    }
    await this.refreshOpen();
  }

  async refreshOpen() {
    const id = this.openId;
    if (!id) return;
    const seq = ++this.openSeq;
    const headers = { Accept: "application/json" };
    const key = this.env.key();
    if (key) headers.Authorization = `Bearer ${key}`;
    let doc = null;
    let problem = "";
    let status = 0;
    try {
      const res = await fetch(this.env.api(`v1/chain/traces/${encodeURIComponent(id)}`), { headers, cache: "no-store" });
      const body = await res.json().catch(() => null);
      status = res.status;
      if (res.ok) doc = body;
      else problem = `HTTP ${res.status}: ${body?.error?.message ?? res.statusText}`;
    } catch (err) {
      problem = `Network error: ${err?.message ?? err}`;
    }
    if (seq !== this.openSeq || id !== this.openId) return; // a newer load won
    this.openStatus = doc?.status ?? "";
    if (!doc) {
      const p = el("p", "error-message", problem);
      this.detailBody.replaceChildren(p);
      // A shared link opened where the page has no key yet: ask here.
      if (status === 401) this.detailBody.append(this.keyForm("trace-key"));
      return;
    }
    this.renderTrace(doc);
  }

  renderTrace(doc) {
    const chain = doc.chain ?? {};
    const stages = Array.isArray(chain.stages) ? chain.stages : [];
    const usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
    for (const st of stages) {
      for (const k of Object.keys(usage)) usage[k] += st?.usage?.[k] ?? 0;
    }
    const head = el("header", "td-head");
    const title = el("h1", "td-question", doc.question || "(no question)");
    const facts = el("p", "td-facts");
    facts.append(statusChip(STAGE_STATUS, doc.status));
    const bits = [
      doc.mode || chain.mode,
      formatDuration(doc.duration_ms),
      usage.total_tokens ? `${numberFmt.format(usage.total_tokens)} tokens` : null,
      doc.client || "unknown client",
      doc.started ? new Date(doc.started).toLocaleString() : null,
    ].filter(Boolean);
    facts.append(document.createTextNode(` ${bits.join(" · ")}`));
    const idLine = el("p", "td-id");
    idLine.append(document.createTextNode("Trace "), el("code", "td-trace-id", doc.trace_id ?? this.openId));
    head.append(title, facts, idLine);

    const msg = {
      id: `trace-${doc.trace_id ?? this.openId}`,
      role: "assistant",
      state: doc.status === "running" ? "streaming" : "done",
      content: "",
      mode: chain.mode ?? doc.mode,
      reasons: chain.reasons ?? [],
      turns: chain.turns ?? stages.reduce((n, s) => n + (s?.turns ?? 0), 0),
      stages,
      usage,
      traceId: doc.trace_id,
      durationMs: doc.duration_ms,
    };
    // The open panels and the scroll position survive a refresh of the
    // same trace (a running chain refreshes at each stage).
    const prev = this.detailBody.querySelector(".message");
    const open = prev ? [...prev.querySelectorAll(".badge")].map((b) => b.getAttribute("aria-expanded") === "true") : null;
    const view = new MessageView(msg, {});
    view.unfold(open);
    this.detailBody.replaceChildren(head, timeline(doc), view.root);
  }
}

// ---- the timeline ------------------------------------------------------------

/**
 * spans lays a trace out in time: per stage its extent, model calls (queue
 * wait, then the node's time: its model's load, when the node reports it,
 * and generation), tool calls and client round trips, all in ms from the
 * chain's start. A call's load is null when its node reports none
 * (OpenAI-compatible servers): gen is then the whole node time. total is
 * the trace's duration, at least the end of the last thing in it.
 */
export function spans(doc) {
  const stages = Array.isArray(doc?.chain?.stages) ? doc.chain.stages : [];
  const out = [];
  let last = 0;
  for (const st of stages) {
    if (!st) continue;
    const start = st.start_ms ?? 0;
    let end = start + (st.duration_ms ?? 0);
    const calls = (st.calls ?? []).map((c) => ({
      start: c.start_ms ?? 0,
      queue: c.queue_ms ?? 0,
      node_ms: c.duration_ms ?? 0,
      load: typeof c.load_ms === "number" ? c.load_ms : null,
      gen: typeof c.load_ms === "number" ? (c.generation_ms ?? Math.max((c.duration_ms ?? 0) - c.load_ms, 0)) : (c.duration_ms ?? 0),
      turn: c.turn,
      kind: c.kind ?? "",
      node: c.node ?? "",
      tokens: c.usage?.total_tokens ?? 0,
      error: c.error ?? "",
      finish: c.finish_reason ?? "",
    }));
    const tools = (st.tools_used ?? []).map((t) => ({
      start: t.start_ms ?? 0,
      dur: t.duration_ms ?? 0,
      name: t.name ?? "?",
      status: t.status ?? "",
      client: !!t.client,
    }));
    for (const c of calls) end = Math.max(end, c.start + c.queue + c.node_ms);
    for (const t of tools) end = Math.max(end, t.start + t.dur);
    out.push({ node: st.node ?? "?", status: st.status ?? "", start, end, calls, tools });
    last = Math.max(last, end);
  }
  return { stages: out, total: Math.max(doc?.duration_ms ?? 0, last, 1) };
}

/**
 * segments cut the trace's duration into what happened in turn: each
 * stage's extent and the proxy's own time around them (classification
 * before the first stage, hand-overs between stages, the answer's end).
 * They add up to the total by construction.
 */
export function segments(layout) {
  const out = [];
  let at = 0;
  const sorted = [...layout.stages].sort((a, b) => a.start - b.start);
  for (const st of sorted) {
    const start = Math.max(st.start, at);
    if (start > at) out.push({ kind: "proxy", label: at === 0 ? "classify" : "hand-over", start: at, ms: start - at });
    const end = Math.max(st.end, start);
    out.push({ kind: "stage", label: st.node, status: st.status, start, ms: end - start });
    at = end;
  }
  if (layout.total > at) out.push({ kind: "proxy", label: "answer", start: at, ms: layout.total - at });
  return out;
}

function bar(cls, start, ms, total, label) {
  const b = el("span", `tl-bar ${cls}`);
  b.style.left = `${(100 * start) / total}%`;
  b.style.width = `${Math.max((100 * ms) / total, 0.4)}%`;
  b.dataset.start = String(start);
  b.dataset.ms = String(ms);
  if (label) b.title = label;
  return b;
}

function row(label, cls, bars, note) {
  const r = el("div", `tl-row ${cls}`);
  const l = el("span", "tl-label", label);
  const track = el("span", "tl-track");
  track.append(...bars);
  r.append(l, track);
  if (note) r.append(el("span", "tl-note", note));
  return r;
}

/** timeline renders the waterfall of a trace. */
export function timeline(doc) {
  const layout = spans(doc);
  const total = layout.total;
  const box = el("section", "timeline");
  box.setAttribute("aria-label", "Timeline");
  box.dataset.total = String(total);
  const h = el("h2", "tl-title", "Timeline");
  h.append(el("span", "tl-total", ` ${formatDuration(total)}`));
  box.append(h);

  // The whole chain in one row: segments that add up to its duration.
  const segs = segments(layout).map((s) => {
    const b = bar(`tl-seg tl-seg-${s.kind}`, s.start, s.ms, total, `${s.label}: ${formatDuration(s.ms)}`);
    b.dataset.kind = s.kind;
    b.dataset.label = s.label;
    if (s.status) b.dataset.status = s.status;
    return b;
  });
  box.append(row("chain", "tl-chain", segs, formatDuration(total)));

  for (const st of layout.stages) {
    const info = STAGE_STATUS[st.status] ?? { icon: "?", word: st.status || "unknown", tone: "off" };
    const sb = bar("tl-stage", st.start, st.end - st.start, total, `${st.node}: ${info.word}, ${formatDuration(st.end - st.start)}`);
    sb.dataset.tone = info.tone;
    const marks = [sb];
    // A stage that stopped says so where it stopped.
    if (st.status && st.status !== "ok" && st.status !== "running") {
      const m = el("span", "tl-stop", info.icon);
      m.style.left = `${(100 * st.end) / total}%`;
      m.dataset.status = st.status;
      m.title = `${st.node} ${info.word} at ${formatDuration(st.end)}`;
      m.setAttribute("role", "img");
      m.setAttribute("aria-label", `${info.word} at ${formatDuration(st.end)}`);
      marks.push(m);
    }
    const srow = row(st.node, "tl-stage-row", marks, `${info.word} · ${formatDuration(st.end - st.start)}`);
    srow.dataset.node = st.node;
    srow.dataset.status = st.status;
    box.append(srow);

    for (const c of st.calls) {
      const label = c.kind === "summary" ? `summary${c.node ? ` (${c.node})` : ""}` : `turn ${c.turn ?? "?"}`;
      const bars = [];
      if (c.queue > 0) bars.push(bar("tl-queue", c.start, c.queue, total, `waited ${formatDuration(c.queue)} for a slot`));
      // The node's time: its model's load first, when it reports one,
      // then generation; unsplit when it reports none.
      const load = c.load ?? 0;
      if (load > 0) bars.push(bar("tl-load", c.start + c.queue, load, total, `${label}: model load ${formatDuration(load)}`));
      const what = c.load === null ? label : `${label}: generation`;
      const g = bar(`tl-gen${c.error ? " tl-error" : ""}`, c.start + c.queue + load, c.gen, total, `${what}: ${formatDuration(c.gen)}${c.tokens ? `, ${c.tokens} tokens` : ""}${c.error ? `, ${c.error}` : ""}`);
      bars.push(g);
      const note = [`${formatDuration(c.queue + c.node_ms)}`];
      if (c.queue) note.push(`queue ${formatDuration(c.queue)}`);
      if (load) note.push(`load ${formatDuration(load)}`);
      if (c.tokens) note.push(`${numberFmt.format(c.tokens)} tokens`);
      const r = row(label, `tl-call${c.kind ? ` tl-call-${c.kind}` : ""}`, bars, note.join(" · "));
      r.dataset.kind = c.kind || "turn";
      r.dataset.node = c.node || st.node;
      box.append(r);
    }
    for (const t of st.tools) {
      const cls = t.client ? "tl-client" : "tl-tool";
      const what = t.client ? `${t.name} (client round trip)` : t.name;
      const b = bar(cls, t.start, t.dur, total, `${what}: ${t.status}, ${formatDuration(t.dur)}`);
      b.dataset.status = t.status;
      const r = row(what, `tl-tool-row${t.client ? " tl-client-row" : ""}`, [b], `${t.status === "client" ? "waiting for the client" : t.status} · ${formatDuration(t.dur)}`);
      r.dataset.tool = t.name;
      box.append(r);
    }
  }
  const legend = el("p", "tl-legend");
  for (const [cls, word] of [
    ["tl-queue", "queue"],
    ["tl-load", "model load"],
    ["tl-gen", "generation"],
    ["tl-tool", "tool"],
    ["tl-client", "client round trip"],
  ]) {
    const k = el("span", "tl-key");
    k.append(el("span", `tl-swatch ${cls}`), document.createTextNode(word));
    legend.append(k);
  }
  box.append(legend);
  return box;
}
