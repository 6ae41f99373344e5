// The approvals page of moat's daemon. Every string from the daemon is
// put in the page with textContent, never as markup.
"use strict";
(function () {
  // The CSRF token goes with every request: the cookie, bound to no port,
  // also reaches other servers on this host, and alone opens nothing. It
  // is kept in this origin's sessionStorage (its port included), so that
  // a reload of the tab stays logged in.
  let csrf = sessionStorage.getItem("moat_csrf") || "";
  let skew = 0; // the daemon's clock minus this one's, in ms
  const cards = new Map(); // approval id -> {li, approval}
  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // The characters that could make what the page shows read as something
  // else, workspace.MustEscape's (a test keeps the two the same):
  // controls (a newline that pushes the rest of a command out of sight),
  // the bidirectional controls that reorder what is displayed ("Trojan
  // Source"), the line and paragraph separators, the characters drawn as
  // nothing or as a blank (zero-width spaces, the soft hyphen, fillers,
  // tag characters), and the replacement character that stands for a
  // byte that is not UTF-8.
  const unsafe = /[\u0000-\u001f\u007f-\u009f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\u2800\u3164\ufeff\uffa0\ufff0-\ufffb\ufffd\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e0fff}]/gu;

  function hex(c) {
    const n = c.codePointAt(0);
    if (n < 0x80) return "\\x" + n.toString(16).padStart(2, "0");
    if (n <= 0xffff) return "\\u" + n.toString(16).padStart(4, "0");
    return "\\U" + n.toString(16).padStart(8, "0");
  }

  // shown is text from the daemon (a directory, a rule, a reason) with
  // every such character written as an escape.
  function shown(s) { return s.replace(unsafe, hex); }

  // quote shows argv as a person would type it: a word with such a
  // character as bash's $'...', the character escaped.
  function quote(argv) {
    return argv.map((w) => {
      if (w.search(unsafe) >= 0) return "$'" + w.replace(/[\\']/g, "\\$&").replace(unsafe, hex) + "'";
      return (w === "" || /[\s'"\\$`;&|<>()*?[\]{}~#!]/.test(w)) ? "'" + w.replace(/'/g, "'\\''") + "'" : w;
    }).join(" ");
  }

  function dur(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m " + (s % 60) + "s";
    return Math.floor(m / 60) + "h " + (m % 60) + "m";
  }

  function status(msg) { $("status").textContent = msg || ""; }

  async function api(method, path, body) {
    const opt = { method: method, headers: {}, credentials: "same-origin", cache: "no-store" };
    if (body !== undefined) {
      opt.headers["Content-Type"] = "application/json";
      opt.body = JSON.stringify(body);
    }
    opt.headers["X-Moat-Csrf"] = csrf;
    const r = await fetch(path, opt);
    let j = null;
    try { j = await r.json(); } catch (e) { j = null; }
    if (!r.ok) {
      const err = new Error(j && j.error ? j.error.message : "HTTP " + r.status);
      err.status = r.status;
      throw err;
    }
    return j;
  }

  function option(sel, value, text) {
    const o = el("option", "", text);
    o.value = value;
    sel.appendChild(o);
  }

  function row(dl, name, value) {
    dl.appendChild(el("dt", "", name));
    const dd = el("dd", "", value);
    dl.appendChild(dd);
    return dd;
  }

  function card(a) {
    const li = el("li", "approval");
    li.id = "a-" + a.id;
    li.appendChild(el("div", "", a.network ? "A network request waits:" : "A command waits:"));
    li.appendChild(el("pre", "what", quote(a.command)));
    const dl = el("dl");
    if (a.dir) row(dl, "directory", shown(a.dir));
    row(dl, "rule", shown(a.rule || "the command line (it hides what it runs)"));
    row(dl, "reason", shown(a.reason || ""));
    if (a.decided && a.decided.length && quote(a.decided) !== quote(a.command)) row(dl, "asked about", quote(a.decided));
    row(dl, "session", shown(a.session + " (" + a.tenant + ")"));
    const age = row(dl, "waiting", "");
    age.className = "age";
    const left = row(dl, "refused in", "");
    left.className = "left";
    li.appendChild(dl);
    if (a.diff) {
      const det = el("details", "diff");
      det.open = true;
      det.appendChild(el("summary", "", "the session's changes so far"));
      det.appendChild(el("pre", "diff", a.diff));
      li.appendChild(det);
    }

    const c = el("div", "controls");
    const scope = el("select", "scope");
    option(scope, "once", "once (this exact " + (a.network ? "request" : "command") + ")");
    if (!a.network) option(scope, "prefix", "commands beginning " + quote(a.decided && a.decided.length ? a.decided : a.command));
    if (a.rule) option(scope, "session", "everything this rule asks, in this session");
    const expiry = el("select", "for");
    for (const d of ["5m", "15m", "1h", "8h"]) option(expiry, d, "for " + d);
    expiry.value = "15m";
    expiry.disabled = true;
    scope.addEventListener("change", () => { expiry.disabled = scope.value === "once"; });
    const why = el("input", "why");
    why.placeholder = "why (recorded)";
    why.maxLength = 500;
    const ok = el("button", "approve", "Approve");
    const no = el("button", "deny", "Deny");
    ok.type = no.type = "button";
    ok.addEventListener("click", () => answer(a.id, "approve", { scope: scope.value, for: scope.value === "once" ? "" : expiry.value, why: why.value }));
    no.addEventListener("click", () => answer(a.id, "deny", { why: why.value }));
    c.append(scope, expiry, why, ok, no);
    li.appendChild(c);
    return { li: li, a: a, age: age, left: left };
  }

  async function answer(id, verb, body) {
    try {
      await api("POST", "/approvals/" + encodeURIComponent(id) + "/" + verb, body);
      status("");
      const c = cards.get(id);
      if (c) { c.li.remove(); cards.delete(id); }
      $("empty").hidden = cards.size > 0;
    } catch (e) {
      status(verb + ": " + e.message);
    }
    refresh();
  }

  function tick() {
    const now = Date.now() + skew;
    for (const c of cards.values()) {
      c.age.textContent = dur(now - Date.parse(c.a.created));
      const left = Date.parse(c.a.expires) - now;
      c.left.textContent = dur(left);
      c.left.classList.toggle("soon", left < 60000);
    }
  }

  function render(st) {
    $("who").textContent = st.tenant;
    skew = Date.parse(st.now) - Date.now();
    const seen = new Set();
    for (const a of st.approvals) {
      seen.add(a.id);
      if (!cards.has(a.id)) {
        const c = card(a);
        cards.set(a.id, c);
        $("list").appendChild(c.li);
      }
    }
    for (const [id, c] of cards) {
      if (!seen.has(id)) { c.li.remove(); cards.delete(id); }
    }
    $("empty").hidden = cards.size > 0;
    tick();
  }

  async function refresh() {
    try {
      const st = await api("GET", "/approvals/state");
      $("login").hidden = true;
      $("main").hidden = false;
      $("logout").hidden = false;
      render(st);
      if ($("status").textContent.startsWith("daemon")) status("");
    } catch (e) {
      if (e.status === 401) {
        $("login").hidden = false;
        $("main").hidden = true;
        $("logout").hidden = true;
      } else {
        status("daemon: " + e.message);
      }
    }
  }

  async function login(body) {
    try {
      const r = await api("POST", "/approvals/login", body);
      csrf = r.csrf;
      sessionStorage.setItem("moat_csrf", csrf);
      status("");
    } catch (e) {
      status("login: " + e.message);
    }
  }

  async function start() {
    const m = location.hash.match(/^#code=([0-9a-f]+)$/);
    if (m) {
      // The code works once: out of the address bar and the history.
      history.replaceState(null, "", location.pathname);
      await login({ code: m[1] });
    }
    $("token-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await login({ token: $("token").value });
      $("token").value = "";
      refresh();
    });
    $("logout").addEventListener("click", async () => {
      try { await api("POST", "/approvals/logout"); } catch (e) { status(e.message); }
      refresh();
    });
    await refresh();
    setInterval(refresh, 1000);
    setInterval(tick, 1000);
  }

  start();
})();
