/* catalog.c -- collections and indexes of the Redis backend: the catalog
 * hash, its per-process cache, key names, create_index (with the build
 * over existing documents), list_indexes, drop_collection and
 * list_collections.
 *
 * The catalog is one hash, dtx:{cat}, mapping a collection name to JSON:
 *   {"gen":"<hex>","nb":16,"ver":3,"next":4,
 *    "idx":[{"id":1,"spec":{name,key,unique,sparse},"ready":true}, ...]}
 * and is changed only by compare-and-set of a whole entry (CATSET), so
 * concurrent creators and droppers serialise on it.  "ver" is the stamp
 * every bucket of the collection must show for a write to go through; it
 * moves whenever the set of indexes writers must maintain changes, and
 * whenever the collection's rules do (an entry may hold "rules": the
 * normalised validator and delete guard, compiled into the descriptor and
 * checked by every write against the descriptor whose ver it carries).
 * An index is listed with ready false while it is built and may not
 * answer queries until then.
 *
 *   set_rules:     entry.rules := R (or removed), ver+1      (CATSET)
 *                  every bucket's stamp := ver               (STAMP)
 *                  so a write checked against older rules fails its
 *                  stamp (RD_ESTALE) and is redone with R.
 *
 * With a namespace (?ns=NAME) every key below starts "dtx@NAME:" instead
 * of "dtx:" -- the catalog, documents, zsets, stamps and claims -- so two
 * namespaces on one server share nothing.  The prefix stays outside the
 * hash tag, so a bucket's keys still share one slot.
 *
 *   create_index:  entry += {id, spec, ready:false}, ver+1   (CATSET)
 *                  every bucket's stamp := ver              (STAMP)
 *                  every document rewritten (write.c adds all entries and
 *                  claims of a building index)
 *                  entry.idx[id].ready := true              (CATSET)
 *       on DUPKEY/BADINDEX: entry -= idx, ver+1; stamps; zsets deleted;
 *                  the build's claims released
 *   drop:          entry deleted                            (CATSET)
 *                  every bucket marked dropped and emptied  (DROP)
 *                  claims the documents held released
 * A process caches entries for CACHE_MS; writers notice a change sooner
 * through the stamps (RD_ESTALE), readers through the stamps the RANGE
 * and READDOC scripts return. */
#include "store/redis/redis_int.h"

#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define CACHE_MS 2000
#define DROPPED_TTL_MS (24LL * 3600 * 1000)
#define RANGE_PAGE 500

/* ---- keys ---------------------------------------------------------------------- */

void dtx__rd_key_prefix(char out[RD_KPMAX], const char *ns) {
  if (ns && *ns)
    snprintf(out, RD_KPMAX, "dtx@%s:", ns);
  else
    snprintf(out, RD_KPMAX, "dtx:");
}

static void put_tag(rd_buf_t *o, const rd_coll_t *co, int bucket) {
  dtx__rd_putc(o, '{');
  dtx__rd_puts(o, co->name);
  dtx__rd_putc(o, ':');
  dtx__rd_puts(o, co->gen);
  dtx__rd_putc(o, ':');
  dtx__rd_puti(o, bucket);
  dtx__rd_putc(o, '}');
}

void dtx__rd_key_doc(rd_buf_t *o, const rd_coll_t *co, int bucket,
                     const char *id, size_t idlen) {
  dtx__rd_puts(o, co->kp);
  dtx__rd_put(o, "d:", 2);
  put_tag(o, co, bucket);
  dtx__rd_put(o, id, idlen);
}

void dtx__rd_key_members(rd_buf_t *o, const rd_coll_t *co, int bucket) {
  dtx__rd_puts(o, co->kp);
  dtx__rd_put(o, "c:", 2);
  put_tag(o, co, bucket);
}

void dtx__rd_key_stamp(rd_buf_t *o, const rd_coll_t *co, int bucket) {
  dtx__rd_puts(o, co->kp);
  dtx__rd_put(o, "m:", 2);
  put_tag(o, co, bucket);
}

void dtx__rd_key_tombs(rd_buf_t *o, const rd_coll_t *co, int bucket) {
  dtx__rd_puts(o, co->kp);
  dtx__rd_put(o, "t:", 2);
  put_tag(o, co, bucket);
}

void dtx__rd_key_index(rd_buf_t *o, const rd_coll_t *co, int bucket,
                       int64_t ixid) {
  dtx__rd_puts(o, co->kp);
  dtx__rd_put(o, "x:", 2);
  put_tag(o, co, bucket);
  dtx__rd_puti(o, (long long)ixid);
}

void dtx__rd_key_claim(rd_buf_t *o, const rd_coll_t *co, int64_t ixid,
                       const char *tuple, size_t tlen) {
  dtx__rd_putf(o, "%su:{%s:%s:%lld:", co->kp, co->name, co->gen,
               (long long)ixid);
  dtx__rd_put(o, tuple, tlen);
  dtx__rd_putc(o, '}');
}

int dtx__rd_bucket(const rd_coll_t *co, const char *id, size_t idlen) {
  return (int)(dtx__rd_hash64(id, idlen) % (uint64_t)co->nb);
}

static int catalog_slot(const dtx__backend_t *b) {
  return dtx__rd_slot(b->catkey, strlen(b->catkey));
}

/* ---- descriptors ------------------------------------------------------------------- */

static void coll_free(rd_coll_t *co) {
  if (!co)
    return;
  for (size_t i = 0; i < co->nidx; i++)
    dtx__index_spec_free(co->idx[i].spec);
  free(co->idx);
  free(co->name);
  free(co->raw);
  free(co->slots);
  dtx__rules_free(co->rules);
  free(co);
}

void dtx__rd_coll_put(rd_coll_t *co) {
  if (co && atomic_fetch_sub(&co->refs, 1) == 1)
    coll_free(co);
}

static int spec_from_json(const json_t *j, dtx__index_spec_t **out) {
  dtx_index_opts_t o = {
      .unique = json_is_true(json_object_get(j, "unique")),
      .sparse = json_is_true(json_object_get(j, "sparse")),
      .name = json_string_value(json_object_get(j, "name")),
  };
  return dtx__index_spec_parse(json_object_get(j, "key"), &o, out);
}

/* Builds a descriptor from a stored catalog entry (raw is copied); kp is
 * the backend's key prefix. */
static int coll_parse(const char *kp, const char *name, const char *raw,
                      rd_coll_t **out) {
  *out = NULL;
  json_t *j;
  if (dtx__json_parse(raw, &j) < 0)
    return dtx__err(DTX_EBACKEND, "redis: catalog entry of '%s' is not JSON",
                    name);
  rd_coll_t *co = calloc(1, sizeof *co);
  int rc = 0;
  if (!co || !(co->name = strdup(name)) || !(co->raw = strdup(raw))) {
    rc = dtx__err(DTX_ENOMEM, "loading the catalog");
    goto fail;
  }
  atomic_init(&co->refs, 1);
  const char *gen = json_string_value(json_object_get(j, "gen"));
  json_t *idx = json_object_get(j, "idx");
  co->nb = (int)json_integer_value(json_object_get(j, "nb"));
  co->ver = json_integer_value(json_object_get(j, "ver"));
  co->next = json_integer_value(json_object_get(j, "next"));
  if (!gen || strlen(gen) >= sizeof co->gen || co->nb < 1 || co->nb > 4096 ||
      co->ver < 1 || !json_is_array(idx)) {
    rc = dtx__err(DTX_EBACKEND, "redis: catalog entry of '%s' is malformed",
                  name);
    goto fail;
  }
  snprintf(co->gen, sizeof co->gen, "%s", gen);
  snprintf(co->kp, sizeof co->kp, "%s", kp);
  /* Rules that no longer compile fail closed: the collection cannot be
   * used until they are fixed, rather than writes going unchecked. */
  json_t *rules = json_object_get(j, "rules");
  if (rules && (rc = dtx__rules_compile(rules, &co->rules)) < 0) {
    rc = dtx__err(DTX_EBACKEND, "redis: stored rules of %s: %s", name,
                  dtx_errdetail());
    goto fail;
  }
  co->idx = calloc(json_array_size(idx) + 1, sizeof *co->idx);
  co->slots = calloc((size_t)co->nb, sizeof *co->slots);
  if (!co->idx || !co->slots) {
    rc = dtx__err(DTX_ENOMEM, "loading the catalog");
    goto fail;
  }
  size_t i;
  json_t *e;
  json_array_foreach(idx, i, e) {
    rd_idx_t *ix = &co->idx[co->nidx];
    ix->id = json_integer_value(json_object_get(e, "id"));
    ix->ready = json_is_true(json_object_get(e, "ready"));
    ix->multikey = json_is_true(json_object_get(e, "multikey"));
    if ((rc = spec_from_json(json_object_get(e, "spec"), &ix->spec)) < 0) {
      rc = dtx__err(DTX_EBACKEND, "redis: stored index spec of '%s': %s", name,
                    dtx_errdetail());
      goto fail;
    }
    co->nidx++;
  }
  for (int b = 0; b < co->nb; b++) {
    char tag[200];
    int n = snprintf(tag, sizeof tag, "%s:%s:%d", co->name, co->gen, b);
    co->slots[b] = dtx__rd_slot(tag, (size_t)n);
  }
  co->loaded_ms = dtx__rd_mono_ms();
  json_decref(j);
  *out = co;
  return 0;
fail:
  json_decref(j);
  coll_free(co);
  return rc;
}

/* ---- the cache ---------------------------------------------------------------------- */

static void cache_install(dtx__backend_t *b, rd_coll_t *co) {
  atomic_fetch_add(&co->refs, 1);
  rd_coll_t *old = NULL;
  pthread_mutex_lock(&b->catmu);
  size_t i = 0;
  while (i < b->ncolls && strcmp(b->colls[i]->name, co->name) != 0)
    i++;
  if (i < b->ncolls) {
    old = b->colls[i];
    b->colls[i] = co;
  } else {
    if (b->ncolls == b->capcolls && DTX__GROW(b->colls, b->capcolls, 16)) {
      pthread_mutex_unlock(&b->catmu);
      dtx__rd_coll_put(co);
      return;
    }
    b->colls[b->ncolls++] = co;
  }
  pthread_mutex_unlock(&b->catmu);
  dtx__rd_coll_put(old);
}

/* The cached entry of NAME when its text is TEXT (a new reference, its
 * age reset), else NULL.  An entry is a pure function of its text, so a
 * fresh read that finds the text unchanged need not parse it and compile
 * its rules again: a pattern's set-up reads each of its collections'
 * entries fresh, once per rule and index, in every process. */
static rd_coll_t *cache_same(dtx__backend_t *b, const char *name,
                             const char *text) {
  rd_coll_t *hit = NULL;
  pthread_mutex_lock(&b->catmu);
  for (size_t i = 0; i < b->ncolls && !hit; i++) {
    rd_coll_t *co = b->colls[i];
    if (strcmp(co->name, name) == 0 && strcmp(co->raw, text) == 0) {
      atomic_fetch_add(&co->refs, 1);
      co->loaded_ms = dtx__rd_mono_ms();
      hit = co;
    }
  }
  pthread_mutex_unlock(&b->catmu);
  return hit;
}

void dtx__rd_coll_forget(dtx__backend_t *b, const char *name) {
  rd_coll_t *old = NULL;
  pthread_mutex_lock(&b->catmu);
  for (size_t i = 0; i < b->ncolls; i++) {
    if (strcmp(b->colls[i]->name, name) == 0) {
      old = b->colls[i];
      b->colls[i] = b->colls[--b->ncolls];
      break;
    }
  }
  pthread_mutex_unlock(&b->catmu);
  dtx__rd_coll_put(old);
}

/* HGET of one entry: *text is malloc'd, or NULL when there is none. */
static int cat_read(dtx__backend_t *b, const char *name, char **text) {
  *text = NULL;
  rd_cmd_t c;
  dtx__rd_cmd_init(&c, catalog_slot(b), -1, 0);
  dtx__rd_args(&c, "HGET");
  dtx__rd_args(&c, b->catkey);
  dtx__rd_args(&c, name);
  int rc = dtx__rd_run(b, &c, 1, "reading the catalog");
  if (rc == 0) {
    if (c.reply->type == REDIS_REPLY_STRING) {
      if (!(*text = strndup(c.reply->str, c.reply->len)))
        rc = dtx__err(DTX_ENOMEM, "reading the catalog");
    } else if (c.reply->type != REDIS_REPLY_NIL) {
      rc = dtx__rd_bad_reply(c.reply, "reading the catalog");
    }
  }
  dtx__rd_cmd_clear(&c);
  return rc;
}

/* Compare-and-set of one entry; expect/text NULL mean none.  Returns 1
 * when done, 0 when the entry was not expect (another process changed
 * it), or an error.  A resend that finds its own text counts as done. */
static int cat_set(dtx__backend_t *b, const char *name, const char *expect,
                   const char *text) {
  rd_cmd_t c;
  dtx__rd_cmd_init(&c, catalog_slot(b), RD_S_CATSET, 1);
  c.nkeys = 1;
  dtx__rd_args(&c, b->catkey);
  dtx__rd_args(&c, name);
  dtx__rd_args(&c, expect ? expect : "");
  dtx__rd_args(&c, text ? text : "");
  int rc = dtx__rd_run(b, &c, 1, "changing the catalog");
  if (rc == 0) {
    const redisReply *r = c.reply;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
      rc = dtx__rd_bad_reply(r, "changing the catalog");
    } else if (r->element[0]->integer == 1) {
      rc = 1;
    } else {
      const redisReply *cur = r->elements > 1 ? r->element[1] : NULL;
      int mine = cur && cur->type == REDIS_REPLY_STRING &&
                 (text ? strlen(text) == cur->len &&
                             memcmp(text, cur->str, cur->len) == 0
                       : cur->len == 0);
      rc = mine ? 1 : 0;
    }
  }
  dtx__rd_cmd_clear(&c);
  return rc;
}

static char *new_entry_text(int nb) {
  uint64_t g;
  if (getrandom(&g, sizeof g, 0) != (ssize_t)sizeof g)
    g = dtx__rd_hash64(&g, sizeof g) ^ (uint64_t)dtx__rd_mono_ms();
  char *t;
  if (asprintf(&t, "{\"gen\":\"%016llx\",\"nb\":%d,\"ver\":1,\"next\":1,"
                   "\"idx\":[]}",
               (unsigned long long)g, nb) < 0)
    return NULL;
  return t;
}

/* A compare-and-set on a catalog entry lost 100 races in a row. */
static int keeps_changing(const char *name) {
  return dtx__err(DTX_EBUSY, "redis: the catalog entry of '%s' keeps changing",
                  name);
}

int dtx__rd_coll_get(dtx__backend_t *b, const char *name, int create,
                     int fresh, rd_coll_t **out) {
  *out = NULL;
  if (!fresh) {
    pthread_mutex_lock(&b->catmu);
    for (size_t i = 0; i < b->ncolls; i++) {
      rd_coll_t *co = b->colls[i];
      if (strcmp(co->name, name) == 0 &&
          dtx__rd_mono_ms() - co->loaded_ms < CACHE_MS) {
        atomic_fetch_add(&co->refs, 1);
        *out = co;
        break;
      }
    }
    pthread_mutex_unlock(&b->catmu);
    if (*out)
      return 0;
  }
  for (int attempt = 0; attempt < 100; attempt++) {
    char *text;
    int rc = cat_read(b, name, &text);
    if (rc < 0)
      return rc;
    if (!text) {
      if (!create) {
        dtx__rd_coll_forget(b, name);
        return 0;
      }
      char *t = new_entry_text(b->uri.buckets);
      if (!t)
        return dtx__err(DTX_ENOMEM, "creating collection '%s'", name);
      rc = cat_set(b, name, NULL, t);
      if (rc == 1)
        text = t;
      else
        free(t);
      if (rc < 0)
        return rc;
      if (rc == 0)
        continue;
    }
    rd_coll_t *co = cache_same(b, name, text);
    if (co) {
      free(text);
      *out = co;
      return 0;
    }
    rc = coll_parse(b->kp, name, text, &co);
    free(text);
    if (rc < 0)
      return rc;
    cache_install(b, co);
    *out = co;
    return 0;
  }
  return keeps_changing(name);
}

/* ---- catalog entry edits ------------------------------------------------------------ */

static json_t *entry_json(const rd_coll_t *co) {
  json_t *j = NULL;
  if (dtx__json_parse(co->raw, &j) < 0)
    return NULL;
  return j;
}

/* Replaces co's entry by j (consumed) with a compare-and-set.  1 done,
 * 0 lost the race, <0 error. */
static int entry_replace(dtx__backend_t *b, const rd_coll_t *co, json_t *j) {
  char *text = j ? dtx__json_dump(j) : NULL;
  json_decref(j);
  if (!text)
    return dtx__err(DTX_ENOMEM, "changing the catalog");
  int rc = cat_set(b, co->name, co->raw, text);
  free(text);
  return rc;
}

/* co's entry with index ixid's flag (multikey, ready) set; NULL when out
 * of memory. */
static json_t *entry_flag(const rd_coll_t *co, int64_t ixid,
                          const char *flag) {
  json_t *j = entry_json(co), *e;
  size_t i;
  json_array_foreach(json_object_get(j, "idx"), i, e) if (
      json_integer_value(json_object_get(e, "id")) == ixid)
      json_object_set_new(e, flag, json_true());
  return j;
}

static const rd_idx_t *find_idx(const rd_coll_t *co, int64_t id) {
  for (size_t i = 0; i < co->nidx; i++)
    if (co->idx[i].id == id)
      return &co->idx[i];
  return NULL;
}

int dtx__rd_raise_stamps(dtx__backend_t *b, const rd_coll_t *co) {
  rd_cmd_t *cmds = calloc((size_t)co->nb, sizeof *cmds);
  if (!cmds)
    return dtx__err(DTX_ENOMEM, "raising stamps");
  for (int k = 0; k < co->nb; k++) {
    rd_buf_t key = {0};
    dtx__rd_key_stamp(&key, co, k);
    dtx__rd_cmd_init(&cmds[k], co->slots[k], RD_S_STAMP, 1);
    cmds[k].nkeys = 1;
    dtx__rd_argb(&cmds[k], &key);
    dtx__rd_argi(&cmds[k], co->ver);
    dtx__rd_buf_free(&key);
  }
  int rc = dtx__rd_run(b, cmds, (size_t)co->nb, "raising catalog stamps");
  for (int k = 0; rc == 0 && k < co->nb; k++)
    if (cmds[k].reply->type != REDIS_REPLY_INTEGER)
      rc = dtx__rd_bad_reply(cmds[k].reply, "raising catalog stamps");
  dtx__rd_cmds_free(cmds, (size_t)co->nb);
  return rc;
}

int dtx__rd_mark_multikey(dtx__backend_t *b, const rd_coll_t *co,
                          int64_t ixid) {
  for (int attempt = 0; attempt < 100; attempt++) {
    rd_coll_t *cur;
    int rc = dtx__rd_coll_get(b, co->name, 0, 1, &cur);
    if (rc < 0)
      return rc;
    if (!cur || strcmp(cur->gen, co->gen) != 0 || !find_idx(cur, ixid)) {
      dtx__rd_coll_put(cur);
      return 0; /* gone: the writer's retry will see */
    }
    if (find_idx(cur, ixid)->multikey) {
      rc = dtx__rd_raise_stamps(b, cur);
      dtx__rd_coll_put(cur);
      return rc;
    }
    json_t *j = entry_flag(cur, ixid, "multikey");
    json_object_set_new(j, "ver", json_integer(cur->ver + 1));
    rc = entry_replace(b, cur, j);
    dtx__rd_coll_put(cur);
    if (rc < 0)
      return rc;
    /* Done or lost the race: either way the next round raises stamps. */
  }
  return keeps_changing(co->name);
}

/* ---- create_index ------------------------------------------------------------------- */

int dtx__rd_bucket_page(dtx__backend_t *b, const rd_coll_t *co, int k,
                        rd_buf_t *min, long long page, const char *what,
                        rd_cmd_t *c, int *more) {
  rd_buf_t members = {0}, stamp = {0}, prefix = {0};
  *more = 0;
  dtx__rd_key_members(&members, co, k);
  dtx__rd_key_stamp(&stamp, co, k);
  dtx__rd_key_doc(&prefix, co, k, "", 0);
  dtx__rd_cmd_init(c, co->slots[k], RD_S_RANGE, 0);
  c->nkeys = 2;
  dtx__rd_argb(c, &members);
  dtx__rd_argb(c, &stamp);
  dtx__rd_argb(c, min);
  dtx__rd_args(c, "+");
  dtx__rd_argi(c, page);
  dtx__rd_argb(c, &prefix);
  dtx__rd_args(c, "m");
  dtx__rd_buf_free(&members);
  dtx__rd_buf_free(&stamp);
  dtx__rd_buf_free(&prefix);
  int rc = dtx__rd_run(b, c, 1, what);
  const redisReply *r = c->reply;
  if (rc == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
                  (r->elements - 3) % 4 != 0))
    rc = dtx__rd_bad_reply(r, what);
  if (rc < 0) {
    dtx__rd_cmd_clear(c);
    return rc;
  }
  if (r->element[1]->integer == page) {
    *more = 1;
    min->n = 0;
    dtx__rd_putc(min, '(');
    dtx__rd_put(min, r->element[2]->str, r->element[2]->len);
  }
  return 0;
}

/* Rewrites every document of bucket k through the write path, so that
 * each gains its entries and claims of the building index. */
static int backfill_bucket(dtx__backend_t *b, rd_coll_t **cop, int k,
                           int64_t want, rd_claims_t *claims) {
  rd_buf_t min = {0};
  dtx__rd_puts(&min, "-");
  int rc = 0, more;
  for (;;) {
    rd_cmd_t c;
    if ((rc = dtx__rd_bucket_page(b, *cop, k, &min, RANGE_PAGE,
                                  "reading a bucket", &c, &more)) < 0)
      break;
    const redisReply *r = c.reply;
    for (size_t i = 3; rc == 0 && i + 3 < r->elements; i += 4) {
      rd_doc_t d = {0};
      d.bucket = k;
      dtx__rd_put(&d.id, r->element[i]->str, r->element[i]->len);
      rc = dtx__rd_doc_fill(&d, (*cop)->name, r->element[i + 1],
                            r->element[i + 2], r->element[i + 3], NULL);
      for (int tries = 0; rc == 0 && d.body; tries++) {
        json_t *same = json_incref(d.body);
        rc = dtx__rd_write(b, *cop, &d, same, NULL, claims);
        json_decref(same);
        if (rc == RD_ESTALE) {
          /* Another index changed meanwhile: carry on with the new
           * catalog if ours is still in it. */
          rd_coll_t *fresh;
          if ((rc = dtx__rd_coll_get(b, (*cop)->name, 0, 1, &fresh)) < 0)
            break;
          if (!fresh || strcmp(fresh->gen, (*cop)->gen) != 0 ||
              !find_idx(fresh, want)) {
            dtx__rd_coll_put(fresh);
            rc = dtx__err(DTX_ECONFLICT,
                          "redis: collection %s changed while its index was "
                          "built",
                          (*cop)->name);
            break;
          }
          dtx__rd_coll_put(*cop);
          *cop = fresh;
          rc = dtx__rd_doc_round(b, fresh, &d, 0);
          continue;
        }
        if (rc == RD_ELOST) {
          rc = 0; /* d holds the current state: rewrite that */
          if (tries > 1000)
            rc = dtx__err(DTX_EBUSY, "redis: a document kept changing "
                                     "during an index build");
          continue;
        }
        break;
      }
      dtx__rd_doc_clear(&d);
    }
    dtx__rd_cmd_clear(&c);
    if (rc < 0 || !more)
      break;
  }
  dtx__rd_buf_free(&min);
  return rc;
}

/* Deletes index ixid's zsets in every bucket. */
static int drop_index_zsets(dtx__backend_t *b, const rd_coll_t *co,
                            int64_t ixid) {
  rd_cmd_t *cmds = calloc((size_t)co->nb, sizeof *cmds);
  if (!cmds)
    return dtx__err(DTX_ENOMEM, "dropping an index");
  for (int k = 0; k < co->nb; k++) {
    rd_buf_t key = {0};
    dtx__rd_key_index(&key, co, k, ixid);
    dtx__rd_cmd_init(&cmds[k], co->slots[k], -1, 1);
    dtx__rd_args(&cmds[k], "DEL");
    dtx__rd_argb(&cmds[k], &key);
    dtx__rd_buf_free(&key);
  }
  int rc = dtx__rd_run(b, cmds, (size_t)co->nb, "dropping an index");
  dtx__rd_cmds_free(cmds, (size_t)co->nb);
  return rc;
}

/* Takes index ixid out of the catalog after a failed build. */
static void abort_build(dtx__backend_t *b, const char *name, const char *gen,
                        int64_t ixid, rd_claims_t *claims) {
  char keep[512];
  snprintf(keep, sizeof keep, "%s", dtx_errdetail());
  for (int attempt = 0; attempt < 100; attempt++) {
    rd_coll_t *co;
    if (dtx__rd_coll_get(b, name, 0, 1, &co) < 0 || !co)
      break;
    if (strcmp(co->gen, gen) != 0 || !find_idx(co, ixid)) {
      dtx__rd_coll_put(co);
      break;
    }
    json_t *j = entry_json(co);
    json_t *idx = json_object_get(j, "idx"), *keep_idx = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(idx, i, e) if (json_integer_value(
                                          json_object_get(e, "id")) != ixid)
        json_array_append(keep_idx, e);
    json_object_set_new(j, "idx", keep_idx);
    json_object_set_new(j, "ver", json_integer(co->ver + 1));
    int rc = entry_replace(b, co, j);
    dtx__rd_coll_put(co);
    if (rc < 0)
      break;
    if (rc == 1) {
      rd_coll_t *fresh;
      if (dtx__rd_coll_get(b, name, 0, 1, &fresh) == 0 && fresh) {
        dtx__rd_raise_stamps(b, fresh);
        drop_index_zsets(b, fresh, ixid);
        dtx__rd_coll_put(fresh);
      }
      break;
    }
  }
  dtx__rd_claims_release(b, claims);
  dtx__err(DTX_EBACKEND, "%s", keep); /* restore the build's detail */
}

/* Builds index ixid of *cop (building state) and marks it ready. */
static int build_index(dtx__backend_t *b, rd_coll_t **cop, int64_t ixid) {
  int rc = dtx__rd_raise_stamps(b, *cop);
  rd_claims_t claims = {0};
  char name[128], gen[20];
  snprintf(name, sizeof name, "%s", (*cop)->name);
  snprintf(gen, sizeof gen, "%s", (*cop)->gen);
  for (int k = 0; rc == 0 && k < (*cop)->nb; k++)
    rc = backfill_bucket(b, cop, k, ixid, &claims);
  if (rc < 0) {
    if (rc == DTX_EDUPKEY || rc == DTX_EBADINDEX) {
      int keep = rc;
      abort_build(b, name, gen, ixid, &claims);
      rc = keep;
    }
    dtx__rd_claims_free(&claims);
    return rc;
  }
  dtx__rd_claims_free(&claims);
  /* Ready: the version stays, since writers already maintain it. */
  for (int attempt = 0; attempt < 100; attempt++) {
    rd_coll_t *co;
    if ((rc = dtx__rd_coll_get(b, name, 0, 1, &co)) < 0)
      return rc;
    if (!co || strcmp(co->gen, gen) != 0 || !find_idx(co, ixid)) {
      dtx__rd_coll_put(co);
      return dtx__err(DTX_ECONFLICT,
                      "redis: collection %s was dropped while its index was "
                      "built",
                      name);
    }
    if (find_idx(co, ixid)->ready) {
      dtx__rd_coll_put(co);
      return 0;
    }
    rc = entry_replace(b, co, entry_flag(co, ixid, "ready"));
    dtx__rd_coll_put(co);
    if (rc < 0)
      return rc;
    if (rc == 1) {
      rd_coll_t *fresh;
      if (dtx__rd_coll_get(b, name, 0, 1, &fresh) == 0)
        dtx__rd_coll_put(fresh);
      return 0;
    }
  }
  return keeps_changing(name);
}

int dtx__rd_create_index(dtx__backend_t *b, const char *coll,
                         const dtx__index_spec_t *spec) {
  for (int attempt = 0; attempt < 100; attempt++) {
    rd_coll_t *co;
    int rc = dtx__rd_coll_get(b, coll, 1, 1, &co);
    if (rc < 0)
      return rc;
    const rd_idx_t *same = NULL;
    for (size_t i = 0; i < co->nidx && !same && rc == 0; i++)
      if ((rc = dtx__index_spec_same(co->idx[i].spec, spec, coll)) == 1)
        same = &co->idx[i];
    if (rc < 0) {
      dtx__rd_coll_put(co);
      return rc;
    }
    if (same) {
      /* Already there; if its builder died, finish the build. */
      rc = same->ready ? 0 : build_index(b, &co, same->id);
      dtx__rd_coll_put(co);
      return rc;
    }
    json_t *j = entry_json(co);
    json_t *sj = dtx__index_spec_json(spec);
    int64_t id = co->next;
    json_t *e = json_pack("{s:I,s:o,s:b}", "id", (json_int_t)id, "spec", sj,
                          "ready", 0);
    if (!j || !e || json_array_append_new(json_object_get(j, "idx"), e) < 0) {
      json_decref(j);
      dtx__rd_coll_put(co);
      return dtx__err(DTX_ENOMEM, "creating index '%s'", spec->name);
    }
    json_object_set_new(j, "next", json_integer(id + 1));
    json_object_set_new(j, "ver", json_integer(co->ver + 1));
    rc = entry_replace(b, co, j);
    dtx__rd_coll_put(co);
    if (rc < 0)
      return rc;
    if (rc == 0)
      continue;
    if ((rc = dtx__rd_coll_get(b, coll, 0, 1, &co)) < 0)
      return rc;
    if (!co || !find_idx(co, id)) {
      dtx__rd_coll_put(co);
      continue; /* dropped meanwhile: start over */
    }
    rc = build_index(b, &co, id);
    dtx__rd_coll_put(co);
    return rc;
  }
  return keeps_changing(coll);
}

/* ---- rules -------------------------------------------------------------------------------- */

int dtx__rd_set_rules(dtx__backend_t *b, const char *coll,
                      const json_t *spec) {
  for (int attempt = 0; attempt < 100; attempt++) {
    rd_coll_t *co;
    int rc = dtx__rd_coll_get(b, coll, spec != NULL, 1, &co);
    if (rc < 0)
      return rc;
    if (!co)
      return 0; /* no collection, no rules: nothing to remove */
    json_t *j = entry_json(co);
    if (!j || (spec ? json_object_set(j, "rules", (json_t *)spec)
                    : (json_object_del(j, "rules"), 0)) < 0 ||
        json_object_set_new(j, "ver", json_integer(co->ver + 1)) < 0) {
      json_decref(j);
      dtx__rd_coll_put(co);
      return dtx__err(DTX_ENOMEM, "setting the rules of %s", coll);
    }
    rc = entry_replace(b, co, j);
    dtx__rd_coll_put(co);
    if (rc < 0)
      return rc;
    if (rc == 0)
      continue; /* the entry changed meanwhile: edit the new one */
    /* Recorded: now every writer still holding the old version must
     * notice before its next write. */
    rd_coll_t *fresh;
    if ((rc = dtx__rd_coll_get(b, coll, 0, 1, &fresh)) < 0)
      return rc;
    rc = fresh ? dtx__rd_raise_stamps(b, fresh) : 0;
    dtx__rd_coll_put(fresh);
    return rc;
  }
  return dtx__err(DTX_EBUSY, "redis: the catalog entry of %s keeps changing",
                  coll);
}

int dtx__rd_get_rules(dtx__backend_t *b, const char *coll, json_t **out) {
  *out = NULL;
  rd_coll_t *co;
  int rc = dtx__rd_coll_get(b, coll, 0, 1, &co);
  if (rc < 0 || !co)
    return rc;
  if (co->rules && !(*out = json_deep_copy(dtx__rules_spec(co->rules))))
    rc = dtx__err(DTX_ENOMEM, "reading the rules of %s", coll);
  dtx__rd_coll_put(co);
  return rc;
}

/* ---- listing ---------------------------------------------------------------------------- */

int dtx__rd_list_indexes(dtx__backend_t *b, const char *coll, json_t **out) {
  *out = NULL;
  rd_coll_t *co;
  int rc = dtx__rd_coll_get(b, coll, 0, 1, &co);
  if (rc < 0)
    return rc;
  json_t *arr = co ? json_array() : NULL;
  for (size_t i = 0; arr && rc == 0 && i < co->nidx; i++)
    if (co->idx[i].ready &&
        json_array_append_new(arr, dtx__index_spec_json(co->idx[i].spec)) < 0)
      rc = DTX_ENOMEM;
  int missing = !co;
  dtx__rd_coll_put(co);
  if ((!missing && !arr) || rc < 0) {
    json_decref(arr);
    return dtx__err(DTX_ENOMEM, "listing indexes of '%s'", coll);
  }
  *out = arr;
  return 0;
}

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int dtx__rd_list_collections(dtx__backend_t *b, json_t **out) {
  *out = NULL;
  rd_cmd_t c;
  dtx__rd_cmd_init(&c, catalog_slot(b), -1, 0);
  dtx__rd_args(&c, "HKEYS");
  dtx__rd_args(&c, b->catkey);
  int rc = dtx__rd_run(b, &c, 1, "listing collections");
  if (rc < 0) {
    dtx__rd_cmd_clear(&c);
    return rc;
  }
  const redisReply *r = c.reply;
  if (r->type != REDIS_REPLY_ARRAY) {
    rc = dtx__rd_bad_reply(r, "listing collections");
    dtx__rd_cmd_clear(&c);
    return rc;
  }
  const char **names = calloc(r->elements + 1, sizeof *names);
  json_t *arr = json_array();
  if (!names || !arr) {
    free(names);
    json_decref(arr);
    dtx__rd_cmd_clear(&c);
    return dtx__err(DTX_ENOMEM, "listing collections");
  }
  for (size_t i = 0; i < r->elements; i++)
    names[i] = r->element[i]->str;
  qsort(names, r->elements, sizeof *names, str_cmp);
  for (size_t i = 0; i < r->elements; i++)
    if (json_array_append_new(arr, json_string(names[i])) < 0)
      rc = dtx__err(DTX_ENOMEM, "listing collections");
  free(names);
  dtx__rd_cmd_clear(&c);
  if (rc < 0) {
    json_decref(arr);
    return rc;
  }
  *out = arr;
  return 0;
}

/* ---- drop_collection ------------------------------------------------------------------- */

static int drop_buckets(dtx__backend_t *b, const rd_coll_t *co) {
  size_t nb = (size_t)co->nb;
  rd_cmd_t *cmds = calloc(nb, sizeof *cmds);
  if (!cmds)
    return dtx__err(DTX_ENOMEM, "dropping '%s'", co->name);
  for (int k = 0; k < co->nb; k++) {
    rd_buf_t key = {0};
    rd_cmd_t *c = &cmds[k];
    dtx__rd_cmd_init(c, co->slots[k], RD_S_DROP, 1);
    dtx__rd_key_stamp(&key, co, k);
    dtx__rd_argb(c, &key);
    key.n = 0;
    dtx__rd_key_members(&key, co, k);
    dtx__rd_argb(c, &key);
    key.n = 0;
    dtx__rd_key_tombs(&key, co, k);
    dtx__rd_argb(c, &key);
    /* Every index id ever handed out, so an abandoned build's zset goes
     * too. */
    for (int64_t id = 1; id < co->next; id++) {
      key.n = 0;
      dtx__rd_key_index(&key, co, k, id);
      dtx__rd_argb(c, &key);
    }
    c->nkeys = (int)c->argc;
    key.n = 0;
    dtx__rd_key_doc(&key, co, k, "", 0);
    dtx__rd_argb(c, &key);
    dtx__rd_argi(c, DROPPED_TTL_MS);
    dtx__rd_buf_free(&key);
  }
  int rc = dtx__rd_run(b, cmds, nb, "dropping a collection");
  rd_claims_t claims = {0};
  for (size_t k = 0; rc == 0 && k < nb; k++) {
    const redisReply *r = cmds[k].reply;
    if (r->type != REDIS_REPLY_ARRAY) {
      rc = dtx__rd_bad_reply(r, "dropping a collection");
      break;
    }
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      const redisReply *f = r->element[i], *v = r->element[i + 1];
      if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
          f->len < 2)
        continue;
      dtx__rd_claims_add(&claims, f->str + 1, f->len - 1, v->str, v->len);
    }
  }
  dtx__rd_cmds_free(cmds, nb);
  if (rc == 0)
    dtx__rd_claims_release(b, &claims);
  dtx__rd_claims_free(&claims);
  return rc;
}

int dtx__rd_drop_collection(dtx__backend_t *b, const char *coll) {
  for (int attempt = 0; attempt < 100; attempt++) {
    rd_coll_t *co;
    int rc = dtx__rd_coll_get(b, coll, 0, 1, &co);
    if (rc < 0)
      return rc;
    if (!co)
      return 0;
    rc = cat_set(b, coll, co->raw, NULL);
    if (rc == 0) {
      dtx__rd_coll_put(co);
      continue; /* changed meanwhile: look again */
    }
    if (rc == 1)
      rc = drop_buckets(b, co);
    dtx__rd_coll_put(co);
    dtx__rd_coll_forget(b, coll);
    return rc;
  }
  return keeps_changing(coll);
}
