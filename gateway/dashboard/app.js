// pgcursor's dashboard: hash-routed pages over the HTTP API (docs/http-api.md).
// No framework and no build step, so the gateway can embed this file as is.
"use strict";

const TOKEN_KEY = "pgcursor.token";
// How often the pages refresh, in seconds (0: paused): the reader's choice,
// kept in localStorage, so every tab and visit keeps it.
const EVERY_KEY = "pgcursor.refreshSeconds";
const EVERY_DEFAULT = "5";
const $ = (sel, root = document) => root.querySelector(sel);

const state = { page: null, params: {}, updatedAt: null, seq: 0, pending: 0, timer: null };

// ---- HTTP ---------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, { method = "GET", body } = {}) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  // A header holds Latin-1 only: no gateway token can hold more.
  if (token && /[^\u0000-\u00ff]/.test(token)) throw new ApiError(401, "that token cannot be sent");
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!response.ok) {
    const why = (data && data.error) || text || response.statusText;
    throw new ApiError(response.status, why);
  }
  return data;
}

// Explains a failed call in words a person can act on.
function describe(error) {
  if (error.status === 403) return "Not allowed with this token (403): " + error.message;
  if (error.status) return error.status + ": " + error.message;
  // fetch's own failure: no answer came at all.
  if (error instanceof TypeError) return "Cannot reach the gateway (" + error.message + "); retrying.";
  return String(error.message || error);
}

const enc = encodeURIComponent;

// ---- Formatting -----------------------------------------------------------

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  })[c]);
}

function ago(iso) {
  if (!iso) return "—";
  return duration((Date.now() - Date.parse(iso)) / 1000) + " ago";
}

function duration(seconds) {
  seconds = Math.max(0, Math.round(seconds));
  if (seconds < 120) return seconds + "s";
  if (seconds < 7200) return Math.round(seconds / 60) + "m";
  if (seconds < 172800) return Math.round(seconds / 3600) + "h";
  return Math.round(seconds / 86400) + "d";
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "—";
}

function num(n) {
  return Number(n ?? 0).toLocaleString("en-US");
}

// rows: array of arrays of HTML cells; head: [label, "num"?] pairs.
function table(head, rows, { empty = "Nothing here.", rowAttrs } = {}) {
  if (!rows.length) return `<p class="muted">${esc(empty)}</p>`;
  const th = head.map(([label, cls]) => `<th class="${cls || ""}">${esc(label)}</th>`).join("");
  const body = rows.map((cells, i) => {
    const attrs = rowAttrs ? rowAttrs(i) : "";
    const tds = cells.map((c, j) => `<td class="${head[j][1] || ""}">${c}</td>`).join("");
    return `<tr ${attrs}>${tds}</tr>`;
  }).join("");
  return `<div class="scroll"><table><thead><tr>${th}</tr></thead><tbody>${body}</tbody></table></div>`;
}

// The way to the lists before and after this one (params.offset): `shown`
// rows of a page of `limit`, out of `total` (null when the API does not
// say: then a full page may have more).
function pager(params, shown, limit, total) {
  const offset = Number(params.offset || 0);
  const more = total == null ? shown === limit : offset + shown < total;
  if (!offset && !more) return "";
  const range = shown ? `${num(offset + 1)}–${num(offset + shown)}` : "none";
  return `<p class="pager muted">Showing ${range}${total == null ? "" : " of " + num(total)}
    ${offset ? `<button data-page-to="${Math.max(0, offset - limit)}">Previous</button>` : ""}
    ${more ? `<button data-page-to="${offset + limit}">Next</button>` : ""}</p>`;
}

function wirePager(el, params) {
  el.querySelectorAll("[data-page-to]").forEach((b) => b.onclick = () => {
    setParams({ ...params, offset: b.dataset.pageTo === "0" ? "" : b.dataset.pageTo, open: "" });
  });
}

const DLQ_PAGE = 100;
const MESSAGES_PAGE = 200;
// The groups route answers every (group, queue) at once; each row holds a
// date-time picker and three buttons, and 1,700 of them took the browser
// seconds to draw at every refresh.
const GROUPS_PAGE = 100;

// ---- Chart ------------------------------------------------------------------

// Two series over time as an SVG line chart; points: [{t, a, b}] oldest first.
function lineChart(points) {
  const w = 1000, h = 200, left = 40, bottom = 20, top = 8;
  if (!points.length) return `<p class="muted">No data yet.</p>`;
  const max = Math.max(1, ...points.map((p) => Math.max(p.a, p.b)));
  const x = (i) => left + (i * (w - left - 4)) / Math.max(1, points.length - 1);
  const y = (v) => top + (h - top - bottom) * (1 - v / max);
  const path = (key) => points.map((p, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(p[key]).toFixed(1)}`).join("");
  const label = (i) => new Date(points[i].t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  const last = points.length - 1;
  return `<svg viewBox="0 0 ${w} ${h}" role="img" aria-label="Messages in and out per minute">
    <line x1="${left}" y1="${y(0)}" x2="${w}" y2="${y(0)}" stroke="#ccd"/>
    <line x1="${left}" y1="${y(max)}" x2="${w}" y2="${y(max)}" stroke="#eef"/>
    <text x="${left - 4}" y="${y(max) + 4}" text-anchor="end" font-size="11" fill="#778">${num(max)}</text>
    <text x="${left - 4}" y="${y(0) + 4}" text-anchor="end" font-size="11" fill="#778">0</text>
    <text x="${left}" y="${h - 4}" font-size="11" fill="#778">${esc(label(0))}</text>
    <text x="${w - 4}" y="${h - 4}" text-anchor="end" font-size="11" fill="#778">${esc(label(last))}</text>
    <path class="in" d="${path("a")}" fill="none" stroke-width="2"/>
    <path class="out" d="${path("b")}" fill="none" stroke-width="2"/>
  </svg>`;
}

// ---- Confirmation and notices ----------------------------------------------------

function confirmAction(text) {
  const modal = $("#confirm");
  $("#confirm-text").textContent = text;
  modal.hidden = false;
  return new Promise((resolve) => {
    const done = (answer) => {
      modal.hidden = true;
      $("#confirm-yes").onclick = null;
      $("#confirm-no").onclick = null;
      resolve(answer);
    };
    $("#confirm-yes").onclick = () => done(true);
    $("#confirm-no").onclick = () => done(false);
  });
}

function notice(text, bad = false) {
  const el = $("#notice");
  el.textContent = text;
  el.className = bad ? "notice bad" : "notice";
  el.hidden = !text;
}

// Asks, calls, says what happened, refreshes.
async function act(question, call, success) {
  if (!(await confirmAction(question))) return;
  try {
    const answer = await call();
    notice(success(answer));
  } catch (error) {
    if (error.status === 401) return showLogin();
    notice(describe(error), true);
  }
  refresh(true);
}

// ---- Pages --------------------------------------------------------------------------
// Each page: `controls(el)` (drawn once per visit; optional), `load()` (the
// API calls) and `draw(el, data)` (drawn at every refresh).

const pages = {};

pages.overview = {
  async load() {
    // Bounded answers only: the lagging list has a row per lagging
    // (group, partition), 30 MB at 100,000 of them.
    const [status, queues, groups, leases] = await Promise.all([
      api("/api/v1/status"),
      api("/api/v1/resources/queues"),
      api("/api/v1/consumer-groups"),
      api("/api/v1/leases?limit=10"),
    ]);
    return { status, queues: queues.queues, groups, leases: leases.leases };
  },
  draw(el, { status, queues, groups, leases }) {
    const points = (status.throughput || []).slice().reverse()
      .map((b) => ({ t: b.timestamp, a: b.ingested, b: b.processed }));
    const dlq = new Map((status.queues || []).map((q) => [q.name, q.dlq]));
    const byQueue = new Map();
    for (const g of groups) {
      if (!byQueue.has(g.queueName)) byQueue.set(g.queueName, []);
      byQueue.get(g.queueName).push(g);
    }
    const queueRows = queues.map((q) => {
      const own = byQueue.get(q.name) || [];
      const lagMsgs = Math.max(0, ...own.map((g) => g.totalLag));
      const lagSecs = Math.max(0, ...own.map((g) => g.maxTimeLag));
      return [
        `<a href="#/queue/${enc(q.name)}">${esc(q.name)}</a>`,
        num(q.partitions), num(q.depth), num(lagMsgs),
        `<span class="${lagSecs > 300 ? "lag-bad" : ""}">${duration(lagSecs)}</span>`,
        num(dlq.get(q.name) || 0), num(q.messages.total),
      ];
    });
    const oldest = groups.filter((g) => g.oldestPartition)
      .sort((a, b) => b.oldestPartition.timeLagSeconds - a.oldestPartition.timeLagSeconds)
      .map((g) => {
        const o = g.oldestPartition;
        return [
          esc(g.name), `<a href="#/queue/${enc(g.queueName)}">${esc(g.queueName)}</a>`,
          esc(o.partition), num(o.offsetLag), when(o.oldestUnconsumedAt),
          `<span class="${o.timeLagSeconds > 300 ? "lag-bad" : ""}">${duration(o.timeLagSeconds)}</span>`,
        ];
      });
    const held = leases.map((l) => [esc(l.consumerGroup), esc(l.queue), esc(l.partition),
      `<code>${esc(l.leaseId)}</code>`, ago(l.takenAt)]);
    el.innerHTML = `
      <h1>Overview</h1>
      <section class="chart"><h2>Throughput, last hour (messages per minute)</h2>
        <p class="legend"><span class="in">in (pushed)</span><span class="out">out (completed)</span></p>
        ${lineChart(points)}</section>
      <section id="queues"><h2>Queues</h2>${table(
        [["Queue"], ["Partitions", "num"], ["Depth", "num"], ["Lag (messages)", "num"],
         ["Lag (oldest)", "num"], ["Dead letters", "num"], ["Pushed ever", "num"]],
        queueRows, { empty: "No queues yet." })}</section>
      <div class="grid2">
        <section id="stuck"><h2>What is stuck: oldest unconsumed message per group</h2>${table(
          [["Group"], ["Queue"], ["Partition"], ["Behind", "num"], ["Oldest since"], ["Age", "num"]],
          oldest, { empty: "Every group is caught up." })}</section>
        <section id="leases"><h2>Leases held longest</h2>${table(
          [["Group"], ["Queue"], ["Partition"], ["Lease"], ["Held for"]],
          held, { empty: "No lease is held." })}</section>
      </div>`;
  },
};

pages.queue = {
  async load({ name }) {
    const queue = await api("/api/v1/resources/queues/" + enc(name));
    // Lease holder and expiry are on the cursors route; a few partitions at most.
    const shown = queue.partitions.slice(0, 50);
    const cursors = await Promise.all(shown.map((p) => api(`/api/v1/partitions/${p.id}/cursors`)));
    return { queue, shown, cursors };
  },
  draw(el, { queue, shown, cursors }) {
    const rows = [];
    shown.forEach((p, i) => {
      const groups = cursors[i];
      if (!groups.length) {
        rows.push([esc(p.name), "—", "—", num(p.head), "—", "—", "—"]);
      }
      for (const g of groups) {
        rows.push([esc(p.name), esc(g.consumerGroup), num(g.cursor), num(g.head),
          `<span class="${g.lag > 0 ? "lag-bad" : ""}">${num(g.lag)}</span>`,
          g.lease ? `<code>${esc(g.lease.leaseId)}</code>` : "—",
          g.lease ? when(g.lease.expiresAt) : "—"]);
      }
    });
    const t = queue.totals;
    const more = queue.partitions.length > shown.length
      ? `<p class="muted">First ${shown.length} of ${queue.partitions.length} partitions.</p>` : "";
    el.innerHTML = `
      <h1>Queue ${esc(queue.name)}</h1>
      <section><p>Depth <b>${num(queue.depth)}</b> · pushed ${num(t.total)} · pending ${num(t.pending)}
        · processing ${num(t.processing)} · completed ${num(t.completed)} · dead letters ${num(t.deadLetter)}
        · <a href="#/messages?queue=${enc(queue.name)}">browse messages</a></p></section>
      <section id="partitions"><h2>Partitions × consumer groups</h2>${table(
        [["Partition"], ["Group"], ["Cursor", "num"], ["Head", "num"], ["Lag", "num"],
         ["Lease holder"], ["Lease expires"]], rows, { empty: "No partitions yet." })}${more}</section>`;
  },
};

// The queue and consumer-group filter of the groups and dead-letter pages.
function queueGroupFilter(el, params, title, id, page) {
  el.innerHTML = `<h1>${title}</h1>
    <form class="filters card" id="${id}">
      <label>Queue <input name="queue" value="${esc(params.queue)}"></label>
      <label>Consumer group <input name="consumerGroup" value="${esc(params.consumerGroup)}"></label>
      <button type="submit">Filter</button>
    </form>`;
  filterForm($("#" + id, el), page);
}

pages.groups = {
  controls: (el, params) => queueGroupFilter(el, params, "Consumer groups", "group-filter", "groups"),
  // The route lists every (group, queue); the filters match part of a name.
  async load(params) {
    const has = (name, part) => !part || name.toLowerCase().includes(part.toLowerCase());
    const groups = await api("/api/v1/consumer-groups");
    return groups.filter((g) => has(g.queueName, params.queue) && has(g.name, params.consumerGroup));
  },
  draw(el, all, params) {
    const offset = Number(params.offset || 0);
    const groups = all.slice(offset, offset + GROUPS_PAGE);
    el.innerHTML = `<section id="group-list">${table(
      [["Group"], ["Queue"], ["Partitions", "num"], ["Lag (messages)", "num"], ["Lag (oldest)", "num"],
       ["State"], ["Seek to"], [""]],
      groups.map((g, i) => [
        esc(g.name), `<a href="#/queue/${enc(g.queueName)}">${esc(g.queueName)}</a>`,
        num(g.partitions), num(g.totalLag), duration(g.maxTimeLag), esc(g.state),
        `<input type="datetime-local" step="1" data-time="${i}" data-keep="${esc(g.name + "/" + g.queueName)}" aria-label="seek time">
         <button data-seek="${i}">Seek to time</button> <button data-end="${i}">Seek to end</button>`,
        `<button class="danger" data-delete="${i}">Delete</button>`,
      ]), { empty: "No consumer group has read anything yet." })}${pager(params, groups.length, GROUPS_PAGE, all.length)}</section>`;
    const path = (g) => `/api/v1/consumer-groups/${enc(g.name)}/queues/${enc(g.queueName)}`;
    el.querySelectorAll("[data-seek]").forEach((b) => b.onclick = () => {
      const g = groups[b.dataset.seek];
      const local = el.querySelector(`[data-time="${b.dataset.seek}"]`).value;
      if (!local) return notice("Pick a time to seek to first.", true);
      const at = new Date(local).toISOString();
      act(`Move ${g.name} on ${g.queueName} to the first message created at or after ${when(at)}?`,
        () => api(path(g) + "/seek", { method: "POST", body: { timestamp: at } }),
        (a) => `Seeked ${g.name} on ${g.queueName}: ${a.partitionsUpdated} partition(s) moved.`);
    });
    el.querySelectorAll("[data-end]").forEach((b) => b.onclick = () => {
      const g = groups[b.dataset.end];
      act(`Move ${g.name} on ${g.queueName} to the end, skipping its ${num(g.totalLag)} unconsumed message(s)?`,
        () => api(path(g) + "/seek", { method: "POST", body: { toEnd: true } }),
        (a) => `Seeked ${g.name} on ${g.queueName} to the end: ${a.partitionsUpdated} partition(s) moved.`);
    });
    el.querySelectorAll("[data-delete]").forEach((b) => b.onclick = () => {
      const g = groups[b.dataset.delete];
      act(`Delete consumer group ${g.name} on ${g.queueName} (its cursors and subscription)?`,
        () => api(path(g), { method: "DELETE" }),
        (a) => `Deleted ${g.name} on ${g.queueName}: ${a.deletedPartitions} partition(s).`);
    });
    wirePager(el, params);
  },
};

pages.dlq = {
  controls: (el, params) => queueGroupFilter(el, params, "Dead letters", "dlq-filter", "dlq"),
  async load(params) {
    const offset = Number(params.offset || 0);
    const q = new URLSearchParams({ limit: String(DLQ_PAGE), offset: String(offset) });
    for (const k of ["queue", "consumerGroup"]) if (params[k]) q.set(k, params[k]);
    const page = await api("/api/v1/dlq?" + q);
    // A payload too large to list with the others (dataOmitted): the one
    // being inspected comes again, on a page of its own.
    const i = page.messages.findIndex((m) => m.id === params.open);
    if (i >= 0 && page.messages[i].dataOmitted) {
      q.set("limit", "1");
      q.set("offset", String(offset + i));
      const alone = (await api("/api/v1/dlq?" + q)).messages[0];
      if (alone && alone.id === params.open) page.messages[i] = alone;
    }
    return page;
  },
  draw(el, { messages, total }, params) {
    const open = messages.find((m) => m.id === params.open);
    el.innerHTML = `<section id="dlq-list"><p class="muted">${num(total)} dead letter(s).</p>${table(
      [["Failed"], ["Queue"], ["Partition"], ["Group"], ["Reason"], ["Retries", "num"], [""]],
      messages.map((m, i) => [when(m.failedAt), esc(m.queue), esc(m.partition), esc(m.consumerGroup),
        `<span class="reason">${esc(m.errorMessage)}</span>`, num(m.retryCount),
        `<button data-inspect="${i}">Inspect</button> <button data-requeue="${i}">Requeue</button>`]),
      { empty: "No dead letters." })}${pager(params, messages.length, DLQ_PAGE, total)}</section>
      ${open ? `<section id="dlq-detail"><h2>Dead letter ${esc(open.transactionId)}</h2>
        <p>Reason: <b class="reason">${esc(open.errorMessage)}</b> · group ${esc(open.consumerGroup)}
        · offset ${num(open.offset)} · failed ${when(open.failedAt)}</p>
        <pre>${esc(JSON.stringify(open.data, null, 2))}</pre></section>` : ""}`;
    wirePager(el, params);
    el.querySelectorAll("[data-inspect]").forEach((b) => b.onclick = () => {
      setParams({ ...params, open: messages[b.dataset.inspect].id });
    });
    el.querySelectorAll("[data-requeue]").forEach((b) => b.onclick = () => {
      const m = messages[b.dataset.requeue];
      act(`Requeue dead letter ${m.transactionId} onto ${m.queue}/${m.partition} as a new message?`,
        () => api(`/api/v1/dlq/${m.id}/requeue`, { method: "POST" }),
        (a) => `Requeued onto ${a.queue}/${a.partition} at offset ${a.offset}.`);
    });
  },
};

pages.messages = {
  controls(el, params) {
    el.innerHTML = `<h1>Messages</h1>
      <form class="filters card" id="msg-filter">
        <label>Queue <input name="queue" value="${esc(params.queue)}"></label>
        <label>Partition <input name="partition" value="${esc(params.partition)}"></label>
        <label>From <input name="from" type="datetime-local" value="${esc(params.from)}"></label>
        <label>To <input name="to" type="datetime-local" value="${esc(params.to)}"></label>
        <label>From offset <input name="fromOffset" type="number" min="0" step="1" value="${esc(params.fromOffset)}"></label>
        <label>To offset <input name="toOffset" type="number" min="0" step="1" value="${esc(params.toOffset)}"></label>
        <label>Status <select name="status">${["", "pending", "processing", "completed", "dead_letter"]
          .map((s) => `<option ${s === params.status ? "selected" : ""}>${s}</option>`).join("")}</select></label>
        <label>Transaction id <input name="transactionId" value="${esc(params.transactionId)}"></label>
        <button type="submit">Search</button>
      </form>`;
    filterForm($("#msg-filter", el), "messages");
  },
  async load(params) {
    const list = await listMessages(params);
    const open = params.open ? params.open.split("/") : null;
    const detail = open
      ? await api(`/api/v1/messages/${enc(open[0])}/${enc(open.slice(1).join("/"))}`) : null;
    return { list, detail };
  },
  draw(el, { list, detail }, params) {
    const paged = pager(params, list.length, MESSAGES_PAGE, null);
    el.innerHTML = `<section id="msg-list">${table(
      [["Created"], ["Queue"], ["Partition"], ["Offset", "num"], ["Transaction id"], ["Status"]],
      list.map((m) => [when(m.createdAt), esc(m.queue), esc(m.partition), num(m.offset),
        esc(m.transactionId), esc(m.status)]),
      { empty: "No message matches.",
        rowAttrs: (i) => `class="clickable" data-open="${esc(list[i].partitionId + "/" + list[i].transactionId)}"` })}${paged}</section>
      ${detail ? `<section id="msg-detail"><h2>Message ${esc(detail.transactionId)}</h2>
        <p>${esc(detail.queue)}/${esc(detail.partition)} · offset ${num(detail.offset)} · ${esc(detail.status)}
        · created ${when(detail.createdAt)}${detail.errorMessage ? ` · error <b>${esc(detail.errorMessage)}</b>` : ""}</p>
        <p>${(detail.groups || []).map((g) => `${esc(g.consumerGroup)}: ${esc(g.state)}`).join(" · ")}</p>
        <pre>${esc(JSON.stringify(detail.payload, null, 2))}</pre></section>` : ""}`;
    wirePager(el, params);
    el.querySelectorAll("[data-open]").forEach((r) => r.onclick = () => {
      setParams({ ...params, open: r.dataset.open });
    });
  },
};

function isoOf(local) {
  return local ? new Date(local).toISOString() : null;
}

function listMessages(params) {
  const q = new URLSearchParams({ limit: String(MESSAGES_PAGE) });
  for (const k of ["queue", "partition", "status", "fromOffset", "toOffset", "transactionId", "offset"]) {
    if (params[k]) q.set(k, params[k]);
  }
  if (params.from) q.set("from", isoOf(params.from));
  if (params.to) q.set("to", isoOf(params.to));
  return api("/api/v1/messages?" + q).then((a) => a.messages);
}

// ---- Routing, refresh, sign-in -------------------------------------------------------

function filterForm(form, page) {
  form.onsubmit = (event) => {
    event.preventDefault();
    const params = {};
    for (const [k, v] of new FormData(form)) if (v) params[k] = v;
    const target = "#/" + page + (Object.keys(params).length ? "?" + new URLSearchParams(params) : "");
    // The same search again is a new search (a transactionId pushed since).
    if (location.hash === target) route();
    else location.hash = target;
  };
}

function setParams(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const [path] = location.hash.split("?");
  location.hash = path + (q.toString() ? "?" + q : "");
}

// A hand-typed address may hold a broken escape (%E0): taken as written.
function decodedOr(text) {
  try { return decodeURIComponent(text); } catch (_) { return text; }
}

function parseHash() {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const [name, ...rest] = path.split("/");
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  if (name === "queue") params.name = decodedOr(rest.join("/"));
  return { page: pages[name] ? name : "overview", params };
}

function route() {
  const { page, params } = parseHash();
  state.page = page;
  state.params = params;
  document.querySelectorAll("nav a").forEach((a) => {
    a.classList.toggle("active", a.dataset.page === page || (page === "queue" && a.dataset.page === "overview"));
  });
  notice("");
  const root = $("#page");
  root.innerHTML = `<div id="controls"></div><div id="data"><p class="muted">Loading…</p></div>`;
  if (pages[page].controls) pages[page].controls($("#controls"), params);
  refresh(true);
}

// What a person typed into the data area survives a refresh's redraw.
function keptInputs() {
  const kept = new Map();
  document.querySelectorAll("#data [data-keep]").forEach((i) => kept.set(i.dataset.keep, i.value));
  return kept;
}

function restoreInputs(kept) {
  document.querySelectorAll("#data [data-keep]").forEach((i) => {
    if (kept.get(i.dataset.keep)) i.value = kept.get(i.dataset.keep);
  });
}

// Not while signed out, a confirmation is open or someone types in the data
// area; a timer's refresh also waits for the one in flight.
function mayRefresh(force) {
  const typing = document.activeElement && document.activeElement.closest("#data input, #data select");
  return (force || state.pending === 0) && $("#login").hidden && $("#confirm").hidden && !typing;
}

// A timer's redraw must not move a row under the pointer about to click it
// (another group's Delete would be where this one's was; a clickable row
// would open another message).
function pointerOnControl() {
  return document.querySelector(
    "#data button:hover, #data a:hover, #data input:hover, #data tr.clickable:hover") !== null;
}

// Nor take away text someone is selecting or has selected (to copy an id).
function selecting() {
  const selection = window.getSelection();
  return selection !== null && !selection.isCollapsed && $("#data").contains(selection.anchorNode);
}

// Where each scrolled box of the data area stands (a wide table scrolled
// sideways, a long payload), to put back after a redraw.
function scrolled() {
  return [...document.querySelectorAll("#data .scroll, #data pre")].map((b) => [b.scrollLeft, b.scrollTop]);
}

function restoreScroll(kept) {
  document.querySelectorAll("#data .scroll, #data pre").forEach((b, i) => {
    if (kept[i]) [b.scrollLeft, b.scrollTop] = kept[i];
  });
}

// Draws only the newest refresh's answer, so a slow older one cannot
// overwrite a page the user has since changed.
async function refresh(force = false) {
  if (!mayRefresh(force) || (!force && (pointerOnControl() || selecting()))) return;
  const seq = ++state.seq;
  const { page, params } = state;
  state.pending += 1;
  try {
    const data = await pages[page].load(params);
    if (seq !== state.seq || (!force && (pointerOnControl() || selecting()))) return;
    const kept = keptInputs();
    const scroll = force ? [] : scrolled();
    pages[page].draw($("#data"), data, params);
    restoreInputs(kept);
    restoreScroll(scroll);
    state.updatedAt = Date.now();
    tick();
  } catch (error) {
    if (seq !== state.seq) return;
    if (error.status === 401) return showLogin();
    $("#data").innerHTML = `<p class="error" id="load-error">${esc(describe(error))}</p>`;
  } finally {
    state.pending -= 1;
  }
}

function tick() {
  $("#updated").textContent = state.updatedAt
    ? "updated " + Math.round((Date.now() - state.updatedAt) / 1000) + "s ago" : "";
}

// Refreshes every `seconds` from now on (0: not until asked again).
function refreshEvery(seconds) {
  clearInterval(state.timer);
  state.timer = seconds > 0 ? setInterval(() => refresh(), seconds * 1000) : null;
}

function wireRefreshChoice() {
  const every = $("#every");
  every.value = localStorage.getItem(EVERY_KEY) || EVERY_DEFAULT;
  if (!every.value) every.value = EVERY_DEFAULT;  // a stored choice no longer offered
  refreshEvery(Number(every.value));
  every.onchange = () => {
    localStorage.setItem(EVERY_KEY, every.value);
    refreshEvery(Number(every.value));
    if (Number(every.value) > 0) refresh();
  };
}

function showLogin() {
  $("#login").hidden = false;
  $("#page").innerHTML = "";
  $("#signout").hidden = true;
  $("#login-error").textContent = sessionStorage.getItem(TOKEN_KEY) ? "That token was not accepted." : "";
  $("#token").focus();
}

function start() {
  $("#login").onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
    $("#token").value = "";
    $("#login").hidden = true;
    $("#signout").hidden = false;
    route();
  };
  $("#signout").hidden = !sessionStorage.getItem(TOKEN_KEY);
  $("#signout").onclick = () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  };
  window.addEventListener("hashchange", route);
  wireRefreshChoice();
  setInterval(tick, 1000);
  route();
}

start();
