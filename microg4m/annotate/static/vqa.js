// microg4m annotate: the caption and QA-pair editors of the open clip (API: vqa_routes.py).
// The editors start from the person's saved entry, else from the model's draft. Saving
// (button, Ctrl+S, ticking "reviewed", or opening another clip) sends the whole entry;
// the server checks the rules and refuses a save based on an older version.
"use strict";

const V = {
  rules: null, warn: [], summary: {}, file: "",
  clip: null,        // clip id the editors show
  entry: null,       // the person's saved entry (null: none)
  draft: null,       // the model's draft (null: none)
  fromDraft: false,  // the editors' text came from the draft
  dirty: false,
  unsaved: new Map(), // clip id -> editor content whose save was refused
};

V.ready = (async () => {
  const r = await api("GET", "/api/vqa");
  if (!r) return;
  V.rules = r.rules;
  V.summary = r.clips;
  V.file = r.file;
  V.warn = Object.entries(r.rules.warnings).map(([k, src]) => [k, new RegExp(src, "i")]);
  $("vqa-file").textContent = `saved to ${r.file}`;
  $("qa-add").onclick = () => { addRow({ Q: "", A: "" }, true); setDirty(true); };
  $("vqa-save").onclick = () => vqaSave();
  $("vqa-reviewed").onchange = () => vqaSave();
  $("vqa-load-draft").onclick = () => { if (V.draft) { fill(V.draft); V.fromDraft = true; setDirty(true); } };
  $("caption").oninput = () => { setDirty(true); captionInfo(); };
  document.addEventListener("keydown", (ev) => {
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "s") { ev.preventDefault(); vqaSave(); }
  });
  window.addEventListener("beforeunload", (ev) => { if (V.dirty) { ev.preventDefault(); ev.returnValue = ""; } });
  vqaMarkList();
})();

function warningsOf(text) { return V.warn.filter(([, rx]) => rx.test(text)).map(([k]) => k); }

function rows() { return [...document.querySelectorAll("#qa-list .qa-row")]; }

function content() {
  const pairs = rows().map((r) => ({ Q: r.querySelector(".q").value.trim(), A: r.querySelector(".a").value.trim() }))
    .filter((p) => p.Q || p.A); // a blank row is no pair
  return { caption: $("caption").value, qa_pairs: pairs, reviewed: $("vqa-reviewed").checked };
}

function captionInfo() {
  const n = ($("caption").value.match(/\S+/g) || []).length;
  $("caption-info").textContent = `${n} words`;
}

function renumber() {
  const rs = rows();
  rs.forEach((r, i) => { r.querySelector(".n").textContent = `${i + 1}.`; });
  const max = V.rules ? V.rules.max_pairs : 6;
  $("qa-count").textContent = `${rs.length} / ${max}`;
  $("qa-add").disabled = rs.length >= max;
  const un = rs.filter((r) => r.querySelector(".unans").checked);
  for (const r of rs) r.querySelector(".unans").disabled = un.length > 0 && !un.includes(r);
}

function rowWarnings(row) {
  const w = warningsOf(row.querySelector(".q").value);
  const box = row.querySelector(".warn");
  box.textContent = w.length ? `warning: the question is about ${w.join(" / ")}: a viewer cannot see that` : "";
  box.hidden = !w.length;
}

function addRow(pair, focus = false) {
  if (rows().length >= V.rules.max_pairs) return;
  const NM = V.rules.unanswerable;
  const row = document.createElement("div");
  row.className = "qa-row";
  row.innerHTML = '<span class="n"></span><input type="text" class="q" maxlength="500" placeholder="question">'
    + '<input type="text" class="a" maxlength="500" placeholder="answer">'
    + `<label class="un" title="an unanswerable question; its answer is exactly '${NM}' (one per clip at most)">`
    + '<input type="checkbox" class="unans"> unanswerable</label>'
    + '<button class="del" title="remove this pair">×</button><div class="warn" hidden></div>';
  const q = row.querySelector(".q"), a = row.querySelector(".a"), un = row.querySelector(".unans");
  q.value = pair.Q; a.value = pair.A;
  un.checked = pair.A === NM;
  a.readOnly = un.checked;
  q.oninput = () => { rowWarnings(row); setDirty(true); };
  a.oninput = () => setDirty(true);
  un.onchange = () => {
    if (un.checked && rows().some((r) => r !== row && r.querySelector(".unans").checked)) {
      un.checked = false;
      toast(`at most one unanswerable pair per clip (answer "${NM}")`);
      return;
    }
    a.value = un.checked ? NM : "";
    a.readOnly = un.checked;
    if (!un.checked) a.focus();
    renumber();
    setDirty(true);
  };
  row.querySelector(".del").onclick = () => { row.remove(); renumber(); setDirty(true); };
  $("qa-list").append(row);
  rowWarnings(row);
  renumber();
  if (focus) q.focus();
}

function fill(c) {
  $("caption").value = c.caption || "";
  $("qa-list").replaceChildren();
  for (const p of (c.qa_pairs || []).slice(0, V.rules.max_pairs)) addRow(p);
  $("vqa-reviewed").checked = c.reviewed === true;
  captionInfo();
  renumber();
}

function setDirty(on) {
  V.dirty = on;
  $("vqa").classList.toggle("dirty", on);
  if (on) $("vqa-status").textContent = "unsaved changes";
}

function describeSource() {
  const d = V.draft, e = V.entry;
  let text;
  if (e) {
    text = `edited by ${e.reviewer || "a person"}, saved ${e.updated}` + (e.reviewed ? " · reviewed" : " · not reviewed yet");
    if (d && d.time && (!e.draft || e.draft.time !== d.time)) text += ` · a draft (${d.model}, ${d.time}) exists: not applied`;
  } else if (d && d.status === "ok") {
    text = `draft from ${d.model} (prompt ${d.prompt_hash}, ${d.time}), not saved yet`;
  } else if (d) {
    text = `draft failed: ${d.reason}` + (d.caption ? " (caption only)" : "");
  } else {
    text = "no draft: write the caption and pairs";
  }
  $("vqa-source").textContent = `· ${text}`;
  $("vqa-load-draft").hidden = !(e && d && (d.caption || (d.qa_pairs || []).length));
}

// called by annotate.js whenever a clip is opened (same = the clip shown was re-opened)
async function vqaClipOpened(id, same) {
  await V.ready;
  if (!V.rules) return;
  if (same && V.clip === id && V.dirty) return; // a refresh must not throw away the edits
  if (V.clip && V.clip !== id && V.dirty) await vqaSave(); // leaving a clip saves its edits
  const r = await api("GET", `/api/vqa/${encodeURIComponent(id)}`);
  if (!r || !S.clip || S.clip.clip_id !== id) return;
  if (V.clip === id && V.dirty) return; // typed into while this was fetched: keep the edits
  V.clip = id; V.entry = r.entry; V.draft = r.draft;
  const kept = V.unsaved.get(id);
  if (kept) {
    fill(kept.content); V.fromDraft = kept.fromDraft; setDirty(true);
  } else {
    const useDraft = !r.entry && r.draft;
    fill(r.entry || r.draft || {});
    V.fromDraft = !!useDraft;
    setDirty(false);
    $("vqa-status").textContent = "";
  }
  describeSource();
}

async function vqaSave() {
  if (!V.clip || !V.rules) return false;
  const id = V.clip, c = content();
  const r = await api("POST", "/api/vqa", {
    clip_id: id, ...c, base: V.entry ? V.entry.updated : null, from_draft: V.fromDraft });
  if (!r) { // refused: the message is in the toast; keep the text for this clip
    V.unsaved.set(id, { content: c, fromDraft: V.fromDraft });
    if (V.clip === id) $("vqa-status").textContent = "not saved (see the message)";
    return false;
  }
  V.unsaved.delete(id);
  V.summary[id] = { edited: true, reviewed: r.entry.reviewed, draft: V.summary[id] ? V.summary[id].draft : null };
  if (V.clip === id) {
    V.entry = r.entry; V.fromDraft = false;
    setDirty(false);
    $("vqa-status").textContent = `saved ${r.entry.updated.slice(11, 19)} UTC`;
    describeSource();
  }
  vqaMarkList();
  return true;
}

// clip list: a mark for clips whose caption and pairs a person reviewed (or drafts exist)
function vqaMarkList() {
  for (const d of document.querySelectorAll("#clip-list div[data-clip]")) {
    const s = V.summary[d.dataset.clip];
    d.classList.toggle("vqa-reviewed", !!(s && s.reviewed));
    d.classList.toggle("vqa-draft", !!(s && !s.edited && s.draft === "ok"));
  }
}
