// The dashboard page: polls /api/state every 400 ms (2.5 times a second)
// and redraws. No framework; the DOM is built with textContent only, so a
// replica name or an error text can never inject markup.
"use strict";

const POLL_MS = 400;
const $ = (id) => document.getElementById(id);
let maxRate = 1; // the bars' scale: the highest per-replica sales/s seen

function fmtMs(s) {
  if (s < 0.001) return (s * 1000).toFixed(2) + " ms";
  if (s < 1) return (s * 1000).toFixed(1) + " ms";
  return s.toFixed(2) + " s";
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function drawBooks(b) {
  const banner = $("oversold");
  if (!b.known) {
    $("stock").textContent = "—";
    $("booksnote").textContent = b.error ? "books unreadable: " + b.error : "";
    banner.hidden = true;
    return;
  }
  $("stock").textContent = b.stock;
  $("lucky").textContent = b.lucky;
  $("initial").textContent = b.initial + (b.learned ? " (learned)" : "");
  $("sum").textContent = b.stock + b.lucky;
  $("booksnote").textContent = "read from " + (b.source === "redis" ? "Redis (one MGET)" : "GET /stock") +
    (b.census && !b.census.error ? " · reservations: " + b.census.reserved + " reserved, " + b.census.paid + " paid, " +
      b.census.cancelled + " cancelled, " + b.census.expired + " expired, " + b.census.returned + " returned" : "");
  const c = b.census;
  if (b.oversold) {
    banner.hidden = false;
    banner.textContent = b.stock < 0 && b.excess === 0
      ? "OVERSOLD: stock is negative (" + b.stock + ")"
      : "OVERSOLD by " + b.excess + ": stock " + b.stock + " + lucky " + b.lucky +
        " = " + (b.stock + b.lucky) + ", but the sale started with " + b.initial;
  } else if (c && !c.error && !c.ok) {
    banner.hidden = false;
    banner.textContent = "RESERVATIONS BROKEN: " + c.problems.join("; ");
  } else {
    banner.hidden = true;
  }
}

function drawReplicas(reps) {
  for (const r of reps) maxRate = Math.max(maxRate, r.sales_per_sec);
  const box = $("replicas");
  box.replaceChildren();
  for (const r of reps) {
    const row = el("div", "rep" + (r.ready ? " ready" : "") + (r.leader ? " leader" : "") + (r.warnings ? " warn" : ""));
    row.dataset.replica = r.name;
    const name = el("div", "name", r.name);
    name.title = r.url + (r.not_ready ? "\nnot ready: " + r.not_ready : "") +
      (r.warnings ? "\nwarnings: " + r.warnings : "") + (r.error ? "\n" + r.error : "");
    const track = el("div", "track");
    const bar = el("div", "bar");
    bar.dataset.sales = r.sales_per_sec.toFixed(1);
    bar.style.width = Math.min(100, (100 * r.sales_per_sec) / maxRate).toFixed(1) + "%";
    track.append(bar);
    const num = el("div", "num");
    num.append(el("b", "", r.up ? r.sales_per_sec.toFixed(0) + "/s" : "down"), document.createTextNode(" · sold " + r.sold));
    row.append(name, track, num);
    box.append(row);
  }
}

function drawResults(results) {
  const t = $("results");
  t.replaceChildren();
  for (const c of results) {
    const tr = el("tr", "r-" + c.result + (c.n === 0 ? " zero" : ""));
    tr.dataset.result = c.result;
    tr.append(el("td", "", c.result), el("td", "", String(c.n)));
    t.append(tr);
  }
}

function drawWait(w) {
  if (!w.available) {
    $("p50").textContent = $("p99").textContent = "n/a";
    $("waitnote").textContent = "no replica exports seckill_lock_wait_seconds";
  } else if (w.count === 0) {
    $("p50").textContent = $("p99").textContent = "—";
    $("waitnote").textContent = "no lock acquisition yet";
  } else {
    $("p50").textContent = fmtMs(w.p50);
    $("p99").textContent = fmtMs(w.p99);
    $("waitnote").textContent = w.span + ", " + w.count + " acquisitions, all replicas (histogram buckets, interpolated)";
  }
}

// drawItems fills the items' table; the card shows only when there are
// items. An item whose books do not balance says so in its row.
function drawItems(its) {
  const card = $("itemscard"), t = $("items");
  const list = (its && its.items) || [];
  card.hidden = list.length === 0 && !(its && its.error);
  t.replaceChildren();
  if (list.length > 0) {
    const head = el("tr");
    for (const h of ["item", "state", "stock", "sold", "initial", "books"]) head.append(el("th", "", h));
    t.append(head);
  }
  for (const it of list) {
    const tr = el("tr", "item" + (it.oversold ? " bad" : ""));
    tr.dataset.item = it.id;
    if (it.error) {
      tr.append(el("td", "", it.id), el("td", "", "unreadable: " + it.error));
    } else {
      const excess = it.stock + it.lucky - it.initial;
      const books = !it.oversold ? "ok" : excess !== 0 ? "OVERSOLD by " + excess : "OVERSOLD: stock " + it.stock;
      const state = it.sold_out && it.state === "open" ? "sold out" : it.state;
      tr.append(el("td", "", it.id), el("td", "", state), el("td", "", String(it.stock)),
        el("td", "", String(it.lucky)), el("td", "", String(it.initial)), el("td", "books", books));
    }
    t.append(tr);
  }
  $("itemsnote").textContent = its && its.error ? "items unreadable: " + its.error
    : its && its.more > 0 ? "and " + its.more + " more" : "";
}

const SVGNS = "http://www.w3.org/2000/svg";

function drawCurve(hist) {
  const svg = $("curve");
  svg.replaceChildren();
  if (hist.length < 2) return;
  const W = 600, H = 180, pad = 6;
  // The x axis spans what there is, between 10 s and a minute, so a page
  // opened just before a sale is not a sliver at the right edge.
  const t1 = hist[hist.length - 1].t;
  const t0 = t1 - Math.min(60000, Math.max(10000, t1 - hist[0].t));
  const x = (t) => pad + ((W - 2 * pad) * (t - t0)) / (t1 - t0);
  const maxStock = Math.max(1, ...hist.map((p) => p.stock));
  const maxSales = Math.max(1, ...hist.map((p) => p.sales_per_sec));
  const line = (ys, color) => {
    const p = document.createElementNS(SVGNS, "polyline");
    p.setAttribute("points", hist.map((q, i) => x(q.t).toFixed(1) + "," + ys[i].toFixed(1)).join(" "));
    p.setAttribute("fill", "none");
    p.setAttribute("stroke", color);
    p.setAttribute("stroke-width", "2");
    p.setAttribute("vector-effect", "non-scaling-stroke");
    svg.append(p);
  };
  const y = (v, m) => H - pad - ((H - 2 * pad) * Math.max(0, v)) / m;
  line(hist.map((p) => y(p.stock, maxStock)), "#4cc2ff");
  line(hist.map((p) => y(p.sales_per_sec, maxSales)), "#d29922");
}

function draw(s) {
  $("backend").textContent = s.backend || "—";
  const l = s.leader;
  if (l.error) {
    $("leader").textContent = "unknown";
    $("term").textContent = "—";
  } else if (l.election === "none") {
    $("leader").textContent = "no election";
    $("term").textContent = "—";
  } else {
    $("leader").textContent = l.leader || "none yet";
    $("term").textContent = l.term ? String(l.term) : "—";
  }
  drawBooks(s.books);
  drawReplicas(s.replicas);
  drawResults(s.results);
  drawWait(s.lock_wait);
  drawCurve(s.history || []);
  drawItems(s.items);
  $("sales").textContent = s.sales_per_sec.toFixed(0) + "/s";
}

async function poll() {
  const conn = $("conn");
  try {
    const resp = await fetch("api/state", { cache: "no-store" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    draw(await resp.json());
    conn.textContent = "live";
    conn.className = "conn ok";
  } catch (e) {
    conn.textContent = "dashboard unreachable: " + e.message;
    conn.className = "conn bad";
  }
  setTimeout(poll, POLL_MS);
}

// The reset is guarded twice: it needs the admin token, and a second click
// within five seconds on the armed button.
function setupReset() {
  const form = $("resetform"), btn = $("reset"), note = $("resetnote");
  let armed = null;
  const disarm = () => {
    clearTimeout(armed);
    armed = null;
    btn.classList.remove("armed");
    btn.textContent = "Reset stock…";
  };
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const stock = Number($("resetstock").value);
    if (armed === null) {
      armed = setTimeout(disarm, 5000);
      btn.classList.add("armed");
      btn.textContent = "Confirm: reset to " + stock;
      return;
    }
    disarm();
    note.textContent = "resetting…";
    try {
      const resp = await fetch("api/reset", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Admin-Token": $("token").value },
        body: JSON.stringify({ stock }),
      });
      const ans = await resp.json();
      note.textContent = resp.ok
        ? "reset to " + stock + " by " + ans.replica
        : "refused (" + (ans.status || resp.status) + "): " + (ans.error || JSON.stringify(ans.body || ""));
    } catch (e) {
      note.textContent = "reset failed: " + e.message;
    }
  });
}

setupReset();
poll();
