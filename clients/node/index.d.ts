// TypeScript declarations for the doctx client (index.js): every method,
// option and answer of doctxd's routes (docs/server.md, docs/clients.md).

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object: a document, a filter, an update... */
export type JsonObject = { [key: string]: Json };

/** The problem+json body of an error answer, with any extra members. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  [key: string]: Json | undefined;
}

/** An error answer from doctxd, or no answer at all (TransportError). */
export class DoctxError extends Error {
  constructor(status: number, code: string, title: string, detail: string,
    problem?: Problem, retryAfter?: number | null, options?: { cause?: unknown });
  /** The HTTP status; 0 when no answer came. */
  readonly status: number;
  /** The library's error name (NOMATCH, DUPKEY, INSUFFICIENT, STALE, FENCED...) or the server's own (RATELIMIT, DRAINING...). */
  readonly code: string;
  readonly title: string;
  /** The text the CLI prints for the same error. */
  readonly detail: string;
  /** The whole problem object (a failed transfer's `transfer`, a partial insert's `inserted`...). */
  readonly problem: Problem;
  /** Retry-After in seconds, or null. */
  readonly retryAfter: number | null;
}
/** 400: bad input; nothing was written. */
export class BadRequest extends DoctxError {}
/** 401: no token, or an unknown one. */
export class Unauthorized extends DoctxError {}
/** 403: the token lacks the route's scope. */
export class Forbidden extends DoctxError {}
/** 404: no such route, transfer or account. */
export class NotFound extends DoctxError {}
/** 405: a known path with another method. */
export class MethodNotAllowed extends DoctxError {}
/** 409: a condition or constraint failed; `code` says which. */
export class Conflict extends DoctxError {}
/** 413: a body over 1 MiB. */
export class TooLarge extends DoctxError {}
/** 429: over the token's rate; `retryAfter` says when to come back. */
export class RateLimited extends DoctxError {}
/** 500 and other 5xx but 503: the server's or the store's own failure. */
export class ServerError extends DoctxError {}
/** 503: the store is away or busy, or doctxd is draining. */
export class Unavailable extends DoctxError {}
/** No HTTP answer (status 0, code CONNECTION or TIMEOUT); `cause` holds fetch's error. */
export class TransportError extends DoctxError {}

/** The error for an error answer: its status's class, the problem's fields. */
export function errorFrom(status: number, problem: unknown, retryAfter?: number | null): DoctxError;
/** A fresh client id: PREFIX- and 32 random hex digits. */
export function newId(prefix?: string): string;

export interface ClientOptions {
  /** Milliseconds a call may take in all, attempts and waits included (default 30000). */
  timeout?: number;
  /** How many more attempts an idempotent call gets at most (default 6). */
  retries?: number;
  /** The first wait between attempts, in ms (default 100); it doubles, with jitter. */
  backoff?: number;
  /** The longest wait the backoff reaches, in ms (default 2000). */
  maxBackoff?: number;
}

// ---- answers ---------------------------------------------------------------

export interface Page<T = JsonObject> { docs: T[]; next: string | null }
export interface InsertResult { inserted: number; ids: Json[] }
export interface UpdateResult { matched: number; modified: number; upserted?: Json }
export interface IndexInfo { name: string; key: JsonObject; unique: boolean; sparse: boolean }

export interface Account {
  _id: string;
  balance: number;
  min_balance: number | null;
  opening_balance: number;
  ceiling: number;
  pending: Json[];
  voids: Json[];
  [key: string]: Json;
}

export type TransferState = 'initiated' | 'preparing' | 'prepared' | 'committed' | 'succeeded'
  | 'failed' | 'cancelling' | string;

export interface Transfer {
  _id: string;
  from: string;
  to: string;
  amount: number;
  state: TransferState;
  reason: string | null;
  owner: string | null;
  lease_until: number;
  epoch: number;
  created: number;
  updated: number;
  [key: string]: Json;
}

/** One item of a batch's answer: the transfer, or a problem object. */
export type BatchResult = { status: 200; transfer: Transfer } | (Problem & { status: number; transfer?: Transfer });

export interface TransferRequest { from: string; to: string; amount: number; id?: string }

/** The audit's report (doctx audit --json) plus `clean`. */
export interface AuditReport { clean: boolean; ok: boolean; findings: JsonObject[]; unsettled: number;
  patterns: { [pattern: string]: JsonObject }; [key: string]: Json }

/** A step of a transaction script (docs/transactions.md, "Scripts"): one of
 * {find_one, filter, as}, {find, filter, limit, as}, {require, filter},
 * {insert, doc}, {update, filter, with, upsert?}, {delete, filter}. */
export type TxnStep = JsonObject;
export interface TxnOptions { isolation?: 'snapshot' | 'serializable'; id?: string; leaseMs?: number; deadlineMs?: number }
/** committed, or aborted by a require (nothing written). */
export interface TxnResult { outcome: 'committed' | 'aborted'; reads: { [name: string]: Json } }

// ---- options ---------------------------------------------------------------

export interface FindOptions { sort?: JsonObject; limit?: number; skip?: number; projection?: JsonObject; after?: string }
export interface WriteOptions { bypassValidation?: boolean }
export interface FencedOptions extends WriteOptions {
  /** "NAME:TOKEN" of a held lock (docs/locks.md). */
  fence?: string;
}
export interface UpdateOptions extends FencedOptions { many?: boolean; upsert?: boolean; arrayFilters?: JsonObject[] }
export interface FindAndModifyOptions extends FencedOptions {
  sort?: JsonObject; projection?: JsonObject; new?: boolean; upsert?: boolean; arrayFilters?: JsonObject[];
}
export interface DeleteOptions extends FencedOptions { many?: boolean }
export interface IndexOptions extends WriteOptions { unique?: boolean; sparse?: boolean; name?: string }
export interface AccountOptions { balance?: number; minBalance?: number | 'none' }
export interface TransferOptions { id?: string; async?: boolean; deadlineMs?: number }
export interface RecoverOptions { olderThanMs?: number; tombstoneTtlMs?: number; deadlineMs?: number; retentionMs?: number }

// ---- the job queue ---------------------------------------------------------

export type JobState = 'ready' | 'delayed' | 'running' | 'succeeded' | 'dead' | 'canceled';
export interface Job {
  _id: string;
  queue: string;
  type: string;
  payload: Json;
  state: JobState;
  priority: number;
  attempts: number;
  max_attempts: number;
  /** The attempt's fencing number, on a claimed (running) job. */
  epoch?: number;
  /** The last progress its running attempt reported (doctx job progress). */
  progress?: Json;
  [key: string]: Json | undefined;
}
export interface AddJobOptions {
  /** A client id: the call is retried, and the same id and content answer the job recorded. */
  id?: string;
  priority?: number;
  delayMs?: number;
  maxAttempts?: number;
  backoffMs?: number;
  uniqueKey?: string;
}
export interface QueueStats { ready: number; delayed: number; running: number; succeeded: number;
  dead: number; canceled: number; total: number; paused: boolean; max_running: number | null;
  rate: QueueRate | null }
export interface QueueRate { n: number; ms: number; group?: string }
export interface QueueSettings { queue: string; paused: boolean; gen: number; max_running: number | null; rate: QueueRate | null }
/** One transition of a job (docs/jobs.md, "Events"). */
export interface JobEvent { cursor: number; queue: string; job: string; born: number; n: number;
  event: string; at: number; epoch: number | null; from: string | null; to: string | null;
  data?: Record<string, unknown> }

// ---- locks, ledger, sync, orders, versions ------------------------------------

export interface Lock { name: string; owner: string | null; token: number; expires: number; held?: boolean; [key: string]: Json | undefined }
export interface AcquireOptions { ttlMs?: number; owner?: string; waitMs?: number; deadlineMs?: number; max?: number }
export interface Leader { name: string; leader: string | null; term: number; expires: number }

/** A leg's value: an integer, or one balancing pair per entry -- "-max" or
 *  "-max=CAP" on one leg, "max" on another (docs/ledger.md, "Balancing legs"). */
export type LegValue = number | '-max' | `-max=${number}` | 'max';
export interface Leg { account: string; value: LegValue }
/** A partial post's amount on one leg of a hold (an integer). */
export interface Amount { account: string; value: number }
export interface LedgerAccountOptions {
  /** The floor (debits), an integer or "none"; unset: 0. */
  minBalance?: number | 'none';
  /** The upper limit (credits, pending ones counted), an integer or "none"; unset: none. */
  maxBalance?: number | 'none';
  /** "CODE/SCALE", e.g. "USD/2"; fixed for good. */
  asset?: string;
}
export interface LedgerEntry { _id: string; changes: JsonObject[]; state: string; [key: string]: Json }
export interface LedgerBalance { account: string; balance: number; available: number; pending_debits: number; seq: number }
export interface PostOptions {
  id?: string; pending?: boolean; timeoutMs?: number; deadlineMs?: number;
  /** A JSON object (at most 4 KiB) kept with the entry, never changed. */
  meta?: JsonObject;
  /** 1..256 bytes naming what the entry belongs to outside the ledger. */
  ref?: string;
}
export interface BatchEntry { legs: Leg[]; id?: string; pending?: boolean; timeoutMs?: number; meta?: JsonObject; ref?: string }
/** A partial post of a hold: amounts per leg (the rest released), named by postId. */
export interface PostPendingOptions { amounts?: Amount[]; postId?: string }
/** account alone, or ref and/or metaFilter (a filter over the meta object). */
export interface EntriesOptions { account?: string; ref?: string; metaFilter?: JsonObject; pageSize?: number; startAfter?: string }
/** One item of a ledger batch's answer: the entry, or a problem object. */
export type EntryResult = { status: 200; entry: LedgerEntry } | (Problem & { status: number });

export interface SyncRuleSpec { master: string; dependents: string; link: string; copy: string }
export interface ExecOptions { leaseMs?: number; owner?: string; deadlineMs?: number }

export interface Order { _id: string; account: string; amount: number; settlement: string; state: string; [key: string]: Json }
/** One item of a confirm of several: the order, or a problem object. */
export type OrderResult = { status: 200; order: Order } | (Problem & { status: number });

export interface PutVersionOptions {
  /** KEY -> the child document to set. */
  child?: { [key: string]: JsonObject };
  /** The child keys to drop. */
  removeChild?: string[];
  /** Conflict CONFLICT unless this is the current version. */
  expectVersion?: number;
}
export interface ItemVersion { item: string; version: number; root: JsonObject; children: { [key: string]: JsonObject } }

export class Client {
  constructor(baseUrl: string, token?: string, opts?: ClientOptions);
  readonly baseUrl: string;
  token?: string;
  timeout: number;
  retries: number;
  backoff: number;
  maxBackoff: number;

  // documents
  /** One page of the matches; pass `next` back as `after` for the next. */
  find<T = JsonObject>(coll: string, filter?: JsonObject, opts?: FindOptions): Promise<Page<T>>;
  count(coll: string, filter?: JsonObject): Promise<number>;
  /** Not retried. */
  insert(coll: string, docs: JsonObject[], opts?: WriteOptions): Promise<InsertResult>;
  /** Not retried. */
  update(coll: string, filter: JsonObject, update: JsonObject | JsonObject[], opts?: UpdateOptions): Promise<UpdateResult>;
  /** Conflict NOMATCH when none matched.  Not retried. */
  findAndModify<T = JsonObject>(coll: string, filter: JsonObject, update: JsonObject | JsonObject[],
    opts?: FindAndModifyOptions): Promise<T>;
  /** How many were deleted.  Not retried. */
  delete(coll: string, filter: JsonObject, opts?: DeleteOptions): Promise<number>;
  /** One result per op.  Not retried. */
  bulk(coll: string, ops: JsonObject[]): Promise<JsonObject[]>;
  aggregate<T = JsonObject>(coll: string, pipeline: JsonObject[]): Promise<T[]>;
  indexes(coll: string): Promise<IndexInfo[]>;
  /** The index's name.  Not retried. */
  createIndex(coll: string, keys: JsonObject, opts?: IndexOptions): Promise<string>;

  // accounts and transfers
  /** Conflict DUPKEY if it exists.  Not retried. */
  createAccount(id: string, opts?: AccountOptions): Promise<Account>;
  /** NotFound NOACCOUNT if none. */
  account(id: string): Promise<Account>;
  accounts(opts?: { pageSize?: number; startAfter?: string }): AsyncGenerator<Account, void, undefined>;
  /** Always retried safely: without an id the client makes one. */
  transfer(from: string, to: string, amount: number, opts?: TransferOptions): Promise<Transfer>;
  /** Items without an id get one; retried safely. */
  transferBatch(transfers: TransferRequest[], opts?: { deadlineMs?: number }): Promise<BatchResult[]>;
  getTransfer(id: string): Promise<Transfer>;
  transfers(opts?: { state?: TransferState; pageSize?: number; startAfter?: string }): AsyncGenerator<Transfer, void, undefined>;
  /** Conflict STATE once it has committed.  Not retried. */
  cancelTransfer(id: string): Promise<Transfer>;

  // the job queue
  /** Retried only with an id. */
  addJob(queue: string, type: string, payload?: Json, opts?: AddJobOptions): Promise<Job>;
  /** Up to n due jobs, each running with its epoch.  Not retried. */
  claim(queue: string, opts?: { n?: number; leaseMs?: number; owner?: string }): Promise<Job[]>;
  /** Conflict STALE once the attempt is superseded.  Retried. */
  heartbeat(id: string, epoch: number, opts?: { leaseMs?: number }): Promise<Job>;
  /** An attempt's progress (any JSON, <= 4096 bytes); Conflict STALE once superseded.  Retried. */
  progress(id: string, epoch: number, value: Json): Promise<Job>;
  /** A repeat answers the same.  Retried. */
  complete(id: string, epoch: number, opts?: { result?: Json }): Promise<Job>;
  /** A repeat answers the same.  Retried. */
  fail(id: string, epoch: number, opts?: { error?: string }): Promise<Job>;
  /** A dead job ready again; Conflict STATE otherwise.  Not retried. */
  retryJob(id: string): Promise<Job>;
  /** Ready or delayed: canceled; running: the cancel recorded (its heartbeat then STATE).  A repeat answers the same.  Retried. */
  cancelJob(id: string): Promise<Job>;
  /** At most once per (job, key); applied false when it was before.  Retried. */
  effect(id: string, epoch: number, key: string, coll: string, filter: JsonObject, update: JsonObject,
    opts?: { fence?: string }): Promise<{ applied: boolean }>;
  job(id: string): Promise<Job>;
  jobs(queue: string, opts?: { state?: JobState; pageSize?: number; startAfter?: string }): AsyncGenerator<Job, void, undefined>;
  queueStats(queue: string): Promise<QueueStats>;
  jobEvents(
    queue: string,
    opts?: { after?: number; limit?: number; waitMs?: number },
  ): Promise<{ events: JobEvent[]; cursor: number }>;
  /** Adds or replaces a schedule (a new gen).  Retried. */
  scheduleJob(name: string, queue: string, type: string, payload?: Json,
    opts?: { cron?: string; everyMs?: number; missed?: 'run-once' | 'skip'; graceMs?: number;
      priority?: number; maxAttempts?: number; backoffMs?: number }): Promise<JsonObject>;
  jobSchedules(opts?: { queue?: string }): Promise<{ schedules: JsonObject[] }>;
  /** NotFound if none.  Not retried. */
  unscheduleJob(name: string): Promise<JsonObject>;
  /** Admin scope: every queue with settings.  Retried. */
  jobQueues(): Promise<{ queues: QueueSettings[] }>;
  /** Admin scope: claims stop, running jobs finish.  Retried. */
  pauseQueue(queue: string): Promise<QueueSettings>;
  /** Admin scope.  Retried. */
  resumeQueue(queue: string): Promise<QueueSettings>;
  /** Admin scope: at most maxRunning run at once; 'none' lifts it; null
   *  leaves it.  opts.rate 'N/MS' ('none' lifts it), per opts.rateGroup.  Retried. */
  setQueue(queue: string, maxRunning?: number | 'none' | null,
           opts?: { rate?: string; rateGroup?: string }): Promise<QueueSettings>;

  // locks
  /** Conflict NOMATCH (naming the holder) while held.  Not retried. */
  acquire(name: string, opts?: AcquireOptions): Promise<Lock>;
  /** Waits until it leads; the token is the term.  Not retried. */
  campaign(name: string, opts?: Omit<AcquireOptions, 'max'>): Promise<Lock>;
  leader(name: string): Promise<Leader>;
  /** Conflict NOMATCH when token is not current.  Not retried. */
  renew(name: string, token: number, opts?: { ttlMs?: number }): Promise<Lock>;
  /** Not retried. */
  release(name: string, token: number): Promise<Lock>;
  lock(name: string): Promise<Lock>;
  locks(opts?: { pageSize?: number; startAfter?: string }): AsyncGenerator<Lock, void, undefined>;
  /** Admin scope.  Not retried. */
  forceRelease(name: string, opts?: { token?: number }): Promise<Lock>;

  // ledger
  /** Not retried. */
  ledgerAccount(id: string, opts?: LedgerAccountOptions): Promise<JsonObject>;
  /** Changes the limits given (at least one), the other kept. */
  ledgerLimit(id: string, minBalance?: number | 'none', opts?: { maxBalance?: number | 'none' }): Promise<JsonObject>;
  closeAccount(id: string, opts?: { deadlineMs?: number }): Promise<LedgerEntry>;
  balance(account: string, opts?: { atSeq?: number }): Promise<LedgerBalance>;
  statement(account: string, opts?: { fromSeq?: number; pageSize?: number }): AsyncGenerator<JsonObject, void, undefined>;
  /** Retried only with an id (the same id, legs, meta and ref: the same entry, posted once). */
  post(legs: Leg[], opts?: PostOptions): Promise<LedgerEntry>;
  /** Retried only when every entry has an id. */
  postBatch(entries: BatchEntry[], opts?: { deadlineMs?: number }): Promise<EntryResult[]>;
  /** Not retried. */
  postPending(id: string, opts?: PostPendingOptions): Promise<LedgerEntry>;
  /** Not retried. */
  void(id: string): Promise<LedgerEntry>;
  /** Not retried. */
  reverse(entryId: string, opts?: { id?: string; deadlineMs?: number }): Promise<LedgerEntry>;
  entry(id: string): Promise<LedgerEntry>;
  entries(opts?: EntriesOptions): AsyncGenerator<LedgerEntry, void, undefined>;
  /** Admin scope; idempotent, so it is retried. */
  uniqueRefs(): Promise<JsonObject>;

  // sync
  /** The same rule again answers the same: retried. */
  syncRule(name: string, spec: SyncRuleSpec): Promise<JsonObject>;
  /** Not retried. */
  syncUpdate(name: string, masterId: string, update: JsonObject, opts?: ExecOptions): Promise<JsonObject>;
  sync(name: string): Promise<JsonObject>;
  /** Admin scope.  Not retried. */
  syncRepair(opts?: { olderThanMs?: number; deadlineMs?: number }): Promise<JsonObject>;

  // orders
  /** Idempotent by trade id: retried. */
  createOrder(tradeId: string, account: string, amount: number, opts?: { settlement?: string }): Promise<Order>;
  /** Credited once: retried. */
  confirmOrder(tradeId: string, opts?: ExecOptions): Promise<Order>;
  /** Retried. */
  confirmOrders(tradeIds: string[], opts?: ExecOptions): Promise<OrderResult[]>;
  /** Not retried. */
  cancelOrder(tradeId: string): Promise<Order>;
  order(tradeId: string): Promise<Order>;
  orders(opts?: { state?: string; pageSize?: number; startAfter?: string }): AsyncGenerator<Order, void, undefined>;

  // versions
  /** Not retried. */
  putVersion(item: string, root: JsonObject, opts?: PutVersionOptions): Promise<{ item: string; version: number }>;
  version(item: string, opts?: { version?: number }): Promise<ItemVersion>;
  versionHistory(item: string): Promise<JsonObject[]>;
  /** Admin scope.  Not retried. */
  versionGc(opts?: { keep?: number; graceMs?: number }): Promise<JsonObject>;

  // transactions (docs/transactions.md)
  /** Not retried: on Unavailable or TransportError ask txnShow(id). */
  txn(script: TxnStep[], opts?: TxnOptions): Promise<TxnResult>;
  /** Write scope: an id with no record is fenced (aborted). */
  txnShow(id: string): Promise<{ id: string; outcome: 'committed' | 'aborted' | 'unknown' }>;

  // admin
  audit(opts?: { settled?: boolean }): Promise<AuditReport>;
  /** Not retried. */
  recover(opts?: RecoverOptions): Promise<JsonObject>;

  /** Admin scope: {now, window_s, classes, series, counts, uptime_s} (docs/admin.md). */
  adminStats(): Promise<JsonObject>;

  // operations
  health(): Promise<{ status: 'ok' }>;
  /** False on 503 (draining, or the store away); asked once. */
  ready(): Promise<boolean>;
  /** The OpenAPI 3.1 description of every route. */
  openapi(): Promise<JsonObject>;
  metrics(): Promise<string>;
}
