// doctx: a client for doctxd, doctx's HTTP/JSON service (docs/server.md).
// An ES module on the global fetch of Node 18+, no dependencies; the same
// surface as the Python client (clients/python), in camelCase.  Option
// names are the CLI's, camelCase here and snake_case on the wire
// (bypassValidation -> bypass_validation); only the options given are sent.
//
// Retries (docs/clients.md, "Retries"): only an idempotent call -- a GET, a
// read sent as POST (find, count, aggregate), or a write that carries a
// client id (a transfer or a batch of them: the client gives one to every
// transfer that lacks it, so every transfer is retried safely: doctxd
// answers a repeated id with the same transfer, counted once) -- and only
// on a connection error, 429 or 503.  The waits grow exponentially from
// `backoff` to `maxBackoff` ms with jitter, are at least the server's
// Retry-After, and never pass the call's deadline (`timeout` ms for the
// whole call, attempts and waits included).
import { randomUUID } from 'node:crypto';

const USER_AGENT = 'doctx-node/0.1';

/** An error answer from doctxd (problem+json), or none (TransportError). */
export class DoctxError extends Error {
  constructor(status, code, title, detail, problem = {}, retryAfter = null, options) {
    super(`${status} ${code}: ${detail}`, options);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.title = title;
    this.detail = detail;
    this.problem = problem;
    this.retryAfter = retryAfter;
  }
}
export class BadRequest extends DoctxError {}
export class Unauthorized extends DoctxError {}
export class Forbidden extends DoctxError {}
export class NotFound extends DoctxError {}
export class MethodNotAllowed extends DoctxError {}
export class Conflict extends DoctxError {}
export class TooLarge extends DoctxError {}
export class RateLimited extends DoctxError {}
export class ServerError extends DoctxError {}
export class Unavailable extends DoctxError {}
export class TransportError extends DoctxError {}

const BY_STATUS = {
  400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
  405: MethodNotAllowed, 409: Conflict, 413: TooLarge, 429: RateLimited,
  503: Unavailable,
};

/** The error for an error answer: its status's class, the problem's fields. */
export function errorFrom(status, problem, retryAfter = null) {
  if (!problem || typeof problem !== 'object') problem = { detail: String(problem ?? '') };
  const Cls = BY_STATUS[status] ?? (status >= 500 ? ServerError : DoctxError);
  return new Cls(status, String(problem.code || `HTTP${status}`), String(problem.title || ''),
    String(problem.detail || problem.title || `HTTP ${status}`), problem, retryAfter);
}

/** A fresh client id for a transfer: PREFIX- and 32 random hex digits. */
export function newId(prefix = 'js') {
  return `${prefix}-${randomUUID().replaceAll('-', '')}`;
}

const snake = (k) => k.replace(/[A-Z]/g, (m) => `_${m.toLowerCase()}`);

// The options given, snake_cased, without the undefined and null ones.
function fields(o) {
  const out = {};
  for (const [k, v] of Object.entries(o ?? {})) if (v !== undefined && v !== null) out[snake(k)] = v;
  return out;
}

function parseRetryAfter(v) {
  if (!v) return null;
  const n = Number(v);
  if (Number.isFinite(n)) return Math.max(0, n);
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, (t - Date.now()) / 1000);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const p = (s) => encodeURIComponent(String(s));

export class Client {
  /**
   * @param {string} baseUrl doctxd's address, e.g. http://127.0.0.1:8420
   * @param {string} [token] a bearer token (none: enough for health and ready)
   * @param {{timeout?: number, retries?: number, backoff?: number, maxBackoff?: number}} [opts]
   *   timeout: ms a call may take in all; retries: how many more attempts
   *   an idempotent call gets; backoff / maxBackoff: the first and longest
   *   wait between them, in ms.
   */
  constructor(baseUrl, token, { timeout = 30000, retries = 6, backoff = 100, maxBackoff = 2000 } = {}) {
    if (!(timeout > 0)) throw new RangeError('timeout must be > 0');
    if (!(retries >= 0)) throw new RangeError('retries must be >= 0');
    this.baseUrl = String(baseUrl).replace(/\/+$/, '');
    this.token = token;
    this.timeout = timeout;
    this.retries = retries;
    this.backoff = backoff;
    this.maxBackoff = maxBackoff;
  }

  // ---- transport ----------------------------------------------------------

  async #once(method, url, body, budget) {
    const headers = { Accept: 'application/json', 'User-Agent': USER_AGENT };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res, text;
    try {
      res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(Math.max(1, Math.ceil(budget))) });
      text = await res.text();
    } catch (e) {
      const code = e?.name === 'TimeoutError' ? 'TIMEOUT' : 'CONNECTION';
      const why = e?.cause?.code ?? e?.cause?.message ?? e?.message;
      throw new TransportError(0, code, 'no answer from doctxd', `${method} ${url}: ${why}`, {}, null, { cause: e });
    }
    const ctype = res.headers.get('content-type') ?? '';
    if (!res.ok) {
      let problem;
      try { problem = text ? JSON.parse(text) : {}; } catch { problem = { detail: text.slice(0, 400) }; }
      throw errorFrom(res.status, problem, parseRetryAfter(res.headers.get('retry-after')));
    }
    return ctype.includes('json') ? JSON.parse(text) : text;
  }

  #delay(attempt, retryAfter) {
    const cap = Math.min(this.maxBackoff, this.backoff * 2 ** attempt);
    let wait = cap / 2 + Math.random() * (cap / 2); // jitter: clients spread out
    if (retryAfter !== null && retryAfter !== undefined) wait = Math.max(wait, retryAfter * 1000);
    return wait;
  }

  async #call(method, path, body, { query, idempotent = false } = {}) {
    let url = this.baseUrl + path;
    if (query) {
      const q = new URLSearchParams(fields(query)).toString();
      if (q) url += `?${q}`;
    }
    const data = body !== undefined ? JSON.stringify(body) : method === 'POST' ? '' : undefined;
    const deadline = Date.now() + this.timeout;
    for (let attempt = 0; ; attempt++) {
      const budget = deadline - Date.now();
      if (budget <= 0) {
        throw new TransportError(0, 'TIMEOUT', 'no answer from doctxd',
          `${method} ${url}: no answer within ${this.timeout} ms`);
      }
      try {
        return await this.#once(method, url, data, budget);
      } catch (e) {
        const retryable = e instanceof TransportError || e instanceof RateLimited || e instanceof Unavailable;
        if (!(idempotent && retryable && attempt < this.retries)) throw e;
        const wait = this.#delay(attempt, e.retryAfter);
        if (Date.now() + wait >= deadline) throw e;
        await sleep(wait);
      }
    }
  }

  #coll(coll, verb) { return `/v1/c/${p(coll)}/${verb}`; }

  // startAfter (an id: keyset paging from that entry) opens the walk; the
  // cursors carry it on (the server takes one or the other).
  async *#pages(path, key, query) {
    let after;
    for (;;) {
      const page = await this.#call('GET', path, undefined, { query: { ...query, after }, idempotent: true });
      yield* page[key];
      after = page.next;
      if (!after) return;
      query = { ...query, startAfter: undefined };
    }
  }

  // ---- documents ------------------------------------------------------------

  /** One page of the documents of coll matching filter: {docs, next}. */
  find(coll, filter, opts = {}) {
    return this.#call('POST', this.#coll(coll, 'find'), fields({ filter, ...opts }), { idempotent: true });
  }

  /** How many documents of coll match filter. */
  async count(coll, filter) {
    return (await this.#call('POST', this.#coll(coll, 'count'), fields({ filter }), { idempotent: true })).count;
  }

  /** Inserts 1..1000 documents: {inserted, ids}.  Not retried. */
  insert(coll, docs, opts = {}) {
    return this.#call('POST', this.#coll(coll, 'insert'), fields({ docs, ...opts }));
  }

  /** Updates the first (or, with many, every) match: {matched, modified[, upserted]}.  Not retried. */
  update(coll, filter, update, opts = {}) {
    return this.#call('POST', this.#coll(coll, 'update'), fields({ filter, update, ...opts }));
  }

  /** Updates one match atomically and returns it; Conflict NOMATCH when none.  Not retried. */
  async findAndModify(coll, filter, update, opts = {}) {
    return (await this.#call('POST', this.#coll(coll, 'find-and-modify'), fields({ filter, update, ...opts }))).doc;
  }

  /** Deletes the first (or, with many, every) match; how many.  Not retried. */
  async delete(coll, filter, opts = {}) {
    return (await this.#call('POST', this.#coll(coll, 'delete'), fields({ filter, ...opts }))).deleted;
  }

  /** Runs 1..1000 operations (doctx bulk's shapes); one result per op.  Not retried. */
  async bulk(coll, ops) {
    return (await this.#call('POST', this.#coll(coll, 'bulk'), { ops })).results;
  }

  /** Runs an aggregation pipeline over coll; its documents. */
  async aggregate(coll, pipeline) {
    return (await this.#call('POST', this.#coll(coll, 'aggregate'), { pipeline }, { idempotent: true })).docs;
  }

  /** The indexes of coll. */
  async indexes(coll) {
    return (await this.#call('GET', this.#coll(coll, 'indexes'), undefined, { idempotent: true })).indexes;
  }

  /** Creates an index on keys; its name.  Not retried. */
  async createIndex(coll, keys, opts = {}) {
    return (await this.#call('POST', this.#coll(coll, 'indexes'), fields({ keys, ...opts }))).name;
  }

  // ---- accounts and transfers -------------------------------------------------

  /** Creates account id ({balance, minBalance: integer or "none"}).  Not retried. */
  createAccount(id, opts = {}) {
    return this.#call('POST', '/v1/accounts', fields({ id, ...opts }));
  }

  /** Account id; NotFound (NOACCOUNT) if none. */
  account(id) {
    return this.#call('GET', `/v1/accounts/${p(id)}`, undefined, { idempotent: true });
  }

  /** Every account, fetched a page (pageSize, 1..1000) at a time. */
  accounts({ pageSize, startAfter } = {}) {
    return this.#pages('/v1/accounts', 'accounts', { limit: pageSize, startAfter });
  }

  /**
   * Moves amount from one account to another; the transfer.  Without an id
   * the client makes one (newId), so the call is always retried safely.
   */
  transfer(from, to, amount, { id, async, deadlineMs } = {}) {
    return this.#call('POST', '/v1/transfers',
      fields({ id: id || newId(), from, to, amount, async, deadlineMs }), { idempotent: true });
  }

  /** Runs 1..1000 transfers; one result per item.  Items without an id get one. */
  async transferBatch(transfers, { deadlineMs } = {}) {
    const items = transfers.map((t) => (t.id ? { ...t } : { ...t, id: newId() }));
    return (await this.#call('POST', '/v1/transfers/batch', fields({ transfers: items, deadlineMs }),
      { idempotent: true })).results;
  }

  /** Transfer id; NotFound if none. */
  getTransfer(id) {
    return this.#call('GET', `/v1/transfers/${p(id)}`, undefined, { idempotent: true });
  }

  /** Every transfer (in state if given), fetched a page at a time. */
  transfers({ state, pageSize, startAfter } = {}) {
    return this.#pages('/v1/transfers', 'transfers', { state, limit: pageSize, startAfter });
  }

  /** Cancels a transfer not yet under way; Conflict (STATE) once committed.  Not retried. */
  cancelTransfer(id) {
    return this.#call('POST', `/v1/transfers/${p(id)}/cancel`);
  }

  // ---- the job queue (docs/jobs.md) ---------------------------------------------------

  /** Adds a job; retried only with an id (the same id and content: the same job). */
  addJob(queue, type, payload, opts = {}) {
    return this.#call('POST', `/v1/queues/${p(queue)}/jobs`, fields({ type, payload, ...opts }),
      { idempotent: Boolean(opts.id) });
  }

  /** Claims up to n due jobs, each running with its epoch; [] when none.  Not retried. */
  async claim(queue, opts = {}) {
    return (await this.#call('POST', `/v1/queues/${p(queue)}/claim`, fields(opts))).jobs;
  }

  /** Extends an attempt's lease; Conflict STALE once superseded.  Retried. */
  heartbeat(id, epoch, { leaseMs } = {}) {
    return this.#call('POST', `/v1/jobs/${p(id)}/heartbeat`, fields({ epoch, leaseMs }), { idempotent: true });
  }

  /** Records an attempt's progress (any JSON); Conflict STALE once superseded.  Retried. */
  progress(id, epoch, value) {
    return this.#call('POST', `/v1/jobs/${p(id)}/progress`, { epoch, value }, { idempotent: true });
  }

  /** Completes an attempt; a repeat answers the same.  Retried. */
  complete(id, epoch, { result } = {}) {
    return this.#call('POST', `/v1/jobs/${p(id)}/complete`, fields({ epoch, result }), { idempotent: true });
  }

  /** Fails an attempt (delayed or dead); a repeat answers the same.  Retried. */
  fail(id, epoch, { error } = {}) {
    return this.#call('POST', `/v1/jobs/${p(id)}/fail`, fields({ epoch, error }), { idempotent: true });
  }

  /** Makes a dead job ready again.  Not retried. */
  retryJob(id) {
    return this.#call('POST', `/v1/jobs/${p(id)}/retry`);
  }

  /** Cancels a ready or delayed job, or records the cancel of a running one (its
   *  heartbeat then rejects with Conflict STATE; complete/fail end it canceled);
   *  a repeat answers the same.  Retried. */
  cancelJob(id) {
    return this.#call('POST', `/v1/jobs/${p(id)}/cancel`, undefined, { idempotent: true });
  }

  /** Applies an update at most once per (job, key): {applied}.  Retried. */
  effect(id, epoch, key, coll, filter, update, { fence } = {}) {
    return this.#call('POST', `/v1/jobs/${p(id)}/effect`, fields({ epoch, key, coll, filter, update, fence }),
      { idempotent: true });
  }

  /** A job; NotFound if none. */
  job(id) {
    return this.#call('GET', `/v1/jobs/${p(id)}`, undefined, { idempotent: true });
  }

  /** Every job of a queue (in state if given), a page at a time. */
  jobs(queue, { state, pageSize, startAfter } = {}) {
    return this.#pages(`/v1/queues/${p(queue)}/jobs`, 'jobs', { state, limit: pageSize, startAfter });
  }

  /** {ready, delayed, running, succeeded, dead, canceled, total}. */
  queueStats(queue) {
    return this.#call('GET', `/v1/queues/${p(queue)}/stats`, undefined, { idempotent: true });
  }

  /** A queue's job events after a cursor (docs/jobs.md, "Events"):
   * {events: [{cursor, job, n, event, at, epoch, from, to}], cursor};
   * pass cursor as the next after.  waitMs (<= 30000): a long poll.
   * A cursor behind the trim: Conflict STATE.  Retried. */
  jobEvents(queue, { after = 0, limit, waitMs } = {}) {
    return this.#call('GET', `/v1/queues/${p(queue)}/events`, undefined,
      { query: { after, limit, wait_ms: waitMs }, idempotent: true });
  }

  /** Adds or replaces a job schedule (cron or everyMs).  Retried. */
  scheduleJob(name, queue, type, payload, { cron, everyMs, missed, graceMs, priority, maxAttempts, backoffMs } = {}) {
    return this.#call('POST', '/v1/job-schedules', fields({
      name, queue, type, payload, cron, every_ms: everyMs, missed, grace_ms: graceMs, priority,
      max_attempts: maxAttempts, backoff_ms: backoffMs,
    }), { idempotent: true });
  }

  /** {schedules}: the active schedules (of a queue if given). */
  jobSchedules({ queue } = {}) {
    return this.#call('GET', '/v1/job-schedules', undefined, { query: { queue }, idempotent: true });
  }

  /** Removes a job schedule; NotFound if none.  Not retried. */
  unscheduleJob(name) {
    return this.#call('DELETE', `/v1/job-schedules/${p(name)}`);
  }

  /** GET /v1/job-queues (admin scope): {queues: [{queue, paused, gen}]} (docs/jobs.md). */
  jobQueues() {
    return this.#call('GET', '/v1/job-queues', undefined, { idempotent: true });
  }

  /** Admin scope: claims of queue stop, running jobs finish; returns once every worker sees it. */
  pauseQueue(queue) {
    return this.#call('POST', `/v1/job-queues/${p(queue)}/pause`, {}, { idempotent: true });
  }

  /** Admin scope: claims of queue start again. */
  resumeQueue(queue) {
    return this.#call('POST', `/v1/job-queues/${p(queue)}/resume`, {}, { idempotent: true });
  }

  /** Admin scope: at most maxRunning jobs of queue run at once ('none': no limit);
   *  opts.rate 'N/MS' claims per window ('none': no rate), per opts.rateGroup value. */
  setQueue(queue, maxRunning, opts = {}) {
    const body = {};
    if (maxRunning !== undefined && maxRunning !== null) body.max_running = maxRunning;
    if (opts.rate !== undefined) body.rate = opts.rate;
    if (opts.rateGroup !== undefined) body.rate_group = opts.rateGroup;
    return this.#call('POST', `/v1/job-queues/${p(queue)}`, body, { idempotent: true });
  }

  // ---- locks (docs/locks.md) -----------------------------------------------------

  /** Acquires a lock: {name, owner, token, expires}; Conflict NOMATCH while held.  Not retried. */
  acquire(name, opts = {}) {
    return this.#call('POST', `/v1/locks/${p(name)}/acquire`, fields(opts));
  }

  /** Waits until this caller leads name (up to waitMs); answers as acquire, the token the term.  Not retried. */
  campaign(name, opts = {}) {
    return this.#call('POST', `/v1/locks/${p(name)}/campaign`, fields(opts));
  }

  /** {name, leader, term, expires} of election name (leader null: none). */
  leader(name) {
    return this.#call('GET', `/v1/locks/${p(name)}/leader`, undefined, { idempotent: true });
  }

  /** Renews a lock held with token; Conflict NOMATCH if not current.  Not retried. */
  renew(name, token, { ttlMs } = {}) {
    return this.#call('POST', `/v1/locks/${p(name)}/renew`, fields({ token, ttlMs }));
  }

  /** Releases a lock held with token.  Not retried. */
  release(name, token) {
    return this.#call('POST', `/v1/locks/${p(name)}/release`, { token });
  }

  /** A lock: {name, owner, token, expires, held}. */
  lock(name) {
    return this.#call('GET', `/v1/locks/${p(name)}`, undefined, { idempotent: true });
  }

  /** Every lock, a page at a time. */
  locks({ pageSize, startAfter } = {}) {
    return this.#pages('/v1/locks', 'locks', { limit: pageSize, startAfter });
  }

  /** Releases a lock whoever holds it (admin scope).  Not retried. */
  forceRelease(name, { token } = {}) {
    return this.#call('POST', `/v1/admin/locks/${p(name)}/release`, fields({ token }));
  }

  // ---- ledger (docs/ledger.md) ----------------------------------------------------

  /**
   * Creates a ledger account.  Not retried.  opts: minBalance, the floor a
   * debit may not take the balance (less pending debits) under, an integer
   * or "none" (no floor; unset: 0); maxBalance, the upper limit a credit
   * may not take the balance (plus pending credits) over, an integer or
   * "none" (unset: none) -- a credit past it is Conflict INSUFFICIENT;
   * asset, "CODE/SCALE" (e.g. "USD/2": values in cents), fixed for good --
   * an entry's legs must all have one asset (or all none), else BadRequest.
   * docs/ledger.md, "Assets" and "The upper limit".
   */
  ledgerAccount(id, { minBalance, maxBalance, asset } = {}) {
    return this.#call('POST', '/v1/ledger/accounts', fields({ id, minBalance, maxBalance, asset }));
  }

  /**
   * Changes a ledger account's limits in one step: minBalance and/or
   * {maxBalance} (each an integer or "none"); the one not given is kept.
   * At least one is required (BadRequest otherwise); a max below the floor
   * is BadRequest, nothing changed.
   */
  ledgerLimit(id, minBalance, { maxBalance } = {}) {
    return this.#call('POST', `/v1/ledger/accounts/${p(id)}/limit`, fields({ minBalance, maxBalance }));
  }

  /** Closes ledger account id for good (balance 0, no hold); Conflict (STATE)
   * otherwise.  Resolves to the close entry.  Not retried. */
  closeAccount(id, { deadlineMs } = {}) {
    return this.#call('POST', `/v1/ledger/accounts/${p(id)}/close`, fields({ deadlineMs }));
  }

  /** {account, balance, available, pending_debits, seq}, now or at atSeq. */
  balance(account, { atSeq } = {}) {
    return this.#call('GET', `/v1/ledger/accounts/${p(account)}/balance`, undefined,
      { query: { atSeq }, idempotent: true });
  }

  /** Every leg of an account in seq order (from fromSeq), a page at a time. */
  async *statement(account, { fromSeq, pageSize } = {}) {
    const path = `/v1/ledger/accounts/${p(account)}/statement`;
    let query = { fromSeq, limit: pageSize };
    for (;;) {
      const page = await this.#call('GET', path, undefined, { query, idempotent: true });
      yield* page.legs;
      if (!page.next) return;
      query = { after: page.next, limit: pageSize };
    }
  }

  /**
   * Posts an entry: legs [{account, value}] summing to 0; retried only with
   * an id (the same id, legs, meta and ref: the same entry, posted once).
   * A value is an integer, or one balancing pair: "-max" or "-max=CAP" on
   * one leg and "max" on another moves as much as both accounts' limits
   * allow (at most CAP); the entry records the amount (docs/ledger.md,
   * "Balancing legs").  opts: id; pending (hold the debits until
   * postPending or void) with timeoutMs; meta, a JSON object (at most 4 KiB)
   * kept with the entry; ref, a string (1..256 bytes) naming what it
   * belongs to outside the ledger -- both never change, and entries() finds
   * entries by them; deadlineMs.  Conflict INSUFFICIENT names the account
   * short of funds or over its max balance; Conflict DUPKEY a ref another
   * entry holds once refs are unique (uniqueRefs).
   */
  post(legs, { id, pending, timeoutMs, meta, ref, deadlineMs } = {}) {
    return this.#call('POST', '/v1/ledger/entries', fields({ legs, id, pending, timeoutMs, meta, ref, deadlineMs }),
      { idempotent: Boolean(id) });
  }

  /**
   * Posts 1..1000 entries {legs, id, pending, timeoutMs, meta, ref} (each as
   * post takes them); one result each.  Retried only when every entry has
   * an id.
   */
  async postBatch(entries, { deadlineMs } = {}) {
    const items = entries.map((e) => fields(e));
    return (await this.#call('POST', '/v1/ledger/entries/batch', fields({ entries: items, deadlineMs }),
      { idempotent: items.every((e) => e.id) })).results;
  }

  /**
   * Posts a pending entry; Conflict STATE once voided.  Not retried.  In
   * full without amounts; with amounts ([{account, value}], each 0 up to
   * what its leg holds, the same sign, summing to 0; legs not named post 0)
   * only that much, the rest released, in one step (docs/ledger.md,
   * "Partial post of a hold").  postId names the partial post: a retry with
   * the same amounts and postId answers the same entry, otherwise Conflict
   * CONFLICT.
   */
  postPending(id, { amounts, postId } = {}) {
    const body = fields({ amounts, postId });
    return this.#call('POST', `/v1/ledger/entries/${p(id)}/post`, Object.keys(body).length ? body : undefined);
  }

  /** Voids a pending entry.  Not retried. */
  void(id) {
    return this.#call('POST', `/v1/ledger/entries/${p(id)}/void`);
  }

  /** Posts the entry reversing entryId (under id if given).  Not retried. */
  reverse(entryId, { id, deadlineMs } = {}) {
    return this.#call('POST', `/v1/ledger/entries/${p(entryId)}/reverse`, fields({ id, deadlineMs }));
  }

  /** A ledger entry; NotFound if none. */
  entry(id) {
    return this.#call('GET', `/v1/ledger/entries/${p(id)}`, undefined, { idempotent: true });
  }

  /**
   * Every ledger entry, a page at a time: those touching account, or those
   * whose ref is the one given and/or whose meta matches metaFilter (a
   * MongoDB filter over the meta object, its paths relative to it:
   * {order: 'o1'}), oldest first.  account does not go with ref or
   * metaFilter (BadRequest).
   */
  entries({ account, ref, metaFilter, pageSize, startAfter } = {}) {
    const mf = metaFilter === undefined || metaFilter === null ? undefined : JSON.stringify(metaFilter);
    return this.#pages('/v1/ledger/entries', 'entries', { account, ref, metaFilter: mf, limit: pageSize, startAfter });
  }

  // ---- sync (docs/sync.md) ----------------------------------------------------------

  /** Defines a sync rule; the same rule again answers the same, so it is retried. */
  syncRule(name, { master, dependents, link, copy }) {
    return this.#call('POST', `/v1/sync/${p(name)}/rule`, fields({ master, dependents, link, copy }),
      { idempotent: true });
  }

  /** Updates a master and its dependents' copies.  Not retried. */
  syncUpdate(name, masterId, update, opts = {}) {
    return this.#call('POST', `/v1/sync/${p(name)}/update`, fields({ masterId, update, ...opts }));
  }

  /** A sync rule; NotFound if none. */
  sync(name) {
    return this.#call('GET', `/v1/sync/${p(name)}`, undefined, { idempotent: true });
  }

  /** Finishes interrupted sync updates (admin scope).  Not retried. */
  syncRepair(opts = {}) {
    return this.#call('POST', '/v1/sync/repair', fields(opts));
  }

  /** Makes entry refs unique in the ledger from now on (admin scope); idempotent. */
  uniqueRefs() {
    return this.#call('POST', '/v1/ledger/unique-refs', undefined, { idempotent: true });
  }

  // ---- orders (docs/orders.md) --------------------------------------------------------

  /** Records an order; idempotent by its trade id, so it is retried. */
  createOrder(tradeId, account, amount, { settlement } = {}) {
    return this.#call('POST', `/v1/orders/${p(tradeId)}/create`, fields({ account, amount, settlement }),
      { idempotent: true });
  }

  /** Confirms an order (credited once); retried. */
  confirmOrder(tradeId, opts = {}) {
    return this.#call('POST', `/v1/orders/${p(tradeId)}/confirm`, fields(opts), { idempotent: true });
  }

  /** Confirms 1..1000 orders; one result each; retried. */
  async confirmOrders(tradeIds, opts = {}) {
    return (await this.#call('POST', '/v1/orders/confirm', fields({ tradeIds, ...opts }),
      { idempotent: true })).results;
  }

  /** Cancels an order; Conflict STATE once confirmed.  Not retried. */
  cancelOrder(tradeId) {
    return this.#call('POST', `/v1/orders/${p(tradeId)}/cancel`);
  }

  /** An order; NotFound if none. */
  order(tradeId) {
    return this.#call('GET', `/v1/orders/${p(tradeId)}`, undefined, { idempotent: true });
  }

  /** Every order (in state if given), a page at a time. */
  orders({ state, pageSize, startAfter } = {}) {
    return this.#pages('/v1/orders', 'orders', { state, limit: pageSize, startAfter });
  }

  // ---- versions (docs/versions.md) ------------------------------------------------------

  /** Writes the next version of an item: {item, version}.  Not retried. */
  putVersion(item, root, opts = {}) {
    return this.#call('POST', `/v1/versions/${p(item)}/put`, fields({ root, ...opts }));
  }

  /** {item, version, root, children}: the current version or the one asked. */
  version(item, { version } = {}) {
    return this.#call('GET', `/v1/versions/${p(item)}`, undefined, { query: { version }, idempotent: true });
  }

  /** The versions of an item still kept. */
  async versionHistory(item) {
    return (await this.#call('GET', `/v1/versions/${p(item)}/history`, undefined, { idempotent: true })).versions;
  }

  /** Drops old versions (admin scope).  Not retried. */
  versionGc(opts = {}) {
    return this.#call('POST', '/v1/versions/gc', fields(opts));
  }

  // ---- transactions (docs/transactions.md) ---------------------------------------------

  /**
   * Runs script (an array of steps, as `doctx txn` takes) as ONE transaction:
   * {outcome: 'committed', reads: {NAME: doc|null}}, or outcome 'aborted' when a
   * require did not hold (nothing written).  opts: isolation ('snapshot' |
   * 'serializable'), id, leaseMs, deadlineMs.  A conflict still there at the
   * deadline throws Conflict (CONFLICT).  Never retried: a repeat under the
   * same id answers CONFLICT even when the first run committed.  On
   * Unavailable (problem.outcome 'unknown') or a TransportError the outcome
   * is unknown: give an id and ask txnShow(id).
   */
  txn(script, opts = {}) {
    return this.#call('POST', '/v1/txn', fields({ script, ...opts }));
  }

  /**
   * {id, outcome}: 'committed', 'aborted' or 'unknown' (pending under a live
   * lease: ask again), as `doctx txn show`.  POST /v1/txn/{id}/outcome (write
   * scope): an id with no record is fenced (an aborted record is written, so
   * a late commit under it fails); committed and aborted are final, so it
   * is retried.
   */
  txnShow(id) {
    return this.#call('POST', `/v1/txn/${p(id)}/outcome`, undefined, { idempotent: true });
  }

  // ---- admin ------------------------------------------------------------------

  /** Runs the audit (admin scope): its report with clean: true|false. */
  audit({ settled } = {}) {
    return this.#call('POST', '/v1/admin/audit', fields({ settled }));
  }

  /** Runs recovery (admin scope); its summary.  Not retried. */
  recover(opts = {}) {
    return this.#call('POST', '/v1/admin/recover', fields(opts));
  }

  /** GET /v1/admin/stats (admin scope): the admin page's dashboard (docs/admin.md). */
  adminStats() {
    return this.#call('GET', '/v1/admin/stats', undefined, { idempotent: true });
  }

  // ---- operations -------------------------------------------------------------

  /** GET /healthz: {status: "ok"} while the process is up. */
  health() {
    return this.#call('GET', '/healthz', undefined, { idempotent: true });
  }

  /** GET /readyz: true when the store answers, false on 503.  Asked once. */
  async ready() {
    try {
      await this.#call('GET', '/readyz');
      return true;
    } catch (e) {
      if (e instanceof Unavailable) return false;
      throw e;
    }
  }

  /** GET /openapi.json: the OpenAPI 3.1 description of every route. */
  openapi() {
    return this.#call('GET', '/openapi.json', undefined, { idempotent: true });
  }

  /** GET /metrics (metrics or admin scope): the Prometheus text. */
  async metrics() {
    return String(await this.#call('GET', '/metrics', undefined, { idempotent: true }));
  }
}
