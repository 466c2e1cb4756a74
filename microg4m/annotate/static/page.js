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

// A message at the foot of the page for a few seconds (green when `ok`).
function toast(msg, ok = false) {
  const t = $("toast");
  t.textContent = msg;
  t.style.background = ok ? "#1a8a2e" : "";
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.hidden = true), 5000);
}
