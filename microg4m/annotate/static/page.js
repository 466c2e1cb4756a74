// microg4m annotation pages: what every page script uses (loaded before it): the element
// lookup, the JSON API call that shows a refusal as the server words it, and the toast.
"use strict";

const $ = (id) => document.getElementById(id);

// Returns the JSON answer, or null after showing the error.
async function api(method, url, body) {
  const opt = { method, headers: {} };
  if (body !== undefined) {
    opt.headers["Content-Type"] = "application/json";
    opt.body = JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(url, opt);
  } catch (e) {
    toast(`server not reachable (${e.message})`);
    return null;
  }
  const data = await r.json().catch(() => ({ error: `${r.status} ${r.statusText}` }));
  if (!r.ok) {
    toast(data.error || `${r.status} ${r.statusText}`); // the refusal, as the server words it
    return null;
  }
  return data;
}

// The query of a list request (pages.py): the filter `base`, then `query`; without a page or
// clip asked for, the page that holds the clip open (`open`, its id or null). Empty, null and
// false values are left out; true is sent as 1.
function listQuery(base, query, open) {
  const params = { ...base, ...query };
  if (params.page === undefined && params.around === undefined && open) params.around = open;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "" && v !== false) q.set(k, v === true ? "1" : String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

// The pager above a clip list (#pager; a list answer comes a page at a time, with page,
// pages and listed: see pages.py): hidden when one page holds the list; go(n) opens page n.
function renderPager(d, go) {
  const p = $("pager");
  p.hidden = !(d.pages > 1);
  p.replaceChildren();
  const button = (text, title, n) => {
    const b = document.createElement("button");
    b.textContent = text;
    b.title = title;
    b.disabled = n < 1 || n > d.pages;
    b.onclick = () => go(n);
    return b;
  };
  const t = document.createElement("span");
  t.textContent = `page ${d.page} / ${d.pages} (${d.listed} clips)`;
  p.append(button("‹", "the page before", d.page - 1), t, button("›", "the page after", d.page + 1));
}

// A message at the foot of the page for a few seconds (green when `ok`).
function toast(msg, ok = false) {
  const t = $("toast");
  t.textContent = msg;
  t.style.background = ok ? "#1a8a2e" : "";
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.hidden = true), 5000);
}

// The frames of a clip as Image objects (index n - 1 for frame n), filled from one request:
// GET /clip/<id>/frames answers the JPEGs one after another, their lengths in the header
// X-Frame-Lengths (one request per clip, not one per frame; a browser that has them
// revalidates them in one request too). onload(n) runs once frame n can be drawn. Opening
// another clip releases the images of the one before; an answer for a clip no longer open
// is dropped.
function clipFrames(id, count, onload) {
  const gen = (clipFrames.gen = (clipFrames.gen || 0) + 1);
  (clipFrames.urls || []).forEach((u) => URL.revokeObjectURL(u));
  clipFrames.urls = [];
  const images = Array.from({ length: count }, () => new Image());
  fetch(`/clip/${encodeURIComponent(id)}/frames`)
    .then(async (r) => {
      if (!r.ok) {
        const data = await r.json().catch(() => ({}));
        throw new Error(data.error || `${r.status} ${r.statusText}`);
      }
      const lengths = (r.headers.get("X-Frame-Lengths") || "").split(",").map(Number);
      const buf = await r.arrayBuffer();
      if (gen !== clipFrames.gen) return; // another clip was opened meanwhile
      let offset = 0;
      lengths.slice(0, count).forEach((len, i) => {
        const url = URL.createObjectURL(new Blob([new Uint8Array(buf, offset, len)], { type: "image/jpeg" }));
        offset += len;
        clipFrames.urls.push(url);
        images[i].onload = () => onload(i + 1);
        images[i].src = url;
      });
    })
    .catch((e) => toast(`the frames of ${id} did not load (${e.message})`));
  return images;
}
