// microg4m team mode: adjudicating captions and QA pairs. Lists the clips whose reviewers
// disagree, shows the clip's frames, the draft and each reviewer's version side by side
// with word-level diffs (against the draft and against each other version), and sends the
// final text: one version picked, a merge, or an edit (API: team/vqa_routes.py).
"use strict";

const T = { data: null, clip: null, images: [], frame: 1, playing: false, acc: 0, lastT: null, warn: [] };

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// ------------------------------------------------------------------ list and figures
// One page of the list (pages.py), filtered by status on the server: by default the page
// that holds the clip open; `query` may name another page.
async function load(query = {}) {
  const d = await api("GET", `/api/text-adjudication${listQuery({ status: $("filter").value }, query, T.clip && T.clip.clip_id)}`);
  if (!d) return false;
  T.data = d;
  renderPager(d, (n) => load({ page: n }));
  T.warn = Object.entries(d.rules.warnings).map(([k, src]) => [k, new RegExp(src, "i")]);
  const c = d.counts;
  $("counts").textContent = `${c.disagree} to adjudicate · ${c.resolved} resolved · ${c.agreed} agreed · ${c.pending} pending`;
  $("files").textContent = `final texts → ${d.file}`;
  renderList();
  renderFigures(d.figures);
  return true;
}

function visible() { return T.data.clips; } // the page, filtered by the server

function renderList() {
  const list = $("clip-list");
  list.replaceChildren();
  for (const c of visible()) {
    const d = el("div", c.status + (T.clip && T.clip.clip_id === c.clip_id ? " current" : ""), c.clip_id);
    d.dataset.clip = c.clip_id;
    d.append(el("span", "st", c.status));
    d.title = `reviewers: ${c.reviewers.join(", ")}` + (c.final_by ? ` · final by ${c.final_by}` : "");
    d.onclick = () => openClip(c.clip_id);
    list.append(d);
  }
  if (!list.children.length) list.append(el("div", "empty", "no clip with this status"));
}

function table(rows, cols) {
  const t = el("table");
  const head = el("tr");
  for (const c of cols) head.append(el("th", "", c));
  t.append(head);
  for (const r of rows) {
    const tr = el("tr");
    for (const c of cols) tr.append(el("td", "", r[c] === null || r[c] === undefined ? "" : String(r[c])));
    t.append(tr);
  }
  return t;
}

function renderFigures(f) {
  const box = $("figures");
  box.replaceChildren();
  const s = f.summary;
  const p = el("p", "", `versions reviewed: ${s.versions_reviewed} · mean caption edit distance from the draft: `
    + `${s.mean_caption_edit_words ?? "–"} words · pairs kept ${s.share_kept ?? "–"}, edited ${s.share_edited ?? "–"}, `
    + `dropped ${s.share_dropped ?? "–"}, added ${s.share_added ?? "–"} · versions the final changed: `
    + `${s.versions_changed_by_final} of ${s.versions_with_final}`);
  p.id = "text-fig-summary";
  const rev = table(f.reviewers, ["reviewer", "reviewed", "mean_caption_edit_words", "share_kept", "share_edited",
    "share_dropped", "share_added", "with_final", "changed_by_final", "changed_share"]);
  rev.id = "text-fig-reviewers";
  const cols = Object.keys(f.question_types[0] || { question_type: 0 });
  const qt = table(f.question_types.filter((r) => cols.slice(1).some((c) => r[c] > 0)), cols);
  qt.id = "text-fig-qtypes";
  box.append(el("h3", "", "Agreement on captions and QA pairs"), p, el("h4", "", "per reviewer"), rev,
    el("h4", "", "question types"), qt);
}

// ------------------------------------------------------------------ one clip
async function openClip(id) {
  const clip = await api("GET", `/api/text-adjudication/${encodeURIComponent(id)}`);
  if (!clip) return;
  const same = T.clip && T.clip.clip_id === id;
  T.clip = clip;
  if (!same) {
    const withBoxes = Object.keys(clip.boxes).map(Number);
    T.frame = withBoxes.length ? Math.min(...withBoxes) : 1;
    T.images = clipFrames(id, clip.frames, (n) => { if (n === T.frame) draw(); });
    $("frame-range").max = clip.frames;
    const cv = $("frame");
    cv.width = clip.width; cv.height = clip.height;
    fillFinal(clip.final.set ? clip.final : firstVersion(clip));
    $("t-note").value = clip.final.note || "";
  }
  $("clip-id").textContent = id;
  $("clip-meta").textContent = `${clip.status} · reviewers ${clip.reviewers.join(", ")}`
    + (clip.kept ? "" : " · rejected by the filter as screened");
  $("t-by").textContent = clip.final.set ? `(set by ${clip.final.by})` : "(not set yet)";
  $("t-status").textContent = "";
  $("text-final").hidden = false;
  renderDraft();
  renderVersions();
  renderList();
  draw();
  if ($("history").open) renderHistory();
}

function firstVersion(clip) {
  const v = clip.versions.find((x) => x.present && x.reviewed) || clip.versions.find((x) => x.present);
  if (v) return v;
  return clip.draft && clip.draft.status === "ok" ? clip.draft : { caption: "", qa_pairs: [] };
}

function renderDraft() {
  const box = $("draft-box"), d = T.clip.draft;
  box.replaceChildren();
  if (!d) { box.append(el("div", "empty", "no draft: the versions are compared with an empty text")); return; }
  box.append(el("h3", "", `Draft (${d.model || "model"}, ${d.time || ""})` + (d.status === "ok" ? "" : ` · failed: ${d.reason}`)));
  box.append(el("p", "cap", d.caption || "(no caption)"));
  const ol = el("ol", "pairs");
  for (const p of d.qa_pairs || []) ol.append(el("li", "", `${p.Q} — ${p.A}`));
  box.append(ol);
}

function diffNode(ops) {
  const span = el("span", "diff");
  ops.forEach(([op, text], i) => {
    if (i) span.append(" ");
    span.append(op === "=" ? document.createTextNode(text) : el(op === "-" ? "del" : "ins", "", text));
  });
  return span;
}

function renderVersions() {
  const box = $("versions");
  box.replaceChildren();
  for (const v of T.clip.versions) {
    const view = el("div", "tview" + (v.reviewed ? " reviewed" : ""));
    view.dataset.reviewer = v.reviewer;
    view.append(el("h3", "", v.reviewer + (!v.present ? " (no version yet)" : v.reviewed ? "" : " (not reviewed yet)")));
    if (!v.present) { box.append(view); continue; }
    const bar = el("div", "use");
    const useAll = el("button", "use-all", "use this version");
    useAll.onclick = () => { fillFinal(v); $("t-status").textContent = `picked ${v.reviewer}'s version`; };
    const useCap = el("button", "use-caption", "use this caption");
    useCap.onclick = () => { $("t-caption").value = v.caption; captionInfo(); };
    bar.append(useAll, useCap);
    view.append(bar);
    const plain = el("ol", "vpairs");
    v.qa_pairs.forEach((p, i) => {
      const li = el("li", "", `${p.Q} — ${p.A} `);
      const add = el("button", "add-pair", "+ to final");
      add.dataset.i = i;
      add.onclick = () => { if (addFinalRow(p)) $("t-status").textContent = "merged a pair"; };
      li.append(add);
      const w = warningsOf(p.Q);
      if (w.length) li.append(el("div", "warn", `warning: about ${w.join(" / ")}`));
      plain.append(li);
    });
    view.append(el("div", "cap", v.caption), plain);
    for (const [against, d] of Object.entries(v.diffs)) {
      const block = el("div", "against");
      block.dataset.against = against;
      const c = d.counts;
      block.append(el("h4", "", `${against === "draft" ? "against the draft" : `against ${against}`}: `
        + `caption ${d.caption_edit_words} word edits · pairs kept ${c.kept}, edited ${c.edited}, dropped ${c.dropped}, added ${c.added}`));
      const cap = el("p", "cap-diff");
      cap.append(diffNode(d.caption));
      block.append(cap);
      const ol = el("ol", "pair-diffs");
      for (const p of d.pairs) {
        const li = el("li", `state-${p.state}`);
        li.append(el("span", "state", p.state), " ", diffNode(p.Q), " — ", diffNode(p.A));
        ol.append(li);
      }
      block.append(ol);
      view.append(block);
    }
    box.append(view);
  }
}

async function renderHistory() {
  const h = await api("GET", `/api/history/${encodeURIComponent(T.clip.clip_id)}`);
  if (!h || h.clip_id !== T.clip.clip_id) return;
  const rows = h.rows.filter((r) => r.kind.startsWith("text"))
    .map((r) => ({ ...r, before: r.before ?? "", after: r.after ?? "" }));
  $("history-rows").replaceChildren(table(rows, ["seq", "at", "who", "layer", "kind", "before", "after"]));
}

// ------------------------------------------------------------------ frames
function color(pid) { const c = T.data.colors; return c[(pid - 1) % c.length]; }

function draw() {
  if (!T.clip) return;
  const cv = $("frame"), ctx = cv.getContext("2d"), img = T.images[T.frame - 1];
  $("frame-no").textContent = `frame ${T.frame} / ${T.clip.frames}`;
  $("frame-range").value = T.frame;
  if (img && img.complete && img.naturalWidth) ctx.drawImage(img, 0, 0, cv.width, cv.height);
  else { ctx.fillStyle = "#111"; ctx.fillRect(0, 0, cv.width, cv.height); }
  ctx.lineWidth = Math.max(2, Math.round(Math.min(cv.width, cv.height) / 150));
  for (const [pid, x1, y1, x2, y2] of T.clip.boxes[T.frame] || []) {
    ctx.strokeStyle = color(pid);
    ctx.strokeRect(x1, y1, x2 - x1, y2 - y1);
  }
}

function setFrame(n) { T.frame = Math.min(T.clip.frames, Math.max(1, n)); draw(); }

function tick(t) {
  if (T.playing && T.clip) {
    if (T.lastT !== null) T.acc += ((t - T.lastT) / 1000) * 30;
    T.lastT = t;
    while (T.acc >= 1) {
      T.acc -= 1;
      const next = T.frame % T.clip.frames + 1, img = T.images[next - 1];
      if (!img || !img.naturalWidth) { T.acc = 0; break; } // wait for the frame
      T.frame = next;
    }
    draw();
  }
  requestAnimationFrame(tick);
}

function setPlaying(on) {
  T.playing = on && !!T.clip; T.acc = 0; T.lastT = null;
  $("play").textContent = T.playing ? "⏸ pause" : "▶ play";
}

// ------------------------------------------------------------------ the final text editor
function warningsOf(text) { return T.warn.filter(([, rx]) => rx.test(text)).map(([k]) => k); }
function finalRows() { return [...document.querySelectorAll("#t-pairs .qa-row")]; }

function captionInfo() {
  $("t-caption-info").textContent = `${($("t-caption").value.match(/\S+/g) || []).length} words`;
}

function renumber() {
  const rs = finalRows(), max = T.data.rules.max_pairs;
  rs.forEach((r, i) => { r.querySelector(".n").textContent = `${i + 1}.`; });
  $("t-count").textContent = `${rs.length} / ${max}`;
  $("t-add").disabled = rs.length >= max;
  const un = rs.filter((r) => r.querySelector(".unans").checked);
  for (const r of rs) r.querySelector(".unans").disabled = un.length > 0 && !un.includes(r);
}

function rowWarnings(row) {
  const w = warningsOf(row.querySelector(".q").value), box = row.querySelector(".warn");
  box.textContent = w.length ? `warning: the question is about ${w.join(" / ")}: a viewer cannot see that` : "";
  box.hidden = !w.length;
}

// one pair row in the final editor; refused (false, with the reason) past the rules
function addFinalRow(pair) {
  const NM = T.data.rules.unanswerable, max = T.data.rules.max_pairs;
  if (finalRows().length >= max) { toast(`at most ${max} pairs per clip`); return false; }
  if (pair.A === NM && finalRows().some((r) => r.querySelector(".unans").checked)) {
    toast(`at most one unanswerable pair per clip (answer "${NM}")`);
    return false;
  }
  const row = el("div", "qa-row");
  row.innerHTML = '<span class="n"></span><input type="text" class="q" maxlength="500" placeholder="question">'
    + '<input type="text" class="a" maxlength="500" placeholder="answer">'
    + '<label class="un"><input type="checkbox" class="unans"> unanswerable</label>'
    + '<button class="del" title="remove this pair">×</button><div class="warn" hidden></div>';
  const q = row.querySelector(".q"), a = row.querySelector(".a"), un = row.querySelector(".unans");
  q.value = pair.Q; a.value = pair.A; un.checked = pair.A === NM; a.readOnly = un.checked;
  q.oninput = () => rowWarnings(row);
  un.onchange = () => {
    if (un.checked && finalRows().some((r) => r !== row && r.querySelector(".unans").checked)) {
      un.checked = false;
      toast(`at most one unanswerable pair per clip (answer "${NM}")`);
      return;
    }
    a.value = un.checked ? NM : ""; a.readOnly = un.checked;
    renumber();
  };
  row.querySelector(".del").onclick = () => { row.remove(); renumber(); };
  $("t-pairs").append(row);
  rowWarnings(row);
  renumber();
  return true;
}

function fillFinal(text) {
  $("t-caption").value = text.caption || "";
  $("t-pairs").replaceChildren();
  for (const p of (text.qa_pairs || []).slice(0, T.data.rules.max_pairs)) addFinalRow(p);
  captionInfo();
  renumber();
}

async function saveFinal() {
  const pairs = finalRows().map((r) => ({ Q: r.querySelector(".q").value.trim(), A: r.querySelector(".a").value.trim() }))
    .filter((p) => p.Q || p.A);
  const r = await api("POST", "/api/text-final", {
    clip_id: T.clip.clip_id, caption: $("t-caption").value, qa_pairs: pairs, note: $("t-note").value });
  if (!r) { $("t-status").textContent = "not saved (see the message)"; return; }
  toast(`saved: final text of ${r.clip_id}`, true);
  T.clip = r;
  fillFinal(r.final);
  await load();
  renderVersions();
  $("t-by").textContent = `(set by ${r.final.by})`;
  if ($("history").open) renderHistory();
  $("t-status").textContent = "saved";
}

async function writeReport() {
  const r = await api("POST", "/api/report");
  if (r) toast(`report written: ${r.written.length} files`, true);
}

// ------------------------------------------------------------------ start
async function start() {
  if (!(await load())) return;
  $("filter").onchange = () => load();
  $("t-save").onclick = saveFinal;
  $("t-add").onclick = () => { if (addFinalRow({ Q: "", A: "" })) finalRows().at(-1).querySelector(".q").focus(); };
  $("t-caption").oninput = captionInfo;
  $("write-report").onclick = writeReport;
  $("history").ontoggle = () => { if ($("history").open && T.clip) renderHistory(); };
  $("play").onclick = () => setPlaying(!T.playing);
  $("step-back").onclick = () => { setPlaying(false); setFrame(T.frame - 1); };
  $("step-fwd").onclick = () => { setPlaying(false); setFrame(T.frame + 1); };
  $("frame-range").oninput = () => { setPlaying(false); setFrame(Number($("frame-range").value)); };
  document.addEventListener("keydown", (ev) => {
    if (!T.clip || ["INPUT", "TEXTAREA", "SELECT"].includes(ev.target.tagName)) return;
    if (ev.key === "ArrowLeft") { setPlaying(false); setFrame(T.frame - 1); }
    else if (ev.key === "ArrowRight") { setPlaying(false); setFrame(T.frame + 1); }
    else if (ev.key === " ") { ev.preventDefault(); setPlaying(!T.playing); }
  });
  const first = visible()[0];
  if (first) await openClip(first.clip_id);
  requestAnimationFrame(tick);
}

start();
