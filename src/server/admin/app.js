// app.js -- doctxd's admin page (docs/admin.md).  One script, no
// framework, no build step: it talks to the same HTTP API as any client,
// with the token from the sign-in form in an Authorization header.  Data
// from the store (ids, names, errors) is only ever set as textContent,
// never parsed as HTML, and the strict CSP allows no inline script.
'use strict';

const $ = (sel) => document.querySelector(sel);
const KEY = 'doctx.admin.token';
let token = sessionStorage.getItem(KEY) || '';
let current = 'dashboard';
let timer = null;

// ---- the API --------------------------------------------------------------

class ApiError extends Error {
  constructor(status, problem, fallback) {
    super((problem && (problem.detail || problem.title)) || fallback);
    this.status = status;
    this.problem = problem;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: 'Bearer ' + token };
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!r.ok) throw new ApiError(r.status, data, r.status + ' ' + r.statusText);
  return data;
}

// ---- little DOM helpers ---------------------------------------------------

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const kid of kids) if (kid != null) e.append(kid);
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  return e;
}

function toast(msg, bad) {
  const d = el('div', { class: bad ? 'bad' : '', text: msg });
  $('#toast').append(d);
  setTimeout(() => d.remove(), 6000);
}

function age(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return s + ' s';
  if (s < 7200) return Math.round(s / 60) + ' min';
  if (s < 172800) return Math.round(s / 3600) + ' h';
  return Math.round(s / 86400) + ' d';
}

// A document's time as ms: wall-clock ms, or ISO text (the CLI's form).
function when(v) {
  return typeof v === 'number' ? v : (typeof v === 'string' ? Date.parse(v) : NaN);
}

function badge(state) {
  const cls = { succeeded: 'ok', failed: 'bad', dead: 'bad', canceled: 'warn',
    rolling_back: 'warn', running: 'warn' }[state] || '';
  return el('span', { class: 'badge ' + cls, text: state });
}

// Reports an error, in the page and on the console (the browser test
// fails on any console error); a lost token sends the user back to sign
// in.
function failed(what, err) {
  console.error('doctx admin: ' + what + ':', err);
  if (err instanceof ApiError && err.status === 401) {
    signOut('The token is no longer accepted: sign in again.');
    return;
  }
  toast(what + ': ' + err.message, true);
}

// ---- sign in --------------------------------------------------------------

function signOut(why) {
  token = '';
  sessionStorage.removeItem(KEY);
  clearInterval(timer);
  $('#app').hidden = true;
  $('#tabs').hidden = true;
  $('#logout').hidden = true;
  $('#login').hidden = false;
  $('#login-error').textContent = why || '';
  $('#token').value = '';
  $('#token').focus();
}

async function signIn(t) {
  token = t;
  try {
    await api('GET', '/v1/admin/stats');
  } catch (err) {
    const why = err.status === 401 ? 'This token is not known to doctxd.'
      : err.status === 403 ? 'This token lacks the admin scope.'
        : 'doctxd answered: ' + err.message;
    signOut(why);
    return;
  }
  sessionStorage.setItem(KEY, t);
  $('#login').hidden = true;
  $('#app').hidden = false;
  $('#tabs').hidden = false;
  $('#logout').hidden = false;
  show(current);
}

// ---- views ----------------------------------------------------------------

const views = {};
let knownQueues = []; // the queues the last stats named

function show(name) {
  current = name;
  for (const b of document.querySelectorAll('#tabs button'))
    b.classList.toggle('on', b.dataset.view === name);
  for (const v of Object.keys(views))
    $('#view-' + v).hidden = v !== name;
  clearInterval(timer);
  const v = views[name];
  v.refresh();
  if (v.every) timer = setInterval(() => v.refresh(), v.every);
}

// -- the dashboard: counts by state and the one-minute charts

function kv(title, obj, order) {
  const box = el('div', { class: 'kv' });
  for (const k of order || Object.keys(obj)) {
    const n = obj[k] || 0;
    box.append(el('span', { text: k }),
      el('span', { class: 'n' + (n ? '' : ' zero'), text: String(n) }));
  }
  return el('div', { class: 'card', 'data-count': title },
    el('h3', { text: title }), box);
}

// The queues' depth: one row per queue, its jobs by state.
function byQueue(queues) {
  const cols = ['ready', 'delayed', 'running', 'dead'];
  const names = Object.keys(queues || {});
  const head = el('tr', {}, el('th', { text: 'queue' }),
    ...cols.map((c) => el('th', { class: 'num', text: c })));
  const rows = names.map((q) => el('tr', { 'data-queue': q }, el('td', { class: 'id', text: q }),
    ...cols.map((c) => el('td', {
      class: 'num' + (queues[q][c] ? '' : ' muted') + (c === 'dead' && queues[q][c] ? ' hot' : ''),
      text: String(queues[q][c] || 0),
    }))));
  return el('div', { class: 'card wide', 'data-count': 'jobs by queue' },
    el('h3', { text: 'jobs by queue' }),
    names.length ? el('table', { class: 'mini' }, el('thead', {}, head), el('tbody', {}, ...rows))
      : el('p', { class: 'muted', text: 'no jobs' }));
}

// Draws series (arrays of equal length, per second) as polylines.
function chart(svgEl, legendEl, series) {
  const W = 600, H = 180, L = 34, B = 20, T = 8;
  svgEl.replaceChildren();
  legendEl.replaceChildren();
  let max = 1;
  for (const s of series) for (const v of s.values) max = Math.max(max, v);
  const n = series.length ? series[0].values.length : 60;
  const x = (i) => L + (i * (W - L - 6)) / Math.max(1, n - 1);
  const y = (v) => H - B - (v * (H - B - T)) / max;
  for (const f of [0, 0.5, 1]) {
    const v = Math.round(max * f);
    svgEl.append(svg('line', { class: 'axis', x1: L, x2: W - 6, y1: y(v), y2: y(v) }),
      svg('text', { class: 'tick', x: L - 6, y: y(v) + 4, 'text-anchor': 'end', text: String(v) }));
  }
  svgEl.append(svg('text', { class: 'tick', x: L, y: H - 4, text: '-60 s' }),
    svg('text', { class: 'tick', x: W - 6, y: H - 4, 'text-anchor': 'end', text: 'now' }));
  for (const s of series) {
    const pts = s.values.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1));
    svgEl.append(svg('polyline', { class: s.cls, points: pts.join(' ') }));
    const total = s.values.reduce((a, b) => a + b, 0);
    legendEl.append(el('span', {}, el('i', { class: s.cls }),
      s.name + ' (' + total + ')'));
  }
  if (!series.length)
    legendEl.append(el('span', { class: 'muted', text: 'no requests in the last minute' }));
}

views.dashboard = {
  every: 2000,
  async refresh() {
    let st;
    try { st = await api('GET', '/v1/admin/stats'); } catch (err) {
      failed('stats', err);
      return;
    }
    const c = st.counts;
    knownQueues = Object.keys(c.jobs_by_queue || {});
    const cards = [
      kv('transfers', c.transfers, ['initiated', 'preparing', 'committed',
        'rolling_back', 'succeeded', 'failed']),
      kv('jobs (all queues)', c.jobs, ['ready', 'delayed', 'running',
        'succeeded', 'dead', 'canceled']),
      kv(c.locks.more ? 'locks (first 10000)' : 'locks', c.locks, ['held', 'total']),
      byQueue(c.jobs_by_queue),
    ];
    cards.push(kv('this doctxd', { 'uptime s': st.uptime_s }));
    $('#counts').replaceChildren(...cards);
    const thr = [], fail = [];
    st.classes.forEach((name, i) => {
      const s = st.series[name];
      if (s.requests.some((v) => v > 0))
        thr.push({ name, cls: 's' + i, values: s.requests });
    });
    const sum = (key) => st.classes.reduce((acc, name) => {
      st.series[name][key].forEach((v, i) => { acc[i] += v; });
      return acc;
    }, new Array(st.window_s).fill(0));
    const e4 = sum('client_errors'), e5 = sum('server_errors');
    if (e4.some((v) => v > 0) || e5.some((v) => v > 0))
      fail.push({ name: '4xx', cls: 'e4', values: e4 },
        { name: '5xx', cls: 'e5', values: e5 });
    chart($('#chart-throughput'), $('#legend-throughput'), thr);
    chart($('#chart-failures'), $('#legend-failures'), fail);
    $('#dash-updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  },
};

// -- transfers: the unfinished ones, with their age and cancel

const PENDING = ['initiated', 'preparing', 'committed', 'rolling_back'];
const changedTransfers = new Map(); // id -> the document a cancel answered

function transferRow(tx, now) {
  const stuckS = Number($('#stuck-s').value) || 60;
  const ms = now - (when(tx.created) || now);
  const state = el('td', {}, badge(tx.state));
  if (tx.reason) state.append(' ', el('span', { class: 'muted', text: tx.reason }));
  if (PENDING.includes(tx.state) && ms > stuckS * 1000)
    state.append(' ', el('span', { class: 'badge bad', text: 'stuck' }));
  const cancel = el('button', { class: 'quiet', text: 'Cancel' });
  cancel.disabled = !['initiated', 'preparing'].includes(tx.state);
  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    try {
      const done = await api('POST', '/v1/transfers/' + encodeURIComponent(tx._id) + '/cancel');
      changedTransfers.set(tx._id, done);
      toast('transfer ' + tx._id + ': ' + done.state + (done.reason ? ' (' + done.reason + ')' : ''));
    } catch (err) {
      if (err.problem && err.problem.transfer) changedTransfers.set(tx._id, err.problem.transfer);
      failed('cancel ' + tx._id, err);
    }
    views.transfers.refresh();
  });
  const tr = el('tr', { 'data-id': tx._id },
    el('td', { class: 'id', text: tx._id }), state,
    el('td', { text: tx.from }), el('td', { text: tx.to }),
    el('td', { class: 'num', text: String(tx.amount) }),
    el('td', { class: 'num', text: age(ms) }), el('td', {}, cancel));
  if (changedTransfers.has(tx._id) && !PENDING.includes(tx.state))
    tr.classList.add('changed');
  return tr;
}

views.transfers = {
  every: 5000,
  async refresh() {
    let lists;
    try {
      lists = await Promise.all(PENDING.map((s) =>
        api('GET', '/v1/transfers?state=' + s + '&limit=200')));
    } catch (err) {
      failed('transfers', err);
      return;
    }
    const seen = new Set();
    const all = [];
    for (const l of lists) for (const tx of l.transfers) { all.push(tx); seen.add(tx._id); }
    // A transfer this page just canceled stays in view with its new state.
    for (const [id, tx] of changedTransfers) if (!seen.has(id)) all.push(tx);
    all.sort((a, b) => (when(a.created) || 0) - (when(b.created) || 0));
    const now = Date.now();
    $('#transfers-table tbody').replaceChildren(...all.map((tx) => transferRow(tx, now)));
    $('#transfers-empty').hidden = all.length > 0;
  },
};

// -- jobs: by queue and state, with a detail view, retry, cancel and delete

const JOB_STATES = ['dead', 'ready', 'delayed', 'running', 'succeeded', 'canceled'];
const changedJobs = new Map(); // id -> the document a retry or cancel answered
let selectedJob = null;

async function showJob(id) {
  selectedJob = id;
  for (const r of document.querySelectorAll('#jobs-table tbody tr'))
    r.classList.toggle('sel', r.dataset.id === id);
  try {
    const job = await api('GET', '/v1/jobs/' + encodeURIComponent(id));
    $('#job-detail').replaceChildren(el('h3', { text: 'job ' + id }),
      el('p', {}, badge(job.state), ' attempts ' + job.attempts + ' of ' + job.max_attempts),
      job.last_error ? el('p', { class: 'error', text: job.last_error }) : '',
      el('pre', { id: 'job-json', text: JSON.stringify(job, null, 2) }));
  } catch (err) {
    failed('job ' + id, err);
  }
}

async function jobAction(job, action, button) {
  button.disabled = true;
  try {
    const done = await api('POST', '/v1/jobs/' + encodeURIComponent(job._id) + '/' + action);
    changedJobs.set(job._id, done);
    toast('job ' + job._id + ': ' + done.state);
  } catch (err) {
    failed(action + ' ' + job._id, err);
  }
  await views.jobs.refresh();
  if (selectedJob === job._id) showJob(job._id);
}

// A finished job's document goes through the document route: the jobs
// collection's delete guard lets only a succeeded, dead or canceled job
// go, and the filter names the state the page showed, so a job that moved
// meanwhile is left alone ("deleted": 0).
async function deleteJob(job, button) {
  if (!window.confirm('Delete job ' + job._id + ' (' + job.state + ')?')) return;
  button.disabled = true;
  try {
    const r = await api('POST', '/v1/c/jobs/delete', { filter: { _id: job._id, state: job.state } });
    toast('job ' + job._id + (r.deleted ? ': deleted' : ': it changed meanwhile; not deleted'));
  } catch (err) {
    failed('delete ' + job._id, err);
  }
  changedJobs.delete(job._id);
  if (selectedJob === job._id) {
    selectedJob = null;
    $('#job-detail').replaceChildren();
  }
  await views.jobs.refresh();
}

function jobRow(job, now) {
  const retry = el('button', { class: 'quiet', text: 'Retry' });
  retry.disabled = job.state !== 'dead';
  retry.addEventListener('click', (e) => { e.stopPropagation(); jobAction(job, 'retry', retry); });
  const cancel = el('button', { class: 'quiet', text: 'Cancel' });
  cancel.disabled = !['ready', 'delayed'].includes(job.state);
  cancel.addEventListener('click', (e) => { e.stopPropagation(); jobAction(job, 'cancel', cancel); });
  const del = el('button', { class: 'quiet', text: 'Delete' });
  del.disabled = !['succeeded', 'dead', 'canceled'].includes(job.state);
  del.addEventListener('click', (e) => { e.stopPropagation(); deleteJob(job, del); });
  const tr = el('tr', { 'data-id': job._id },
    el('td', { class: 'id', text: job._id }), el('td', { text: job.type }),
    el('td', {}, badge(job.state)),
    el('td', { class: 'num', text: job.attempts + '/' + job.max_attempts }),
    el('td', { class: 'muted', text: job.last_error || '' }),
    el('td', { class: 'num', text: age(now - (when(job.created) || now)) }),
    el('td', {}, retry, ' ', cancel, ' ', del));
  tr.addEventListener('click', () => showJob(job._id));
  if (changedJobs.has(job._id)) tr.classList.add('changed');
  if (selectedJob === job._id) tr.classList.add('sel');
  return tr;
}

views.jobs = {
  every: 5000,
  async refresh() {
    if (!$('#jobs-queue').value.trim() && knownQueues.length)
      $('#jobs-queue').value = knownQueues[0];
    $('#jobs-queues').replaceChildren(...knownQueues.map((q) => el('option', { value: q })));
    const q = $('#jobs-queue').value.trim();
    const state = $('#jobs-state').value;
    sessionStorage.setItem('doctx.admin.queue', q);
    if (!q) {
      $('#jobs-table tbody').replaceChildren();
      $('#jobs-stats').replaceChildren(el('span', { class: 'muted', text: 'name a queue' }));
      return;
    }
    const base = '/v1/queues/' + encodeURIComponent(q);
    let stats, list;
    try {
      [stats, list] = await Promise.all([api('GET', base + '/stats'),
        api('GET', base + '/jobs?state=' + state + '&limit=200')]);
    } catch (err) {
      failed('jobs of ' + q, err);
      return;
    }
    $('#jobs-stats').replaceChildren(...JOB_STATES.map((s) =>
      el('span', { class: 'badge' + (s === state ? ' ok' : ''), text: s + ' ' + (stats[s] || 0) })));
    const seen = new Set(list.jobs.map((j) => j._id));
    const all = list.jobs.slice();
    // A job this page just retried or canceled stays in view, in its new state.
    for (const [id, j] of changedJobs) if (!seen.has(id) && j.queue === q) all.push(j);
    const now = Date.now();
    $('#jobs-table tbody').replaceChildren(...all.map((j) => jobRow(j, now)));
    $('#jobs-empty').hidden = all.length > 0;
  },
};

// -- locks: holder, token, expiry, force-release

function expiry(lock, now) {
  const d = lock.expires - now;
  if (!lock.owner && !lock.held) return 'free';
  return d >= 0 ? 'in ' + age(d) : 'lapsed ' + age(-d) + ' ago';
}

views.locks = {
  every: 5000,
  async refresh() {
    let list;
    try { list = await api('GET', '/v1/locks?limit=1000'); } catch (err) {
      failed('locks', err);
      return;
    }
    const now = Date.now();
    $('#locks-table tbody').replaceChildren(...list.locks.map((l) => {
      const rel = el('button', { class: 'danger', text: 'Force release' });
      rel.disabled = !l.held;
      rel.addEventListener('click', async () => {
        if (!window.confirm('Force-release lock ' + l.name + ' held by ' + l.owner +
          ' (token ' + l.token + ')? Its holder\'s fenced writes will be refused.')) return;
        rel.disabled = true;
        try {
          const done = await api('POST', '/v1/admin/locks/' + encodeURIComponent(l.name) +
            '/release', { token: l.token });
          toast('lock ' + l.name + ': ' + (done.held ? 'still held' : 'released'));
        } catch (err) {
          failed('release ' + l.name, err);
        }
        views.locks.refresh();
      });
      return el('tr', { 'data-name': l.name },
        el('td', { class: 'id', text: l.name }),
        el('td', {}, l.held ? el('span', { class: 'badge warn', text: 'held' })
          : el('span', { class: 'badge', text: 'free' })),
        el('td', { text: l.owner || '' }), el('td', { class: 'num', text: String(l.token) }),
        el('td', { text: expiry(l, now) }), el('td', {}, rel));
    }));
    $('#locks-empty').hidden = list.locks.length > 0;
  },
};

// -- audit: run one, show the last result

function renderAudit(res) {
  const box = $('#audit-result');
  if (!res) return;
  const r = res.report;
  const findings = Array.isArray(r.findings) ? r.findings : [];
  const head = el('div', { class: 'row' },
    el('span', { id: 'audit-verdict', class: 'badge ' + (r.clean ? 'ok' : 'bad'),
      text: r.clean ? 'clean' : 'findings' }),
    el('span', { class: 'muted', text: 'run at ' + new Date(res.at).toLocaleString() +
      ' in ' + res.ms + ' ms; ' + findings.length + ' finding(s), ' +
      (r.unsettled || 0) + ' unsettled' }));
  // One line per pattern: its summary, and a badge when it has findings.
  const byPattern = {};
  for (const f of findings) byPattern[f.pattern] = (byPattern[f.pattern] || 0) + 1;
  const rows = Object.entries(r.patterns || {}).map(([name, p]) => el('tr', {},
    el('td', { text: name }),
    el('td', {}, byPattern[name] ? el('span', { class: 'badge bad', text: byPattern[name] + ' finding(s)' })
      : el('span', { class: 'badge ok', text: 'clean' })),
    el('td', { class: 'muted', text: p.summary || '' })));
  const table = el('table', {}, el('thead', {}, el('tr', {},
    el('th', { text: 'pattern' }), el('th', { text: 'verdict' }), el('th', { text: 'summary' }))),
  el('tbody', {}, ...rows));
  const list = el('ul', { id: 'audit-findings' }, ...findings.slice(0, 200).map((f) =>
    el('li', {}, el('b', { text: f.pattern + ' / ' + f.kind + ': ' }), f.detail || '')));
  box.replaceChildren(head, table, findings.length ? list : '',
    el('details', {}, el('summary', { text: 'full report (JSON)' }),
      el('pre', { text: JSON.stringify(r, null, 2) })));
}

views.audit = {
  refresh() {
    const last = sessionStorage.getItem('doctx.admin.audit');
    if (last) renderAudit(JSON.parse(last));
  },
};

async function runAudit() {
  const b = $('#audit-run');
  b.disabled = true;
  b.textContent = 'Running...';
  const t0 = performance.now();
  try {
    const report = await api('POST', '/v1/admin/audit', {});
    const res = { report, at: Date.now(), ms: Math.round(performance.now() - t0) };
    sessionStorage.setItem('doctx.admin.audit', JSON.stringify(res));
    renderAudit(res);
    toast('audit: ' + (report.clean ? 'clean' : 'findings'));
  } catch (err) {
    failed('audit', err);
  } finally {
    b.disabled = false;
    b.textContent = 'Run audit';
  }
}

// ---- start ----------------------------------------------------------------

document.addEventListener('DOMContentLoaded', () => {
  $('#login-form').addEventListener('submit', (e) => {
    e.preventDefault();
    signIn($('#token').value.trim());
  });
  $('#logout').addEventListener('click', () => signOut(''));
  for (const b of document.querySelectorAll('#tabs button'))
    b.addEventListener('click', () => show(b.dataset.view));
  $('#audit-run').addEventListener('click', runAudit);
  $('#transfers-refresh').addEventListener('click', () => views.transfers.refresh());
  $('#stuck-s').addEventListener('change', () => views.transfers.refresh());
  $('#jobs-queue').value = sessionStorage.getItem('doctx.admin.queue') || '';
  $('#jobs-queue').addEventListener('change', () => views.jobs.refresh());
  $('#jobs-state').addEventListener('change', () => views.jobs.refresh());
  $('#jobs-refresh').addEventListener('click', () => views.jobs.refresh());
  $('#locks-refresh').addEventListener('click', () => views.locks.refresh());
  if (token) signIn(token); else signOut('');
});
