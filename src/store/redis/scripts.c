/* scripts.c -- the Lua scripts of the Redis backend.
 *
 * The scripts know nothing of doctx's semantics: filters, updates and
 * index keys are evaluated in C (src/doc), once.  A script only makes one
 * bucket's bookkeeping atomic with a document's compare-and-set: it
 * checks a version and a catalog stamp and then writes bytes it was
 * given.  Every key a script touches carries the hash tag of the bucket
 * (or is the one key passed), so each runs on one slot of one node --
 * except RD_S_MRANGE, which reads several buckets and is sent only to a
 * standalone server, where every slot lives on the one node.
 *
 * Replies are arrays whose first element says what happened; the C side
 * (docs.c, plan.c, catalog.c) documents the layout next to each use.
 * The read scripts declare no-writes (Redis 7 script flags), so a master
 * that pauses writes (CLUSTER FAILOVER) still answers them: a scan's
 * buckets are then read in one round rather than some of them seconds
 * later. */
#include "store/redis/redis_int.h"

/* RD_S_WRITE
 * KEYS: doc, members zset, stamp, tombstones set, index zsets...
 * ARGV: 1 expected version ('' = no key), 2 new version, 3 stamp,
 *       4 op (i insert, u update, d delete, c check only), 5 body,
 *       6 members entry, 7 seq, 8 not_before, 9 not_after (wall-clock
 *       ms, '' = none; not for c), 10 (d) the fence record the deleted
 *       document leaves ('' = none),
 *       then nrel and that many claim fields to release (their values are
 *       returned), then nrec and that many field/value pairs to record,
 *       then per index zset: nrem entries..., nadd entries...
 * Returns {-1, stamp} on a stale catalog, {0, v, s, b, f} when the
 * version differs (the current state), {-3, server ms} when the server's
 * TIME is outside [not_before, not_after] (a time-bounded write, window.c:
 * read here, in the write's atomic step), else {1, released values...}.
 *
 * A fence tombstone (src/store/fence.c) is the deleted document's key
 * kept with a version and its fence record f, no body, no expiry, listed
 * in the bucket's tombstones set (by _id) so a drop finds it; reads see
 * no body, so to them it is absent.  An insert over it (C has folded f
 * into the new body, decided on this very version) drops f and the
 * listing.  KEYS[4] is not passed for 'c', which returns first. */
static const char S_WRITE[] =
    /* ZADD/ZREM entries ARGV[p+1..p+n], a few hundred per call: a write
     * of a document with a large indexed array then blocks the server for
     * a fraction of the time one call per entry takes. */
    "local function each(cmd, key, p, n)\n"
    "  local i = 1\n"
    "  while i <= n do\n"
    "    local a = {}\n"
    "    local j = i\n"
    "    while j <= n and j < i + 256 do\n"
    "      if cmd == 'ZADD' then a[#a + 1] = 0 end\n"
    "      a[#a + 1] = ARGV[p + j]\n"
    "      j = j + 1\n"
    "    end\n"
    "    redis.call(cmd, key, unpack(a))\n"
    "    i = j\n"
    "  end\n"
    "end\n"
    "local st = redis.call('GET', KEYS[3]) or '1'\n"
    "if st ~= ARGV[3] then return {-1, st} end\n"
    "local cur = redis.call('HMGET', KEYS[1], 'v', 's', 'b')\n"
    "local v = cur[1] or ''\n"
    "if v ~= ARGV[1] then\n"
    "  local f = redis.call('HGET', KEYS[1], 'f') or ''\n"
    "  return {0, v, cur[2] or '', cur[3] or '', f}\n"
    "end\n"
    "local op = ARGV[4]\n"
    "if op == 'c' then return {1} end\n"
    "if ARGV[8] ~= '' or ARGV[9] ~= '' then\n"
    "  local t = redis.call('TIME')\n"
    "  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "  if (ARGV[8] ~= '' and now < tonumber(ARGV[8])) or\n"
    "     (ARGV[9] ~= '' and now > tonumber(ARGV[9])) then\n"
    "    return {-3, now}\n"
    "  end\n"
    "end\n"
    "local p = 11\n"
    "local out = {1}\n"
    "local n = tonumber(ARGV[p])\n"
    "for i = 1, n do\n"
    "  local f = ARGV[p + i]\n"
    "  out[#out + 1] = redis.call('HGET', KEYS[1], f) or ''\n"
    "  redis.call('HDEL', KEYS[1], f)\n"
    "end\n"
    "p = p + n + 1\n"
    "if op == 'd' then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  redis.call('ZREM', KEYS[2], ARGV[6])\n"
    "  if ARGV[10] ~= '' then\n"
    "    redis.call('HSET', KEYS[1], 'v', ARGV[2], 'f', ARGV[10])\n"
    "    redis.call('SADD', KEYS[4], string.sub(ARGV[6], 17))\n"
    "  end\n"
    "elseif op == 'i' then\n"
    "  if redis.call('HDEL', KEYS[1], 'f') == 1 then\n"
    "    redis.call('SREM', KEYS[4], string.sub(ARGV[6], 17))\n"
    "  end\n"
    "  redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[7], 'b', ARGV[5])\n"
    "  redis.call('PERSIST', KEYS[1])\n"
    "  redis.call('ZADD', KEYS[2], 0, ARGV[6])\n"
    "else\n"
    "  redis.call('HSET', KEYS[1], 'v', ARGV[2], 'b', ARGV[5])\n"
    "end\n"
    "n = tonumber(ARGV[p])\n"
    "if op ~= 'd' then\n"
    "  for i = 1, n do\n"
    "    redis.call('HSET', KEYS[1], ARGV[p + 2 * i - 1], ARGV[p + 2 * i])\n"
    "  end\n"
    "end\n"
    "p = p + 2 * n + 1\n"
    "for k = 5, #KEYS do\n"
    "  n = tonumber(ARGV[p])\n"
    "  each('ZREM', KEYS[k], p, n)\n"
    "  p = p + n + 1\n"
    "  n = tonumber(ARGV[p])\n"
    "  each('ZADD', KEYS[k], p, n)\n"
    "  p = p + n + 1\n"
    "end\n"
    "return out\n";

/* RD_S_READDOC  KEYS: doc, stamp.  Returns {stamp, v, s, b, f} (f: a
 * fence tombstone's record). */
static const char S_READDOC[] =
    "#!lua flags=no-writes\n"
    "local st = redis.call('GET', KEYS[2]) or '1'\n"
    "local d = redis.call('HMGET', KEYS[1], 'v', 's', 'b', 'f')\n"
    "return {st, d[1] or '', d[2] or '', d[3] or '', d[4] or ''}\n";

/* RD_S_RANGE
 * KEYS: a bucket zset (members or an index), stamp
 * ARGV: 1 min, 2 max (ZRANGEBYLEX syntax), 3 limit, 4 doc key prefix,
 *       5 'm' for the members zset (entry = 16-digit seq, id) or 'x' for
 *       an index (entry = key, seq, id, 4-byte id length),
 *       6 'v' for versions only (optional)
 * Returns {stamp, entries read, last entry, then per distinct document:
 * id, v, s, b} (or id, v with 'v').  The documents are read without being declared (they are
 * in the zset's slot); a listed document that is missing can only be one
 * that a slot migration has not moved here yet (a document and its
 * entries change together), so the read fails with TRYAGAIN rather than
 * answer without it.
 *
 * RANGE_FN is that body as a Lua function, shared by RD_S_RANGE and
 * RD_S_MRANGE so the two cannot drift apart. */
#define RANGE_FN                                                              \
  "local function range(zk, sk, lo, hi, lim, pre, kind, vo)\n"               \
  "  local st = redis.call('GET', sk) or '1'\n"                              \
  "  local ms = redis.call('ZRANGEBYLEX', zk, lo, hi,"                       \
  " 'LIMIT', 0, tonumber(lim))\n"                                            \
  "  local out = {st, #ms, ms[#ms] or ''}\n"                                 \
  "  local seen = {}\n"                                                      \
  "  for _, m in ipairs(ms) do\n"                                            \
  "    local id\n"                                                           \
  "    if kind == 'm' then id = string.sub(m, 17)\n"                         \
  "    else\n"                                                               \
  "      local n = #m\n"                                                     \
  "      local a, b, c, d = string.byte(m, n - 3, n)\n"                      \
  "      local l = ((a * 256 + b) * 256 + c) * 256 + d\n"                    \
  "      id = string.sub(m, n - 3 - l, n - 4)\n"                             \
  "    end\n"                                                                \
  "    if not seen[id] then\n"                                               \
  "      seen[id] = true\n"                                                  \
  "      local d = redis.call('HMGET', pre .. id, 'v', 's', 'b')\n"          \
  "      if not d[3] then\n"                                                 \
  "        return redis.error_reply('TRYAGAIN document not here yet')\n"     \
  "      end\n"                                                              \
  "      out[#out + 1] = id\n"                                               \
  "      out[#out + 1] = d[1]\n"                                             \
  "      if vo ~= 'v' then\n"                                                \
  "        out[#out + 1] = d[2] or ''\n"                                     \
  "        out[#out + 1] = d[3]\n"                                           \
  "      end\n"                                                              \
  "    end\n"                                                                \
  "  end\n"                                                                  \
  "  return out\n"                                                           \
  "end\n"

static const char S_RANGE[] =
    "#!lua flags=no-writes\n" RANGE_FN
    "return range(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4],"
    " ARGV[5], ARGV[6])\n";

/* RD_S_MRANGE  (standalone servers only: its keys span slots)
 * KEYS: k pairs of a bucket zset and its stamp
 * ARGV: per pair, RD_S_RANGE's six arguments (the sixth '' or 'v')
 * Returns k replies, each exactly RD_S_RANGE's for that pair, or the
 * first error one of them raised.  Each sub-range keeps its own limit,
 * and a caller sends at most RD_MRANGE_MAX pairs, so one call reads at
 * most that many pages: a scatter over a standalone server's buckets
 * costs one script call instead of one per bucket. */
static const char S_MRANGE[] =
    "#!lua flags=no-writes\n" RANGE_FN
    "local all = {}\n"
    "for i = 1, #KEYS / 2 do\n"
    "  local a = (i - 1) * 6\n"
    "  local r = range(KEYS[2 * i - 1], KEYS[2 * i], ARGV[a + 1],"
    " ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6])\n"
    "  if r.err then return r end\n"
    "  all[i] = r\n"
    "end\n"
    "return all\n";

/* RD_S_COUNT  KEYS: members zset, stamp.  Returns {stamp, count}. */
static const char S_COUNT[] =
    "#!lua flags=no-writes\n"
    "local st = redis.call('GET', KEYS[2]) or '1'\n"
    "return {st, redis.call('ZCARD', KEYS[1])}\n";

/* RD_S_FENCE  KEYS: the claim owner's doc.
 * ARGV: 1 record field, 2 claim value, 3 new version, 4 tombstone ttl ms.
 * Returns 0 when the owner records that very claim (it is held), else
 * bumps the owner's version, so that any write of it in flight fails, and
 * returns 1.  A missing owner gets a tombstone (a version, no body) that
 * expires. */
static const char S_FENCE[] =
    "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return 0 end\n"
    "local exists = redis.call('EXISTS', KEYS[1])\n"
    "redis.call('HSET', KEYS[1], 'v', ARGV[3])\n"
    "if exists == 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end\n"
    "return 1\n";

/* RD_S_CLAIM  KEYS: claim.  ARGV: 1 expected ('' = none), 2 new value.
 * Returns {1} when set, else {0, current value}. */
static const char S_CLAIM[] =
    "local c = redis.call('GET', KEYS[1]) or ''\n"
    "if c ~= ARGV[1] then return {0, c} end\n"
    "redis.call('SET', KEYS[1], ARGV[2])\n"
    "return {1}\n";

/* RD_S_UNCLAIM  KEYS: claim.  ARGV: value.  Deletes it if unchanged. */
static const char S_UNCLAIM[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('DEL', KEYS[1])\n"
    "end\n"
    "return 0\n";

/* RD_S_CATSET  KEYS: catalog hash.
 * ARGV: 1 collection, 2 expected text ('' = none), 3 new text ('' = delete).
 * Returns {1} when done, else {0, current}. */
static const char S_CATSET[] =
    "local c = redis.call('HGET', KEYS[1], ARGV[1]) or ''\n"
    "if c ~= ARGV[2] then return {0, c} end\n"
    "if ARGV[3] == '' then redis.call('HDEL', KEYS[1], ARGV[1])\n"
    "else redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end\n"
    "return {1}\n";

/* RD_S_STAMP  KEYS: stamp.  ARGV: version.  Raises it, never lowers it,
 * never revives a dropped bucket.  Returns 1, or 0 when dropped. */
static const char S_STAMP[] =
    "local c = redis.call('GET', KEYS[1]) or '1'\n"
    "if c == 'dropped' then return 0 end\n"
    "if tonumber(c) < tonumber(ARGV[1]) then\n"
    "  redis.call('SET', KEYS[1], ARGV[1])\n"
    "end\n"
    "return 1\n";

/* RD_S_DROP  KEYS: stamp, members zset, tombstones set, index zsets...
 * ARGV: 1 doc key prefix, 2 ttl ms of the 'dropped' stamp.
 * Marks the bucket dropped (late writers see a stale catalog), deletes its
 * documents, fence tombstones and zsets, and returns the claim records
 * the documents held
 * (field, value pairs) so the caller can release them.  Like RANGE it
 * fails with TRYAGAIN, before changing anything, while a slot migration
 * has moved only part of the bucket here. */
static const char S_DROP[] =
    "local ms = redis.call('ZRANGE', KEYS[2], 0, -1)\n"
    "for _, m in ipairs(ms) do\n"
    "  if redis.call('EXISTS', ARGV[1] .. string.sub(m, 17)) == 0 then\n"
    "    return redis.error_reply('TRYAGAIN document not here yet')\n"
    "  end\n"
    "end\n"
    "redis.call('SET', KEYS[1], 'dropped', 'PX', ARGV[2])\n"
    "local out = {}\n"
    "for _, m in ipairs(ms) do\n"
    "  local k = ARGV[1] .. string.sub(m, 17)\n"
    "  local h = redis.call('HGETALL', k)\n"
    "  for i = 1, #h, 2 do\n"
    "    if string.sub(h[i], 1, 1) == 'u' then\n"
    "      out[#out + 1] = h[i]\n"
    "      out[#out + 1] = h[i + 1]\n"
    "    end\n"
    "  end\n"
    "  redis.call('DEL', k)\n"
    "end\n"
    "for _, t in ipairs(redis.call('SMEMBERS', KEYS[3])) do\n"
    "  redis.call('DEL', ARGV[1] .. t)\n"
    "end\n"
    "for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end\n"
    "return out\n";

/* RD_S_REBODY  KEYS: doc.  ARGV: 1 its body as read, 2 the same
 * document's new bytes (format.c: JSON text -> BSON).  Returns {1} when
 * the body was still ARGV[1] and is now ARGV[2], else {0, current body}
 * ('' when none).  The version is left alone: the document's value does
 * not change, so no writer's compare-and-set should fail for it. */
static const char S_REBODY[] =
    "local c = redis.call('HGET', KEYS[1], 'b') or ''\n"
    "if c ~= ARGV[1] then return {0, c} end\n"
    "redis.call('HSET', KEYS[1], 'b', ARGV[2])\n"
    "return {1}\n";

const char *const dtx__rd_scripts[RD_NSCRIPTS] = {
    [RD_S_WRITE] = S_WRITE,     [RD_S_READDOC] = S_READDOC,
    [RD_S_RANGE] = S_RANGE,     [RD_S_COUNT] = S_COUNT,
    [RD_S_FENCE] = S_FENCE,     [RD_S_CLAIM] = S_CLAIM,
    [RD_S_UNCLAIM] = S_UNCLAIM, [RD_S_CATSET] = S_CATSET,
    [RD_S_STAMP] = S_STAMP,     [RD_S_DROP] = S_DROP,
    [RD_S_MRANGE] = S_MRANGE,   [RD_S_REBODY] = S_REBODY,
};
