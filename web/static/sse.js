// sse.js: an incremental Server-Sent Events parser for fetch() bodies.
//
// EventSource cannot POST, so the page reads the /chat stream from
// fetch()'s body reader and feeds the decoded text here. Reads split events
// (and lines, and even "\r\n" pairs) anywhere; the parser keeps what it has
// not finished and hands out whole events only. It follows the WHATWG
// event-stream rules: lines end in \n, \r or \r\n; a line starting with ":"
// is a comment (keepalives); "field: value" drops one leading space; several
// data lines join with "\n"; a blank line dispatches.

/**
 * @typedef {{event: string, data: string, id: string}} SSEEvent
 */

export class SSEParser {
  /** @param {(ev: SSEEvent) => void} onEvent */
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buf = "";
    this.event = "";
    this.data = [];
    this.id = "";
  }

  /**
   * push feeds the next piece of decoded text.
   * @param {string} text
   */
  push(text) {
    this.buf += text;
    let start = 0;
    for (;;) {
      let i = start;
      while (i < this.buf.length && this.buf[i] !== "\n" && this.buf[i] !== "\r") i++;
      if (i >= this.buf.length) break;
      // A "\r" at the very end may be the first half of "\r\n": wait.
      if (this.buf[i] === "\r" && i + 1 >= this.buf.length) break;
      const line = this.buf.slice(start, i);
      start = i + (this.buf[i] === "\r" && this.buf[i + 1] === "\n" ? 2 : 1);
      this.line(line);
    }
    this.buf = this.buf.slice(start);
  }

  /**
   * end flushes a last event that was not followed by a blank line. The
   * spec drops it; a server that closes right after its last data line still
   * meant it, so it is kept.
   */
  end() {
    if (this.buf !== "") {
      const rest = this.buf.replace(/\r$/, "");
      this.buf = "";
      this.line(rest);
    }
    this.dispatch();
  }

  line(line) {
    if (line === "") {
      this.dispatch();
      return;
    }
    if (line[0] === ":") return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value[0] === " ") value = value.slice(1);
    switch (field) {
      case "event":
        this.event = value;
        break;
      case "data":
        this.data.push(value);
        break;
      case "id":
        this.id = value;
        break;
      default:
      // retry and unknown fields are ignored.
    }
  }

  dispatch() {
    if (this.data.length === 0) {
      this.event = "";
      return;
    }
    const ev = { event: this.event || "message", data: this.data.join("\n"), id: this.id };
    this.event = "";
    this.data = [];
    this.onEvent(ev);
  }
}

/**
 * parseAll parses a whole stream fed in the given pieces (used by tests).
 * @param {string[]} pieces
 * @returns {SSEEvent[]}
 */
export function parseAll(pieces) {
  const out = [];
  const p = new SSEParser((ev) => out.push(ev));
  for (const piece of pieces) p.push(piece);
  p.end();
  return out;
}
