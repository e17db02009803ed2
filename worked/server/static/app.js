/* worked serve: the page. Vanilla JavaScript, no build step, no external requests.
 *
 * Safety: every piece of text that comes from a problem or a student (titles, tokens, answers,
 * messages) is put on the page with textContent. The only markup inserted as HTML is MathML that
 * the server printed from its equation trees and checked against an allow-list.
 */
"use strict";

const S = {
  info: null,
  student: { source: null, problem: null, view: null, solution: null, report: null },
  teacher: { problem: null },
};

/* ------------------------------------------------------------------ helpers */

/* The page's words in its language: the server puts the translations of this file's _t("…") strings (its
   catalogue, worked/locale) into <script id="i18n" type="application/json">; {name} places are filled from args. */
const I18N = (() => {
  try { return JSON.parse(document.getElementById("i18n").textContent); } catch (e) { return {}; }
})();
function _t(msgid, args) {
  const s = I18N[msgid] || msgid;
  return args ? s.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (m, k) => (k in args ? String(args[k]) : m)) : s;
}

/* A heading's words inside a sentence: lower case, except in German (its nouns keep their capital). */
function lowered(text) {
  return /^de\b/.test(document.documentElement.lang || "") ? text : text.toLowerCase();
}

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/* MathML made by the server (allow-listed there); falls back to plain text. */
function math(markup, fallback) {
  const span = el("span", { class: "mathwrap" });
  if (markup) span.innerHTML = markup;
  else span.textContent = fallback || "";
  return span;
}

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  let resp;
  try {
    resp = await fetch(path, opts);
  } catch (e) {
    throw new Error(_t("cannot reach the server (is `worked serve` still running?)"));
  }
  const type = resp.headers.get("content-type") || "";
  if (type.includes("application/json")) {
    const data = await resp.json();
    if (!resp.ok) throw new Error(data.error || _t("the server answered {status}", { status: resp.status }));
    return data;
  }
  if (!resp.ok) throw new Error(_t("the server answered {status}", { status: resp.status }));
  return resp;
}

function showError(box, err) {
  box.textContent = err ? String(err.message || err) : "";
  box.hidden = !err;
}

function hashString(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  return (h >>> 0).toString(36);
}

function filenameOf(resp, fallback) {
  const cd = resp.headers.get("content-disposition") || "";
  const m = /filename="([^"]+)"/.exec(cd);
  return m ? m[1] : fallback;
}

async function saveBlob(resp, fallback) {
  const blob = await resp.blob();
  const url = URL.createObjectURL(blob);
  const a = el("a", { href: url, download: filenameOf(resp, fallback) });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

function busy(button, on, label) {
  if (!button) return;
  if (on) { button.dataset.label = button.textContent; button.textContent = label || _t("Working…"); button.disabled = true; }
  else { button.textContent = button.dataset.label || button.textContent; button.disabled = false; }
}

/* ------------------------------------------------------------------ matrices */

/* A read-only matrix with row/column labels, as a table (screen readers read tables well). */
function matrixTable(rows, cols, cells, caption, rowMath) {
  const t = el("table", { class: "m" });
  if (caption) t.append(el("caption", { class: "visually-hidden", text: caption }));
  const head = el("tr", {}, el("td"));
  cols.forEach((c) => head.append(el("th", { scope: "col", text: c })));
  t.append(el("thead", {}, head));
  const body = el("tbody");
  rows.forEach((r, i) => {
    const label = rowMath && rowMath[i]     // a row labelled by a symbol (dγ_2): its math
      ? el("th", { scope: "row", title: r }, math(rowMath[i].mathml, r)) : el("th", { scope: "row", text: r, title: r });
    const tr = el("tr", {}, label);
    cols.forEach((_, j) => {
      const cell = cells[i][j];
      const td = el("td", { class: j === 0 ? "first" + (cols.length === 1 ? " last" : "") : j === cols.length - 1 ? "last" : null });
      if (typeof cell === "string") td.textContent = cell;
      else if (cell.mathml) td.append(math(cell.mathml, cell.text));
      else td.textContent = cell.text;
      tr.append(td);
    });
    body.append(tr);
  });
  t.append(body);
  return t;
}

/* An editable grid: one labelled input per entry, row by row (Tab order = reading order). */
function inputGrid(prefix, label, rows, cols, opts = {}) {
  const t = el("table", { class: "g" });
  const head = el("tr", {}, el("td"));
  cols.forEach((c) => head.append(el("th", { scope: "col", text: c })));
  t.append(el("thead", {}, head));
  const body = el("tbody");
  const masked = new Set((opts.masked || []).map(([i, j]) => `${i},${j}`));
  rows.forEach((r, i) => {
    const tr = el("tr", {}, el("th", { scope: "row", text: r, title: r }));
    cols.forEach((c, j) => {
      const id = `${prefix}-${i}-${j}`;
      const input = el("input", {
        id, type: "text", autocomplete: "off", autocapitalize: "off", spellcheck: "false",
        "aria-label": _t("{grid}, row {row}, column {col}", { grid: label, row: r, col: c }),
        "data-i": i, "data-j": j, class: masked.has(`${i},${j}`) ? "masked" : null,
        inputmode: opts.numeric ? "decimal" : null,
        placeholder: masked.has(`${i},${j}`) ? opts.maskedPlaceholder || "" : null,
      });
      if (opts.values && opts.values[i] && opts.values[i][j] !== undefined) input.value = String(opts.values[i][j]);
      if (opts.asked && !opts.asked.has(`${i},${j}`)) {   // a quiz: a cell no question asks for is not an answer
        tr.append(el("td", { class: "not-asked" }, el("span", { "aria-label": _t("not asked"), text: "·" })));
        return;
      }
      if (opts.asked) { input.classList.add("asked"); input.setAttribute("aria-label", _t("{cell}, asked", { cell: input.getAttribute("aria-label") })); }
      input.addEventListener("paste", (ev) => pasteMatrix(ev, t, label, rows, cols, opts.onPasteError));
      input.addEventListener("input", () => fitCell(input));
      fitCell(input);
      const mark = el("span", { class: "mark", "aria-hidden": "true" });
      const sr = el("span", { class: "visually-hidden", id: id + "-v" });
      input.setAttribute("aria-describedby", id + "-v");
      tr.append(el("td", {}, el("span", { class: "cellbox" }, input, mark), sr));
    });
    body.append(tr);
  });
  t.append(body);
  return t;
}

/* A cell as wide as what is typed in it (2sqrt(2) is not cut to 2sqrt(2). */
function fitCell(input) {
  const n = input.value.length;
  input.style.width = n > 5 ? `calc(${n + 1}ch + 26px)` : "";
}

/* The text of a matrix pasted into one cell → rows of entries, or null when it is one entry.
 * Accepts a spreadsheet's rows (tabs between entries, newlines between rows), [[1,1],[2,1]] and
 * rows of entries separated by spaces (or ", "). */
function parsePasted(text) {
  const t = text.replace(/\r\n?/g, "\n").trim();
  if (!t) return null;
  let rows;
  if (/^\[\s*\[/.test(t)) {
    const inner = t.match(/\[([^\[\]]*)\]/g) || [];
    rows = inner.map((r) => r.slice(1, -1).split(",").map((x) => x.trim()));
  } else if (/^\[[^\[\]]*\]$/.test(t)) {   // one row: [1, 2, 3]
    rows = [t.slice(1, -1).split(",").map((x) => x.trim())];
  } else {
    const lines = t.split("\n").map((l) => l.trim()).filter((l) => l !== "");
    rows = lines.map((l) => (l.includes("\t") ? l.split("\t") : l.split(/\s*[,;]\s+|\s*;\s*|\s+/)).map((x) => x.trim()));
  }
  rows = rows.filter((r) => r.length && !(r.length === 1 && r[0] === ""));
  if (!rows.length || (rows.length === 1 && rows[0].length === 1)) return null;
  return rows;
}

function pasteMatrix(ev, table, label, rowNames, colNames, onError) {
  const text = (ev.clipboardData || window.clipboardData).getData("text");
  const rows = parsePasted(text);
  if (!rows) return;          // one entry: the browser pastes it as usual
  ev.preventDefault();
  const at = ev.target, i0 = +at.dataset.i, j0 = +at.dataset.j;
  const width = Math.max(...rows.map((r) => r.length));
  const roomR = rowNames.length - i0, roomC = colNames.length - j0;
  const shown = text.trim().replace(/\t/g, " ⇥ ").replace(/\r?\n/g, " ⏎ ");
  const said = shown.length > 60 ? shown.slice(0, 57) + "…" : shown;
  const report = (msg) => { if (onError) onError(msg); };
  if (rows.some((r) => r.length !== width)) {
    const and = _t(" and ");
    report(_t("Could not paste “{text}”: its rows have {sizes} entries; {grid} needs {cols} entries in each of its {rows} rows ({names}).",
      { text: said, sizes: [...new Set(rows.map((r) => r.length))].join(and), grid: label, cols: colNames.length, rows: rowNames.length, names: rowNames.join(", ") }));
    return;
  }
  if (rows.length > roomR || width > roomC) {
    report(_t("Could not paste “{text}”: it is {r}×{c}, but from row {row}, column {col} {grid} has room for {roomR}×{roomC}; {grid} is {rows}×{cols} (rows {names}).",
      { text: said, r: rows.length, c: width, row: rowNames[i0], col: colNames[j0], grid: label, roomR, roomC, rows: rowNames.length, cols: colNames.length, names: rowNames.join(", ") }));
    return;
  }
  rows.forEach((r, di) => r.forEach((v, dj) => {
    const cell = table.querySelector(`input[data-i="${i0 + di}"][data-j="${j0 + dj}"]`);
    if (cell) { cell.value = v; fitCell(cell); }
  }));
  if (onError) onError(_t("Pasted {rows}×{cols} into {grid}.", { rows: rows.length, cols: width, grid: label }), true);
  at.dispatchEvent(new Event("input", { bubbles: true }));
}

function readGrid(table) {
  const nr = $$("tbody tr", table).length, nc = $$("thead th", table).length;
  const rows = Array.from({ length: nr }, () => Array(nc).fill(""));
  for (const input of $$("input", table)) {
    const i = +input.dataset.i, j = +input.dataset.j;
    (rows[i] = rows[i] || [])[j] = input.value.trim();
  }
  return rows;
}

/* ------------------------------------------------------------------ tabs */

function selectTab(name, focus) {
  for (const tab of $$('[role="tab"]')) {
    const on = tab.id === "tab-" + name;
    tab.setAttribute("aria-selected", on ? "true" : "false");
    tab.tabIndex = on ? 0 : -1;
    $("#" + tab.getAttribute("aria-controls")).hidden = !on;
    if (on && focus) tab.focus();
  }
}

function studentAddress() {
  const src = S.student.source;
  return location.pathname + location.search + (src && src.kind === "problem" ? "#problem=" + encodeURIComponent(src.name) : "");
}

function setupTabs() {
  const tabs = $$('[role="tab"]');
  tabs.forEach((tab, k) => {
    tab.addEventListener("click", () => { selectTab(tab.id.slice(4)); history.replaceState(null, "", tab.id === "tab-teacher" ? "#teacher" : studentAddress()); });
    tab.addEventListener("keydown", (ev) => {
      const visible = tabs.filter((t) => !t.hidden);
      const at = visible.indexOf(tab);
      if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
        const next = visible[(at + (ev.key === "ArrowRight" ? 1 : visible.length - 1)) % visible.length];
        next.click(); next.focus(); ev.preventDefault();
      }
    });
  });
}

/* ------------------------------------------------------------------ student: choosing and showing a problem */

function problemKey(problem) { return "worked:answers:" + hashString(JSON.stringify(problem)); }

async function openProblem(source) {
  const err = $("#global-error");
  showError(err, null);
  let data;
  try {
    if (source.kind === "problem") data = await api("/api/problems/" + encodeURIComponent(source.name));
    else if (source.kind === "variant") data = await api("/api/variants/" + encodeURIComponent(source.code));
    else data = await api("/api/view", { problem: source.problem });
  } catch (e) {
    showError(err, e);
    return false;
  }
  if (data.code) source.code = data.code;
  if (data.parts) {     // a quiz that mixes families: a problem per part, each with its questions
    S.student = { source, problem: null, view: null, solution: null, report: null, questions: [], part: null,
      title: data.title, parts: data.parts.map((p) => ({ ...p, solution: null, report: null, box: null })) };
    renderMixed();
    return true;
  }
  S.student = { source, problem: data.problem, view: data.view, solution: null, report: null, questions: data.questions || [] };
  renderProblem();
  return true;
}

/* ------------------------------------------------------------------ a quiz that mixes families

 * Its variant's page holds the parts in order, each with its problem (facts, given matrices), its grids and choice
 * questions, checked in one go and scored per part (as `worked grade` scores each part against its own problem).
 * The functions of the one-problem page work on the current part: usePart(p) makes S.student's view, problem,
 * questions and report that part's, gridsRoot() its box and idPre() the prefix of its elements' ids. */
function usePart(p) {
  const st = S.student;
  st.part = p;
  if (p) Object.assign(st, { view: p.view, problem: p.problem, questions: p.questions, report: p.report });
  else Object.assign(st, { view: null, problem: null, questions: [], report: null });
}

function gridsRoot() { return (S.student.part && S.student.part.box) || $("#answer-grids"); }
function idPre() { return S.student.part ? `p${S.student.part.part}-` : ""; }

/* "Part 2: Causal attention" (the part's title without the quiz's, which the page's heading says). */
function partName(p) {
  const t = p.title && S.student.title && p.title.startsWith(S.student.title + " — ") ? p.title.slice(S.student.title.length + 3) : p.title;
  return t ? _t("Part {k}: {title}", { k: p.part, title: t }) : _t("Part {k}", { k: p.part });
}

function renderMixed() {
  const st = S.student;
  $("#problem-title").textContent = `${st.title || "Quiz"} (variant ${st.source.code})`;
  const facts = $("#problem-facts");
  const list = el("ol", { class: "questions" });
  let total = 0;
  for (const p of st.parts) {
    const pts = p.questions.reduce((a, q) => a + q.points, 0);
    total += pts;
    list.append(el("li", { text: `${partName(p)} (${pts} pt${pts === 1 ? "" : "s"})` }));
  }
  facts.replaceChildren(el("dt", { text: _t("Parts") }), el("dd", {}, list),
    el("dt", { text: _t("Points") }), el("dd", { text: _t("{total} in all; each part's problem and questions are below", { total }) }));
  $("#problem-inputs").replaceChildren();
  $("#student-downloads").hidden = true;      // worked quiz wrote a sheet per part; the page prints none
  $("#problem-card").hidden = false;
  const box = $("#answer-grids");
  box.replaceChildren();
  for (const p of st.parts) {
    const head = el("h3", { id: `part-${p.part}-title`, text: partName(p) });
    const dl = el("dl", { class: "facts" }), mats = el("div", { class: "mats" });
    p.box = el("div", { class: "part-grids" });
    box.append(el("section", { class: "part", "aria-labelledby": head.id }, head, dl, mats, p.box));
    usePart(p);
    factsInto(dl);
    inputsInto(mats);
    renderAnswerGrids();
  }
  usePart(null);
  $$(".dec-places").forEach((s) => { s.textContent = String(st.parts[0].view.decimals); });
  $("#feedback").hidden = true;
  $("#solution").hidden = true;
  $("#solution-body").replaceChildren();
}

/* Each part's answers, in order, as the server takes them for a mixed variant. */
function collectMixed() {
  const out = { answers: [], any: false };
  for (const p of S.student.parts) {
    usePart(p);
    const { answers, any } = collectAnswers();
    out.answers.push(answers);
    out.any = out.any || any;
  }
  usePart(null);
  return out;
}

async function renderMixedReport(report) {
  const st = S.student;
  const diag = $("#diagnoses");
  diag.replaceChildren();
  const lines = el("ul", { class: "part-scores" });
  let wrongAny = false, first = null, more = 0, anyCarried = false;
  for (const p of st.parts) {
    const r = report.parts[p.part - 1];
    p.report = r;
    usePart(p);
    const res = await markGrids(r);
    wrongAny = wrongAny || res.wrongAny;
    anyCarried = anyCarried || res.t.carried_forward > 0;
    lines.append(el("li", {}, el("strong", { text: _t("{part}: {earned} of {points} points", { part: partName(p), earned: r.score.earned, points: r.score.points }) }),
      ` (${r.questions.map((q) => `${q.name || q.ask}: ` + _t("{earned} of {points}", { earned: q.earned, points: q.points })).join("; ")}). ` + countsText(res.t, true)));
    if (r.diagnoses.length) {
      diag.append(el("h3", { text: _t("What went wrong in {part}", { part: partName(p) }) }));
      diagnosesInto(diag, r, res.byGrid, res.sv);
      if (first) more += r.diagnoses.length; else { first = r.diagnoses[0]; more += r.diagnoses.length - 1; }
    } else errorsInto(diag, r);
  }
  usePart(null);
  const summary = $("#summary");
  summary.replaceChildren(el("strong", { class: "score", text: _t("Points: {earned} of {points}", { earned: report.score.earned, points: report.score.points }) }),
    lines, legendMarks(anyCarried));
  finishReport(wrongAny, _t("Points: {earned} of {points}.", { earned: report.score.earned, points: report.score.points }), first, more);
}

function renderProblem() {
  const { view, source } = S.student;
  $("#problem-title").textContent = view.title + (source.kind === "variant" ? ` (variant ${source.code})` : "");
  factsInto($("#problem-facts"));
  inputsInto($("#problem-inputs"));
  renderProblemRest();
}

/* The facts of the current problem, and a quiz's graded questions. */
function factsInto(facts) {
  facts.replaceChildren();
  for (const f of S.student.view.facts) facts.append(el("dt", { text: f.label }), el("dd", { text: f.text }));
  if (S.student.questions.length) {
    const list = el("ol", { class: "questions" });
    for (const q of S.student.questions) {
      list.append(el("li", { text: `${q.name ? q.name + ": " : ""}${q.ask} (${q.points} pt${q.points === 1 ? "" : "s"}; ${q.tolerance})` }));
    }
    facts.append(el("dt", { text: _t("Graded questions") }), el("dd", {}, list));
  }
}

/* The given matrices of the current problem. */
function inputsInto(box) {
  box.replaceChildren();
  for (const m of S.student.view.inputs) {
    const shape = el("span", { class: "shape", text: `${m.shape}${m.note ? ", " + m.note : ""}` });
    if (m.matrix) {   // a bracketed matrix (MathML); its rows are the tokens
      const numbered = m.rows.every((r, i) => r === String(i + 1) || r === "");   // or a vector: one row, no name
      const rows = numbered ? null : el("span", { class: "shape", text: `· rows: ${m.rows.join(", ")}` });
      box.append(el("figure", { class: "mat" }, el("div", { class: "bracketed" }, math(m.matrix, m.text || m.key)),
        el("figcaption", {}, shape, rows)));
    } else {
      const cap = el("figcaption", {}, math(m.mathml, m.text || m.key), shape);
      box.append(el("figure", { class: "mat" }, cap, matrixTable(m.rows, m.cols, m.cells, `${m.key}, ${m.shape}`)));
    }
  }
}

function renderProblemRest() {
  const { view, source } = S.student;
  // downloads of the worksheet
  const dl = $("#student-downloads");
  dl.hidden = !S.info.features.render;
  for (const a of $$("a", dl)) {
    const doc = a.dataset.doc, fmt = a.dataset.fmt;
    if (source.kind === "problem") a.href = `/download/problems/${encodeURIComponent(source.name)}/${doc}.${fmt}`;
    else if (source.kind === "variant") a.href = `/download/variants/${encodeURIComponent(source.code)}/${doc}.${fmt}`;
    else a.href = "#";
  }
  $("#problem-card").hidden = false;
  $$(".dec-places").forEach((s) => { s.textContent = String(view.decimals); });
  renderAnswerGrids();
  $("#feedback").hidden = true;
  $("#solution").hidden = true;
  $("#solution-body").replaceChildren();
}

/* The key of the grid a question asks for (a chain's Z is its last block's). */
function gridKeyOf(q) {
  const keys = new Set(S.student.view.grids.map((g) => g.key));
  return !keys.has(q.matrix) && q.matrix === "Z" ? [...keys].filter((k) => /\.Z$/.test(k)).pop() || q.matrix : q.matrix;
}

/* A quiz variant: which cells its questions ask for, by grid key ("i,j" sets), and the questions per grid. */
function askedCells() {
  const qs = S.student.questions || [];
  if (!qs.length) return null;
  const out = {};
  for (const q of qs) {
    if (q.type === "choice") continue;      // chosen among options, not typed into the grid (choiceQuestions)
    const key = gridKeyOf(q);
    const a = out[key] = out[key] || { cells: new Set(), questions: [] };
    for (const [i, j] of q.cells || []) a.cells.add(`${i},${j}`);
    a.questions.push(q);
  }
  return out;
}

function renderAnswerGrids() {
  const { view, problem } = S.student;
  const saved = JSON.parse(localStorage.getItem(problemKey(problem)) || "{}");
  const asked = askedCells();
  const box = gridsRoot();
  box.replaceChildren();
  const choices = (S.student.questions || []).filter((x) => x.type === "choice");
  view.grids.forEach((g) => {
    // a choice question where its matrix comes in the steps' order (after that matrix's grid, if asked too)
    const here = () => choices.filter((q) => gridKeyOf(q) === g.key).forEach((q) => box.append(choiceField(q, saved)));
    const mine = asked && asked[g.key];
    if (asked && !mine) { here(); return; }          // a quiz shows only the grids its questions ask for
    const fs = el("fieldset", { class: "grid", "data-key": g.key, id: gridId(g.key) });
    fs.append(el("legend", {}, g.label, " ", el("span", { class: "eq" }, math(g.mathml, g.text || ""))));
    fs.append(el("p", { class: "hint", text: `${g.rows.length}×${g.cols.length}` + (g.hint ? ` · ${g.hint}` : "") }));
    if (mine) {
      fs.append(el("p", { class: "asked-note" }, el("span", { class: "asked-key", "aria-hidden": "true" }),
        " Asked: " + mine.questions.map((q) => `${q.name ? q.name + " " : ""}${readableAsk(q.ask, g)} ` +
          `(${q.points} pt${q.points === 1 ? "" : "s"})`).join("; ") + ". Only the marked cells count."));
    }
    const note = el("p", { class: "paste-note", role: "status" });
    const table = inputGrid("a-" + idPre() + g.key.replace(/\W/g, "_"), g.label, g.rows, g.cols,
      { masked: g.masked, values: saved[g.key], maskedPlaceholder: "−∞ / 0", asked: mine ? mine.cells : null,
        onPasteError: (msg, ok) => { note.textContent = msg; note.className = "paste-note" + (ok ? "" : " bad"); } });
    fs.append(el("div", { class: "scroll" }, table));
    fs.append(note);
    fs.append(el("p", { class: "verdict", "aria-live": "polite" }));
    fs.append(el("div", { class: "diag-slot" }));
    fs.append(el("div", { class: "step-slot" }));
    box.append(fs);
    here();
  });
  const keys = new Set(view.grids.map((g) => g.key));
  choices.filter((q) => !keys.has(gridKeyOf(q))).forEach((q) => box.append(choiceField(q, saved)));
  $("#answers-form").hidden = false;
  $("#check-status").replaceChildren();
}

/* The words of a choice question on the page. */
const CHOICE_WORDS = {
  points: (n) => (n === 1 ? _t("{n} pt", { n }) : _t("{n} pts", { n })), choose: (pts) => _t("Choose one ({pts}).", { pts }),
  right: _t("✓ right"), wrong: _t("✗ wrong"), blank: _t("Not answered."), gotRight: (pts) => _t("Right ({pts}).", { pts }),
  gotWrong: (pts) => _t("Not the right option ({pts}).", { pts }), earned: (e, pts) => _t("{earned} of {points}", { earned: e, points: pts }),
};

/* A choice question: its options as radio buttons in a fieldset whose legend says what is asked. */
function choiceField(q, saved) {
  const g = S.student.view.grids.find((x) => x.key === gridKeyOf(q));
  const id = "choice-" + idPre() + (q.name || q.ask).replace(/\W/g, "_");
  const what = g ? readableAsk(q.ask, g) : q.ask;
  const fs = el("fieldset", { class: "grid choice", id, "data-choice": q.name || q.ask },
    el("legend", {}, `${q.name ? q.name + ": " : ""}${what}`),
    el("p", { class: "hint", text: CHOICE_WORDS.choose(CHOICE_WORDS.points(q.points)) }));
  const opts = el("div", { class: "options" });
  for (const o of q.options || []) {
    const input = el("input", { type: "radio", name: id, value: o.letter, id: `${id}-${o.letter}` });
    if (saved["choice:" + (q.name || q.ask)] === o.letter) input.checked = true;
    opts.append(el("label", { for: input.id }, input, el("span", { text: `${o.letter}. ${o.value}` })));
  }
  fs.append(opts, el("p", { class: "verdict", "aria-live": "polite" }), el("div", { class: "diag-slot" }));
  fs.question = q;
  return fs;
}

/* "weights[1,2]" as the grid labels it: "Attention weights[cats, chase]". */
function readableAsk(ask, g) {
  const everyRow = _t("every row");
  const everyCol = _t("every column");
  return ask.replace(/^([\w.]+)\[([\d*]+),\s*([\d*]+)\]$/, (all, key, i, j) =>
    `${g.label}[${i === "*" ? everyRow : g.rows[+i - 1] || i}, ${j === "*" ? everyCol : g.cols[+j - 1] || j}]`);
}

function collectAnswers() {
  const answers = {};
  let any = false;
  for (const fs of $$("fieldset.grid:not(.choice)", gridsRoot())) {
    const rows = readGrid($("table", fs));
    if (rows.some((r) => r.some((v) => v !== ""))) { answers[fs.dataset.key] = rows; any = true; }
  }
  for (const fs of $$("fieldset.choice", gridsRoot())) {     // a chosen option: its letter at the question's entry
    const picked = $("input:checked", fs);
    if (!picked) continue;
    const q = fs.question, [i, j] = q.cells[0];
    const g = S.student.view.grids.find((x) => x.key === gridKeyOf(q));
    const key = g ? g.key : q.matrix;
    const rows = answers[key] || Array.from({ length: g ? g.rows.length : i + 1 }, () => Array(g ? g.cols.length : j + 1).fill(""));
    rows[i][j] = picked.value;
    answers[key] = rows;
    any = true;
  }
  return { answers, any };
}

function saveAnswers() {
  if (S.student.parts && !S.student.part) {      // a mixed variant: each part's answers, kept by its problem
    for (const p of S.student.parts) { usePart(p); saveAnswers(); }
    usePart(null);
    return;
  }
  if (!S.student.problem) return;
  const all = {};
  for (const fs of $$("fieldset.grid:not(.choice)", gridsRoot())) all[fs.dataset.key] = readGrid($("table", fs));
  for (const fs of $$("fieldset.choice", gridsRoot())) {
    const picked = $("input:checked", fs);
    if (picked) all["choice:" + fs.dataset.choice] = picked.value;
  }
  try { localStorage.setItem(problemKey(S.student.problem), JSON.stringify(all)); } catch (e) { /* private mode */ }
}

/* ------------------------------------------------------------------ student: checking */

const VERDICT_TEXT = { correct: _t("correct"), wrong: _t("wrong"), blank: _t("not answered"), invalid: _t("could not be read") };

function clearMarks(root = gridsRoot()) {
  for (const td of $$("td", root)) {
    td.classList.remove("ok", "bad", "ecf");
    const m = $(".mark", td); if (m) m.textContent = "";
    const v = $(".visually-hidden", td); if (v) v.textContent = "";
    const n = $(".cell-note", td); if (n) n.remove();
    const input = $("input", td); if (input) { input.removeAttribute("aria-invalid"); input.setAttribute("aria-describedby", input.id + "-v"); }
  }
  for (const p of $$(".verdict", root)) { p.textContent = ""; p.className = "verdict"; }
  for (const s of $$(".step-slot, .diag-slot", root)) s.replaceChildren();
}

async function checkAnswers(ev) {
  ev.preventDefault();
  const status = $("#check-status");
  status.classList.remove("bad");
  const mixed = !!S.student.parts;
  const { answers, any } = mixed ? collectMixed() : collectAnswers();
  if (!any) { status.textContent = _t("Type at least one answer first."); status.classList.add("bad"); return; }
  saveAnswers();
  const btn = $("#check-btn");
  busy(btn, true, _t("Checking…"));
  let report;
  try {
    const source = S.student.source;
    report = await api("/api/check?view=1", source.kind === "variant" ? { variant: source.code, answers, reveal: true } : { problem: S.student.problem, answers, reveal: true });
    // (the expected values come only from a server that shows solutions; the page hides them behind a button)
  } catch (e) {
    status.textContent = e.message; status.classList.add("bad");
    return;
  } finally { busy(btn, false); }
  S.student.report = report;
  await (mixed ? renderMixedReport(report) : renderReport(report));
}

async function solutionView() {
  if (S.info.no_solutions) return null;
  const holder = S.student.part || S.student;     // (a mixed variant's part keeps its own)
  if (!holder.solution) {
    try { holder.solution = await api("/api/solve?view=1", { problem: S.student.problem }); }
    catch (e) { return null; }
  }
  return holder.solution.view;
}

/* A grid's entry as the grid labels it: scaled[3,1] → "Scaled scores[mice, cats]". */
function entryName(key, i, j) {
  const g = S.student.view && S.student.view.grids.find((x) => x.key === key);
  if (!g) return `${key}[${i},${j}]`;
  return `${g.label}[${g.rows[i - 1] ?? i}, ${g.cols[j - 1] ?? j}]`;
}

/* Indices the grid does not show, in a message, become the grid's own labels. */
function humanize(text) {
  if (!text) return text;
  return text.replace(/\b([A-Za-z][\w.]*)\[(\d+),\s*(\d+)\]/g, (all, key, i, j) =>
    (S.student.view.grids.some((x) => x.key === key) ? entryName(key, +i, +j) : all));
}

/* Why an entry could not be read, without its "Q[1,1]: cannot read '…':" prefix; several numbers in one cell
 * are named as such (they are not a decimal comma). */
function unreadableReason(raw, message) {
  const nums = raw.trim().split(/\s*[,;]\s+|\s*;\s*|\s+/).filter(Boolean);
  if (nums.length > 1 && nums.every((x) => /^[-+−]?\d*[.,]?\d+$/.test(x))) {
    return _t("“{text}” is {n} numbers; a cell holds one (paste a whole row or matrix into a cell to fill several)", { text: raw.trim(), n: nums.length });
  }
  const nan = _t("not a number");
  let m = message || "";
  m = m.replace(/^[^:]*\[\d+,\d+\]:\s*/, "");
  m = m.replace(/^cannot read '(?:[^'\\]|\\.)*':\s*/, "").replace(/^cannot read "(?:[^"\\]|\\.)*":\s*/, "");
  const lead = raw.trim() + ": ";
  if (m.startsWith(lead)) m = m.slice(lead.length);
  return _t("“{text}” cannot be read: {why}", { text: raw.trim(), why: m || nan });
}

function gridId(key) { return "grid-" + idPre() + key.replace(/\W/g, "_"); }

async function renderReport(report) {
  const { wrongAny, byGrid, sv, t } = await markGrids(report);
  // the feedback card
  const summary = $("#summary");
  if (askedCells()) {   // a quiz: only the asked cells count
    Object.assign(report.summary, t);
    report.summary_text = null;
  }
  summary.textContent = report.summary_text || countsText(report.summary, !!askedCells());
  if (report.score) {
    summary.append(el("br"), el("strong", { class: "score", text: _t("Points: {earned} of {points}", { earned: report.score.earned, points: report.score.points }) }),
      " (" + report.questions.map((q) => `${q.name || q.ask}: ` + _t("{earned} of {points}", { earned: q.earned, points: q.points })).join("; ") + ")");
  }
  summary.append(el("br"), legendMarks(report.summary.carried_forward > 0));
  const diag = $("#diagnoses");
  diag.replaceChildren();
  if (report.diagnoses.length) diag.append(el("h3", { text: _t("What went wrong") }));
  diagnosesInto(diag, report, byGrid, sv);
  finishReport(wrongAny, summary.firstChild.textContent, report.diagnoses[0], report.diagnoses.length - 1);
}

/* "3 of 5 asked entries correct, 1 wrong (…), 1 not answered." */
function countsText(s, asked) {
  const total = s.correct + s.wrong + s.blank + s.invalid;
  return (asked ? _t("{n} of {total} asked entries correct", { n: s.correct, total }) : _t("{n} of {total} entries correct", { n: s.correct, total })) +
    (s.wrong ? _t(", {n} wrong", { n: s.wrong }) + (s.carried_forward ? _t(" ({n} of them only because of an earlier slip)", { n: s.carried_forward }) : "") : "") +
    (s.blank ? _t(", {n} not answered", { n: s.blank }) : "") + (s.invalid ? _t(", {n} could not be read", { n: s.invalid }) : "") + ".";
}

function legendMarks(anyCarried) {
  return el("span", { class: "legend-marks" },
    el("span", { text: _t("✓ correct") }), el("span", { text: _t("✗ wrong") }),
    anyCarried ? el("span", { text: _t("↪ wrong, but right from your own earlier answers") }) : null,
    el("span", { text: _t("? could not be read") }));
}

/* The report's diagnoses in the feedback card: a link to each one shown at its grid, the others in full; then
 * what could not be read outside a cell. */
function diagnosesInto(diag, report, byGrid, sv) {
  for (const d of report.diagnoses) {
    const placed = Object.values(byGrid).some((ds) => ds.includes(d));
    if (!placed) { diag.append(diagnosisBox(d, sv, false)); continue; }
    const key = Object.keys(byGrid).find((k) => byGrid[k].includes(d));
    diag.append(el("p", { class: "diag-link" }, d.code === "early-rounding" ? _t("Note: ") : "✗ ", titleOf(d), ": ",
      el("a", { href: "#" + d._id }, d.step ? _t("at {grid}, re-read {steps}", { grid: gridLabel(key), steps: stepSpan(d) }) : _t("at {grid}", { grid: gridLabel(key) }))));
  }
  errorsInto(diag, report);
}

function errorsInto(diag, report) {
  for (const e of report.errors || []) {
    if (e.entry) continue;        // an unreadable entry is shown in its cell
    diag.append(el("p", { class: "alert", text: humanize(e.message) }));
  }
}

/* The check bar's status (what the summary says, and a link to the first diagnosis), and the feedback shown. */
function finishReport(wrongAny, text, first, more) {
  const status = $("#check-status");
  status.classList.toggle("bad", wrongAny);
  status.replaceChildren(text);
  if (first) {
    status.append(" ", el("a", { href: "#" + first._id, class: "to-diag" },
      more > 0 ? _t("What went wrong: {title} (and {n} more)", { title: first.title, n: more }) : _t("What went wrong: {title}", { title: first.title })));
  }
  $("#solution-actions").hidden = S.info.no_solutions;
  $("#feedback").hidden = false;
}

/* The current problem's grids and choice questions marked from its report; the diagnoses placed at their grids.
 * Returns whether any answer is wrong, the diagnoses by grid, the solution's view and (on a quiz) the counts of
 * the asked entries. */
async function markGrids(report) {
  const root = gridsRoot();
  clearMarks(root);
  const sv = await solutionView();
  const asked = askedCells();
  let wrongAny = false;
  const byGrid = {};   // the diagnoses at the grid they concern (the first of their grids on the page)
  report.diagnoses.forEach((d, k) => {
    const key = (d.matrices || []).find((x) => $(`fieldset[data-key="${CSS.escape(x)}"]`, root));
    d._id = `diag-${idPre()}${k}`;
    if (key) (byGrid[key] = byGrid[key] || []).push(d);
  });
  for (const fs of $$("fieldset.grid:not(.choice)", root)) {
    const key = fs.dataset.key;
    const m = report.matrices[key];
    if (!m) continue;
    const label = $("legend", fs).firstChild.textContent;
    const mine = asked && asked[key];
    const errs = {};
    for (const e of m.errors || []) if (e.entry) errs[`${e.entry[0] - 1},${e.entry[1] - 1}`] = e.message;
    const c = { correct: 0, wrong: 0, blank: 0, invalid: 0, carried_forward: 0 };
    $$("input", fs).forEach((input) => {
      const i = +input.dataset.i, j = +input.dataset.j;
      const v = m.verdicts[i][j];
      const carried = m.carried_forward && m.carried_forward[i][j];
      c[v] += 1;
      if (carried && v === "wrong") c.carried_forward += 1;
      const td = input.closest("td");
      const mark = $(".mark", td), sr = $(".visually-hidden", td);
      if (v === "correct") { td.classList.add("ok"); mark.textContent = "✓"; }
      else if (v === "wrong" && carried) { td.classList.add("ecf"); mark.textContent = "↪"; }
      else if (v === "wrong") { td.classList.add("bad"); mark.textContent = "✗"; input.setAttribute("aria-invalid", "true"); }
      else if (v === "invalid") { td.classList.add("bad"); mark.textContent = "?"; input.setAttribute("aria-invalid", "true"); }
      sr.textContent = v === "blank" ? "" : (carried ? _t("wrong, but right from your own earlier answers") : VERDICT_TEXT[v]);
      input.removeAttribute("title");
      const notes = [];
      if (v === "invalid") notes.push(el("span", { class: "why", text: unreadableReason(input.value, errs[`${i},${j}`]) }));
      if (m.expected && (v === "wrong" || v === "invalid")) {
        notes.push(el("span", { class: "expected", text: `expected ${m.expected[i][j]}` }));
      }
      if (notes.length) {
        const note = el("span", { class: "cell-note", id: input.id + "-n" }, ...notes);
        td.append(note);
        input.setAttribute("aria-describedby", `${input.id}-v ${input.id}-n`);
      }
    });
    const total = mine ? mine.cells.size : m.shape[0] * m.shape[1];
    const parts = [mine ? _t("{n} of {total} asked correct", { n: c.correct, total }) : _t("{n} of {total} correct", { n: c.correct, total })];
    if (c.wrong) parts.push(_t("{n} wrong", { n: c.wrong }) + (c.carried_forward ? _t(" ({n} follow correctly from your earlier answers ↪)", { n: c.carried_forward }) : ""));
    if (c.blank) parts.push(_t("{n} not answered", { n: c.blank }));
    if (c.invalid) parts.push(_t("{n} could not be read", { n: c.invalid }));
    const p = $(".verdict", fs);
    const realWrong = c.wrong - (c.carried_forward || 0) + c.invalid;
    p.className = "verdict " + (realWrong ? "bad" : c.correct ? "ok" : "");
    p.textContent = parts.join(", ") + ".";
    if (m.consistent_with_earlier === true && c.wrong) {
      p.append(el("br"), _t("Consistent with your earlier answers ({grids}): the slip was earlier, not here.", { grids: m.based_on.map(gridLabel).join(", ") }));
    }
    const hasExpected = $$(".cell-note .expected", fs).length > 0;
    if (hasExpected) {   // the expected values on demand: a button, for touch and keyboard alike
      fs.classList.add("hide-expected");
      const b = el("button", { type: "button", class: "show-expected", "aria-expanded": "false", text: _t("Show the expected values") });
      b.addEventListener("click", () => {
        const on = fs.classList.toggle("hide-expected");
        b.setAttribute("aria-expanded", on ? "false" : "true");
        b.textContent = on ? _t("Show the expected values") : _t("Hide the expected values");
      });
      p.append(" ", b);
    }
    const slot = $(".diag-slot", fs);
    for (const d of byGrid[key] || []) slot.append(diagnosisBox(d, sv, key));
    if (realWrong) {
      wrongAny = true;
      if (!(byGrid[key] || []).length && m.step && c.wrong - (c.carried_forward || 0) > 0) {
        // a plain slip: no mistake named, but the step to redo is
        slot.append(el("p", { class: "reread" }, _t("A slip in {grid}: re-read Step {n}: ", { grid: label, n: m.step.number }),
          prose(m.step.title_math, m.step.title), "."));
      }
      if (sv) {
        const steps = sv.steps.filter((s) => s.result === key);
        if (steps.length) {
          const d = el("details", { class: "step" }, el("summary", { text: _t("Show the worked step for {grid}", { grid: label }) }));
          steps.forEach((s) => d.append(renderStep(s, sv)));
          $(".step-slot", fs).append(d);
        }
      }
    }
  }
  for (const fs of $$("fieldset.choice", root)) if (markChoice(fs, report)) wrongAny = true;
  const t = { correct: 0, wrong: 0, blank: 0, invalid: 0, carried_forward: 0 };    // a quiz: the asked entries
  if (asked) {
    for (const fs of $$("fieldset.grid:not(.choice)", root)) {
      for (const input of $$("input", fs)) {
        const m = report.matrices[fs.dataset.key];
        if (!m) { t.blank += 1; continue; }
        const v = m.verdicts[+input.dataset.i][+input.dataset.j];
        t[v] += 1;
        if (v === "wrong" && m.carried_forward[+input.dataset.i][+input.dataset.j]) t.carried_forward += 1;
      }
    }
    for (const q of report.questions || []) if (q.type === "choice") t[q.chosen ? (q.right ? "correct" : "wrong") : "blank"] += 1;
  }
  return { wrongAny, byGrid, sv, t };
}

/* A choice question's verdict: the option chosen marked, the points, and for a wrong option the mistake it is
 * with that mistake's feedback. True when it is wrong. */
function markChoice(fs, report) {
  const scored = (report.questions || []).find((x) => (x.name || x.ask) === fs.dataset.choice);
  const p = $(".verdict", fs), slot = $(".diag-slot", fs);
  for (const l of $$(".options label", fs)) { l.classList.remove("ok", "bad"); const m = $(".mark", l); if (m) m.remove(); }
  slot.replaceChildren();
  if (!scored) return false;
  const pts = CHOICE_WORDS.earned(scored.earned, CHOICE_WORDS.points(scored.points));
  const label = scored.chosen && $(`input[value="${CSS.escape(scored.chosen)}"]`, fs).closest("label");
  if (label) {
    label.classList.add(scored.right ? "ok" : "bad");
    label.append(el("span", { class: "mark", text: scored.right ? CHOICE_WORDS.right : CHOICE_WORDS.wrong }));
  }
  p.className = "verdict " + (!scored.chosen ? "" : scored.right ? "ok" : "bad");
  p.textContent = !scored.chosen ? CHOICE_WORDS.blank : scored.right ? CHOICE_WORDS.gotRight(pts) : CHOICE_WORDS.gotWrong(pts);
  if (scored.mistake) {
    const d = scored.mistake;
    slot.append(el("div", { class: "diag", role: "note" },
      el("p", { class: "diag-title" }, `✗ ${scored.chosen}: `, titleOf(d), " ", el("code", { text: d.code })),
      el("p", { class: "msg" }, prose(d.message_math, d.message))));
  }
  return !!scored.chosen && !scored.right;
}

/* A message with its math (the parts the server printed: text, and allow-listed MathML), or its text. */
function prose(parts, text) {
  const span = el("span", { class: "prose" });
  if (!parts) { span.textContent = humanize(text || ""); return span; }
  for (const x of parts) span.append(x.mathml ? math(x.mathml, x.text) : document.createTextNode(humanize(x.text)));
  return span;
}

/* A link to a diagnosis moves there and focuses it, without changing the address (which holds the problem). */
function goToDiagnosis(ev) {
  const a = ev.target.closest("a[href^='#diag-']");
  if (!a) return;
  ev.preventDefault();
  const d = document.getElementById(a.getAttribute("href").slice(1));
  if (!d) return;
  d.scrollIntoView({ block: "center" });
  d.focus({ preventScroll: true });
}

/* "Step 5", or "Steps 20–22" for a mistake that shows in the matrices of several steps (an update with the
 * wrong sign: W_Q, W_K and W_V's updates). */
function stepSpan(d) {
  const mats = (S.student.report && S.student.report.matrices) || {};
  const nums = [d.step.number, ...(d.matrices || []).map((k) => mats[k] && mats[k].step && mats[k].step.number)]
    .filter((n) => Number.isInteger(n));
  const lo = Math.min(...nums), hi = Math.max(...nums);
  return hi > lo ? _t("Steps {lo}–{hi}", { lo, hi }) : _t("Step {n}", { n: d.step.number });
}

function capital(t) { return t.charAt(0).toUpperCase() + t.slice(1); }

/* A mistake's title with its math (the server's title_math: "K·Qᵀ instead of Q·Kᵀ" as MathML), capitalised. */
function titleOf(d) {
  const parts = d.title_math && d.title_math.map((x, k) => (k === 0 && !x.mathml ? { text: capital(x.text) } : x));
  return prose(parts, capital(d.title));
}

/* A named mistake: what it is, where, and the step to re-read (with that step, folded). */
function diagnosisBox(d, sv, atGrid) {   // atGrid: the key of the grid it is shown at, or false
  const info = d.code === "early-rounding";
  const box = el("div", { class: "diag" + (info ? " info" : ""), role: info ? null : "note", id: d._id, tabindex: "-1" },
    el(atGrid ? "p" : "h3", { class: "diag-title" }, info ? _t("Note: ") : "✗ ", titleOf(d), " ", el("code", { text: d.code })),
    el("p", { class: "msg" }, prose(d.message_math, d.message)),
    d.matrices && d.matrices.length ? el("p", { text: _t("Where: {grids}.", { grids: d.matrices.map(gridLabel).join(", ") }) }) : null);
  if (d.step) {
    const span = stepSpan(d);
    box.append(el("p", { class: "reread" }, span !== _t("Step {n}", { n: d.step.number }) ? _t("Re-read {steps}, from Step {n}: ", { steps: span, n: d.step.number })
      : _t("Re-read {steps}: ", { steps: span }), prose(d.step.title_math, d.step.title), "."));
    const own = sv && atGrid && sv.steps[d.step.number - 1] && sv.steps[d.step.number - 1].result === atGrid;
    if (sv && sv.steps[d.step.number - 1] && !own) {   // (the grid's own step is under the grid already)
      const det = el("details", { class: "step" }, el("summary", { text: _t("Show Step {n}", { n: d.step.number }) }));
      det.append(renderStep(sv.steps[d.step.number - 1], sv, d.step.number));
      box.append(det);
    }
  }
  return box;
}

function gridLabel(key) {
  const g = S.student.view && S.student.view.grids.find((x) => x.key === key);
  return g ? g.label : key;
}

/* ------------------------------------------------------------------ worked steps */

function renderStep(step, sv, number) {
  const n = number || sv.steps.indexOf(step) + 1;
  const box = el("div", { class: "s" });
  box.append(el("h3", { text: _t("Step {n}. {title}", { n, title: step.title }) }));
  if (step.why) box.append(el("p", { class: "why", text: step.why }));
  if (step.shape) box.append(el("p", { class: "shape", text: _t("shapes: {shape}", { shape: step.shape }) }));
  for (const note of step.notes || []) box.append(el("p", { class: "notes", text: note }));
  const lines = el("div", { class: "lines", tabindex: "0", role: "region", "aria-label": _t("Step {n}, the lines", { n }) });
  let group = null;
  for (const ln of step.lines) {
    if (ln.group && ln.group !== group) {
      lines.append(el("p", { class: "group", text: ln.group.charAt(0).toUpperCase() + ln.group.slice(1) }));
    }
    group = ln.group;
    lines.append(el("div", { class: "line" }, math(ln.mathml, ln.text)));
  }
  box.append(lines);
  const m = step.result && sv.matrices[step.result];
  // the heading says "=" only over a matrix that is exact as shown, "≈" over rounded decimals (the server
  // decides); when the key shows the exact matrix too, it comes first, as on the printed key
  if (m) {
    const figs = el("div", { class: "mats" });
    for (const x of m.exact ? [m.exact, m] : [m]) {
      figs.append(el("figure", { class: "mat" },
        el("figcaption", {}, math(x.heading.mathml, x.heading.text), x.caption ? el("span", { class: "shape", text: x.caption }) : null),
        matrixTable(x.rows, x.cols, x.cells, `${step.result}${x.caption ? ", " + x.caption : ""}`, x.row_math)));
    }
    box.append(figs);
  }
  return box;
}

async function showSolution() {
  const btn = $("#show-solution");
  busy(btn, true, _t("Loading…"));
  const parts = S.student.parts || [null];       // a mixed variant: each part's solution under its name
  const views = [];
  for (const p of parts) {
    if (p) usePart(p);
    views.push(await solutionView());
  }
  if (parts[0]) usePart(null);
  busy(btn, false);
  if (views.some((sv) => !sv)) { $("#check-status").textContent = _t("The worked solution is not available on this server."); return; }
  const body = $("#solution-body");
  body.replaceChildren();
  views.forEach((sv, k) => {
    const steps = el("div", { class: "steps" });
    sv.steps.forEach((s, n) => steps.append(renderStep(s, sv, n + 1)));
    if (parts[k]) body.append(el("h3", { class: "part-head", text: partName(parts[k]) }));
    body.append(steps);
  });
  const sec = $("#solution");
  sec.hidden = false;
  sec.focus();
  sec.scrollIntoView({ block: "start" });
}

/* ------------------------------------------------------------------ teacher */

const T_FIELDS = { title: "#t-title", tokens: "#t-tokens", d_model: "#t-dmodel", d_k: "#t-dk", d_v: "#t-dv",
  heads: "#t-heads", scale: "#t-scale", mask: "#t-mask", decimals: "#t-decimals" };

function teacherShape() {
  const v = (k) => $(T_FIELDS[k]).value.trim();
  const toks = v("tokens").split(/[\s,]+/).filter(Boolean);
  const int = (k, lo, hi) => {
    const x = Number(v(k));
    if (!Number.isInteger(x) || x < lo || x > hi) throw new Error(_t("{field}: expected a whole number from {lo} to {hi}", { field: $(T_FIELDS[k]).labels[0].firstChild.textContent.trim(), lo, hi }));
    return x;
  };
  const L = S.info.limits;
  if (toks.length < 1) throw new Error(_t("Tokens: type at least one token"));
  if (toks.length > L.tokens) throw new Error(_t("Tokens: at most {n}", { n: L.tokens }));
  return { title: v("title"), tokens: toks, d_model: int("d_model", 1, L.dim), d_k: int("d_k", 1, L.dim),
    d_v: int("d_v", 1, L.dim), heads: int("heads", 1, L.heads), scale: v("scale") || "sqrt",
    mask: v("mask"), decimals: int("decimals", 0, L.decimals) };
}

function teacherMatrices(sh) {
  const nums = (k) => Array.from({ length: k }, (_, i) => String(i + 1));
  const mats = [{ key: "X", label: "X", rows: sh.tokens, cols: nums(sh.d_model) }];
  for (let h = 1; h <= sh.heads; h++) {
    const pre = sh.heads > 1 ? `head ${h} ` : "";
    mats.push({ key: `h${h}.W_Q`, label: `${pre}W_Q`, rows: nums(sh.d_model), cols: nums(sh.d_k) });
    mats.push({ key: `h${h}.W_K`, label: `${pre}W_K`, rows: nums(sh.d_model), cols: nums(sh.d_k) });
    mats.push({ key: `h${h}.W_V`, label: `${pre}W_V`, rows: nums(sh.d_model), cols: nums(sh.d_v) });
  }
  const block = !!(S.teacher.extra || {}).block;    // a Transformer block's attention always has W_O
  if (sh.heads > 1 || block) mats.push({ key: "W_O", label: "W_O", rows: nums(sh.heads * sh.d_v), cols: nums(sh.d_model) });
  if ($("#t-train").checked && !block) {   // (a block's training step has its targets, kept as loaded)   // the training step's target: the shape of Z
    mats.push({ key: "T", label: "target T", rows: sh.tokens, cols: nums(sh.heads > 1 ? sh.d_model : sh.d_v) });
  }
  return mats;
}

function renderTeacherGrids(values) {
  const err = $("#teacher-error");
  showError(err, null);
  let sh;
  try { sh = teacherShape(); } catch (e) { showError(err, e); return; }
  const old = {};
  for (const fs of $$("#teacher-grids fieldset")) old[fs.dataset.key] = readGrid($("table", fs));
  const box = $("#teacher-grids");
  box.replaceChildren();
  for (const m of teacherMatrices(sh)) {
    const vals = (values && values[m.key]) || old[m.key];
    const fs = el("fieldset", { class: "grid teacher-mat", "data-key": m.key },
      el("legend", { text: `${m.label} (${m.rows.length}×${m.cols.length})` }),
      el("div", { class: "scroll" }, inputGrid("t-" + m.key.replace(/\W/g, "_"), m.label, m.rows, m.cols, { values: vals,
        onPasteError: (msg, ok) => { if (ok) { showError($("#teacher-error"), null); $("#teacher-status").textContent = msg; } else showError($("#teacher-error"), msg); } })));
    box.append(fs);
  }
}

/* What the grids do not edit is kept as loaded: a chain of blocks whole, cross-attention's encoder side. */
const T_EDITED = new Set(["title", "tokens", "X", "W_Q", "W_K", "W_V", "heads", "W_O", "scale", "mask", "decimals", "train"]);

function fillTeacher(problem) {
  S.teacher.whole = null;
  S.teacher.extra = {};
  const note = $("#t-whole");
  note.hidden = true;
  if (problem.blocks) {     // a chain: previewed and downloaded as loaded (its TOML file is where it is edited)
    S.teacher.whole = problem;
    note.textContent = _t("“{title}” is a chain of {n} blocks: the key, the sheets and the quiz use it as loaded (edit its TOML file to change it). Make the grids to enter a problem instead.",
      { title: problem.title, n: problem.blocks.length });
    note.hidden = false;
    $("#teacher-grids").replaceChildren();
    return;
  }
  for (const [k, v] of Object.entries(problem)) if (!T_EDITED.has(k)) S.teacher.extra[k] = v;
  $("#t-train").checked = !!problem.train;
  if (problem.train) $("#t-lr").value = String(problem.train.lr);
  const heads = problem.heads || [{ W_Q: problem.W_Q, W_K: problem.W_K, W_V: problem.W_V }];
  $(T_FIELDS.title).value = problem.title || "";
  $(T_FIELDS.tokens).value = problem.tokens.join(" ");
  $(T_FIELDS.d_model).value = problem.X[0].length;
  $(T_FIELDS.d_k).value = heads[0].W_Q[0].length;
  $(T_FIELDS.d_v).value = heads[0].W_V[0].length;
  $(T_FIELDS.heads).value = heads.length;
  $(T_FIELDS.scale).value = String(problem.scale);
  $(T_FIELDS.mask).value = problem.mask;
  $(T_FIELDS.decimals).value = problem.decimals;
  const values = { X: problem.X };
  heads.forEach((h, k) => { values[`h${k + 1}.W_Q`] = h.W_Q; values[`h${k + 1}.W_K`] = h.W_K; values[`h${k + 1}.W_V`] = h.W_V; });
  if (problem.W_O) values.W_O = problem.W_O;
  if (problem.train) values.T = problem.train.target;
  $("#teacher-grids").replaceChildren();
  renderTeacherGrids(values);
}

function teacherProblem() {
  if (S.teacher.whole) return S.teacher.whole;
  const sh = teacherShape();
  const grids = {};
  for (const fs of $$("#teacher-grids fieldset")) {
    for (const input of $$("input", fs)) {
      if (input.value.trim() === "") {
        input.focus();
        throw new Error(_t("{cell} is empty", { cell: input.getAttribute("aria-label") }));
      }
    }
    grids[fs.dataset.key] = readGrid($("table", fs));
  }
  if (!grids.X || grids.X.length !== sh.tokens.length || grids.X[0].length !== sh.d_model) {
    throw new Error(_t("The grids do not match the sizes above: press “Make the grids” first"));
  }
  const p = { title: sh.title, tokens: sh.tokens, X: grids.X, scale: sh.scale, mask: sh.mask, decimals: sh.decimals };
  const block = !!(S.teacher.extra || {}).block;
  if (sh.heads === 1) Object.assign(p, { W_Q: grids["h1.W_Q"], W_K: grids["h1.W_K"], W_V: grids["h1.W_V"] }, block ? { W_O: grids.W_O } : {});
  else {
    p.heads = [];
    for (let h = 1; h <= sh.heads; h++) p.heads.push({ W_Q: grids[`h${h}.W_Q`], W_K: grids[`h${h}.W_K`], W_V: grids[`h${h}.W_V`] });
    p.W_O = grids.W_O;
  }
  Object.assign(p, S.teacher.extra || {});
  if (block) {      // a block's training step: cross-entropy on its targets (which need its output layer)
    if ($("#t-train").checked) p.train = { loss: "cross-entropy", lr: $("#t-lr").value.trim() || "1/10" };
  } else if ($("#t-train").checked) {
    if (!grids.T) throw new Error(_t("The training step needs its target T: press “Make the grids” first"));
    p.train = { target: grids.T, loss: "mse", lr: $("#t-lr").value.trim() || "1/10" };
  }
  return p;
}

async function teacherAction(fn, button) {
  const err = $("#teacher-error"), status = $("#teacher-status");
  showError(err, null);
  status.textContent = "";
  busy(button, true);
  try { await fn(); } catch (e) { showError(err, e); } finally { busy(button, false); }
}

async function download(problem, doc, fmt) {
  const resp = await fetch("/api/download", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ problem, document: doc, format: fmt }),
  });
  if (!resp.ok) {
    let msg = _t("the server answered {status}", { status: resp.status });
    try { msg = (await resp.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  await saveBlob(resp, `${doc}.${fmt}`);
}

/* The knobs of the random form as the options of `worked new` (a family). */
function randomFamily() {
  const v = (k) => $("#r-" + k).value.trim();
  const whole = (k, label) => {
    if (!/^-?\d+$/.test(v(k))) throw new Error(_t("{field}: expected a whole number", { field: label }));
    return parseInt(v(k), 10);
  };
  const family = {
    d_model: whole("d_model", "d_model"), d_k: whole("d_k", "d_k"), heads: whole("heads", _t("Heads")),
    range: [whole("lo", _t("Smallest entry")), whole("hi", _t("Largest entry"))], mask: v("mask"),
    scale: v("scale") || "sqrt", decimals: whole("decimals", _t("Decimals")),
  };
  if (/^\d+$/.test(v("tokens"))) family.tokens = parseInt(v("tokens"), 10);
  else family.words = v("tokens").split(/[\s,]+/).filter(Boolean);
  if (v("d_v")) family.d_v = whole("d_v", "d_v");
  if (v("wlo") || v("whi")) family.weight_range = [whole("wlo", _t("Smallest weight-matrix entry")), whole("whi", _t("Largest weight-matrix entry"))];
  const number = (k, label) => {
    if (!/^\d*\.?\d+$/.test(v(k))) throw new Error(_t("{field}: expected a number such as 0.5", { field: label }));
    return parseFloat(v(k));
  };
  if (v("max_weight")) family.max_weight = number("max_weight", _t("Largest weight"));
  if (v("min_weight")) family.min_weight = number("min_weight", _t("Smallest weight"));
  if (v("max_score")) family.max_score = number("max_score", _t("Largest |scaled score|"));
  family.ties = $("#r-ties").checked;
  // the architectures the solver has: cross-attention, a chain of blocks, a training step
  if (v("attention") === "cross") {
    family.attention = "cross";
    if (family.mask === "none") delete family.mask;
    if (/^\d+$/.test(v("tokens_enc"))) family.tokens_enc = parseInt(v("tokens_enc"), 10);
    else if (v("tokens_enc")) family.tokens_enc = v("tokens_enc").split(/[\s,]+/).filter(Boolean);
  }
  if (v("blocks")) {
    family.blocks = v("blocks").split(/[\s,]+/).filter(Boolean);
    for (const k of ["attention", "mask", "heads"]) delete family[k];
    if (family.blocks.includes("cross") && v("tokens_enc")) {
      family.tokens_enc = /^\d+$/.test(v("tokens_enc")) ? parseInt(v("tokens_enc"), 10) : v("tokens_enc").split(/[\s,]+/).filter(Boolean);
    }
  }
  if (v("block")) {          // a whole Transformer block: its own knobs, which worked new takes only with --block
    family.block = v("block");
    if (v("positional") !== "none") family.positional = v("positional");
    if (v("d_ff")) family.d_ff = whole("d_ff", "d_ff");
    if (v("vocab")) family.vocab = whole("vocab", _t("Vocabulary"));
    if (v("eps")) family.eps = v("eps");
  }
  if ($("#r-train").checked) family.train = true;
  if (v("lr")) family.lr = v("lr");
  return family;
}

/* The knobs of `worked new`: [key, label, the random form's value, help]. The random form shows them all (and a
 * seed); the quiz builder shows them per part, empty meaning the default. */
const KNOBS = [
  ["tokens", _t("Tokens"), "3", _t("a count, or words separated by spaces")],
  ["d_model", "d_model", "4"], ["d_k", "d_k", "2"], ["d_v", "d_v", "", _t("empty: same as d_k")],
  ["heads", _t("Heads"), "1"], ["lo", _t("Smallest entry"), "-2"], ["hi", _t("Largest entry"), "3"],
  ["wlo", _t("Smallest weight-matrix entry"), "", _t("empty: as the entries")], ["whi", _t("Largest weight-matrix entry"), "", _t("empty: as the entries")],
  ["mask", _t("Mask"), "none"], ["scale", _t("Scale"), "sqrt", _t("sqrt, none or a number")], ["decimals", _t("Decimals"), "2", _t("the places shown and asked")],
  ["max_weight", _t("Largest weight"), "0.9", _t("in every softmax row")], ["min_weight", _t("Smallest weight"), "", _t("empty: one unit of the last place")],
  ["max_score", _t("Largest |scaled score|"), "5", _t("0: no limit")], ["ties", _t("Allow ties for the largest score"), ""],
  ["attention", _t("Attention"), "self"], ["tokens_enc", _t("Encoder tokens"), "", _t("cross: a count or words; empty: as the tokens")],
  ["blocks", _t("Blocks"), "", _t("a chain, such as self-causal, cross; empty: one block")],
  ["block", _t("Transformer block"), ""], ["positional", _t("Positions"), "none"],
  ["d_ff", "d_ff", "", _t("the feed-forward's width; empty: d_model")],
  ["vocab", _t("Vocabulary"), "", _t("an output layer over N words; empty: none")],
  ["eps", _t("Layer norm's ε"), "", _t("exact, such as 1/100; empty: 0")],
  ["train", _t("Add a training step"), ""], ["lr", _t("Learning rate"), "", _t("empty: the default")],
];
const KNOB_TEXT = ["tokens", "scale", "tokens_enc", "blocks", "lr", "eps"];      // typed as text, not as a number

/* One knob's field: a labelled select, checkbox or input (id *id*, value *def*). */
function knobField(id, key, label, def, help) {
  let input;
  if (key === "mask") input = el("select", { id }, el("option", { text: "none" }), el("option", { text: "causal" }));
  else if (key === "attention") input = el("select", { id }, el("option", { text: "self" }), el("option", { text: "cross" }));
  else if (key === "block") input = el("select", { id }, el("option", { value: "", text: _t("none (attention only)") }),
    el("option", { text: "post-ln" }), el("option", { text: "pre-ln" }));
  else if (key === "positional") input = el("select", { id }, el("option", { text: "none" }), el("option", { text: "sinusoidal" }));
  else if (key === "train" || key === "ties") input = el("input", { id, type: "checkbox" });
  else input = el("input", { id, value: def, spellcheck: "false", placeholder: { d_ff: "d_model", eps: "0" }[key] || null,
    inputmode: KNOB_TEXT.includes(key) ? null : ["max_weight", "min_weight", "max_score"].includes(key) ? "decimal" : "numeric" });
  return el("div", { class: "field" + (["tokens", "blocks", "tokens_enc"].includes(key) ? " wide" : "") },
    el("label", { for: id }, label, help ? el("span", { class: "sub", text: ` (${help})` }) : null), input);
}

function buildRandomForm() {
  const form = $("#random-form");
  for (const [key, label, def, help] of [...KNOBS, ["seed", _t("Seed"), "1"]]) form.append(knobField("r-" + key, key, label, def, help));
  form.append(el("div", { class: "field wide" }, el("button", { type: "submit", class: "primary", id: "draw", text: _t("Draw a problem") })));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    teacherAction(async () => {
      const family = randomFamily();
      const v = (k) => $("#r-" + k).value.trim();
      if (!/^\d+$/.test(v("seed"))) throw new Error(_t("Seed: expected a whole number"));
      const seed = parseInt(v("seed"), 10);
      family.title = _t("random problem (seed {seed})", { seed });
      const data = await api("/api/new", { family, seed });
      S.teacher.problem = data.problem;
      fillTeacher(data.problem);
      $("#teacher-status").textContent = _t("Drew “{title}”. Preview the key or download below.", { title: data.problem.title });
    }, $("#draw"));
  });
}

/* ------------------------------------------------------------------ teacher: the quiz builder
 * The spec as form fields: the quiz's own fields, then per part its problem family (the knobs of `worked new`) and
 * its questions, one row each. quizSpec() reads them as the spec's tables; the server writes them as the TOML
 * `worked quiz` reads (shown under the form), checks them as that command does while they are typed
 * (POST /api/quiz-form: each question's error in the spec reader's words, and the matrices for the ask picker),
 * and makes the quiz from them. */

const QUIZ_WORDS = {
  part: (k) => _t("Part {k}", { k }), single: _t("The problem and its questions"), question: (k) => _t("Question {k}", { k }),
  family: _t("Problem family (the knobs of worked new; empty: the default)"), useRandom: _t("Use the random problem's knobs"),
  addQuestion: _t("Add a question"), removePart: _t("Remove this part"), up: _t("Move up"), down: _t("Move down"), remove: _t("Remove"),
  ask: _t("Ask"), askHelp: _t("such as scores[2,3], weights[1,*] or Z"), matrix: _t("Matrix"), row: _t("Row"), col: _t("Column"),
  every: (what) => (what === "row" ? _t("every row (*)") : _t("every column (*)")), typed: _t("(as typed)"), type: _t("Type"), value: _t("a number to type"),
  choice: _t("choose among options"), choices: _t("Options"), choicesHelp: _t("empty: 4; the right value and named mistakes' values"),
  points: _t("Points"), pointsHelp: _t("empty: 1"), abs: _t("Tolerance ±"), absHelp: _t("absolute; empty: one unit of the last place"),
  rel: _t("Relative tolerance"), relHelp: _t("0.02 is 2 %"), name: _t("Name"), nameHelp: _t("empty: q1, q2, …"),
  partTitle: _t("Title of the part"),
  ready: (q, p) => (p > 1 ? (q === 1 ? _t("The spec makes a quiz: {q} question in {p} parts.", { q, p }) : _t("The spec makes a quiz: {q} questions in {p} parts.", { q, p }))
    : (q === 1 ? _t("The spec makes a quiz: {q} question.", { q }) : _t("The spec makes a quiz: {q} questions.", { q }))),
  notYet: _t("The spec cannot make a quiz yet: "),
};

const QUIZ_START = { title: "Attention quiz 1", seed: 2026, count: 2,
  family: { tokens: 3, d_model: 4, d_k: 2, range: [-2, 3] },
  questions: [{ ask: "scores[2,3]", points: 1, tolerance: 0.01 }, { ask: "weights[1,*]", points: 2, tolerance: 0.01 },
    { ask: "Z", points: 3, tolerance: 0.02 }] };

/* A field's text as the spec holds it: a whole number, a decimal, or the text (which the server then refuses, in
 * the spec reader's words). */
function specNumber(s) {
  if (/^-?\d{1,15}$/.test(s)) return parseInt(s, 10);
  if (/^-?\d*\.\d+$/.test(s)) return parseFloat(s);
  return s;
}
const wordsOf = (s) => s.split(/[\s,]+/).filter(Boolean);

const FAMILY_FORM_KEYS = new Set(["tokens", "words", "tokens_enc", "d_model", "d_k", "d_v", "heads", "range",
  "weight_range", "mask", "scale", "decimals", "max_weight", "min_weight", "max_score", "ties", "attention", "blocks",
  "train", "lr", "block", "positional", "d_ff", "vocab", "eps"]);

/* A part's family from its knobs: only what is filled in (the rest is worked new's default). */
function partFamily(part) {
  const pre = part.dataset.pre;
  const v = (k) => $(`#${pre}-${k}`, part).value.trim();
  const on = (k) => $(`#${pre}-${k}`, part).checked;
  const given = new Set(JSON.parse(part.dataset.given || "[]"));    // a default the loaded spec said is kept said
  const fam = {};
  if (v("attention") === "cross" || given.has("attention")) fam.attention = v("attention");
  if (v("blocks")) fam.blocks = wordsOf(v("blocks"));
  if (/^\d+$/.test(v("tokens"))) fam.tokens = specNumber(v("tokens"));
  else if (v("tokens")) fam.words = wordsOf(v("tokens"));
  if (v("tokens_enc")) fam.tokens_enc = /^\d+$/.test(v("tokens_enc")) ? specNumber(v("tokens_enc")) : wordsOf(v("tokens_enc"));
  for (const k of ["d_model", "d_k", "d_v", "heads"]) if (v(k)) fam[k] = specNumber(v(k));
  if (v("lo") || v("hi")) fam.range = [specNumber(v("lo")), specNumber(v("hi"))];
  if (v("wlo") || v("whi")) fam.weight_range = [specNumber(v("wlo")), specNumber(v("whi"))];
  if (v("mask") === "causal" || given.has("mask")) fam.mask = v("mask");
  if (v("scale")) fam.scale = specNumber(v("scale"));
  for (const k of ["decimals", "max_weight", "min_weight", "max_score"]) if (v(k)) fam[k] = specNumber(v(k));
  for (const k of ["ties", "train"]) if (on(k) || given.has(k)) fam[k] = on(k);
  if (v("lr")) fam.lr = specNumber(v("lr"));
  if (v("block")) fam.block = v("block");
  if (v("positional") === "sinusoidal" || given.has("positional")) fam.positional = v("positional");
  for (const k of ["d_ff", "vocab"]) if (v(k)) fam[k] = specNumber(v(k));
  if (v("eps")) fam.eps = v("eps");
  return Object.assign(fam, JSON.parse(part.dataset.extra || "{}"));
}

function fillPartFamily(part, fam) {
  const pre = part.dataset.pre;
  const set = (k, x) => {
    const e = $(`#${pre}-${k}`, part);
    if (e.type === "checkbox") e.checked = !!x;
    else e.value = x === undefined || x === null ? "" : Array.isArray(x) ? x.join(k === "blocks" ? ", " : " ") : String(x);
  };
  set("tokens", fam.words || fam.tokens);
  set("tokens_enc", fam.tokens_enc);
  for (const k of ["d_model", "d_k", "d_v", "heads", "scale", "decimals", "max_weight", "min_weight", "max_score", "lr", "blocks", "ties", "train"]) set(k, fam[k]);
  set("lo", (fam.range || [])[0]); set("hi", (fam.range || [])[1]);
  set("wlo", (fam.weight_range || [])[0]); set("whi", (fam.weight_range || [])[1]);
  set("mask", fam.mask === "causal" ? "causal" : "none");
  set("attention", fam.attention === "cross" ? "cross" : "self");
  set("block", fam.block === "post-ln" || fam.block === "pre-ln" ? fam.block : "");
  set("positional", fam.positional === "sinusoidal" ? "sinusoidal" : "none");
  for (const k of ["d_ff", "vocab", "eps"]) set(k, fam[k]);
  const extra = {};
  // (a value the selects do not offer is kept as loaded, for the spec's reader to refuse by name)
  const offered = { block: ["post-ln", "pre-ln"], positional: ["none", "sinusoidal"] };
  for (const [k, x] of Object.entries(fam)) if (!FAMILY_FORM_KEYS.has(k) || (offered[k] && !offered[k].includes(x))) extra[k] = x;
  part.dataset.extra = JSON.stringify(extra);
  part.dataset.given = JSON.stringify(Object.keys(fam).filter((k) => ["mask", "attention", "ties", "train", "positional"].includes(k)));
}

const QUESTION_FORM_KEYS = new Set(["name", "ask", "type", "choices", "points", "tolerance"]);

/* A question row as a [[questions]] table: only what is filled in. */
function rowQuestion(row) {
  const v = (k) => $(`[data-q="${k}"]`, row).value.trim();
  const q = {};
  if (v("name")) q.name = v("name");
  if (v("ask")) q.ask = v("ask");
  if (v("type") === "choice") { q.type = "choice"; if (v("choices")) q.choices = specNumber(v("choices")); }
  if (v("points")) q.points = specNumber(v("points"));
  if (v("type") !== "choice" && v("rel")) q.tolerance = Object.assign(v("abs") ? { abs: specNumber(v("abs")) } : {}, { rel: specNumber(v("rel")) });
  else if (v("type") !== "choice" && v("abs")) q.tolerance = specNumber(v("abs"));
  return Object.assign(q, JSON.parse(row.dataset.extra || "{}"));
}

let quizSeq = 0;      // ids of the builder's rows and parts: stable when rows move

function qField(id, key, label, help, input, cls) {
  input.id = id;
  input.dataset.q = key;
  return el("div", { class: "field" + (cls ? " " + cls : "") },
    el("label", { for: id }, label, help ? el("span", { class: "sub", text: ` (${help})` }) : null), input);
}

function questionRow(part, q = {}) {
  const n = ++quizSeq, id = (k) => `qq${n}-${k}`, W = QUIZ_WORDS;
  const t = q.tolerance;
  const abs = typeof t === "object" && t !== null ? t.abs : t, rel = typeof t === "object" && t !== null ? t.rel : undefined;
  const text = (x) => (x === undefined || x === null ? "" : String(x));
  const input = (x, mode) => el("input", { value: text(x), spellcheck: "false", autocomplete: "off", inputmode: mode || null });
  const row = el("li", { class: "qrow", "data-n": n });
  const legend = el("legend", {});
  const err = el("p", { class: "q-err", id: id("err"), hidden: true });
  const type = el("select", {}, el("option", { value: "value", text: `value (${W.value})` }), el("option", { value: "choice", text: `choice (${W.choice})` }));
  type.value = q.type === "choice" ? "choice" : "value";
  const picker = el("div", { class: "picker" },
    qField(id("mat"), "mat", W.matrix, null, el("select", {})),
    qField(id("row"), "row", W.row, null, el("select", {})),
    qField(id("col"), "col", W.col, null, el("select", {})));
  const fs = el("fieldset", { class: "qfields" }, legend,
    qField(id("ask"), "ask", W.ask, W.askHelp, input(q.ask), "wide"), picker,
    qField(id("type"), "type", W.type, null, type, "wide"),
    qField(id("choices"), "choices", W.choices, W.choicesHelp, input(q.choices, "numeric"), "when-choice"),
    qField(id("points"), "points", W.points, W.pointsHelp, input(q.points, "decimal")),
    qField(id("abs"), "abs", W.abs, W.absHelp, input(abs, "decimal"), "when-value"),
    qField(id("rel"), "rel", W.rel, W.relHelp, input(rel, "decimal"), "when-value"),
    qField(id("name"), "name", W.name, W.nameHelp, input(q.name)),
    el("div", { class: "row-buttons" },
      el("button", { type: "button", "data-act": "up", text: "↑ " + W.up }),
      el("button", { type: "button", "data-act": "down", text: "↓ " + W.down }),
      el("button", { type: "button", "data-act": "remove", text: W.remove })),
    err);
  row.append(fs);
  const extra = {};
  for (const [k, x] of Object.entries(q)) if (!QUESTION_FORM_KEYS.has(k)) extra[k] = x;
  row.dataset.extra = JSON.stringify(extra);
  showQuestionType(row);
  fillPicker(row, JSON.parse(part.dataset.matrices || "[]"));
  return row;
}

function showQuestionType(row) {
  const choice = $('[data-q="type"]', row).value === "choice";
  for (const f of $$(".when-choice", row)) f.hidden = !choice;
  for (const f of $$(".when-value", row)) f.hidden = choice;
}

/* The ask picker: the part's matrices, and a row and a column (or every one), kept in step with the ask typed. */
function fillPicker(row, matrices) {
  const mat = $('[data-q="mat"]', row);
  const W = QUIZ_WORDS;
  mat.replaceChildren(el("option", { value: "", text: W.typed }),
    ...matrices.map((m) => el("option", { value: m.key, text: m.words ? `${m.key}: ${m.words}` : m.key })));
  row.matrices = matrices;
  pickerFromAsk(row);
}

function setIndexOptions(select, size, what) {
  const keep = select.value;
  select.replaceChildren(el("option", { value: "*", text: QUIZ_WORDS.every(what) }),
    ...Array.from({ length: size }, (_, i) => el("option", { value: String(i + 1), text: String(i + 1) })));
  select.value = [...select.options].some((o) => o.value === keep) ? keep : "*";
}

function pickerFromAsk(row) {
  const ask = $('[data-q="ask"]', row).value.trim();
  const m = /^([A-Za-z][\w.]*)\s*(?:\[\s*([^,\]]+?)\s*,\s*([^,\]]+?)\s*\])?$/.exec(ask);
  const found = m && (row.matrices || []).find((x) => x.key === m[1]);
  const mat = $('[data-q="mat"]', row), r = $('[data-q="row"]', row), c = $('[data-q="col"]', row);
  mat.value = found ? found.key : "";
  setIndexOptions(r, found ? found.rows : 0, "row");
  setIndexOptions(c, found ? found.cols : 0, "column");
  if (found && m[2]) { r.value = [...r.options].some((o) => o.value === m[2]) ? m[2] : "*"; c.value = [...c.options].some((o) => o.value === m[3]) ? m[3] : "*"; }
  const scalar = found && found.rows === 1 && found.cols === 1;
  r.closest(".field").hidden = c.closest(".field").hidden = !found || scalar;
}

function askFromPicker(row, changed) {
  const mat = $('[data-q="mat"]', row), r = $('[data-q="row"]', row), c = $('[data-q="col"]', row);
  const found = (row.matrices || []).find((x) => x.key === mat.value);
  if (!found) return;
  if (changed === "mat") { setIndexOptions(r, found.rows, "row"); setIndexOptions(c, found.cols, "column"); }
  const scalar = found.rows === 1 && found.cols === 1;
  r.closest(".field").hidden = c.closest(".field").hidden = scalar;
  $('[data-q="ask"]', row).value = scalar || (r.value === "*" && c.value === "*") ? found.key : `${found.key}[${r.value},${c.value}]`;
}

const isTable = (x) => typeof x === "object" && x !== null && !Array.isArray(x);

function quizPart(spec = {}) {
  const n = ++quizSeq, pre = `qp${n}`, W = QUIZ_WORDS;
  const part = el("fieldset", { class: "qpart", "data-pre": pre });
  part.append(el("legend", {}));
  part.append(el("div", { class: "field part-title" }, el("label", { for: `${pre}-title`, text: W.partTitle }),
    el("input", { id: `${pre}-title`, value: spec.title || "", maxlength: "200" })));
  const knobs = el("div", { class: "knobs" });
  for (const [key, label, , help] of KNOBS) knobs.append(knobField(`${pre}-${key}`, key, label, "", help));
  const famErr = el("p", { class: "alert fam-err", id: `${pre}-famerr`, hidden: true });
  part.append(el("details", { class: "family", open: true }, el("summary", { text: W.family }), knobs,
    el("p", {}, el("button", { type: "button", class: "use-random", text: W.useRandom }))), famErr);
  part.append(el("ol", { class: "qrows" }));
  part.append(el("p", { class: "actions" }, el("button", { type: "button", class: "add-question", text: W.addQuestion }),
    el("button", { type: "button", class: "remove-part", text: W.removePart })));
  fillPartFamily(part, isTable(spec.family) ? spec.family : {});
  const extra = {};
  for (const [k, x] of Object.entries(spec)) if (!["title", "family", "questions"].includes(k)) extra[k] = x;
  part.dataset.partExtra = JSON.stringify(extra);
  const qs = Array.isArray(spec.questions) && spec.questions.length ? spec.questions : [{}];
  for (const q of qs) $(".qrows", part).append(questionRow(part, isTable(q) ? q : {}));
  return part;
}

/* Numbers, legends and labels after rows or parts were added, moved or removed. */
function renumberQuiz() {
  const parts = $$("#q-parts > fieldset.qpart");
  const mixed = S.quiz.mixed || parts.length > 1;
  parts.forEach((part, pk) => {
    const head = mixed ? QUIZ_WORDS.part(pk + 1) : QUIZ_WORDS.single;
    $("legend", part).textContent = head;
    $(".part-title", part).hidden = !mixed;
    $(".remove-part", part).hidden = parts.length < 2;
    $(".remove-part", part).setAttribute("aria-label", `${QUIZ_WORDS.removePart}: ${head}`);
    $(".add-question", part).setAttribute("aria-label", _t("Add a question to {part}", { part: lowered(head) }));
    $(".use-random", part).setAttribute("aria-label", _t("Use the random problem's knobs in {part}", { part: lowered(head) }));
    const rows = $$(".qrows > li", part);
    rows.forEach((row, k) => {
      const what = mixed ? _t("{question} of {part}", { question: QUIZ_WORDS.question(k + 1), part: lowered(head) }) : QUIZ_WORDS.question(k + 1);
      $("legend", row).textContent = QUIZ_WORDS.question(k + 1);
      for (const b of $$("[data-act]", row)) {
        b.setAttribute("aria-label", `${b.textContent.replace(/^[↑↓] /, "")}: ${what}`);
        const stuck = (b.dataset.act === "up" && k === 0) || (b.dataset.act === "down" && k === rows.length - 1) ||
          (b.dataset.act === "remove" && rows.length === 1);
        if (stuck) b.setAttribute("aria-disabled", "true"); else b.removeAttribute("aria-disabled");
      }
    });
  });
}

/* The spec's tables from the form. */
function quizSpec() {
  const v = (id) => $(id).value.trim();
  const spec = {};
  if (v("#q-title")) spec.title = v("#q-title");
  if (v("#q-seed")) spec.seed = specNumber(v("#q-seed"));
  if (v("#q-count")) spec.count = specNumber(v("#q-count"));
  if (v("#q-paper")) spec.paper = v("#q-paper");
  if (v("#q-instructions")) spec.instructions = $("#q-instructions").value;
  Object.assign(spec, S.quiz.extra || {});
  const parts = $$("#q-parts > fieldset.qpart").map((part) => {
    const p = { family: partFamily(part), questions: $$(".qrows > li", part).map(rowQuestion) };
    const title = $(`#${part.dataset.pre}-title`).value.trim();
    return Object.assign(title ? { title } : {}, JSON.parse(part.dataset.partExtra || "{}"), p);
  });
  if (S.quiz.mixed || parts.length > 1) spec.parts = parts;
  else Object.assign(spec, { family: parts[0].family, questions: parts[0].questions });
  return spec;
}

function fillQuiz(spec) {
  const set = (id, x) => { $(id).value = x === undefined || x === null ? "" : String(x); };
  if (!isTable(spec)) spec = {};
  set("#q-title", spec.title); set("#q-seed", spec.seed); set("#q-count", spec.count);
  set("#q-paper", spec.paper); set("#q-instructions", spec.instructions);
  S.quiz.extra = {};
  for (const [k, x] of Object.entries(spec)) {
    if (!["title", "seed", "count", "paper", "instructions", "family", "questions", "parts"].includes(k)) S.quiz.extra[k] = x;
  }
  S.quiz.mixed = Array.isArray(spec.parts);
  const parts = S.quiz.mixed ? spec.parts : [{ family: spec.family, questions: spec.questions }];
  $("#q-parts").replaceChildren(...(parts.length ? parts : [{}]).map((p) => quizPart(isTable(p) ? p : {})));
  renumberQuiz();
  checkQuiz(true);
}

/* The spec checked as it is typed: each question's error at its row, the family's at its knobs, the matrices for
 * the pickers, the TOML under the form. */
function checkQuiz(now) {
  clearTimeout(S.quiz.timer);
  S.quiz.timer = setTimeout(async () => {
    const seq = ++S.quiz.seq;
    let r;
    try { r = await api("/api/quiz-form", { spec: quizSpec() }); } catch (e) { r = { error: { message: e.message }, parts: [] }; }
    if (seq !== S.quiz.seq) return;        // a newer check is on its way
    applyQuizCheck(r);
  }, now ? 0 : 350);
}

const ERROR_FIELD = { tolerance: "abs", choices: "choices", points: "points", name: "name", type: "type", ask: "ask" };
const FAMILY_FIELD = { words: "tokens", range: "lo", weight_range: "wlo" };

function markField(input, errId, on) {
  if (!input) return;
  const ids = (input.getAttribute("aria-describedby") || "").split(" ").filter((x) => x && x !== errId);
  if (on) { input.setAttribute("aria-invalid", "true"); ids.push(errId); } else input.removeAttribute("aria-invalid");
  if (ids.length) input.setAttribute("aria-describedby", ids.join(" ")); else input.removeAttribute("aria-describedby");
}

function applyQuizCheck(r) {
  $("#q-spec").value = r.toml || "";
  let shown = false;
  $$("#q-parts > fieldset.qpart").forEach((part, pk) => {
    const info = (r.parts || [])[pk] || { family_error: null, matrices: null, questions: [] };
    const famErr = $(".fam-err", part);
    for (const i of $$(".knobs [aria-invalid]", part)) markField(i, famErr.id, false);
    famErr.hidden = !info.family_error;
    famErr.textContent = info.family_error ? info.family_error.message : "";
    if (info.family_error) {
      shown = true;
      const key = (info.family_error.field || "").split(".").pop();
      markField($(`#${part.dataset.pre}-${FAMILY_FIELD[key] || key}`), famErr.id, true);
    }
    if (info.matrices && info.matrices.length) part.dataset.matrices = JSON.stringify(info.matrices);
    $$(".qrows > li", part).forEach((row, k) => {
      const e = (info.questions[k] || {}).error;
      const err = $(".q-err", row);
      for (const i of $$("[aria-invalid]", row)) markField(i, err.id, false);
      err.hidden = !e;
      err.textContent = e ? e.message : "";
      if (e) { shown = true; markField($(`[data-q="${ERROR_FIELD[e.field] || "ask"}"]`, row), err.id, true); }
      if (info.matrices && info.matrices.length && JSON.stringify(row.matrices) !== part.dataset.matrices) fillPicker(row, info.matrices);
    });
  });
  const line = $("#q-check");
  const n = $$("#q-parts .qrows > li").length, p = $$("#q-parts > fieldset.qpart").length;
  const text = r.error ? QUIZ_WORDS.notYet + (shown ? _t("see the field marked above.") : r.error.message) : QUIZ_WORDS.ready(n, p);
  if (line.textContent !== text) line.textContent = text;      // (a live region: said when it changes)
  line.classList.toggle("bad", !!r.error);
}

function setupQuizBuilder() {
  S.quiz = { seq: 0, timer: null, mixed: false, extra: {} };
  const load = $("#q-load");
  for (const name of S.info.quiz_specs || []) load.append(el("option", { value: name, text: name }));
  load.closest(".field").hidden = !(S.info.quiz_specs || []).length;
  load.addEventListener("change", async () => {
    if (!load.value) return;
    showError($("#quiz-error"), null);
    try {
      const data = await api("/api/quiz-specs/" + encodeURIComponent(load.value));
      if (!data.spec) throw new Error(_t("{name}: the form cannot show this spec (its TOML cannot be read)", { name: load.value }));
      fillQuiz(data.spec);
      $("#quiz-status").textContent = _t("Loaded the spec {name}.", { name: load.value });
    } catch (e) { showError($("#quiz-error"), e); }
  });
  const form = $("#quiz-form");
  form.addEventListener("input", (ev) => {
    const row = ev.target.closest("li.qrow");
    if (row && ev.target.dataset.q === "ask") pickerFromAsk(row);
    if (!ev.target.closest("fieldset.formats") && ev.target.id !== "q-roster") checkQuiz();
  });
  form.addEventListener("change", (ev) => {
    const row = ev.target.closest("li.qrow");
    if (row && ["mat", "row", "col"].includes(ev.target.dataset.q)) askFromPicker(row, ev.target.dataset.q);
    if (row && ev.target.dataset.q === "type") showQuestionType(row);
    if (ev.target.tagName === "SELECT" || ev.target.type === "checkbox") checkQuiz();
  });
  form.addEventListener("click", (ev) => {
    const b = ev.target.closest("button");
    if (!b || b.type === "submit") return;
    const part = b.closest("fieldset.qpart"), row = b.closest("li.qrow");
    if (b.getAttribute("aria-disabled") === "true") return;
    if (b.classList.contains("use-random")) {
      showError($("#quiz-error"), null);
      try { fillPartFamily(part, randomFamily()); $("#quiz-status").textContent = _t("The part's family is now the random problem's knobs."); }
      catch (e) { showError($("#quiz-error"), e); }
    } else if (b.classList.contains("add-question")) {
      const r = questionRow(part);
      $(".qrows", part).append(r);
      renumberQuiz();
      $('[data-q="ask"]', r).focus();
    } else if (b.classList.contains("remove-part")) {
      const next = part.nextElementSibling || part.previousElementSibling;
      part.remove();
      S.quiz.mixed = $$("#q-parts > fieldset.qpart").length > 1;
      renumberQuiz();
      $("legend", next) && $(".add-question", next).focus();
    } else if (b.dataset.act === "remove") {
      const next = row.nextElementSibling || row.previousElementSibling;
      row.remove();
      renumberQuiz();
      $('[data-q="ask"]', next).focus();
    } else if (b.dataset.act === "up" || b.dataset.act === "down") {
      const other = b.dataset.act === "up" ? row.previousElementSibling : row.nextElementSibling;
      if (!other) return;
      if (b.dataset.act === "up") other.before(row); else other.after(row);
      renumberQuiz();
      b.focus();        // (moving the row took the focus away)
      $("#quiz-status").textContent = _t("Moved: now {where}.", { where: lowered($("legend", row).textContent) });
    } else return;
    checkQuiz();
  });
  $("#q-add-part").addEventListener("click", () => {
    S.quiz.mixed = true;
    const first = $("#q-parts > fieldset.qpart");
    const part = quizPart({ family: first ? partFamily(first) : {}, questions: [{}] });
    $("#q-parts").append(part);
    renumberQuiz();
    $(`#${part.dataset.pre}-title`).focus();
    checkQuiz();
  });
  fillQuiz(QUIZ_START);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const err = $("#quiz-error"), status = $("#quiz-status"), btn = $("#make-quiz");
    showError(err, null);
    status.textContent = "";
    (async () => {
      busy(btn, true, _t("Making the quiz…"));
      try {
        const body = { spec: quizSpec(), formats: $$('input[name="q-fmt"]:checked').map((c) => c.value).join(",") };
        const file = $("#q-roster").files[0];
        if (file) body.roster = await file.text();
        if (!body.formats) throw new Error(_t("Formats: choose at least one"));
        const resp = await fetch("/api/quiz", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
        if (!resp.ok) {
          let msg = _t("the server answered {status}", { status: resp.status });
          try { msg = (await resp.json()).error || msg; } catch (e) { /* not JSON */ }
          throw new Error(msg);
        }
        await saveBlob(resp, "quiz.zip");
        status.textContent = _t("The quiz is downloaded (quiz.zip).");
      } catch (e) { showError(err, e); } finally { busy(btn, false); }
    })();
  });
}

function setupTeacher() {
  setupQuizBuilder();
  buildRandomForm();
  $("#random-off").hidden = S.info.features.random;
  $("#random-form").hidden = !S.info.features.random;
  $("#shape-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    S.teacher.whole = null; $("#t-whole").hidden = true;
    renderTeacherGrids();
  });
  $("#t-train").addEventListener("change", () => { if (!S.teacher.whole) renderTeacherGrids(); });
  const load = $("#t-load");
  for (const p of S.info.problems || []) load.append(el("option", { value: p.name, text: p.title || p.name }));
  load.addEventListener("change", () => teacherAction(async () => {
    if (!load.value) return;
    const data = await api("/api/problems/" + encodeURIComponent(load.value));
    fillTeacher(data.problem);
    $("#teacher-status").textContent = `Loaded “${data.problem.title}”.`;
  }, null));
  $("#preview-key").addEventListener("click", (ev) => teacherAction(async () => {
    const problem = teacherProblem();
    const resp = await fetch("/api/download", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ problem, document: "answer-key", format: "html" }),
    });
    if (!resp.ok) throw new Error((await resp.json()).error);
    const frame = $("#key-preview");
    frame.srcdoc = await resp.text();
    frame.hidden = false;
    $("#teacher-status").textContent = _t("The key is below.");
  }, ev.currentTarget));
  $("#try-student").addEventListener("click", (ev) => teacherAction(async () => {
    const problem = teacherProblem();
    await api("/api/view", { problem });  // checks it first
    $("#problem-select").value = "";
    if (await openProblem({ kind: "custom", problem })) { selectTab("student", true); $("#problem-card").scrollIntoView(); }
  }, ev.currentTarget));
  for (const b of $$("#teacher-downloads button[data-doc]")) {
    b.addEventListener("click", () => teacherAction(() => download(teacherProblem(), b.dataset.doc, b.dataset.fmt), b));
  }
  $("#dl-toml").addEventListener("click", (ev) => teacherAction(() => download(teacherProblem(), "problem", "toml"), ev.currentTarget));
  // start from the built-in example so the grids are never empty
  fillTeacher({ title: "cats chase mice", tokens: ["cats", "chase", "mice"],
    X: [[1, 0, 1, 0], [0, 2, 0, 1], [1, 1, 0, 0]], W_Q: [[1, 0], [0, 1], [1, 0], [0, 1]],
    W_K: [[0, 1], [1, 0], [1, 0], [0, 1]], W_V: [[1, 0], [0, 1], [1, 1], [0, 0]], scale: "sqrt", mask: "none", decimals: 2 });
}

/* ------------------------------------------------------------------ start */

async function start() {
  setupTabs();      // before the server answers: a tab pressed meanwhile is not lost
  try {
    S.info = await api("/api/info");
  } catch (e) {
    $("#boot").textContent = _t("Could not load: {error}", { error: e.message });
    return;
  }
  $("#boot").hidden = true;
  keepFocusClear();
  window.addEventListener("resize", markOverflow);
  new MutationObserver(() => { clearTimeout(S.moreTimer); S.moreTimer = setTimeout(markOverflow, 50); })
    .observe($("#main"), { childList: true, subtree: true });
  const sel = $("#problem-select");
  if (S.info.mode === "quiz") {
    $("#problem-pick").hidden = true;
    $("#code-form").hidden = false;
  } else {
    sel.append(el("option", { value: "", text: _t("Choose a problem…") }));
    for (const p of S.info.problems) sel.append(el("option", { value: p.name, text: p.title || p.name }));
  }
  sel.addEventListener("change", () => {
    if (!sel.value) return;
    history.replaceState(null, "", "#problem=" + encodeURIComponent(sel.value));   // a reload keeps the problem
    openProblem({ kind: "problem", name: sel.value });
  });
  $("#code-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const code = $("#variant-code").value.trim();
    if (code) openProblem({ kind: "variant", code });
  });
  $("#answers-form").addEventListener("submit", checkAnswers);
  $("#check-status").addEventListener("click", goToDiagnosis);
  $("#diagnoses").addEventListener("click", goToDiagnosis);
  $("#answers-form").addEventListener("input", () => { clearTimeout(S.saveTimer); S.saveTimer = setTimeout(saveAnswers, 400); });
  $("#clear-btn").addEventListener("click", () => {
    for (const input of $$("#answer-grids input")) { if (input.type === "radio") input.checked = false; else input.value = ""; }
    clearMarks($("#answer-grids")); saveAnswers(); $("#feedback").hidden = true; $("#check-status").textContent = "";
  });
  $("#show-solution").addEventListener("click", showSolution);
  $("#student-downloads").addEventListener("click", (ev) => {
    const a = ev.target.closest("a");
    if (!a || S.student.source.kind !== "custom") return;
    ev.preventDefault();
    download(S.student.problem, a.dataset.doc, a.dataset.fmt).catch((e) => showError($("#global-error"), e));
  });
  if (S.info.no_solutions) {
    $("#tab-teacher").hidden = true;
    $("#solution-actions").hidden = true;
  } else {
    setupTeacher();
  }
  selectTab(location.hash === "#teacher" && !S.info.no_solutions ? "teacher" : "student");
  const m = /^#(problem|code)=(.+)$/.exec(location.hash);
  if (m && m[1] === "problem") { sel.value = decodeURIComponent(m[2]); openProblem({ kind: "problem", name: decodeURIComponent(m[2]) }); }
  // a variant code in the address (#code=K3F9AB, or ?code=K3F9AB as a QR code on the sheet may hold it)
  const code = m && m[1] === "code" ? decodeURIComponent(m[2]) : new URLSearchParams(location.search).get("code");
  if (code && S.info.mode === "quiz") { $("#variant-code").value = code; openProblem({ kind: "variant", code }); }
}

/* The sticky Check bar never hides the focused element: the page's scroll padding is the bar's height
 * (so the browser scrolls a focused cell clear of it), and a focus that still lands under it is scrolled up. */
/* A grid wider than the screen says so (a shadow at the hidden side, and a line of text). */
function markOverflow() {
  for (const box of $$(".grid .scroll")) {
    const more = box.scrollWidth > box.clientWidth + 1;
    let hint = box.nextElementSibling && box.nextElementSibling.classList.contains("more") ? box.nextElementSibling : null;
    if (more && !hint) box.after(el("p", { class: "more", text: _t("Scroll the grid sideways for more columns →") }));
    if (!more && hint) hint.remove();
  }
}

function keepFocusClear() {
  const bar = $(".actions.sticky");
  const setPad = () => document.documentElement.style.setProperty("--sticky-h", `${Math.ceil(bar.getBoundingClientRect().height) + 16}px`);
  if (window.ResizeObserver) new ResizeObserver(setPad).observe(bar);
  setPad();
  document.addEventListener("focusin", (ev) => {
    const t = ev.target;
    if (!t || bar.contains(t) || bar.offsetParent === null || !t.getBoundingClientRect) return;
    const r = t.getBoundingClientRect(), b = bar.getBoundingClientRect();
    if (r.bottom > b.top - 4 && r.top < b.bottom) window.scrollBy(0, r.bottom - b.top + 16);
    else if (r.top < 0) window.scrollBy(0, r.top - 16);
  });
}

document.addEventListener("DOMContentLoaded", start);
