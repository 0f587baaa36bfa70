// The Node client against a real doctxd (docs/clients.md), on node:test.
// Run by tests/clients/run.sh, which starts doctxd on a fresh store and
// sets DOCTXD_URL (that doctxd, no rate limit), DOCTXD (the binary),
// DOCTXD_STORE and DOCTXD_TOKENS (to start more of them here) and the
// tokens T_ADMIN, T_WRITE, T_READ.  Every doctxd started here is bounded:
// each wait has a deadline, and each process is killed at the end.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, request } from 'node:http';
import { createConnection, createServer as netServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import {
  Client, DoctxError, BadRequest, Unauthorized, Forbidden, NotFound, Conflict,
  TooLarge, RateLimited, Unavailable, TransportError,
} from '../index.js';

const { DOCTXD_URL: URL, DOCTXD, DOCTXD_STORE: STORE, DOCTXD_TOKENS: TOKENS,
  T_ADMIN, T_WRITE, T_READ } = process.env;
const TMP = process.env.TMPDIR ?? '/tmp';
const uid = (prefix) => `${prefix}-${randomUUID().slice(0, 10)}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const c = new Client(URL, T_WRITE, { timeout: 20000 });

// ---- helpers: more doctxd processes, a proxy that loses an answer ------------

async function freePort() {
  const s = netServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

const daemons = [];
after(() => { for (const d of daemons) d.stop(); });

class Daemon {
  constructor(args, { port = 0, delay = 0 } = {}) {
    this.log = join(TMP, `doctxd-${randomUUID().slice(0, 6)}.log`);
    this.argv = ['--store', STORE, '--tokens', TOKENS, '--listen', `127.0.0.1:${port}`, ...args];
    this.url = `http://127.0.0.1:${port}`;
    this.proc = null;
    this.timer = setTimeout(() => this.start(), delay);
    daemons.push(this);
  }

  start() {
    this.timer = null;
    this.exited = new Promise((resolve) => {
      this.proc = spawn('sh', ['-c', 'exec "$0" "$@" >>"$LOG" 2>&1', DOCTXD, ...this.argv],
        { env: { ...process.env, LOG: this.log }, stdio: 'ignore' });
      this.proc.on('exit', (code) => resolve(code));
    });
  }

  logged(what) {
    try { return readFileSync(this.log, 'utf8').split('\n').find((l) => l.includes(what)); } catch { return undefined; }
  }

  async waitLog(what, ms = 10000) {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const line = this.logged(what);
      if (line) return line;
      await sleep(20);
    }
    throw new Error(`doctxd never logged '${what}'`);
  }

  async listening() {
    const line = await this.waitLog('listening on');
    this.url = `http://${line.trim().split(' ').pop()}`;
    return this.url;
  }

  // Resolves with the exit code, or null after ms.
  exitCode(ms) {
    let timer;
    const late = new Promise((r) => { timer = setTimeout(() => r(null), ms); });
    return Promise.race([this.exited, late]).finally(() => clearTimeout(timer));
  }

  stop() {
    if (this.timer) clearTimeout(this.timer);
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGKILL');
    }
  }
}

// Forwards requests to doctxd; the first `drop` answers are lost on the way
// back (the connection is closed without them), as on a flaky network
// after the store has done the work.
async function lossyProxy(upstream, drop) {
  const up = new globalThis.URL(upstream);
  const forwarded = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      const headers = {};
      for (const h of ['authorization', 'content-type']) if (req.headers[h]) headers[h] = req.headers[h];
      const body = Buffer.concat(chunks);
      headers['content-length'] = body.length;
      const out = request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers }, (ur) => {
        const parts = [];
        ur.on('data', (d) => parts.push(d));
        ur.on('end', () => {
          forwarded.push(`${req.method} ${req.url}`);
          if (drop > 0) {
            drop--;
            req.socket.destroy(); // the answer is lost
            return;
          }
          res.writeHead(ur.statusCode, { 'content-type': ur.headers['content-type'] });
          res.end(Buffer.concat(parts));
        });
      });
      out.end(body);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    forwarded,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

async function rejects(promise, Cls, check = () => {}) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof Cls, `want ${Cls.name}, got ${e?.name}: ${e?.message}`);
    assert.ok(e instanceof DoctxError);
    check(e);
    return e;
  }
  assert.fail(`want ${Cls.name}, got an answer`);
}

// ---- declarations ----------------------------------------------------------

test('index.d.ts declares every method of Client', () => {
  const dts = readFileSync(new globalThis.URL('../index.d.ts', import.meta.url), 'utf8');
  const body = dts.slice(dts.indexOf('export class Client {'));
  const declared = new Set([...body.matchAll(/^ {2}(\w+)(?:<[^>]*>)?\(/gm)].map((m) => m[1]).filter((m) => m !== 'constructor'));
  const methods = Object.getOwnPropertyNames(Client.prototype).filter((n) => n !== 'constructor');
  assert.deepEqual(methods.filter((m) => !declared.has(m)), []);
  assert.deepEqual([...declared].filter((m) => !methods.includes(m)), []);
});

test('every route of tests/clients/routes.json has a method', () => {
  const table = JSON.parse(readFileSync(new globalThis.URL('../../../tests/clients/routes.json', import.meta.url), 'utf8'));
  const camel = (n) => n.replace(/_([a-z])/g, (_, ch) => ch.toUpperCase());
  const want = new Set(Object.values(table).map(camel));
  const methods = Object.getOwnPropertyNames(Client.prototype).filter((n) => n !== 'constructor');
  assert.deepEqual([...want].filter((m) => !methods.includes(m)), []);
  assert.deepEqual(methods.filter((m) => !want.has(m)), []);
});

// ---- operations ---------------------------------------------------------------

test('health, ready, metrics', async () => {
  assert.deepEqual(await new Client(URL).health(), { status: 'ok' });
  assert.equal(await new Client(URL).ready(), true);
  assert.match(await new Client(URL, T_ADMIN).metrics(), /doctxd_http_requests_total\{/);
  const spec = await new Client(URL).openapi();
  assert.match(spec.openapi, /^3\.1/);
  assert.ok('/v1/transfers' in spec.paths);
  const stats = await new Client(URL, T_ADMIN).adminStats();
  assert.equal(stats.window_s, 60);
  assert.ok('counts' in stats);
  await rejects(new Client(URL, T_WRITE).adminStats(), Forbidden);
});

// ---- documents ----------------------------------------------------------------

test('documents', async () => {
  const coll = uid('items');
  assert.deepEqual(await c.insert(coll, [{ _id: 1, item: 'pen', qty: 2 }, { _id: 2, item: 'ink', qty: 5 }]),
    { inserted: 2, ids: [1, 2] });
  const page = await c.find(coll, { qty: { $gte: 1 } }, { sort: { qty: -1 }, limit: 1 });
  assert.deepEqual(page.docs, [{ _id: 2, item: 'ink', qty: 5 }]);
  assert.ok(page.next);
  assert.deepEqual((await c.find(coll, { item: 'pen' }, { projection: { qty: 1 } })).docs, [{ _id: 1, qty: 2 }]);
  assert.equal(await c.count(coll, { item: 'pen' }), 1);
  assert.equal(await c.count(coll), 2);
  assert.deepEqual(await c.update(coll, { item: 'pen' }, { $inc: { qty: 1 } }), { matched: 1, modified: 1 });
  assert.equal((await c.update(coll, {}, { $set: { seen: true } }, { many: true })).modified, 2);
  assert.equal((await c.findAndModify(coll, { _id: 2, qty: { $gte: 5 } }, { $inc: { qty: -5 } }, { new: true })).qty, 0);
  await rejects(c.findAndModify(coll, { _id: 2, qty: { $gte: 5 } }, { $inc: { qty: -5 } }), Conflict,
    (e) => { assert.equal(e.code, 'NOMATCH'); assert.equal(e.status, 409); });
  await rejects(c.insert(coll, [{ _id: 1 }]), Conflict, (e) => assert.equal(e.code, 'DUPKEY'));
  assert.equal(await c.delete(coll, { _id: 2 }), 1);
  const res = await c.bulk(coll, [{ insertOne: { document: { _id: 3, qty: 1 } } }, { deleteOne: { filter: { _id: 1 } } }]);
  assert.deepEqual(res.map((r) => r.ok), [true, true]);
  assert.deepEqual(await c.aggregate(coll, [{ $group: { _id: null, qty: { $sum: '$qty' } } }]), [{ _id: null, qty: 1 }]);
  assert.equal(await c.createIndex(coll, { item: 1 }), 'item_1');
  assert.deepEqual((await c.indexes(coll)).map((i) => i.name), ['_id_', 'item_1']);
  assert.equal(await c.delete(coll, {}, { many: true }), 1);
});

test('find pages with the cursor', async () => {
  const coll = uid('paged');
  await c.insert(coll, Array.from({ length: 7 }, (_, i) => ({ _id: i, n: i })));
  const seen = [];
  let after, pages = 0;
  do {
    const page = await c.find(coll, {}, { sort: { n: 1 }, limit: 3, after });
    pages++;
    seen.push(...page.docs.map((d) => d.n));
    after = page.next;
  } while (after);
  assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6]);
  assert.equal(pages, 3);
});

// ---- accounts and transfers --------------------------------------------------

test('accounts and transfers', async () => {
  const a = uid('alice'), b = uid('bob');
  assert.equal((await c.createAccount(a, { balance: 1000 })).balance, 1000);
  assert.equal((await c.createAccount(b, { minBalance: 0 })).balance, 0);
  await rejects(c.createAccount(a), Conflict, (e) => assert.equal(e.code, 'DUPKEY'));
  const tid = uid('order');
  const tx = await c.transfer(a, b, 250, { id: tid });
  assert.deepEqual([tx._id, tx.state], [tid, 'succeeded']);
  assert.equal((await c.getTransfer(tid)).amount, 250);
  const auto = await c.transfer(a, b, 5);
  assert.ok(auto._id.startsWith('js-'));
  assert.equal(auto.state, 'succeeded');
  const poor = await c.transfer(b, a, 1e9);
  assert.equal(poor.state, 'failed');
  assert.ok(poor.reason);
  await rejects(c.transfer(a, b, 999, { id: tid }), Conflict, (e) => assert.equal(e.code, 'CONFLICT'));
  const later = await c.transfer(b, a, 5, { async: true });
  assert.equal(later.state, 'initiated');
  const canceled = await c.cancelTransfer(later._id);
  assert.deepEqual([canceled.state, canceled.reason], ['failed', 'canceled']);
  const res = await c.transferBatch([{ from: a, to: b, amount: 1 }, { from: a, to: b, amount: 2, id: tid }]);
  assert.equal(res[0].status, 200);
  assert.ok(res[0].transfer._id.startsWith('js-'));
  assert.deepEqual([res[1].status, res[1].code], [409, 'CONFLICT']);
  assert.equal((await c.account(a)).balance, 1000 - 250 - 5 - 1);
  assert.equal((await c.account(b)).balance, 256);
  await rejects(c.account(uid('nobody')), NotFound, (e) => assert.equal(e.code, 'NOACCOUNT'));
  await rejects(c.getTransfer(uid('never')), NotFound);
});

test('list iterators page', async () => {
  const mine = Array.from({ length: 5 }, () => uid('acct'));
  for (const m of mine) await c.createAccount(m, { balance: 10 });
  const got = [];
  for await (const x of c.accounts({ pageSize: 2 })) got.push(x._id);
  assert.ok(mine.every((m) => got.includes(m)));
  assert.equal(new Set(got).size, got.length);
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await c.transfer(mine[0], mine[1], 1))._id);
  const listed = [];
  for await (const t of c.transfers({ state: 'succeeded', pageSize: 2 })) listed.push(t._id);
  assert.ok(ids.every((i) => listed.includes(i)));
  assert.equal(new Set(listed).size, listed.length);
});

test('list iterators are keyset: inserts behind the place shift nothing', async () => {
  const mine = Array.from({ length: 6 }, () => uid('ks'));
  for (const m of mine) await c.createAccount(m, { balance: 1 });
  const got = [];
  for await (const x of c.accounts({ pageSize: 2 })) {
    got.push(x._id);
    if (got.length % 2 === 0 && got.length < 40) await c.createAccount('0' + uid('ks'), { balance: 1 });
  }
  assert.ok(mine.every((m) => got.includes(m)));
  assert.equal(new Set(got).size, got.length);
  mine.sort();
  const rest = [];
  for await (const x of c.accounts({ pageSize: 2, startAfter: mine[0] })) rest.push(x._id);
  assert.ok(!rest.includes(mine[0]) && mine.slice(1).every((m) => rest.includes(m)));
  assert.deepEqual(rest, [...rest].sort());
});

// ---- locks, ledger, sync, orders, versions -------------------------------------

test('jobs', async () => {
  const q = uid('mail'), j1 = uid('j'), j2 = uid('j'), j3 = uid('j');
  const first = await c.addJob(q, 'send', { to: 'a' }, { id: j1, priority: 5 });
  assert.deepEqual([first._id, first.state, first.priority], [j1, 'ready', 5]);
  assert.equal((await c.addJob(q, 'send', { to: 'a' }, { id: j1, priority: 5 }))._id, j1);
  await rejects(c.addJob(q, 'send', { to: 'b' }, { id: j1 }), Conflict, (e) => assert.equal(e.code, 'CONFLICT'));
  await c.addJob(q, 'send', undefined, { uniqueKey: uid('k'), id: j2 });
  assert.deepEqual((await c.job(j1)).payload, { to: 'a' });
  const stats = await c.queueStats(q);
  assert.deepEqual([stats.ready, stats.total], [2, 2]);
  const claimed = await c.claim(q, { n: 1, leaseMs: 20000, owner: 'js-1' });
  assert.deepEqual(claimed.map((j) => j._id), [j1]);
  assert.equal(claimed[0].state, 'running');
  const ep = claimed[0].epoch;
  assert.equal((await c.heartbeat(j1, ep, { leaseMs: 30000 })).state, 'running');
  await rejects(c.heartbeat(j1, ep + 6), Conflict, (e) => assert.equal(e.code, 'STALE'));
  const prog = await c.progress(j1, ep, { pct: 40 });
  assert.equal(prog.state, 'running');
  assert.deepEqual(prog.progress, { pct: 40 });
  assert.deepEqual((await c.job(j1)).progress, { pct: 40 });
  await rejects(c.progress(j1, ep + 6, 1), Conflict, (e) => assert.equal(e.code, 'STALE'));
  assert.deepEqual((await c.job(j1)).progress, { pct: 40 });
  const done = await c.complete(j1, ep, { result: { sent: true } });
  assert.equal(done.state, 'succeeded');
  assert.deepEqual(await c.complete(j1, ep, { result: { sent: true } }), done);
  const ep2 = (await c.claim(q, { n: 5 }))[0].epoch;
  assert.deepEqual(await c.claim(q), []);
  const failed = await c.fail(j2, ep2, { error: 'smtp down' });
  assert.equal(failed.state, 'delayed');
  assert.deepEqual(await c.fail(j2, ep2, { error: 'smtp down' }), failed);
  const all = [];
  for await (const j of c.jobs(q, { pageSize: 1 })) all.push(j._id);
  assert.deepEqual(all, [j1, j2]);
  const ok = [];
  for await (const j of c.jobs(q, { state: 'succeeded' })) ok.push(j._id);
  assert.deepEqual(ok, [j1]);
  // every transition, once, in each job's order (jobs interleave in the
  // order they were relayed); a page from a cursor goes on
  const evs = await c.jobEvents(q);
  const of = (id) => evs.events.filter((e) => e.job === id).map((e) => e.event);
  assert.deepEqual([of(j1), of(j2)], [['added', 'claimed', 'progress', 'succeeded'],
    ['added', 'claimed', 'failed']]);
  assert.deepEqual(evs.events.map((e) => e.cursor), [1, 2, 3, 4, 5, 6, 7]);
  assert.equal(evs.cursor, 7);
  const page = await c.jobEvents(q, { after: 4, limit: 1 });
  assert.deepEqual([page.events.map((e) => e.cursor), page.cursor], [[5], 5]);
  assert.deepEqual(await c.jobEvents(q, { after: 7, waitMs: 10 }), { events: [], cursor: 7 });
  const once = uid('once');
  await c.addJob(once, 't', undefined, { id: j3, maxAttempts: 1 });
  const ep3 = (await c.claim(once))[0].epoch;
  assert.equal((await c.fail(j3, ep3, { error: 'boom' })).state, 'dead');
  assert.equal((await c.retryJob(j3)).state, 'ready');
  await rejects(c.retryJob(j3), Conflict, (e) => assert.equal(e.code, 'STATE'));
  assert.equal((await c.cancelJob(j3)).state, 'canceled');
  assert.equal((await c.cancelJob(j3)).state, 'canceled');
  // a running job: the cancel is recorded, its worker ends it canceled
  const cq = uid('cq'), j4 = uid('j');
  await c.addJob(cq, 't', undefined, { id: j4 });
  const ep4 = (await c.claim(cq, { leaseMs: 20000 }))[0].epoch;
  const req = await c.cancelJob(j4);
  assert.equal(req.state, 'running');
  assert.ok(req.cancel_requested);
  await rejects(c.heartbeat(j4, ep4), Conflict, (e) => assert.equal(e.code, 'STATE'));
  assert.equal((await c.complete(j4, ep4, { result: 1 })).state, 'canceled');
  await rejects(c.job(uid('nojob')), NotFound);
});

test('a job effect applies once', async () => {
  const wallets = uid('wallets'), q = uid('fx'), jid = uid('f');
  await c.insert(wallets, [{ _id: 'w1', n: 0 }]);
  await c.addJob(q, 't', undefined, { id: jid });
  const ep = (await c.claim(q))[0].epoch;
  const fx = [jid, ep, 'credit', wallets, { _id: 'w1' }, { $inc: { n: 1 } }];
  assert.deepEqual(await c.effect(...fx), { applied: true });
  assert.deepEqual(await c.effect(...fx), { applied: false });
  assert.equal((await c.find(wallets, { _id: 'w1' })).docs[0].n, 1);
  assert.equal((await c.complete(jid, ep)).state, 'succeeded');
});

test('locks and fences', async () => {
  const admin = new Client(URL, T_ADMIN);
  const name = uid('L'), coll = uid('res');
  const held = await c.acquire(name, { ttlMs: 60000, owner: 'w1' });
  assert.equal(held.owner, 'w1');
  assert.ok(held.token >= 1);
  await rejects(c.acquire(name, { owner: 'w2' }), Conflict, (e) => {
    assert.equal(e.code, 'NOMATCH');
    assert.match(e.detail, /held by w1/);
  });
  assert.equal((await c.lock(name)).held, true);
  assert.equal((await c.renew(name, held.token, { ttlMs: 90000 })).token, held.token);
  await c.insert(coll, [{ _id: 1, v: 0 }]);
  await c.update(coll, { _id: 1 }, { $set: { v: 1 } }, { fence: `${name}:${held.token}` });
  assert.equal((await c.release(name, held.token)).held, false);
  await rejects(c.renew(name, held.token), Conflict);
  const second = await c.acquire(name, { owner: 'w2', ttlMs: 60000 });
  await c.update(coll, { _id: 1 }, { $set: { v: 2 } }, { fence: `${name}:${second.token}` });
  await rejects(c.update(coll, { _id: 1 }, { $set: { v: 9 } }, { fence: `${name}:${held.token}` }), Conflict,
    (e) => assert.equal(e.code, 'FENCED'));
  const other = uid('L');
  await c.acquire(other);
  const listed = [];
  for await (const l of c.locks({ pageSize: 1 })) listed.push(l.name);
  assert.ok(listed.includes(name) && listed.includes(other));
  assert.equal((await admin.forceRelease(name)).held, false);
  await rejects(c.lock(uid('nolock')), NotFound);
});

test('semaphores and election', async () => {
  const pool = uid('pool');
  const primary = uid('primary');
  const a = await c.acquire(pool, { max: 2, owner: 'a', ttlMs: 60000 });
  const b = await c.acquire(pool, { max: 2, owner: 'b', ttlMs: 60000 });
  assert.deepEqual(new Set([a.slot, b.slot]), new Set([0, 1]));
  assert.ok(b.token > a.token);
  await rejects(c.acquire(pool, { max: 2, owner: 'c' }), Conflict); // both slots held
  await rejects(c.acquire(pool, { max: 3 }), BadRequest); // one max per name
  const led = await c.campaign(primary, { owner: 'n1', ttlMs: 60000, waitMs: 1000 });
  const now = await c.leader(primary);
  assert.equal(now.leader, 'n1');
  assert.equal(now.term, led.token);
});

test('ledger', async () => {
  const ext = uid('ext'), cash = uid('cash'), fees = uid('fees');
  assert.equal((await c.ledgerAccount(ext, { minBalance: 'none' })).min_balance, null);
  await c.ledgerAccount(cash);
  await c.ledgerAccount(fees);
  const e1 = uid('e');
  const legs = [{ account: ext, value: -1000 }, { account: cash, value: 1000 }];
  assert.equal((await c.post(legs, { id: e1 })).state, 'posted');
  assert.equal((await c.post(legs, { id: e1 }))._id, e1);
  assert.equal((await c.balance(cash)).balance, 1000);
  await rejects(c.post([{ account: cash, value: -5000 }, { account: fees, value: 5000 }]), Conflict,
    (e) => assert.equal(e.code, 'INSUFFICIENT'));
  const p1 = uid('p'), p2 = uid('p');
  await c.post([{ account: cash, value: -100 }, { account: fees, value: 100 }], { id: p1, pending: true });
  assert.equal((await c.balance(cash)).available, 900);
  assert.equal((await c.postPending(p1)).state, 'posted');
  await c.post([{ account: cash, value: -50 }, { account: fees, value: 50 }], { id: p2, pending: true, timeoutMs: 600000 });
  assert.equal((await c.void(p2)).state, 'voided');
  await rejects(c.postPending(p2), Conflict, (e) => assert.equal(e.code, 'STATE'));
  assert.equal((await c.reverse(p1, { id: uid('r') })).reverses, p1);
  assert.equal((await c.entry(e1))._id, e1);
  assert.equal((await c.balance(cash, { atSeq: 1 })).balance, 1000);
  const seen = [];
  for await (const leg of c.statement(cash, { pageSize: 2 })) seen.push(leg.entry);
  assert.equal(seen.length, 3);
  assert.equal(seen[0], e1);
  const from2 = [];
  for await (const leg of c.statement(cash, { fromSeq: 2 })) from2.push(leg.entry);
  assert.deepEqual(from2, seen.slice(1));
  let n = 0;
  for await (const _ of c.entries({ account: fees, pageSize: 1 })) n++;
  assert.ok(n >= 2);
  const res = await c.postBatch([{ id: uid('b'), legs: [{ account: ext, value: -7 }, { account: cash, value: 7 }] },
    { legs: [{ account: fees, value: -99999 }, { account: cash, value: 99999 }] }]);
  assert.deepEqual(res.map((r) => r.status), [200, 409]);
  assert.equal((await c.ledgerLimit(fees, 'none')).min_balance, null);
  await rejects(c.closeAccount(cash), Conflict, (e) => assert.equal(e.code, 'STATE')); // it holds money
  const shut = uid('shut');
  await c.ledgerAccount(shut);
  assert.equal((await c.closeAccount(shut, { deadlineMs: 5000 })).state, 'closed');
  assert.ok('closed_at' in (await c.balance(shut)));
});

test('ledger assets, limits, meta and refs, balancing legs, partial posts', async () => {
  const src = uid('src'), dst = uid('dst'), eur = uid('eur');
  let acct = await c.ledgerAccount(src, { minBalance: 'none', asset: 'USD/2' });
  assert.equal(acct.asset, 'USD/2');
  assert.equal(acct.min_balance, null);
  acct = await c.ledgerAccount(dst, { asset: 'USD/2', maxBalance: 500 });
  assert.equal(acct.asset, 'USD/2');
  assert.equal(acct.max_balance, 500);
  await c.ledgerAccount(eur, { asset: 'EUR/2' });
  // over the max: nothing recorded
  await rejects(c.post([{ account: src, value: -600 }, { account: dst, value: 600 }]), Conflict, (e) => {
    assert.equal(e.code, 'INSUFFICIENT');
    assert.ok(e.detail.includes(dst), e.detail);
  });
  await rejects(c.post([{ account: src, value: -1 }, { account: eur, value: 1 }]), BadRequest);
  assert.equal((await c.balance(dst)).balance, 0);
  // limit: one field given, the other kept
  acct = await c.ledgerLimit(dst, undefined, { maxBalance: 1000 });
  assert.equal(acct.max_balance, 1000);
  assert.equal(acct.min_balance, 0);
  assert.equal((await c.ledgerLimit(dst, -5)).max_balance, 1000);
  assert.equal((await c.ledgerLimit(dst, 0)).min_balance, 0);
  await rejects(c.ledgerLimit(dst), BadRequest);
  // meta and ref, found again by either (and by both)
  const ref = uid('inv'), order = uid('o'), eid = uid('e');
  const meta = { order, lines: [1, 2], camelKey: true };
  const ent = await c.post([{ account: src, value: -100 }, { account: dst, value: 100 }], { id: eid, meta, ref });
  assert.deepEqual(ent.meta, meta); // the meta's own keys are not snake_cased
  assert.equal(ent.ref, ref);
  const ids = async (opts) => { const out = []; for await (const x of c.entries(opts)) out.push(x._id); return out; };
  assert.deepEqual(await ids({ ref }), [eid]);
  assert.deepEqual(await ids({ metaFilter: { order } }), [eid]);
  assert.deepEqual(await ids({ ref, metaFilter: { order: 'other' } }), []);
  const ref2 = uid('inv');
  const res = await c.postBatch([{ legs: [{ account: src, value: -1 }, { account: dst, value: 1 }], meta: { order }, ref: ref2 }]);
  assert.equal(res[0].status, 200);
  assert.equal(res[0].entry.ref, ref2);
  assert.equal((await ids({ metaFilter: { order }, pageSize: 1 })).length, 2);
  // a balancing pair moves what the limits allow, at most the cap
  const bal = await c.post([{ account: src, value: '-max=50' }, { account: dst, value: 'max' }]);
  assert.deepEqual(bal.changes.map((x) => x.value), [-50, 50]);
  // a hold posted in part: the rest released, retried with its post id
  const hold = uid('h'), postId = uid('pp');
  await c.post([{ account: src, value: -300 }, { account: dst, value: 300 }], { id: hold, pending: true });
  const amounts = [{ account: src, value: -120 }, { account: dst, value: 120 }];
  const got = await c.postPending(hold, { amounts, postId });
  assert.equal(got.state, 'posted');
  assert.deepEqual(got.amounts, [-120, 120]);
  assert.equal(got.post_id, postId);
  assert.equal((await c.postPending(hold, { amounts, postId }))._id, hold);
  await rejects(c.postPending(hold, { amounts: [{ account: src, value: -100 }, { account: dst, value: 100 }], postId }),
    Conflict, (e) => assert.equal(e.code, 'CONFLICT'));
  const b = await c.balance(dst);
  assert.equal(b.balance, 100 + 1 + 50 + 120);
  assert.equal(b.asset, 'USD/2');
});

test('a retried ledger post is counted once', async () => {
  const src = uid('src'), dst = uid('dst');
  await c.ledgerAccount(src, { minBalance: 'none' });
  await c.ledgerAccount(dst);
  const proxy = await lossyProxy(URL, 1);
  try {
    await new Client(proxy.url, T_WRITE, { timeout: 10000, backoff: 10 })
      .post([{ account: src, value: -40 }, { account: dst, value: 40 }], { id: uid('pay') });
    assert.equal(proxy.forwarded.length, 2);
  } finally {
    await proxy.close();
  }
  assert.equal((await c.balance(dst)).balance, 40);
});

test('sync', async () => {
  const admin = new Client(URL, T_ADMIN);
  const users = uid('users'), comments = uid('comments'), rule = uid('names');
  await c.insert(users, [{ _id: 'u1', name: 'Ann' }]);
  await c.insert(comments, [{ _id: 'c1', uid: 'u1' }, { _id: 'c2', uid: 'u1' }]);
  const spec = { master: users, dependents: comments, link: 'uid', copy: 'name:uname' };
  const first = await c.syncRule(rule, spec);
  assert.deepEqual(await c.syncRule(rule, spec), first);
  assert.equal((await c.sync(rule))._id, rule);
  const out = await c.syncUpdate(rule, 'u1', { $set: { name: 'Bo' } });
  assert.equal(out.dependents, 2);
  assert.equal(out.flag_cleared, true);
  assert.equal(await c.count(comments, { uname: 'Bo' }), 2);
  await rejects(c.sync(uid('nosync')), NotFound);
  assert.equal((await admin.syncRepair()).ok, true);
});

test('orders', async () => {
  const shop = uid('shop');
  await c.createAccount(shop);
  const o1 = uid('o'), o2 = uid('o'), o3 = uid('o');
  const first = await c.createOrder(o1, shop, 50);
  assert.equal(first.state, 'pending');
  assert.deepEqual(await c.createOrder(o1, shop, 50), first);
  await rejects(c.createOrder(o1, shop, 51), Conflict);
  await c.createOrder(o2, shop, 7);
  await c.createOrder(o3, shop, 9);
  assert.equal((await c.confirmOrder(o1, { owner: 'cb' })).state, 'success');
  const res = await c.confirmOrders([o1, o2, uid('nope')]);
  assert.deepEqual(res.map((r) => r.status), [200, 200, 404]);
  assert.equal((await c.account(shop)).balance, 57);
  assert.equal((await c.cancelOrder(o3)).state, 'canceled');
  await rejects(c.cancelOrder(o1), Conflict, (e) => assert.equal(e.code, 'STATE'));
  assert.equal((await c.order(o1)).amount, 50);
  const ok = [];
  for await (const o of c.orders({ state: 'success', pageSize: 1 })) ok.push(o._id);
  assert.ok(ok.includes(o1) && ok.includes(o2));
});

test('versions', async () => {
  const admin = new Client(URL, T_ADMIN);
  const item = uid('doc');
  assert.deepEqual(await c.putVersion(item, { t: 1 }, { child: { a: { x: 1 }, b: { y: 2 } } }), { item, version: 1 });
  assert.equal((await c.putVersion(item, { t: 2 }, { removeChild: ['b'], expectVersion: 1 })).version, 2);
  await rejects(c.putVersion(item, { t: 3 }, { expectVersion: 1 }), Conflict, (e) => assert.equal(e.code, 'CONFLICT'));
  const now = await c.version(item);
  assert.equal(now.version, 2);
  assert.deepEqual(now.children, { a: { x: 1 } });
  assert.deepEqual((await c.version(item, { version: 1 })).children.b, { y: 2 });
  assert.deepEqual((await c.versionHistory(item)).map((v) => v.version), [1, 2]);
  assert.equal((await admin.versionGc({ keep: 1, graceMs: 0 })).ok, true);
});

test('transactions', async () => {
  const coll = uid('stock');
  await c.insert(coll, [{ _id: 'w1', n: 5 }, { _id: 'w2', n: 0 }]);
  const move = [
    { find_one: coll, filter: { _id: 'w1' }, as: 'w1' },
    { require: 'w1', filter: { n: { $gte: 3 } } },
    { update: coll, filter: { _id: 'w1' }, with: { $inc: { n: -3 } } },
    { update: coll, filter: { _id: 'w2' }, with: { $inc: { n: 3 } } },
  ];
  const id = uid('t');
  assert.deepEqual(await c.txn(move, { id, leaseMs: 5000, deadlineMs: 5000 }),
    { outcome: 'committed', reads: { w1: { _id: 'w1', n: 5 } } });
  assert.deepEqual(await c.txn(move, { isolation: 'serializable' }),
    { outcome: 'aborted', reads: { w1: { _id: 'w1', n: 2 } } });
  assert.deepEqual(await c.txnShow(id), { id, outcome: 'committed' });
  const fenced = uid('t');
  assert.deepEqual(await c.txnShow(fenced), { id: fenced, outcome: 'aborted' });
  await rejects(c.txn(move.slice(2), { id: fenced }), Conflict, (e) => assert.equal(e.code, 'CONFLICT'));
  await rejects(c.txn([{ upsert: coll, filter: {} }]), BadRequest, (e) => assert.match(e.detail, /step 1/));
  await rejects(c.txn(move, { deadlineMs: Number.MAX_SAFE_INTEGER }), BadRequest);
  await rejects(c.txn(move, { isolation: 'linearizable' }), BadRequest);
  await rejects(new Client(URL, T_READ).txn(move), Forbidden);
  assert.deepEqual((await c.find(coll, {}, { sort: { _id: 1 } })).docs.map((d) => d.n), [2, 3]);
});

test('a transaction whose answer is lost is not retried; txnShow tells', async () => {
  const coll = uid('stock');
  await c.insert(coll, [{ _id: 'a', n: 1 }, { _id: 'b', n: 0 }]);
  const id = uid('t');
  const proxy = await lossyProxy(URL, 1);
  try {
    await rejects(new Client(proxy.url, T_WRITE, { timeout: 10000, backoff: 10 }).txn([
      { update: coll, filter: { _id: 'a' }, with: { $inc: { n: -1 } } },
      { update: coll, filter: { _id: 'b' }, with: { $inc: { n: 1 } } },
    ], { id }), TransportError);
    assert.equal(proxy.forwarded.length, 1);
  } finally {
    await proxy.close();
  }
  assert.deepEqual(await c.txnShow(id), { id, outcome: 'committed' });
  assert.deepEqual((await c.find(coll, {}, { sort: { _id: 1 } })).docs.map((d) => d.n), [0, 1]);
});

// ---- retries -----------------------------------------------------------------

test('a retried transfer is counted once', async () => {
  const a = uid('payer'), b = uid('payee');
  await c.createAccount(a, { balance: 100 });
  await c.createAccount(b);
  const proxy = await lossyProxy(URL, 1);
  let tx;
  try {
    tx = await new Client(proxy.url, T_WRITE, { timeout: 10000, backoff: 10 }).transfer(a, b, 30);
    assert.equal(proxy.forwarded.length, 2, proxy.forwarded.join(', '));
    assert.equal(tx.state, 'succeeded');
  } finally {
    await proxy.close();
  }
  assert.equal((await c.account(a)).balance, 70);
  assert.equal((await c.account(b)).balance, 30);
  assert.equal((await c.getTransfer(tx._id)).amount, 30);
});

test('a write without a client id is not retried', async () => {
  const coll = uid('once');
  const proxy = await lossyProxy(URL, 1);
  try {
    await rejects(new Client(proxy.url, T_WRITE, { timeout: 10000, backoff: 10 }).insert(coll, [{ n: 1 }]),
      TransportError);
    assert.equal(proxy.forwarded.length, 1);
  } finally {
    await proxy.close();
  }
  assert.equal(await c.count(coll), 1); // it did happen, once
});

test('a GET is retried until doctxd listens', async () => {
  const late = new Daemon(['--rate', '0'], { port: await freePort(), delay: 500 });
  const t0 = Date.now();
  // Retries enough for a doctxd that starts slowly on a loaded machine.
  assert.deepEqual(await new Client(late.url, undefined, { timeout: 30000, retries: 20, backoff: 50 }).health(), { status: 'ok' });
  assert.ok(Date.now() - t0 >= 400, 'it was not up at the first try');
  late.stop();
});

test('a non-idempotent call is not retried when refused', async () => {
  const coll = uid('refused');
  const late = new Daemon(['--rate', '0'], { port: await freePort(), delay: 500 });
  const t0 = Date.now();
  // A retry would wait at least 2 s (half the first backoff) and then find
  // doctxd up: the call fails well before, and nothing was written.  (A
  // bound of 400 ms failed on a loaded machine.)
  await rejects(new Client(late.url, T_WRITE, { timeout: 30000, backoff: 4000, maxBackoff: 8000 })
    .update(coll, { _id: 1 }, { $inc: { n: 1 } }, { upsert: true }),
  TransportError, (e) => { assert.equal(e.status, 0); assert.equal(e.code, 'CONNECTION'); });
  assert.ok(Date.now() - t0 < 1500, 'it failed at once, no retry');
  await late.listening();
  assert.equal(await new Client(late.url, T_WRITE).count(coll), 0);
  late.stop();
});

// ---- errors, each from a real answer -----------------------------------------------

test('bad request', async () => {
  await rejects(c.update(uid('x'), {}, { $frobnicate: { a: 1 } }), BadRequest,
    (e) => { assert.equal(e.status, 400); assert.ok(e.detail && e.title); });
  await rejects(c.transfer('a', 'a', 1), BadRequest, (e) => assert.match(e.detail, /same account/));
  await rejects(c.find(uid('x'), {}, { after: 'bm90LWEtY3Vyc29y' }), BadRequest);
  await rejects(c.find(uid('x'), {}, { limt: 1 }), BadRequest, (e) => assert.match(e.detail, /unknown field 'limt'/));
});

test('unauthorized and forbidden', async () => {
  await rejects(new Client(URL, 'not-a-known-token-at-all').account('x'), Unauthorized,
    (e) => assert.equal(e.code, 'UNAUTHORIZED'));
  await rejects(new Client(URL).count('x'), Unauthorized);
  await rejects(new Client(URL, T_READ).insert('x', [{ a: 1 }]), Forbidden,
    (e) => { assert.equal(e.code, 'FORBIDDEN'); assert.equal(e.status, 403); });
  await rejects(new Client(URL, T_WRITE).audit(), Forbidden);
});

test('too large', async () => {
  await rejects(c.insert(uid('big'), [{ blob: 'x'.repeat(1 << 20) }]), TooLarge,
    (e) => { assert.equal(e.code, 'TOOLARGE'); assert.equal(e.status, 413); });
});

test('rate limited, then retried after Retry-After', async () => {
  const slow = new Daemon(['--rate', '1', '--burst', '1']);
  const url = await slow.listening();
  const once = new Client(url, T_READ, { retries: 0 });
  await rejects(once.account('nobody'), NotFound); // takes the one token in the bucket
  // The next call finds the bucket empty -- unless a loaded machine took a
  // second between the two, and the bucket refilled: up to 5 calls.
  let limited = null;
  for (let i = 0; i < 5 && !limited; i++) {
    try {
      await once.account('nobody');
    } catch (e) {
      if (e instanceof RateLimited) limited = e;
      else if (!(e instanceof NotFound)) throw e;
    }
  }
  assert.ok(limited, '5 calls in a row at --rate 1 --burst 1, none rate limited');
  assert.equal(limited.code, 'RATELIMIT');
  assert.ok(limited.retryAfter >= 1);
  const t0 = Date.now();
  await rejects(new Client(url, T_READ, { retries: 3, timeout: 5000 }).account('nobody'), NotFound);
  assert.ok(Date.now() - t0 >= 500, 'it waited for the bucket');
  slow.stop();
});

test('unavailable while draining', async () => {
  const d = new Daemon(['--drain-ms', '8000']);
  const url = await d.listening();
  const { hostname, port } = new globalThis.URL(url);
  // A request still sending its body keeps the drain waiting.
  const slow = createConnection({ host: hostname, port: Number(port) });
  await new Promise((r) => slow.on('connect', r));
  slow.write(`POST /v1/c/x/count HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${T_READ}\r\n`
    + 'Content-Type: application/json\r\nContent-Length: 20\r\n\r\n{');
  try {
    await sleep(200);
    d.proc.kill('SIGTERM');
    await d.waitLog('draining');
    await rejects(new Client(url, T_READ, { retries: 0 }).account('x'), Unavailable, (e) => {
      assert.equal(e.code, 'DRAINING');
      assert.equal(e.status, 503);
      assert.equal(e.retryAfter, 1);
    });
    assert.equal(await new Client(url).ready(), false);
  } finally {
    slow.destroy();
  }
  assert.equal(await d.exitCode(10000), 0);
});

// ---- admin (last: the audit sees everything above) ------------------------------------

test('audit and recover', async () => {
  const admin = new Client(URL, T_ADMIN);
  const report = await admin.audit();
  assert.equal(report.clean, true, JSON.stringify(report.findings));
  assert.equal(report.patterns.transfer.in_flight, 0);
  const summary = await admin.recover();
  assert.ok('transfer' in summary.patterns);
});
