// markdown.js: a small Markdown renderer for model output.
//
// Model output is untrusted. This renderer never parses HTML: it builds DOM
// nodes with createElement and puts every piece of source text in through
// text nodes, so "<script>" or "<img onerror=…>" in a reply can only ever
// show up as text. Links are kept only for http(s) URLs and open with
// rel="noopener noreferrer"; anything else is shown as the literal source.
//
// Supported: paragraphs (single newlines become line breaks), fenced code
// blocks (``` or ~~~, with a language tag), `code`, **bold**, *em*, ~~del~~,
// headings, bullet and numbered lists (nested by indentation), block quotes,
// horizontal rules, simple pipe tables, [links](https://…) and bare URLs.

const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
const TABLE_SEP = /^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$/;
const SAFE_URL = /^https?:\/\/[^\s<>"]+$/i;
const BARE_URL = /https?:\/\/[^\s<>"'`]+/gi;

/**
 * renderMarkdown turns Markdown source into a DocumentFragment.
 * @param {string} src
 * @returns {DocumentFragment}
 */
export function renderMarkdown(src) {
  const frag = document.createDocumentFragment();
  const lines = String(src ?? "").replace(/\r\n?/g, "\n").split("\n");
  renderBlocks(lines, frag);
  return frag;
}

/**
 * isSafeURL reports whether url may become a link's href.
 * @param {string} url
 */
export function isSafeURL(url) {
  return SAFE_URL.test(url);
}

function el(tag, className) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  return e;
}

function renderBlocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "") {
      i++;
      continue;
    }

    let m = FENCE.exec(line);
    if (m) {
      const fence = m[1];
      const lang = m[2];
      const body = [];
      i++;
      // The closing fence uses the same character, at least as long. An
      // unclosed fence (a reply still streaming) runs to the end.
      const close = new RegExp("^ {0,3}" + (fence[0] === "`" ? "`" : "~") + "{" + fence.length + ",}[ \\t]*$");
      while (i < lines.length && !close.test(lines[i])) body.push(lines[i++]);
      i++;
      const pre = el("pre", "md-code");
      const code = el("code");
      if (lang) {
        pre.dataset.lang = lang;
        code.className = "language-" + lang.replace(/[^\w+#.-]/g, "");
      }
      code.textContent = body.join("\n");
      pre.append(code);
      parent.append(pre);
      continue;
    }

    m = HEADING.exec(line);
    if (m) {
      // Chat replies sit under the page's own headings: # maps to h3.
      const level = Math.min(m[1].length + 2, 6);
      const h = el("h" + level, "md-h");
      renderInline(m[2], h);
      parent.append(h);
      i++;
      continue;
    }

    if (RULE.test(line)) {
      parent.append(el("hr"));
      i++;
      continue;
    }

    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && lines[i].trim() !== "") {
        const q = QUOTE.exec(lines[i]);
        body.push(q ? q[1] : lines[i]);
        i++;
      }
      const bq = el("blockquote");
      renderBlocks(body, bq);
      parent.append(bq);
      continue;
    }

    m = ITEM.exec(line);
    if (m) {
      i = renderList(lines, i, parent);
      continue;
    }

    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      i = renderTable(lines, i, parent);
      continue;
    }

    const para = [];
    while (i < lines.length && lines[i].trim() !== "" && !startsBlock(lines[i])) para.push(lines[i++]);
    if (para.length === 0) para.push(lines[i++]);
    const p = el("p");
    para.forEach((l, k) => {
      if (k > 0) p.append(el("br"));
      renderInline(l.trim(), p);
    });
    parent.append(p);
  }
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

function renderList(lines, i, parent) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const list = el(ordered ? "ol" : "ul");
  if (ordered) {
    const start = parseInt(first[2], 10);
    if (start !== 1) list.start = start;
  }
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[3] ?? ""];
    const contentIndent = indent + m[2].length + 1;
    i++;
    // Continuation lines: indented further than the marker (nested lists,
    // wrapped text), or a blank line followed by such a line.
    while (i < lines.length) {
      const l = lines[i];
      if (l.trim() === "") {
        const next = lines[i + 1];
        if (next !== undefined && leading(next) > indent && next.trim() !== "") {
          body.push("");
          i++;
          continue;
        }
        break;
      }
      const sub = ITEM.exec(l);
      if (sub && sub[1].length <= indent) break;
      if (!sub && leading(l) <= indent && startsBlock(l)) break;
      body.push(l.slice(Math.min(leading(l), contentIndent)));
      i++;
    }
    const li = el("li");
    if (body.length === 1 || (body.every((l) => !startsBlock(l)) && !body.includes(""))) {
      body.forEach((l, k) => {
        if (k > 0) li.append(el("br"));
        renderInline(l.trim(), li);
      });
    } else {
      // A tight item: its first line stays inline, the rest are blocks.
      renderInline(body[0].trim(), li);
      renderBlocks(body.slice(1), li);
    }
    list.append(li);
  }
  parent.append(list);
  return i;
}

function leading(line) {
  return line.length - line.trimStart().length;
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function renderTable(lines, i, parent) {
  const head = splitRow(lines[i]);
  const aligns = splitRow(lines[i + 1]).map((c) =>
    c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : "",
  );
  i += 2;
  const wrap = el("div", "md-table");
  const table = el("table");
  const thead = el("thead");
  const tr = el("tr");
  head.forEach((c, k) => {
    const th = el("th");
    if (aligns[k]) th.style.textAlign = aligns[k];
    renderInline(c, th);
    tr.append(th);
  });
  thead.append(tr);
  table.append(thead);
  const tbody = el("tbody");
  while (i < lines.length && lines[i].trim() !== "" && lines[i].includes("|")) {
    const row = el("tr");
    const cells = splitRow(lines[i]);
    head.forEach((_, k) => {
      const td = el("td");
      if (aligns[k]) td.style.textAlign = aligns[k];
      renderInline(cells[k] ?? "", td);
      row.append(td);
    });
    tbody.append(row);
    i++;
  }
  table.append(tbody);
  wrap.append(table);
  parent.append(wrap);
  return i;
}

/**
 * renderInline appends the inline Markdown of text to parent.
 * @param {string} text
 * @param {Node} parent
 */
export function renderInline(text, parent) {
  let buf = "";
  const flush = () => {
    if (buf) {
      appendText(buf, parent);
      buf = "";
    }
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];

    if (c === "\\" && i + 1 < text.length && /[!-/:-@[-`{-~]/.test(text[i + 1])) {
      buf += text[i + 1];
      i += 2;
      continue;
    }

    if (c === "`") {
      let n = 1;
      while (text[i + n] === "`") n++;
      const ticks = "`".repeat(n);
      let j = text.indexOf(ticks, i + n);
      while (j !== -1 && text[j + n] === "`") j = text.indexOf(ticks, j + n + 1);
      if (j !== -1) {
        flush();
        let body = text.slice(i + n, j);
        if (body.length > 2 && body.startsWith(" ") && body.endsWith(" ")) body = body.slice(1, -1);
        const code = el("code");
        code.textContent = body;
        parent.append(code);
        i = j + n;
        continue;
      }
      buf += ticks;
      i += n;
      continue;
    }

    if (c === "!" && text[i + 1] === "[") {
      // Images are not loaded (the page reaches no other host): they become
      // a link to the image when the URL is http(s).
      const link = parseLink(text, i + 1);
      if (link) {
        flush();
        appendLink(link, "image: ", parent, text.slice(i, link.end));
        i = link.end;
        continue;
      }
    }

    if (c === "[") {
      const link = parseLink(text, i);
      if (link) {
        flush();
        appendLink(link, "", parent, text.slice(i, link.end));
        i = link.end;
        continue;
      }
    }

    if ((c === "*" || c === "_" || c === "~") && text[i + 1] === c) {
      const end = findClose(text, i + 2, c + c);
      if (end !== -1 && (c !== "_" || wordBoundary(text, i, end + 2))) {
        flush();
        const tag = c === "~" ? "del" : "strong";
        const e = el(tag);
        renderInline(text.slice(i + 2, end), e);
        parent.append(e);
        i = end + 2;
        continue;
      }
    }

    if ((c === "*" || c === "_") && text[i + 1] !== c && text[i + 1] !== undefined && text[i + 1] !== " ") {
      const end = findClose(text, i + 1, c);
      if (end !== -1 && (c !== "_" || wordBoundary(text, i, end + 1))) {
        flush();
        const e = el("em");
        renderInline(text.slice(i + 1, end), e);
        parent.append(e);
        i = end + 1;
        continue;
      }
    }

    buf += c;
    i++;
  }
  flush();
}

// findClose finds the closing delimiter of an emphasis opened just before
// from: not preceded by a space, with a non-empty body.
function findClose(text, from, delim) {
  let j = text.indexOf(delim, from);
  while (j !== -1) {
    const single = delim.length === 1;
    const doubled = single && (text[j + 1] === delim || text[j - 1] === delim);
    if (j > from && text[j - 1] !== " " && !doubled) return j;
    j = text.indexOf(delim, j + (doubled ? 2 : 1));
  }
  return -1;
}

// wordBoundary keeps snake_case_names from turning into emphasis: an
// underscore run must not touch letters or digits on its outer sides.
function wordBoundary(text, start, end) {
  const before = text[start - 1];
  const after = text[end];
  const word = /[\p{L}\p{N}]/u;
  return !(before && word.test(before)) && !(after && word.test(after));
}

function parseLink(text, i) {
  // [label](url "title") with balanced brackets in the label.
  let depth = 0;
  let j = i;
  for (; j < text.length; j++) {
    if (text[j] === "\\") {
      j++;
      continue;
    }
    if (text[j] === "[") depth++;
    else if (text[j] === "]" && --depth === 0) break;
  }
  if (j >= text.length || text[j + 1] !== "(") return null;
  const close = text.indexOf(")", j + 2);
  if (close === -1) return null;
  const inner = text.slice(j + 2, close).trim();
  const m = /^<?([^\s>]*)>?(?:\s+"([^"]*)")?$/.exec(inner);
  if (!m) return null;
  return { label: text.slice(i + 1, j), url: m[1], title: m[2] ?? "", end: close + 1 };
}

function appendLink(link, prefix, parent, source) {
  if (!isSafeURL(link.url)) {
    // Not http(s) (javascript:, data:, relative…): show the source as text.
    parent.append(document.createTextNode(source));
    return;
  }
  const a = el("a");
  a.href = link.url;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  if (link.title) a.title = link.title;
  if (prefix) a.append(document.createTextNode(prefix));
  renderInline(link.label || link.url, a);
  parent.append(a);
}

// appendText appends plain text, turning bare http(s) URLs into links.
function appendText(s, parent) {
  let last = 0;
  for (const m of s.matchAll(BARE_URL)) {
    let url = m[0];
    // Trailing punctuation belongs to the sentence, not the URL.
    const trail = /[.,;:!?)\]]+$/.exec(url);
    if (trail && !(trail[0].startsWith(")") && url.includes("("))) url = url.slice(0, -trail[0].length);
    if (m.index > last) parent.append(document.createTextNode(s.slice(last, m.index)));
    const a = el("a");
    a.href = url;
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    a.textContent = url;
    parent.append(a);
    last = m.index + url.length;
  }
  if (last < s.length) parent.append(document.createTextNode(s.slice(last)));
}
