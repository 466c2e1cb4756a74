// microg4m team mode: sends the session's CSRF token with every state-changing request,
// sends the browser to the login page when the session has ended, and adds "log out".
"use strict";
(() => {
  const token = document.querySelector('meta[name="csrf-token"]').content;
  const plain = window.fetch.bind(window);
  window.fetch = async (url, opt = {}) => {
    const method = (opt.method || "GET").toUpperCase();
    if (!["GET", "HEAD", "OPTIONS"].includes(method)) {
      opt = { ...opt, headers: { ...(opt.headers || {}), "X-CSRF-Token": token } };
    }
    const r = await plain(url, opt);
    if (r.status === 401) location.href = "/login";
    return r;
  };
  async function logout() {
    await fetch("/logout", { method: "POST" });
    location.href = "/login";
  }
  document.addEventListener("DOMContentLoaded", () => {
    const b = document.createElement("button");
    b.id = "logout";
    b.textContent = "log out";
    b.onclick = logout;
    document.querySelector("header").append(b);
  });
})();
