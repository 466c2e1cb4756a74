// microg4m team mode: the adjudication page. Lists the clips whose annotators disagree,
// shows each annotator's labels on the clip's frames side by side, and sends the final
// labels (see team/server.py for the API).
"use strict";

const A = { data: null, clip: null, images: [], frame: 1, playing: false, acc: 0, lastT: null };
const labelById = new Map();

function color(pid) { const c = A.data.colors; return c[(pid - 1) % c.length]; }
function labelName(aid) { const l = labelById.get(aid); return l ? l.name : `id ${aid}`; }

// ------------------------------------------------------------------ list and figures
// One page of the list (pages.py), filtered by status on the server: by default the page
// that holds the clip open; `query` may name another page.
async function load(query = {}) {
  const d = await api("GET", `/api/adjudication${listQuery({ status: $("filter").value }, query, A.clip && A.clip.clip_id)}`);
  if (!d) return false;
  A.data = d;
  renderPager(d, (n) => load({ page: n }));
  for (const l of d.labels) labelById.set(l.id, l);
  const c = d.counts;
  $("counts").textContent = `${c.disagree} to adjudicate · ${c.resolved} resolved · ${c.agreed} agreed · ${c.pending} pending`;
  $("files").textContent = `final labels → ${d.files.join(" · ")}`;
  $("problems").hidden = !d.problems.length;
  $("problems").textContent = d.problems.join("\n");
  renderList();
  renderFigures(d.figures);
  return true;
}

function visible() { return A.data.clips; } // the page, filtered by the server

function renderList() {
  const list = $("clip-list");
  list.replaceChildren();
  for (const c of visible()) {
    const d = document.createElement("div");
    d.dataset.clip = c.clip_id;
    d.className = c.status + (A.clip && A.clip.clip_id === c.clip_id ? " current" : "");
    d.textContent = c.clip_id;
    const st = document.createElement("span");
    st.className = "st";
    st.textContent = c.status;
    d.append(st);
    d.title = `annotators: ${c.annotators.join(", ")}` + (c.final_by ? ` · final by ${c.final_by}` : "");
    d.onclick = () => openClip(c.clip_id);
    list.append(d);
  }
  if (!list.children.length) list.innerHTML = '<div class="empty">no clip with this status</div>';
}

function table(rows, cols) {
  const t = document.createElement("table");
  const head = document.createElement("tr");
  for (const c of cols) {
    const th = document.createElement("th");
    th.textContent = c;
    head.append(th);
  }
  t.append(head);
  for (const r of rows) {
    const tr = document.createElement("tr");
    for (const c of cols) {
      const td = document.createElement("td");
      td.textContent = r[c] === null || r[c] === undefined ? "" : r[c];
      tr.append(td);
    }
    t.append(tr);
  }
  return t;
}

function renderFigures(f) {
  const box = $("figures");
  box.replaceChildren();
  const s = f.summary;
  const h = document.createElement("h3");
  h.textContent = "Agreement";
  const p = document.createElement("p");
  p.id = "fig-summary";
  p.textContent = `clips labelled by two or more: ${s.clips_shared} · persons: ${s.persons_shared} · `
    + `exact agreement: ${s.exact_share ?? "–"} · positive agreement: ${s.positive_agreement ?? "–"} · `
    + `differing labels: ${s.differing}`;
  const ann = table(f.annotators, ["annotator", "done", "excluded", "exclusion_differs", "labels", "differing",
    "changed_by_final", "suggestions", "suggestions_accepted", "suggestions_edited", "suggestions_removed"]);
  ann.id = "fig-annotators";
  const act = table(f.actions.filter((r) => r.chosen > 0), ["action_id", "name", "chosen", "both", "one_only",
    "positive_agreement", "kappa"]);
  act.id = "fig-actions";
  const h2 = document.createElement("h4"); h2.textContent = "per annotator";
  const h3 = document.createElement("h4"); h3.textContent = "per action (chosen at least once)";
  box.append(h, p, h2, ann, h3, act);
}

// ------------------------------------------------------------------ one clip
async function openClip(id) {
  const clip = await api("GET", `/api/adjudication/${encodeURIComponent(id)}`);
  if (!clip) return;
  const same = A.clip && A.clip.clip_id === id;
  A.clip = clip;
  if (!same) {
    const withBoxes = Object.keys(clip.boxes).map(Number);
    A.frame = withBoxes.length ? Math.min(...withBoxes) : 1;
    A.images = clipFrames(id, clip.frames, (n) => { if (n === A.frame) draw(); });
    $("frame-range").max = clip.frames;
  }
  $("clip-id").textContent = id;
  $("clip-meta").textContent = `${clip.status} · annotators ${clip.annotators.join(", ")} · `
    + `${clip.persons.length} person(s)` + (clip.kept ? "" : " · rejected by the filter as screened");
  renderViews();
  renderFinal();
  renderList();
  draw();
  if ($("history").open) renderHistory();
}

async function renderHistory() {
  const h = await api("GET", `/api/history/${encodeURIComponent(A.clip.clip_id)}`);
  if (!h || h.clip_id !== A.clip.clip_id) return;
  const rows = h.rows.map((r) => ({ ...r, person: r.person_id || "", before: r.before ?? "", after: r.after ?? "" }));
  $("history-rows").replaceChildren(table(rows, ["seq", "at", "who", "layer", "kind", "person", "before", "after"]));
}

function renderViews() {
  const box = $("views");
  box.replaceChildren();
  for (const l of A.clip.labels) {
    const v = document.createElement("div");
    v.className = "view" + (l.excluded ? " excluded" : "");
    v.dataset.annotator = l.annotator;
    const h = document.createElement("h3");
    h.textContent = l.annotator + (l.done ? "" : " (not done)");
    const cv = document.createElement("canvas");
    cv.width = A.clip.width; cv.height = A.clip.height;
    const s = document.createElement("div");
    s.className = "summary";
    s.textContent = l.excluded ? `excluded: ${l.reason || "(no reason)"}`
      : A.clip.persons.map((p) => `Person ${p}: ${(l.actions[p] || []).map(labelName).join(", ") || "–"}`).join("\n");
    v.append(h, cv, s);
    box.append(v);
  }
}

function draw() {
  if (!A.clip) return;
  const img = A.images[A.frame - 1];
  $("frame-no").textContent = `frame ${A.frame} / ${A.clip.frames}`;
  $("frame-range").value = A.frame;
  const boxes = A.clip.boxes[A.frame] || [];
  for (const l of A.clip.labels) {
    const cv = document.querySelector(`.view[data-annotator="${l.annotator}"] canvas`);
    if (!cv) continue;
    const ctx = cv.getContext("2d");
    if (img && img.complete && img.naturalWidth) ctx.drawImage(img, 0, 0, cv.width, cv.height);
    else { ctx.fillStyle = "#111"; ctx.fillRect(0, 0, cv.width, cv.height); }
    const lw = Math.max(2, Math.round(Math.min(cv.width, cv.height) / 150));
    const fpx = Math.max(11, Math.round(Math.min(cv.width, cv.height) / 26));
    ctx.font = `bold ${fpx}px sans-serif`;
    for (const [pid, x1, y1, x2, y2] of boxes) {
      const c = color(pid);
      ctx.strokeStyle = c; ctx.lineWidth = lw;
      ctx.strokeRect(x1, y1, x2 - x1, y2 - y1);
      const names = l.excluded ? "excluded" : (l.actions[pid] || []).map(labelName).join(", ") || "–";
      const text = `${pid}: ${names}`;
      const tw = Math.min(ctx.measureText(text).width + 6, cv.width), th = fpx + 4;
      const tx = Math.min(Math.max(0, x1), cv.width - tw);
      const ty = y1 - th >= 0 ? y1 - th : y1;
      ctx.fillStyle = c; ctx.fillRect(tx, ty, tw, th);
      ctx.fillStyle = "#000"; ctx.fillText(text, tx + 3, ty + fpx, tw - 6);
    }
  }
}

function setFrame(n) { A.frame = Math.min(A.clip.frames, Math.max(1, n)); draw(); }

function tick(t) {
  if (A.playing && A.clip) {
    if (A.lastT !== null) A.acc += ((t - A.lastT) / 1000) * 30;
    A.lastT = t;
    while (A.acc >= 1) {
      A.acc -= 1;
      const next = A.frame % A.clip.frames + 1;
      const img = A.images[next - 1];
      if (!img || !img.naturalWidth) { A.acc = 0; break; } // wait for the frame
      A.frame = next;
    }
    draw();
  }
  requestAnimationFrame(tick);
}

function setPlaying(on) {
  A.playing = on && !!A.clip; A.acc = 0; A.lastT = null;
  $("play").textContent = A.playing ? "⏸ pause" : "▶ play";
}

// ------------------------------------------------------------------ the final labels
function renderFinal() {
  const clip = A.clip, fin = clip.final, labs = clip.labels;
  $("final").hidden = false;
  $("f-by").textContent = fin.by ? `(set by ${fin.by})` : fin.set ? "(the annotators agree)" : "(not set yet)";
  $("f-exclude").checked = fin.set ? fin.excluded : labs.length > 0 && labs.every((l) => l.excluded);
  $("f-reason").value = fin.set ? fin.reason : labs.filter((l) => l.reason).map((l) => l.reason).join("; ");
  $("f-note").value = fin.note;
  $("f-status").textContent = "";
  const box = $("f-persons");
  box.replaceChildren();
  for (const pid of clip.persons) {
    const div = document.createElement("div");
    div.className = "fperson";
    div.dataset.person = pid;
    div.style.setProperty("--c", color(pid));
    const title = document.createElement("b");
    title.textContent = `Person ${pid}: `;
    div.append(title);
    const votes = new Map();
    for (const l of labs) {
      if (l.excluded) continue;
      for (const a of l.actions[pid] || []) votes.set(a, [...(votes.get(a) || []), l.annotator]);
    }
    const chosen = fin.set ? (fin.actions[pid] || [])
      : [...votes].filter(([, who]) => who.length === labs.length).map(([a]) => a);
    for (const a of fin.actions[pid] || []) if (!votes.has(a)) votes.set(a, []);
    for (const [a, who] of votes) addChoice(div, a, who, chosen.includes(a), labs.length);
    const sel = document.createElement("select");
    sel.className = "add";
    sel.append(new Option("add an action…", ""));
    for (const l of A.data.labels) sel.append(new Option(l.name, l.id)); // as text, never as HTML
    sel.onchange = () => {
      const a = Number(sel.value);
      if (a && !div.querySelector(`input[data-action="${a}"]`)) addChoice(div, a, [], true, labs.length, sel);
      else if (a) div.querySelector(`input[data-action="${a}"]`).checked = true;
      sel.value = "";
    };
    div.append(sel);
    box.append(div);
  }
}

function addChoice(div, a, who, on, n, before) {
  const lab = document.createElement("label");
  if (who.length !== n) lab.classList.add("split");
  const cb = document.createElement("input");
  cb.type = "checkbox";
  cb.dataset.action = a;
  cb.checked = on;
  lab.append(cb, ` ${labelName(a)}` + (who.length ? ` (${who.join(", ")})` : ""));
  lab.title = `id ${a}`;
  if (before) div.insertBefore(lab, before); else div.append(lab);
}

async function save() {
  const actions = {};
  for (const div of document.querySelectorAll("#f-persons .fperson")) {
    actions[div.dataset.person] = [...div.querySelectorAll("input[data-action]:checked")].map((i) => Number(i.dataset.action));
  }
  const excluded = $("f-exclude").checked;
  const r = await api("POST", "/api/final", {
    clip_id: A.clip.clip_id, excluded, reason: $("f-reason").value, note: $("f-note").value,
    actions: excluded ? {} : actions,
  });
  if (!r) return;
  toast(`saved: final labels of ${r.clip_id}`, true);
  A.clip = Object.assign(A.clip, r);
  await load();
  renderFinal();
  renderViews();
  draw();
  if ($("history").open) renderHistory();
  $("f-status").textContent = "saved";
}

async function writeReport() {
  const r = await api("POST", "/api/report");
  if (r) toast(`report written: ${r.written.length} files`, true);
}

// ------------------------------------------------------------------ start
async function start() {
  if (!(await load())) return;
  $("filter").onchange = () => load();
  $("save").onclick = save;
  $("write-report").onclick = writeReport;
  $("history").ontoggle = () => { if ($("history").open && A.clip) renderHistory(); };
  $("play").onclick = () => setPlaying(!A.playing);
  $("step-back").onclick = () => { setPlaying(false); setFrame(A.frame - 1); };
  $("step-fwd").onclick = () => { setPlaying(false); setFrame(A.frame + 1); };
  $("frame-range").oninput = () => { setPlaying(false); setFrame(Number($("frame-range").value)); };
  document.addEventListener("keydown", (ev) => {
    if (!A.clip || ["INPUT", "TEXTAREA", "SELECT"].includes(ev.target.tagName)) return;
    if (ev.key === "ArrowLeft") { setPlaying(false); setFrame(A.frame - 1); }
    else if (ev.key === "ArrowRight") { setPlaying(false); setFrame(A.frame + 1); }
    else if (ev.key === " ") { ev.preventDefault(); setPlaying(!A.playing); }
  });
  const first = visible()[0];
  if (first) await openClip(first.clip_id);
  requestAnimationFrame(tick);
}

start();
