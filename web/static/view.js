// view.js: DOM for one conversation message (bubble, mode pill, stage
// badges and their detail panels) and for the header's node list.
//
// Everything is built with createElement and textContent; the only place
// model text becomes markup is markdown.js, which does the same.

import { renderMarkdown } from "./markdown.js";

/** Stage statuses: colour (tone) AND icon AND word, never colour alone. */
export const STAGE_STATUS = {
  ok: { icon: "✓", word: "ok", tone: "ok" },
  stopped_repeat: { icon: "⟲", word: "stopped: repeat", tone: "warn" },
  stopped_budget: { icon: "⏱\uFE0E", word: "stopped: budget", tone: "warn" },
  stopped_format_errors: { icon: "⚠\uFE0E", word: "stopped: format errors", tone: "warn" },
  stopped_no_progress: { icon: "⋯", word: "stopped: no progress", tone: "warn" },
  skipped_offline: { icon: "⊘", word: "skipped: offline", tone: "off" },
  skipped_context: { icon: "⊘", word: "skipped: prompt too long", tone: "off" },
  failed: { icon: "✗", word: "failed", tone: "bad" },
  degenerate: { icon: "≋", word: "degenerate answer", tone: "warn" },
  awaiting_client: { icon: "⏸\uFE0E", word: "waiting for client", tone: "live" },
  running: { icon: "◌", word: "running", tone: "live" },
  cancelled: { icon: "■", word: "cancelled", tone: "off" },
  abandoned: { icon: "⌛\uFE0E", word: "abandoned: the client never came back", tone: "off" },
  interrupted: { icon: "■", word: "interrupted", tone: "bad" },
};

/** Tool call statuses. */
export const TOOL_STATUS = {
  ok: { icon: "✓", word: "ok", tone: "ok" },
  error: { icon: "✗", word: "error", tone: "bad" },
  duplicate: { icon: "≡", word: "duplicate", tone: "warn" },
  cached: { icon: "↺", word: "cached", tone: "info" },
  blocked: { icon: "⊘", word: "blocked", tone: "bad" },
  client: { icon: "⇄", word: "sent to the client", tone: "info" },
};

/** Results longer than this are cut, with a "show more" button. */
export const RESULT_CUT = 600;
/** …or longer than this many lines. */
export const RESULT_LINES = 8;

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function statusOf(table, status) {
  return table[status] ?? { icon: "?", word: String(status || "unknown").replaceAll("_", " "), tone: "off" };
}

/** statusChip renders icon + word with the status tone. */
export function statusChip(table, status) {
  const s = statusOf(table, status);
  const chip = el("span", "status-chip");
  chip.dataset.tone = s.tone;
  chip.dataset.status = status ?? "";
  chip.append(el("span", "status-icon", s.icon), el("span", "status-word", s.word));
  chip.firstChild.setAttribute("aria-hidden", "true");
  return chip;
}

export function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

export function formatDuration(ms) {
  if (ms == null || Number.isNaN(ms)) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60000);
  return `${m} min ${Math.round((ms % 60000) / 1000)} s`;
}

const numberFmt = new Intl.NumberFormat("en");

function formatUsage(u) {
  if (!u || (!u.prompt_tokens && !u.completion_tokens && !u.total_tokens)) return "–";
  const total = u.total_tokens || (u.prompt_tokens ?? 0) + (u.completion_tokens ?? 0);
  const out = el("span");
  out.append(
    document.createTextNode(numberFmt.format(total)),
    el("span", "sd-fine", ` ${numberFmt.format(u.prompt_tokens ?? 0)} in · ${numberFmt.format(u.completion_tokens ?? 0)} out`),
  );
  return out;
}

/** prettyArgs shows tool arguments as indented JSON when they are JSON. */
export function prettyArgs(args) {
  if (args === undefined || args === null) return "{}";
  if (typeof args === "string") {
    try {
      return JSON.stringify(JSON.parse(args), null, 2);
    } catch {
      return args;
    }
  }
  return JSON.stringify(args, null, 2);
}

/** compactArgs is the one-line JSON of short arguments, else null. */
export function compactArgs(args) {
  let v = args ?? {};
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      return v.length <= 60 && !v.includes("\n") ? v : null;
    }
  }
  const s = JSON.stringify(v, null, 1).replace(/\n\s*/g, " ").replace(/([[{]) /g, "$1").replace(/ ([\]}])/g, "$1");
  return s.length <= 60 ? s : null;
}

let tipSeq = 0;

/**
 * MessageView owns the DOM of one message and updates it in place, so a
 * badge keeps its focus and fold state while the stream rewrites the data.
 */
export class MessageView {
  /**
   * @param {object} msg the stored message
   * @param {{onRetry?: (msg: object) => void, onSaveKey?: (key: string, msg: object) => void}} hooks
   */
  constructor(msg, hooks = {}) {
    this.hooks = hooks;
    this.id = msg.id;
    this.root = el("article", `message ${msg.role}`);
    this.root.dataset.id = msg.id;
    this.root.setAttribute("aria-label", msg.role === "user" ? "You" : "Answer");
    if (msg.role === "user") {
      const bubble = el("div", "bubble user-bubble");
      bubble.textContent = msg.content;
      this.root.append(bubble);
      return;
    }
    this.bubble = el("div", "bubble answer");
    this.head = el("div", "answer-head");
    this.pillWrap = el("span", "pill-wrap");
    this.meta = el("span", "answer-meta");
    this.head.append(this.pillWrap, this.meta);
    this.badges = el("div", "badges");
    this.badges.setAttribute("role", "group");
    this.badges.setAttribute("aria-label", "Chain stages");
    this.details = el("div", "stage-details");
    this.live = el("div", "live-status");
    this.live.setAttribute("role", "status");
    this.reply = el("div", "reply md");
    this.errorBox = el("div", "error-box");
    this.errorBox.setAttribute("role", "alert");
    this.foot = el("div", "answer-foot");
    this.bubble.append(this.head, this.badges, this.details, this.live, this.reply, this.errorBox, this.foot);
    this.root.append(this.bubble);
    this.stageSigs = [];
    this.replyText = null;
    this.pillKey = "";
    this.errorKey = null;
    this.footKey = null;
    this.update(msg);
  }

  /** update brings the DOM in line with msg. */
  update(msg) {
    if (msg.role === "user") return;
    const state = msg.state ?? "done";
    this.root.dataset.state = state;
    this.root.dataset.deltas = String(msg.deltas ?? 0);
    this.root.setAttribute("aria-busy", state === "streaming" ? "true" : "false");
    this.renderPill(msg);
    this.renderMeta(msg);
    this.head.hidden = !msg.mode && this.meta.textContent === "";
    this.renderStages(msg);
    this.renderLive(msg);
    this.renderReply(msg);
    this.renderError(msg);
    this.renderFoot(msg);
  }

  renderPill(msg) {
    const reasonList = Array.isArray(msg.reasons) ? msg.reasons.map(String) : [];
    const key = `${msg.mode}|${reasonList.join("\n")}`;
    if (key === this.pillKey) return;
    this.pillKey = key;
    this.pillWrap.replaceChildren();
    if (!msg.mode) return;
    const tipId = `tip-${msg.id}-${++tipSeq}`;
    const pill = el("button", "mode-pill");
    pill.type = "button";
    pill.dataset.mode = msg.mode;
    pill.append(el("span", "mode-icon", msg.mode === "reflexive" ? "◆" : "●"), el("span", "", msg.mode));
    pill.firstChild.setAttribute("aria-hidden", "true");
    const reasons = reasonList.length ? reasonList : ["no reason given"];
    pill.title = `Classified ${msg.mode}: ${reasons.join("; ")}`;
    pill.setAttribute("aria-describedby", tipId);
    // The tooltip shows on hover and on focus (CSS). A click or tap pins it
    // (touch screens have no hover, and Safari does not focus buttons on
    // click); Escape dismisses it until the pill loses focus (WCAG 1.4.13).
    pill.addEventListener("click", () => {
      if (pill.dataset.pinned) delete pill.dataset.pinned;
      else pill.dataset.pinned = "true";
      delete pill.dataset.dismissed;
    });
    pill.addEventListener("keydown", (e) => {
      if (e.key === "Escape") {
        pill.dataset.dismissed = "true";
        delete pill.dataset.pinned;
        e.stopPropagation();
      }
    });
    pill.addEventListener("blur", () => {
      delete pill.dataset.dismissed;
      delete pill.dataset.pinned;
    });
    const tip = el("span", "tooltip");
    tip.id = tipId;
    tip.setAttribute("role", "tooltip");
    tip.append(el("span", "tooltip-title", `Why ${msg.mode}`));
    const ul = el("ul");
    for (const r of reasons) ul.append(el("li", "", r));
    tip.append(ul);
    this.pillWrap.append(pill, tip);
  }

  renderMeta(msg) {
    const parts = [];
    if (msg.turns) parts.push(plural(msg.turns, "turn", "turns"));
    if (msg.durationMs != null && msg.state === "done") parts.push(formatDuration(msg.durationMs));
    const total = msg.usage?.total_tokens;
    if (total) parts.push(`${numberFmt.format(total)} tokens`);
    this.meta.textContent = parts.join(" · ");
    this.meta.title = msg.traceId ? `trace ${msg.traceId}` : "";
    // The trace has an address: a link opens it in the traces view, where
    // it can be shared.
    if (msg.traceId && !String(msg.id).startsWith("trace-")) {
      const a = el("a", "trace-link", "trace ↗");
      a.href = `#/traces/${encodeURIComponent(msg.traceId)}`;
      a.title = `Open trace ${msg.traceId}: timeline and prompts`;
      if (parts.length) this.meta.append(document.createTextNode(" · "));
      this.meta.append(a);
    }
  }

  /**
   * unfold opens every stage's panel, or those open[i] says, as the traces
   * view shows a chain.
   * @param {boolean[] | null} open
   */
  unfold(open) {
    [...this.badges.children].forEach((badge, i) => {
      const on = open ? open[i] !== false : true;
      badge.setAttribute("aria-expanded", String(on));
      this.details.children[i].hidden = !on;
    });
    this.syncDetails();
  }

  renderStages(msg) {
    // Holes (an event for stage 2 before stage 1's) show as pending stages.
    const stages = Array.from(msg.stages ?? [], (s) => s ?? { node: "…", turns: 0, status: "running", tools_used: [] });
    this.badges.hidden = stages.length === 0;
    for (let i = 0; i < stages.length; i++) {
      const stage = stages[i];
      const sig = JSON.stringify(stage);
      let badge = this.badges.children[i];
      let panel = this.details.children[i];
      if (!badge) {
        const panelId = `detail-${msg.id}-${i}`;
        badge = el("button", "badge");
        badge.type = "button";
        badge.setAttribute("aria-expanded", "false");
        badge.setAttribute("aria-controls", panelId);
        badge.append(el("span", "badge-icon"), el("span", "badge-label"), el("span", "badge-status"));
        badge.firstChild.setAttribute("aria-hidden", "true");
        panel = el("section", "stage-detail");
        panel.id = panelId;
        panel.hidden = true;
        badge.addEventListener("click", () => {
          const open = badge.getAttribute("aria-expanded") !== "true";
          badge.setAttribute("aria-expanded", String(open));
          panel.hidden = !open;
          this.syncDetails();
        });
        this.badges.append(badge);
        this.details.append(panel);
        this.stageSigs[i] = "";
      }
      if (this.stageSigs[i] === sig) continue;
      this.stageSigs[i] = sig;
      const st = statusOf(STAGE_STATUS, stage.status);
      badge.dataset.node = stage.node;
      badge.dataset.status = stage.status ?? "";
      badge.dataset.tone = st.tone;
      badge.children[0].textContent = st.icon;
      badge.children[1].textContent = `${stage.node} ▸ ${plural(stage.turns ?? 0, "turn", "turns")}`;
      const word = badge.children[2];
      word.textContent = st.word;
      // "ok" is said by the ✓ and the colour; the word stays for screen
      // readers but is not printed, to keep the badge row light.
      word.classList.toggle("visually-hidden", stage.status === "ok");
      badge.title = `${stage.node}${stage.model ? ` (${stage.model})` : ""}: ${st.word}`;
      panel.dataset.node = stage.node;
      panel.setAttribute("aria-label", `${stage.node} stage detail`);
      fillStageDetail(panel, stage, i);
    }
    while (this.badges.children.length > stages.length) {
      this.badges.lastChild.remove();
      this.details.lastChild.remove();
      this.stageSigs.pop();
    }
    this.syncDetails();
  }

  /** syncDetails hides the panels' container when every panel is folded. */
  syncDetails() {
    this.details.hidden = ![...this.details.children].some((p) => !p.hidden);
  }

  renderLive(msg) {
    if (msg.state !== "streaming") {
      this.live.hidden = true;
      this.live.textContent = "";
      return;
    }
    this.live.hidden = false;
    let text = "Sending…";
    if (msg.mode) text = "Classified, starting…";
    const current = [...(msg.stages ?? [])].reverse().find((s) => s.status === "running");
    if (msg.liveNote) {
      text = msg.liveNote;
    } else if (msg.deltas > 0) {
      text = current ? `${current.node} writing the answer…` : "Writing the answer…";
    } else if (current) {
      text = `${current.node} working · turn ${current.turns || 1}${current.max_turns ? ` of ${current.max_turns}` : ""}`;
    } else if ((msg.stages ?? []).length) {
      text = "Finishing…";
    }
    if (this.live.dataset.text === text) return;
    this.live.dataset.text = text;
    this.live.replaceChildren(el("span", "spinner"), el("span", "", text));
    this.live.firstChild.setAttribute("aria-hidden", "true");
  }

  renderReply(msg) {
    const text = msg.content ?? "";
    if (text === this.replyText) return;
    this.replyText = text;
    this.reply.replaceChildren(renderMarkdown(text));
    this.reply.hidden = text === "";
  }

  renderError(msg) {
    const e = msg.error;
    const key = e ? JSON.stringify(e) : "";
    if (key === this.errorKey) return;
    this.errorKey = key;
    this.errorBox.replaceChildren();
    this.root.classList.toggle("has-error", !!e);
    this.errorBox.hidden = !e;
    if (!e) return;
    const title = [];
    if (e.status) title.push(`HTTP ${e.status}`);
    if (e.code) title.push(String(e.code));
    else if (e.type) title.push(String(e.type));
    const head = el("div", "error-title");
    head.append(el("span", "error-icon", "✗"), el("span", "", title.length ? `Error · ${title.join(" · ")}` : "Error"));
    head.firstChild.setAttribute("aria-hidden", "true");
    this.errorBox.append(head, el("p", "error-message", e.message || "Something went wrong."));
    if (e.retryAfter) this.errorBox.append(el("p", "error-hint", `The server asks to retry after ${e.retryAfter} s.`));
    if ((e.status === 401 || e.code === "invalid_api_key") && this.hooks.onSaveKey) {
      const form = el("form", "key-form");
      const label = el("label", "", "API key");
      const input = el("input");
      input.type = "password";
      input.autocomplete = "off";
      input.id = `key-${msg.id}`;
      label.htmlFor = input.id;
      const save = el("button", "btn btn-small", "Save and retry");
      save.type = "submit";
      form.append(label, input, save);
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        this.hooks.onSaveKey(input.value.trim(), msg);
      });
      this.errorBox.append(form);
    }
  }

  renderFoot(msg) {
    const canRetry = (msg.state === "error" || msg.state === "stopped" || msg.state === "interrupted") && this.hooks.onRetry;
    const note =
      msg.state === "stopped" ? "Stopped." : msg.state === "interrupted" ? "Interrupted by a page reload." : "";
    const key = `${msg.state}|${!!msg.content}|${canRetry}`;
    if (key === this.footKey) return;
    this.footKey = key;
    this.foot.replaceChildren();
    if (note) this.foot.append(el("span", "foot-note", note));
    if (msg.content && msg.state !== "streaming") {
      const copy = el("button", "btn btn-ghost btn-small copy-btn", "Copy");
      copy.type = "button";
      copy.addEventListener("click", async () => {
        try {
          await navigator.clipboard.writeText(msg.content);
          copy.textContent = "Copied";
        } catch {
          copy.textContent = "Copy failed";
        }
        setTimeout(() => (copy.textContent = "Copy"), 1500);
      });
      this.foot.append(copy);
    }
    if (canRetry) {
      const retry = el("button", "btn btn-ghost btn-small retry-btn", "Retry");
      retry.type = "button";
      retry.addEventListener("click", () => this.hooks.onRetry(msg));
      this.foot.append(retry);
    }
    this.foot.hidden = this.foot.childElementCount === 0;
  }
}

function fact(dl, name, value) {
  const row = el("div");
  const dd = el("dd");
  if (value instanceof Node) dd.append(value);
  else dd.textContent = value;
  row.append(el("dt", "", name), dd);
  dl.append(row);
}

function fillStageDetail(panel, stage, index) {
  panel.replaceChildren();
  const head = el("div", "sd-head");
  head.append(el("span", "sd-node", stage.node), el("span", "sd-index", `stage ${index + 1}`));
  panel.append(head);

  const dl = el("dl", "sd-facts");
  fact(dl, "Model", stage.model || "–");
  fact(dl, "Turns", stage.max_turns ? `${stage.turns ?? 0} of ${stage.max_turns}` : String(stage.turns ?? 0));
  fact(dl, "Duration", stage.status === "running" ? "running…" : formatDuration(stage.duration_ms));
  fact(dl, "Tokens", formatUsage(stage.usage));
  fact(dl, "Status", statusChip(STAGE_STATUS, stage.status));
  panel.append(dl);

  if (stage.error) {
    const err = el("p", "sd-error");
    err.append(el("strong", "", "Error: "), document.createTextNode(stage.error));
    panel.append(err);
  }

  // What the stage wrote, rendered as the answer is; the answering
  // stage's output is the reply itself.
  for (const [key, title] of [["reasoning", "Reasoning"], ["output", "Output"]]) {
    if (typeof stage[key] !== "string" || stage[key] === "") continue;
    panel.append(el("h4", "sd-sub", title));
    const body = el("div", `sd-${key} md`);
    body.append(renderMarkdown(stage[key]));
    panel.append(body);
  }
  if (stage.cut) panel.append(el("p", "sd-cut", `Cut: ${stage.cut}`));

  const tools = Array.isArray(stage.tools_used) ? stage.tools_used : [];
  if (tools.length === 0) {
    panel.append(el("p", "sd-empty", stage.tools === false ? "No tools for this stage." : "No tool calls."));
  } else {
    panel.append(el("h4", "sd-sub", `Tool calls (${tools.length})`));
    const list = el("ol", "tool-calls");
    tools.forEach((tool) => list.append(toolCall(tool)));
    panel.append(list);
  }
  const fit = toolFitView(stage.tool_fit);
  if (fit) panel.append(fit);
  const prompt = promptView(stage);
  if (prompt) panel.append(prompt);
}

/**
 * toolFitView says how a stage's tools were fitted to its node's window:
 * how many were offered, whether compacted, which were withheld and why,
 * and which find_tools found. null when nothing was fitted.
 */
function toolFitView(fit) {
  if (!fit || typeof fit !== "object") return null;
  const box = el("section", "tool-fit");
  box.append(el("h4", "sd-sub", "Tools offered"));
  const of = Number(fit.of ?? 0);
  const offered = Number(fit.offered ?? 0);
  box.append(el("p", "tf-count", `${numberFmt.format(offered)} of ${numberFmt.format(of)}${fit.compact ? " · compact schemas" : ""}`));
  if (fit.reason) box.append(el("p", "tf-reason", String(fit.reason)));
  const withheld = Array.isArray(fit.withheld) ? fit.withheld : [];
  if (withheld.length) {
    const d = el("details", "tf-withheld");
    d.append(el("summary", "", `Withheld (${withheld.length}), found through find_tools`));
    d.append(el("p", "tf-names", withheld.join(", ")));
    box.append(d);
  }
  const found = Array.isArray(fit.found) ? fit.found : [];
  if (found.length) box.append(el("p", "tf-found", `Found through find_tools: ${found.join(", ")}`));
  return box;
}

/** Fitting marks on a prompt message: what the context fitting did. */
export const FIT_MARK = {
  summary: "summary of earlier turns",
  shortened: "shortened to fit",
  earlier_questions: "the user's earlier questions",
  omitted: "turns left out",
};

/** Context actions, as a line each. */
function contextAction(a) {
  const span = a.to_turn && a.to_turn !== a.from_turn;
  const turns = a.from_turn || a.to_turn ? ` ${span ? "turns" : "turn"} ${a.from_turn ?? "?"}${span ? `–${a.to_turn}` : ""}` : "";
  const sum = a.summary_id ? ` (summary ${a.summary_id})` : "";
  return `${a.action ?? "?"}${turns}${sum}${a.detail ? `: ${a.detail}` : ""}`;
}

/**
 * promptView shows what each model call of a stage was given (the stored
 * trace keeps the messages, capped and redacted) with the parts the
 * context fitting made or changed marked, and how the stage's prompts were
 * fitted to its node's window. null when the trace has neither.
 */
function promptView(stage) {
  const calls = Array.isArray(stage.calls) ? stage.calls : [];
  const withMessages = calls.filter((c) => Array.isArray(c.messages) && c.messages.length);
  const ctx = stage.context;
  if (!withMessages.length && !ctx) return null;
  const box = el("section", "prompt-view");
  box.append(el("h4", "sd-sub", "Prompt"));
  if (ctx) {
    const c = el("div", "pv-context");
    c.dataset.overflow = String(!!ctx.overflow);
    const bits = [`window ${numberFmt.format(ctx.window ?? 0)} tokens`, `estimated ${numberFmt.format(ctx.estimated_tokens ?? 0)}`];
    if (ctx.reported_tokens) bits.push(`reported ${numberFmt.format(ctx.reported_tokens)}`);
    c.append(el("p", "pv-window", bits.join(" · ")));
    if (ctx.overflow) c.append(el("p", "pv-overflow", "⚠\uFE0E The prompt reached the window: the node may have cut it."));
    const actions = Array.isArray(ctx.actions) ? ctx.actions : [];
    if (actions.length) {
      const ul = el("ul", "pv-actions");
      ul.setAttribute("aria-label", "Context fitting");
      for (const a of actions) {
        const li = el("li", "pv-action", contextAction(a));
        li.dataset.action = a.action ?? "";
        ul.append(li);
      }
      c.append(ul);
    }
    box.append(c);
  }
  const last = calls.findLastIndex((c) => Array.isArray(c.messages) && c.messages.length);
  calls.forEach((call, i) => {
    if (!Array.isArray(call.messages) || call.messages.length === 0) return;
    const d = el("details", "pv-call");
    // The last prompt is the one the stage's answer came from: open.
    d.open = i === last;
    d.dataset.kind = call.kind || "turn";
    const fitted = call.messages.filter((m) => m.fit).length;
    const label = call.kind === "summary" ? `Summary call${call.node ? ` on ${call.node}` : ""}` : `Call ${i + 1} · turn ${call.turn ?? "?"}`;
    const sum = el("summary", "pv-call-head", `${label} · ${plural(call.messages.length, "message", "messages")}`);
    if (fitted) sum.append(el("span", "pv-fitted", ` · ${fitted} fitted`));
    d.append(sum);
    const ol = el("ol", "pv-messages");
    for (const m of call.messages) ol.append(promptMessage(m));
    d.append(ol);
    box.append(d);
  });
  return box;
}

function promptMessage(m) {
  const li = el("li", "pv-msg");
  li.dataset.role = m.role ?? "";
  const head = el("div", "pv-msg-head");
  head.append(el("span", "pv-role", m.role ?? "?"));
  if (m.name) head.append(el("code", "pv-name", m.name));
  if (m.tool_call_id) head.append(el("code", "pv-call-id", m.tool_call_id));
  if (m.fit) {
    li.dataset.fit = m.fit;
    const mark = el("span", "pv-fit", `fitted: ${FIT_MARK[m.fit] ?? m.fit}`);
    mark.dataset.fit = m.fit;
    head.append(mark);
  }
  li.append(head);
  if (m.content) li.append(el("pre", "pv-content", m.content));
  for (const tc of m.tool_calls ?? []) {
    const call = el("pre", "pv-tool-call", `→ ${tc.name ?? "?"} ${tc.arguments ?? ""}`);
    li.append(call);
  }
  return li;
}

function toolCall(tool) {
  const li = el("li", "tool-call");
  li.dataset.tool = tool.name ?? "";
  li.dataset.status = tool.status ?? "";
  const head = el("div", "tc-head");
  head.append(el("code", "tc-name", tool.name ?? "?"));
  // Short arguments read best inline, next to the name (list_dir {"path": "."});
  // long ones get an indented block.
  const compact = compactArgs(tool.args);
  if (compact !== null) {
    const args = el("code", "tc-args-inline");
    args.append(el("span", "visually-hidden", "Arguments: "), document.createTextNode(compact));
    head.append(args);
  }
  const side = el("span", "tc-side");
  side.append(statusChip(TOOL_STATUS, tool.status));
  const extra = [];
  if (tool.turn) extra.push(`turn ${tool.turn}`);
  if (tool.duration_ms != null) extra.push(formatDuration(tool.duration_ms));
  if (extra.length) side.append(el("span", "tc-meta", extra.join(" · ")));
  head.append(side);
  li.append(head);

  if (compact === null) {
    li.append(el("div", "tc-label", "Arguments"));
    li.append(el("pre", "tc-args", prettyArgs(tool.args)));
  }

  const result = typeof tool.result === "string" ? tool.result : tool.result == null ? "" : JSON.stringify(tool.result, null, 2);
  // With the arguments inline, the block under the head is plainly the
  // result: its label is kept for screen readers only.
  li.append(el("div", compact === null ? "tc-label" : "visually-hidden", "Result"));
  const pre = el("pre", "tc-result", result === "" ? "(empty)" : result);
  li.append(pre);
  // Cut at ~600 characters, or sooner when that many would still be a
  // tall block of short lines.
  let cutAt = RESULT_CUT;
  const lines = result.split("\n", RESULT_LINES + 1);
  if (lines.length > RESULT_LINES) cutAt = Math.min(cutAt, lines.slice(0, RESULT_LINES).join("\n").length);
  if (result.length > cutAt) {
    const cut = result.slice(0, cutAt);
    pre.textContent = cut + "…";
    pre.dataset.cut = "true";
    const more = el("button", "btn btn-ghost btn-small show-more");
    more.type = "button";
    more.setAttribute("aria-expanded", "false");
    const rest = result.length - cutAt;
    const label = () => `Show more (${numberFmt.format(rest)} more characters)`;
    more.textContent = label();
    more.addEventListener("click", () => {
      const open = more.getAttribute("aria-expanded") !== "true";
      more.setAttribute("aria-expanded", String(open));
      pre.textContent = open ? result : cut + "…";
      pre.dataset.cut = String(!open);
      more.textContent = open ? "Show less" : label();
    });
    li.append(more);
  }
  return li;
}

/**
 * renderNodes fills the header's node list from a /readyz body (or shows
 * that the proxy itself could not be reached).
 */
export function renderNodes(list, storeEl, ready, failure) {
  list.replaceChildren();
  if (!ready) {
    const li = el("li", "node");
    li.dataset.reachable = "false";
    li.append(el("span", "dot", ""), el("span", "node-name", "proxy"), el("span", "node-word", "unreachable"));
    li.firstChild.setAttribute("aria-hidden", "true");
    li.title = failure ? String(failure) : "the proxy did not answer /readyz";
    list.append(li);
    storeEl.hidden = true;
    return;
  }
  for (const n of ready.nodes ?? []) {
    const li = el("li", "node");
    li.dataset.node = n.name;
    li.dataset.reachable = String(!!n.reachable);
    const dot = el("span", "dot");
    dot.setAttribute("aria-hidden", "true");
    li.append(dot, el("span", "node-name", n.name), el("span", "node-word", n.reachable ? "reachable" : "unreachable"));
    const tip = [n.provider, n.model].filter(Boolean).join(" · ");
    const lat = n.reachable && n.latency_ms != null ? ` · ${n.latency_ms} ms` : "";
    li.title = `${n.name}: ${tip}${lat}${n.error ? `\n${n.error}` : ""}`;
    list.append(li);
  }
  storeEl.hidden = !ready.store;
  storeEl.dataset.store = ready.store ?? "";
  storeEl.dataset.tone = ready.store === "degraded" ? "warn" : "ok";
  storeEl.textContent = `store: ${ready.store ?? "?"}`;
  storeEl.title =
    ready.store === "degraded" ? "Redis is unreachable: the proxy fell back to in-process state" : `shared state: ${ready.store}`;
}
