// microg4m annotate: the page. State lives on the server (files on disk); this page
// only shows it and sends one change at a time (see app.py for the API).
"use strict";

const S = {
  state: null,      // /api/state
  clip: null,       // /api/clips/<id>
  images: [],       // Image per frame (index 0 = frame 1)
  frame: 1, playing: false, acc: 0, lastT: null,
  person: null,     // selected person id
  pending: {},      // person id -> the suggested actions shown ticked, not saved (see pendingOf)
  search: "", active: 0,
};
const labelById = new Map();

// One page of the clip list (the server answers a page at a time: pages.py). By default the
// page that holds the clip open; `query` may name another page or clip instead. The to-do
// filter is the server's (todo=1), so that it holds across pages.
async function loadState(query = {}) {
  const st = await api("GET", `/api/state${listQuery({ todo: $("todo-only").checked }, query, S.clip && S.clip.clip_id)}`);
  if (!st) return false;
  S.state = st;
  for (const l of S.state.labels) labelById.set(l.id, l);
  $("annotator").textContent = S.state.annotator ? `annotator: ${S.state.annotator}` : "";
  $("files").textContent = `${S.state.actions_file} · ${S.state.screening_file}`;
  const probs = $("problems");
  probs.hidden = !S.state.problems.length;
  probs.textContent = S.state.problems.join("\n");
  renderProgress();
  renderSuggestionSummary();
  renderPager(st, (n) => loadState({ page: n }));
  renderClipList();
  return true;
}

// ------------------------------------------------------------------ clips
function clipEntry(id) { return S.state.clips.find((c) => c.clip_id === id); }

function visibleClips() { return S.state.clips; } // the page, filtered by the server

function renderProgress() {
  $("progress-text").textContent = `${S.state.done} / ${S.state.total} clips done`;
  $("progress").max = Math.max(1, S.state.total);
  $("progress").value = S.state.done;
}

function renderClipList() {
  const list = $("clip-list");
  list.replaceChildren();
  for (const c of visibleClips()) {
    const d = document.createElement("div");
    d.textContent = c.clip_id;
    d.dataset.clip = c.clip_id;
    d.title = `${c.labelled}/${c.persons.length} persons labelled` + (c.excluded ? ` · excluded: ${c.reason}` : "");
    if (c.done) d.classList.add("done");
    if (c.excluded) d.classList.add("excluded");
    if (S.clip && c.clip_id === S.clip.clip_id) d.classList.add("current");
    d.onclick = () => openClip(c.clip_id);
    list.append(d);
  }
  if (!list.children.length) {
    list.innerHTML = '<div class="empty">no clips</div>';
  }
  const cur = list.querySelector(".current");
  if (cur) cur.scrollIntoView({ block: "nearest" });
  if (window.vqaMarkList) vqaMarkList(); // reviewed captions (vqa.js)
}

async function openClip(id) {
  const clip = await api("GET", `/api/clips/${encodeURIComponent(id)}`);
  if (!clip) return;
  const same = S.clip && S.clip.clip_id === id;
  S.clip = clip;
  if (!same) {
    const withBoxes = Object.keys(clip.boxes).map(Number);
    S.frame = withBoxes.length ? Math.min(...withBoxes) : 1; // start where the boxes start
    S.person = clip.persons.length ? clip.persons[0] : null;
    S.pending = {};
    S.search = "";
    S.images = clipFrames(id, clip.frames, (n) => { if (n === S.frame) draw(); });
    const k = Math.max(1, Math.ceil(640 / clip.width));
    $("canvas").width = clip.width * k;
    $("canvas").height = clip.height * k;
    history.replaceState(null, "", `#clip=${encodeURIComponent(id)}`);
  } else if (!clip.persons.includes(S.person)) {
    S.person = clip.persons.length ? clip.persons[0] : null;
  }
  updateEntry();
  $("clip-id").textContent = id;
  $("clip-meta").textContent = `${clip.clip_type === "m" ? "movie" : "real"} · ${clip.width}×${clip.height} · `
    + `${clip.persons.length} person(s)` + (clip.kept ? "" : " · rejected by the filter as screened");
  $("exclude").checked = clip.excluded;
  if (!same || document.activeElement !== $("reason")) $("reason").value = clip.reason;
  renderScreening();
  renderPersons();
  renderClipList();
  draw();
  if (window.vqaClipOpened) vqaClipOpened(id, same); // the caption and QA editors (vqa.js)
}

// The next or previous clip of the list, across its pages.
async function stepClip(delta) {
  let list = visibleClips();
  const i = S.clip ? list.findIndex((c) => c.clip_id === S.clip.clip_id) : -1;
  let j = i < 0 ? 0 : i + delta;
  if (j < 0 || j >= list.length) {
    const page = S.state.page + (j < 0 ? -1 : 1);
    if (page < 1 || page > S.state.pages || !(await loadState({ page }))) return;
    list = visibleClips();
    j = j < 0 ? list.length - 1 : 0;
  }
  if (list[j] && (!S.clip || list[j].clip_id !== S.clip.clip_id)) await openClip(list[j].clip_id);
}

// local copy of the server's rule: done = excluded, or every person has an action
function updateEntry() {
  const c = S.clip;
  const was = c.done;
  const labelled = c.persons.filter((p) => (c.actions[p] || []).length).length;
  c.done = c.excluded || (c.persons.length > 0 && labelled === c.persons.length);
  const e = clipEntry(c.clip_id); // absent when the clip is not on the page shown
  if (e) Object.assign(e, { excluded: c.excluded, reason: c.reason, labelled, done: c.done });
  if (was !== c.done) S.state.done += c.done ? 1 : -1;
  renderProgress();
}

// ------------------------------------------------------------------ player
function color(pid) { const c = S.state.colors; return c[(pid - 1) % c.length]; }

function draw() {
  const cv = $("canvas"), ctx = cv.getContext("2d");
  const clip = S.clip;
  if (!clip) return;
  const k = cv.width / clip.width;
  const img = S.images[S.frame - 1];
  if (img && img.complete && img.naturalWidth) {
    ctx.drawImage(img, 0, 0, cv.width, cv.height);
  } else {
    ctx.fillStyle = "#111"; ctx.fillRect(0, 0, cv.width, cv.height);
    ctx.fillStyle = "#ccc"; ctx.font = "20px sans-serif"; ctx.fillText("loading…", 20, 40);
  }
  $("frame-no").textContent = `frame ${S.frame} / ${clip.frames}`;
  if (!$("show-boxes").checked) return;
  const base = Math.max(2, Math.round(Math.min(cv.width, cv.height) / 200));
  const fpx = Math.max(14, Math.round(Math.min(cv.width, cv.height) / 22));
  ctx.font = `bold ${fpx}px sans-serif`;
  for (const [pid, x1, y1, x2, y2] of clip.boxes[S.frame] || []) {
    const c = color(pid);
    const lw = pid === S.person ? base * 2 : base;
    ctx.strokeStyle = c; ctx.lineWidth = lw;
    ctx.strokeRect(x1 * k, y1 * k, (x2 - x1) * k, (y2 - y1) * k);
    const text = `Person ID: ${pid}`;
    const tw = ctx.measureText(text).width + 8, th = fpx + 6;
    const tx = Math.min(Math.max(0, x1 * k - lw / 2), cv.width - tw);
    const ty = y1 * k - lw / 2 - th >= 0 ? y1 * k - lw / 2 - th : y1 * k + lw / 2;
    ctx.fillStyle = c; ctx.fillRect(tx, ty, tw, th);
    ctx.fillStyle = "#000"; ctx.fillText(text, tx + 4, ty + fpx);
  }
}

function setFrame(n) {
  const total = S.clip ? S.clip.frames : 1;
  S.frame = Math.min(total, Math.max(1, n));
  draw();
}

function setPlaying(on) {
  S.playing = on && !!S.clip;
  S.acc = 0; S.lastT = null;
  $("play").textContent = S.playing ? "⏸ pause" : "▶ play";
}

function tick(t) {
  if (S.playing && S.clip) {
    if (S.lastT !== null) S.acc += ((t - S.lastT) / 1000) * 30 * Number($("speed").value);
    S.lastT = t;
    while (S.acc >= 1) {
      S.acc -= 1;
      let next = S.frame + 1;
      if (next > S.clip.frames) {
        if (!$("loop").checked) { setPlaying(false); break; }
        next = 1;
      }
      const img = S.images[next - 1];
      if (!img || !img.naturalWidth) { S.acc = 0; break; } // wait for the frame
      S.frame = next;
    }
    draw();
  }
  requestAnimationFrame(tick);
}

function changeSpeed(delta) {
  const sel = $("speed");
  sel.selectedIndex = Math.min(sel.options.length - 1, Math.max(0, sel.selectedIndex + delta));
}

// ------------------------------------------------------------------ persons and actions
function actionsOf(pid) { return S.clip.actions[pid] || []; }

// Suggestions (the VLM baseline's answers, suggestions.py): a person without a saved action
// shows the model's actions ticked and marked as suggested; nothing is saved until a click.
// A click on a box (or Enter in the search, or a chip's ×) saves the person's set as shown
// with that change; "accept" saves it as suggested; "clear" unticks them (nothing saved).
function suggestionOf(pid) { return (S.clip.suggestions || {})[pid] || null; }

function pendingOf(pid) {
  if (S.clip.excluded || actionsOf(pid).length || !suggestionOf(pid)) return null;
  if (!(pid in S.pending)) S.pending[pid] = suggestionOf(pid).actions.slice();
  return S.pending[pid];
}

function shownOf(pid) { return pendingOf(pid) || actionsOf(pid); }

function toggle(pid, aid) {
  const pending = pendingOf(pid);
  if (!pending) return change(pid, aid, actionsOf(pid).includes(aid) ? "remove" : "add");
  return saveSet(pid, pending.includes(aid) ? pending.filter((a) => a !== aid) : [...pending, aid]);
}

function outcomeOf(suggested, saved) {
  const kept = saved.filter((a) => suggested.includes(a)).length;
  if (kept === suggested.length && saved.length === suggested.length) return "accepted";
  return kept ? "edited" : "removed";
}

function suggestionNote(pid) {
  const sg = suggestionOf(pid);
  const note = document.createElement("div");
  note.className = "suggestion-note";
  const names = sg.actions.map((a) => (labelById.get(a) || { name: `id ${a}` }).name).join(", ");
  const pending = pendingOf(pid);
  if (!pending) {
    const what = actionsOf(pid).length ? outcomeOf(sg.actions, actionsOf(pid)) : "clip excluded";
    note.textContent = `suggested by ${sg.model}: ${names} (${what})`;
    return note;
  }
  note.textContent = pending.length ? `suggested by ${sg.model}: not saved until you click `
    : `suggested by ${sg.model}: ${names} (not ticked) `;
  const ok = document.createElement("button");
  ok.className = "accept-suggestion";
  ok.textContent = "accept";
  ok.title = "save the suggested actions for this person";
  ok.onclick = (ev) => { ev.stopPropagation(); saveSet(pid, sg.actions.slice()); };
  note.append(ok);
  if (pending.length) {
    const no = document.createElement("button");
    no.className = "clear-suggestion";
    no.textContent = "clear";
    no.title = "untick the suggested actions (nothing is saved)";
    no.onclick = (ev) => { ev.stopPropagation(); S.pending[pid] = []; renderPersons(); };
    note.append(" ", no);
  }
  return note;
}

function renderSuggestionSummary() {
  const s = S.state.suggestions;
  const el = $("suggestion-summary");
  if (!el) return;
  el.hidden = !s || !s.suggestions;
  if (s && s.suggestions) {
    el.textContent = `suggestions: ${s.suggestions_accepted} accepted · ${s.suggestions_edited} edited · `
      + `${s.suggestions_removed} removed`;
  }
}

function renderPersons() {
  const box = $("persons");
  box.replaceChildren();
  if (!S.clip.persons.length) {
    box.innerHTML = '<div class="empty">No tracked person in this clip (tracks are made for kept clips only).</div>';
    return;
  }
  for (const pid of S.clip.persons) {
    const card = document.createElement("div");
    card.className = "person" + (pid === S.person ? " selected" : "");
    card.style.setProperty("--c", color(pid));
    card.dataset.person = pid;
    const mine = shownOf(pid);
    const pending = !!pendingOf(pid);
    card.innerHTML = `<h3><span>Person ID: ${pid}</span><span class="count">${mine.length} / ${S.state.max_actions}</span></h3>`;
    if (suggestionOf(pid)) card.append(suggestionNote(pid));
    const chips = document.createElement("div");
    chips.className = "chips";
    for (const aid of mine) {
      const l = labelById.get(aid);
      const chip = document.createElement("span");
      chip.className = "chip" + (l ? "" : " unknown") + (pending ? " suggested" : "");
      chip.textContent = l ? l.name : `unknown id ${aid}`;
      chip.title = `id ${aid}`;
      const x = document.createElement("button");
      x.textContent = "×";
      x.title = "remove";
      x.onclick = (ev) => { ev.stopPropagation(); toggle(pid, aid); };
      chip.append(x);
      chips.append(chip);
    }
    card.append(chips);
    if (pid === S.person) card.append(makePicker(pid));
    card.onclick = () => { if (S.person !== pid) selectPerson(pid); };
    box.append(card);
  }
}

function makePicker(pid) {
  const wrap = document.createElement("div");
  wrap.className = "picker";
  if (S.clip.excluded) {
    wrap.innerHTML = '<div class="empty">Clip excluded: include it again to label.</div>';
    return wrap;
  }
  const input = document.createElement("input");
  input.type = "search";
  input.id = "search";
  input.placeholder = "search actions ( / )";
  input.value = S.search;
  input.oninput = () => { S.search = input.value; S.active = 0; renderList(pid); };
  wrap.append(input);
  const list = document.createElement("div");
  list.className = "list";
  list.id = "action-list";
  wrap.append(list);
  setTimeout(() => renderList(pid));
  return wrap;
}

function matches() {
  const q = S.search.trim().toLowerCase();
  return S.state.labels.filter((l) => !q || l.name.toLowerCase().includes(q) || String(l.id) === q);
}

function renderList(pid) {
  const list = $("action-list");
  if (!list) return;
  list.replaceChildren();
  const found = matches();
  S.active = Math.min(S.active, Math.max(0, found.length - 1));
  const mine = shownOf(pid);
  const pending = !!pendingOf(pid);
  const full = mine.length >= S.state.max_actions;
  for (const type of S.state.label_types) {
    const group = found.filter((l) => l.label_type === type);
    if (!group.length) continue;
    const h = document.createElement("h4");
    h.textContent = type.replace("_", " ");
    list.append(h);
    for (const l of group) {
      const lab = document.createElement("label");
      const on = mine.includes(l.id);
      lab.dataset.action = l.id;
      if (found.indexOf(l) === S.active) lab.classList.add("active");
      if (full && !on) lab.classList.add("full");
      if (pending && on) lab.classList.add("suggested");
      const cb = document.createElement("input");
      cb.type = "checkbox";
      cb.checked = on;
      cb.onclick = (ev) => { ev.preventDefault(); toggle(pid, l.id); };
      lab.append(cb, ` ${l.name}`);
      lab.title = `id ${l.id}`;
      list.append(lab);
    }
  }
  if (!found.length) list.innerHTML = '<div class="empty">no action matches</div>';
  const act = list.querySelector("label.active");
  if (act) act.scrollIntoView({ block: "nearest" });
}

function selectPerson(pid) {
  S.person = pid; S.search = ""; S.active = 0;
  renderPersons();
  draw();
}

function stepPerson(delta) {
  const ps = S.clip ? S.clip.persons : [];
  if (!ps.length) return;
  const i = ps.indexOf(S.person);
  selectPerson(ps[(i + delta + ps.length) % ps.length]);
}

async function change(pid, aid, op) {
  const clipId = S.clip.clip_id;
  const focus = document.activeElement && document.activeElement.id === "search";
  const r = await api("POST", "/api/actions", { clip_id: clipId, person_id: pid, action: aid, op });
  if (!r) return;
  saved(clipId, pid, r, focus);
}

// The person's whole set in one save (op "set"): a suggestion as the page shows it.
async function saveSet(pid, actions) {
  const clipId = S.clip.clip_id;
  const focus = document.activeElement && document.activeElement.id === "search";
  const r = await api("POST", "/api/actions", { clip_id: clipId, person_id: pid, actions, op: "set" });
  if (r) saved(clipId, pid, r, focus);
}

function saved(clipId, pid, r, focus) {
  if (!S.clip || S.clip.clip_id !== clipId) return;
  S.clip.actions[pid] = r.actions;
  S.pending[pid] = []; // dealt with: not ticked again in this view
  updateEntry();
  renderPersons();
  renderClipList();
  if (focus && $("search")) { $("search").focus(); }
}

// ------------------------------------------------------------------ screening
function renderScreening() {
  $("screening").classList.toggle("excluded", S.clip.excluded);
  $("screen-status").textContent = S.clip.excluded ? "excluded (the filter drops it on the next run)" : "";
}

// Saves go one after another, each sending the form as it is then: "x" saves the
// exclusion at once and the reason typed next is saved on Enter; sent side by side, the
// second could reach the server first and the first (without the reason) would win.
let screeningSaves = Promise.resolve();
let screeningQueued = 0;
function sendScreening() {
  screeningQueued++;
  screeningSaves = screeningSaves.then(saveScreening, saveScreening).finally(() => { screeningQueued--; });
  return screeningSaves;
}

async function saveScreening() {
  const r = await api("POST", "/api/screening",
    { clip_id: S.clip.clip_id, excluded: $("exclude").checked, reason: $("reason").value });
  if (!r) { $("exclude").checked = S.clip.excluded; return; }
  S.clip.excluded = r.excluded;
  S.clip.reason = r.reason;
  // keep what is being typed, or what a queued save will send
  if (r.excluded && screeningQueued === 1 && document.activeElement !== $("reason")) $("reason").value = r.reason;
  updateEntry();
  renderScreening();
  renderPersons();
  renderClipList();
}

// ------------------------------------------------------------------ keyboard
function onKey(ev) {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const t = ev.target;
  if (t.id === "search") return searchKey(ev);
  if (t.id === "reason") {
    if (ev.key === "Escape" || ev.key === "Enter") t.blur(); // blur saves (change event)
    return;
  }
  if ((t.tagName === "INPUT" && t.type === "text") || t.tagName === "TEXTAREA") return;
  const keys = {
    " ": () => setPlaying(!S.playing),
    ArrowLeft: () => { setPlaying(false); setFrame(S.frame - 1); },
    ArrowRight: () => { setPlaying(false); setFrame(S.frame + 1); },
    n: () => stepClip(1), p: () => stepClip(-1),
    j: () => stepPerson(1), k: () => stepPerson(-1),
    "/": () => focusSearch(), a: () => focusSearch(),
    x: () => { $("exclude").checked = !$("exclude").checked; sendScreening(); if ($("exclude").checked) $("reason").focus(); },
    u: () => { $("todo-only").checked = !$("todo-only").checked; loadState(); },
    "-": () => changeSpeed(-1), "+": () => changeSpeed(1), "=": () => changeSpeed(1),
    l: () => { $("loop").checked = !$("loop").checked; },
    b: () => { $("show-boxes").checked = !$("show-boxes").checked; draw(); },
  };
  const fn = keys[ev.key];
  if (!fn || !S.clip) return;
  ev.preventDefault();
  if (t.blur && t !== document.body) t.blur(); // a focused button must not also get the key
  fn();
}

function focusSearch() {
  const s = $("search");
  if (s) { s.focus(); s.select(); }
}

function searchKey(ev) {
  const found = matches();
  if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
    ev.preventDefault();
    S.active = Math.min(found.length - 1, Math.max(0, S.active + (ev.key === "ArrowDown" ? 1 : -1)));
    renderList(S.person);
  } else if (ev.key === "Enter") {
    ev.preventDefault();
    const l = found[S.active];
    if (l) toggle(S.person, l.id);
  } else if (ev.key === "Escape") {
    ev.preventDefault();
    ev.target.blur();
  }
}

// ------------------------------------------------------------------ start
async function refresh() {
  if (!(await loadState())) return;
  if (S.clip && clipEntry(S.clip.clip_id)) await openClip(S.clip.clip_id);
}

async function start() {
  const m = location.hash.match(/^#clip=(.+)$/);
  const asked = m && decodeURIComponent(m[1]);
  if (!(await loadState(asked ? { around: asked } : {}))) return;
  $("play").onclick = () => setPlaying(!S.playing);
  $("step-back").onclick = () => { setPlaying(false); setFrame(S.frame - 1); };
  $("step-fwd").onclick = () => { setPlaying(false); setFrame(S.frame + 1); };
  $("prev-clip").onclick = () => stepClip(-1);
  $("next-clip").onclick = () => stepClip(1);
  $("show-boxes").onchange = draw;
  $("todo-only").onchange = () => loadState();
  $("exclude").onchange = sendScreening;
  $("reason").onchange = () => { if ($("exclude").checked) sendScreening(); };
  document.addEventListener("keydown", onKey);
  window.addEventListener("focus", refresh); // another tab may have changed the files
  const want = asked && clipEntry(asked);
  const first = want || S.state.clips.find((c) => !c.done) || S.state.clips[0];
  if (first) await openClip(first.clip_id);
  requestAnimationFrame(tick);
}

start();
