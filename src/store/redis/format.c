/* format.c -- a namespace's format key, and the upgrade of a namespace
 * written before bodies were BSON (docs/engine.md, "The store format").
 *
 * The key is KP "{cat}:format" (the catalog's hash tag, so the catalog's
 * slot) and holds the namespace's format number.  Absent means format 3:
 * every namespace written before this key existed, whose bodies are JSON
 * text.  Format 4 bodies are BSON (docs.c).  Opening a namespace:
 *   - format 4: nothing to do (one GET);
 *   - no catalog at all: nothing written yet, so it is format 4 at once;
 *   - format 3: every body is rewritten JSON -> BSON, one compare-and-set
 *     each (RD_S_REBODY: the body's bytes unchanged -> the new bytes; the
 *     version stays, as the document's value does), then the key is set;
 *   - any other value: refused, as SQLite refuses a format it does not
 *     read (src/store/sqlite/catalog.c).
 *
 * Why it is safe half way and twice at once: a reader tells a BSON body
 * from a JSON one by its last byte whatever the key says (docs.c), so a
 * half-upgraded namespace reads right; a crash before the key is set
 * leaves it absent and the next open walks again, skipping what is BSON
 * already; two upgraders race only on each body's compare-and-set, and
 * the loser finds BSON (the winner's, or a writer's: every write of this
 * build is BSON) and moves on.  A writer racing an upgrade is never
 * failed by it: the version it compares is left alone.
 *
 * The walk goes through the store's own structure -- the catalog's
 * collections, each bucket's members zset, RD_S_RANGE pages -- rather
 * than SCANning every master: each command is routed by slot (MOVED and
 * ASK as everywhere, so a cluster's nodes and a migrating slot are the
 * executor's business), only this namespace's live documents are read
 * (a shared server's other keys are not walked), and it needs no command
 * beyond docs/redis.md's ACL rule.  Every live document is listed in its
 * bucket's members zset (the WRITE script changes both together); fence
 * tombstones keep no body.  A body that does not parse is left as it is:
 * reading it reports it (DTX_EBACKEND naming it), as before the upgrade,
 * and one bad document does not keep a namespace from opening. */
#include "store/redis/redis_int.h"

#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RD_FORMAT 4
#define UP_PAGE 256

static void fmt_key(const dtx__backend_t *b, char *out, size_t cap) {
  snprintf(out, cap, "%s{cat}:format", b->kp);
}

/* One plain command on the format key's slot: GET, or SET to RD_FORMAT. */
static int fmt_cmd(dtx__backend_t *b, int set, redisReply **out) {
  char key[RD_KPMAX + 16];
  fmt_key(b, key, sizeof key);
  rd_cmd_t c;
  dtx__rd_cmd_init(&c, dtx__rd_slot(key, strlen(key)), -1, set);
  dtx__rd_args(&c, set ? "SET" : "GET");
  dtx__rd_args(&c, key);
  if (set)
    dtx__rd_argi(&c, RD_FORMAT);
  const char *what =
      set ? "setting the namespace format" : "reading the namespace format";
  int rc = dtx__rd_run(b, &c, 1, what);
  if (rc == 0 && c.reply->type == REDIS_REPLY_ERROR)
    rc = dtx__rd_bad_reply(c.reply, what);
  if (rc == 0 && out) {
    *out = c.reply;
    c.reply = NULL;
  }
  dtx__rd_cmd_clear(&c);
  return rc;
}

/* *yes: whether the catalog hash exists (a collection was ever made). */
static int catalog_exists(dtx__backend_t *b, int *yes) {
  rd_cmd_t c;
  dtx__rd_cmd_init(&c, dtx__rd_slot(b->catkey, strlen(b->catkey)), -1, 0);
  dtx__rd_args(&c, "EXISTS");
  dtx__rd_args(&c, b->catkey);
  int rc = dtx__rd_run(b, &c, 1, "reading the catalog");
  if (rc == 0 && c.reply->type != REDIS_REPLY_INTEGER)
    rc = dtx__rd_bad_reply(c.reply, "reading the catalog");
  if (rc == 0)
    *yes = c.reply->integer != 0;
  dtx__rd_cmd_clear(&c);
  return rc;
}

/* The BSON bytes of JSON-text body p (NUL-terminated) into out: 1 when
 * there is something to write, 0 when the body is left as it is (BSON
 * already, unparsable, or a document whose BSON would pass 16 MiB). */
static int rebody(const char *p, size_t n, rd_buf_t *out) {
  out->n = 0;
  if (n == 0 || dtx__rd_body_is_bson(p, n))
    return 0;
  json_t *j = NULL;
  if (dtx__json_parse(p, &j) < 0 || !json_is_object(j)) {
    json_decref(j);
    dtx__err_clear();
    return 0;
  }
  int rc = dtx__rd_body_encode(j, "a namespace being upgraded", out);
  json_decref(j);
  if (rc == DTX_ELIMIT) { /* kept as JSON text, which still reads */
    dtx__err_clear();
    return 0;
  }
  if (rc < 0)
    return rc;
  return dtx__rd_body_is_bson(out->p, out->n);
}

/* Rewrites the body of document key (whose stored bytes were old) as
 * BSON, until it is BSON or gone. */
static int convert_one(dtx__backend_t *b, const rd_buf_t *key, int slot,
                       const char *old, size_t oldn) {
  rd_buf_t cur = {0}, nb = {0};
  dtx__rd_put(&cur, old, oldn);
  int rc = 0;
  for (int tries = 0; rc == 0; tries++) {
    if (tries == 100) {
      rc = dtx__err(DTX_EBUSY, "redis: a document kept changing while the "
                               "namespace was upgraded");
      break;
    }
    int want = rebody(cur.p ? cur.p : "", cur.n, &nb);
    if (want <= 0) {
      rc = want;
      break;
    }
    rd_cmd_t c;
    dtx__rd_cmd_init(&c, slot, RD_S_REBODY, 1);
    c.nkeys = 1;
    dtx__rd_argb(&c, key);
    dtx__rd_argb(&c, &cur);
    dtx__rd_argb(&c, &nb);
    rc = dtx__rd_run(b, &c, 1, "upgrading a document");
    const redisReply *r = c.reply;
    if (rc == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
                    r->element[0]->type != REDIS_REPLY_INTEGER))
      rc = dtx__rd_bad_reply(r, "upgrading a document");
    else if (rc == 0 && r->element[0]->integer == 1) {
      dtx__rd_cmd_clear(&c);
      break;
    } else if (rc == 0) {
      /* {0, current body}: changed meanwhile; gone is '' */
      cur.n = 0;
      if (r->elements > 1 && r->element[1]->type == REDIS_REPLY_STRING)
        dtx__rd_put(&cur, r->element[1]->str, r->element[1]->len);
      else
        dtx__rd_put(&cur, "", 0);
    }
    dtx__rd_cmd_clear(&c);
  }
  dtx__rd_buf_free(&cur);
  dtx__rd_buf_free(&nb);
  return rc;
}

/* Converts the JSON-text bodies of bucket k of co. */
static int upgrade_bucket(dtx__backend_t *b, const rd_coll_t *co, int k) {
  rd_buf_t min = {0}, key = {0}, nb = {0};
  dtx__rd_puts(&min, "-");
  int rc = 0, more;
  for (;;) {
    rd_cmd_t c;
    if ((rc = dtx__rd_bucket_page(b, co, k, &min, UP_PAGE,
                                  "upgrading a bucket", &c, &more)) < 0)
      break;
    const redisReply *r = c.reply;
    /* The page's compare-and-sets go as one pipeline; one that lost
     * (a writer was first) is taken up alone by convert_one. */
    rd_cmd_t *cmds = calloc(UP_PAGE, sizeof *cmds);
    size_t nc = 0;
    if (!cmds)
      rc = dtx__err(DTX_ENOMEM, "upgrading a bucket");
    for (size_t i = 3; rc == 0 && i + 3 < r->elements && nc < UP_PAGE;
         i += 4) {
      const redisReply *id = r->element[i], *body = r->element[i + 3];
      if (body->type != REDIS_REPLY_STRING || body->len == 0 ||
          dtx__rd_body_is_bson(body->str, body->len))
        continue;
      int want = rebody(body->str, body->len, &nb);
      if (want <= 0) {
        rc = want;
        continue;
      }
      key.n = 0;
      dtx__rd_key_doc(&key, co, k, id->str, id->len);
      rd_cmd_t *cc = &cmds[nc++];
      dtx__rd_cmd_init(cc, co->slots[k], RD_S_REBODY, 1);
      cc->nkeys = 1;
      dtx__rd_argb(cc, &key);
      dtx__rd_arg(cc, body->str, body->len);
      dtx__rd_argb(cc, &nb);
    }
    if (rc == 0 && nc)
      rc = dtx__rd_run(b, cmds, nc, "upgrading documents");
    for (size_t j = 0; rc == 0 && j < nc; j++) {
      const redisReply *x = cmds[j].reply;
      if (x->type != REDIS_REPLY_ARRAY || x->elements < 1 ||
          x->element[0]->type != REDIS_REPLY_INTEGER)
        rc = dtx__rd_bad_reply(x, "upgrading a document");
      else if (x->element[0]->integer != 1) {
        rd_buf_t kk = {0};
        dtx__rd_put(&kk, cmds[j].argv[0], cmds[j].argvlen[0]);
        const redisReply *now = x->elements > 1 ? x->element[1] : NULL;
        int isstr = now && now->type == REDIS_REPLY_STRING;
        rc = convert_one(b, &kk, co->slots[k], isstr ? now->str : "",
                         isstr ? now->len : 0);
        dtx__rd_buf_free(&kk);
      }
    }
    if (cmds)
      dtx__rd_cmds_free(cmds, nc);
    dtx__rd_cmd_clear(&c);
    if (rc < 0 || !more)
      break;
  }
  dtx__rd_buf_free(&min);
  dtx__rd_buf_free(&key);
  dtx__rd_buf_free(&nb);
  return rc;
}

static int upgrade(dtx__backend_t *b) {
  json_t *names = NULL;
  int rc = dtx__rd_list_collections(b, &names);
  size_t i;
  json_t *name;
  json_array_foreach(names, i, name) {
    rd_coll_t *co = NULL;
    if (rc < 0 ||
        (rc = dtx__rd_coll_get(b, json_string_value(name), 0, 1, &co)) < 0)
      break;
    for (int k = 0; co && rc == 0 && k < co->nb; k++)
      rc = upgrade_bucket(b, co, k);
    dtx__rd_coll_put(co);
  }
  json_decref(names);
  return rc;
}

int dtx__rd_format_open(dtx__backend_t *b) {
  redisReply *r = NULL;
  int rc = fmt_cmd(b, 0, &r);
  if (rc < 0)
    return rc;
  long long fmt = 3;
  if (r->type == REDIS_REPLY_STRING) {
    char *end;
    fmt = strtoll(r->str, &end, 10);
    if (r->len == 0 || *end || fmt < 3) {
      rc = dtx__err(DTX_EBACKEND, "redis: namespace format %.20s, this doctx "
                                  "reads format %d", r->str, RD_FORMAT);
      freeReplyObject(r);
      return rc;
    }
  } else if (r->type != REDIS_REPLY_NIL) {
    rc = dtx__rd_bad_reply(r, "reading the namespace format");
  }
  freeReplyObject(r);
  if (rc < 0 || fmt == RD_FORMAT)
    return rc;
  if (fmt > RD_FORMAT)
    return dtx__err(DTX_EBACKEND,
                    "redis: namespace format %lld, this doctx reads format %d",
                    fmt, RD_FORMAT);
  int any = 0;
  if ((rc = catalog_exists(b, &any)) < 0)
    return rc;
  if (any && (rc = upgrade(b)) < 0)
    return dtx__err_wrap(rc, "redis: upgrading the namespace to format %d",
                         RD_FORMAT);
  return fmt_cmd(b, 1, NULL);
}
