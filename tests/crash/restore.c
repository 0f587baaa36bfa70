/* restore.c -- crash_restore [-v] URI DUMP [COLL...]: puts a store back to
 * what a `doctx dump` of it showed, in one process, on every backend.
 *
 * The plain-write table (tests/crash/plainwrite.sh) runs each row that a
 * store admitted alone on the fixture, then `doctx recover` and `doctx
 * audit --settled`; recovery finishes every piece of work in flight, so
 * some ten collections differ afterwards.  On SQLite a copy of the file
 * would do; on Redis the same through `doctx bulk` costs a program start
 * per collection.  This restores in place and writes only what differs:
 *   - a collection the dump does not hold is dropped;
 *   - rules that differ are set as dumped, indexes the dump lists and the
 *     store lacks are created;
 *   - a document whose stored text differs from the dump's, or that the
 *     dump lacks, is deleted, and every dumped document the store then
 *     lacks is inserted -- all past the rules (bypass_validation), as an
 *     operator's repair would.
 * With COLL... only those collections are put back (and none dropped):
 * what a caller knows its writes touched.
 * Fence tombstones (docs/locks.md) stay as the store keeps them: a
 * document deleted here leaves its record, and its copy inserted back
 * takes it over, so no fence record is lost or invented.
 * Prints {"dropped","deleted","inserted","rules"} -- with -v first one
 * line "COLL<TAB>ID" (ID as JSON) per document it had to write, deleted or
 * inserted, which tells what the writes since the dump changed; exit 0,
 * or 1 naming the call that failed. */
#include "doctx.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *coll, int rc) {
  fprintf(stderr, "crash_restore: %s %s: %s: %s\n", what, coll ? coll : "",
          dtx_errname(rc), dtx_errdetail());
  return 1;
}

/* Is line a dump's collection header (collection, indexes, rules, count)? */
static int is_head(const json_t *v) {
  return json_is_object(v) && json_object_size(v) == 4 &&
         json_is_string(json_object_get(v, "collection")) &&
         json_object_get(v, "indexes") && json_object_get(v, "rules") &&
         json_object_get(v, "count");
}

/* A document's _id as text: the key of the maps below. */
static char *id_key(const json_t *doc) {
  return dtx_json_dump(json_object_get(doc, "_id"));
}

/* Reads the dump: {COLL: {"head": HEADER, "docs": {ID: DOC}}}. */
static json_t *read_dump(const char *path) {
  FILE *f = fopen(path, "r");
  json_t *all = json_object(), *cur = NULL;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  if (!f) {
    perror(path);
    json_decref(all);
    return NULL;
  }
  while ((n = getline(&line, &cap, f)) > 0) {
    json_t *v = NULL;
    if (dtx_json_parse(line, &v) < 0) {
      fprintf(stderr, "crash_restore: %s: a line is not JSON\n", path);
      json_decref(all);
      all = NULL;
      break;
    }
    if (is_head(v)) {
      cur = json_pack("{s:O,s:o}", "head", v, "docs", json_object());
      json_object_set_new(all, json_string_value(json_object_get(v, "collection")), cur);
    } else if (cur) {
      char *k = id_key(v);
      json_object_set(json_object_get(cur, "docs"), k, v);
      free(k);
    }
    json_decref(v);
  }
  free(line);
  fclose(f);
  return all;
}

/* Makes coll's rules, indexes and documents those of snap (a read_dump
 * entry); counts what it wrote into *nd, *ni, *nr. */
static int verbose;

/* -v: one line per document of coll written back. */
static void changed(const char *coll, const char *key) {
  if (verbose)
    printf("%s\t%s\n", coll, key);
}

static int restore_coll(dtx_store_t *st, const char *coll, json_t *snap,
                        long *nd, long *ni, long *nr) {
  json_t *head = json_object_get(snap, "head"), *want = json_object_get(snap, "docs");
  json_t *rules = NULL, *idx = NULL, *docs = NULL, *kept = json_object();
  const dtx_insert_opts_t io = {.bypass_validation = 1};
  const dtx_delete_opts_t dopt = {.bypass_validation = 1};
  int rc, ec = 0;
  if ((rc = dtx_store_get_rules(st, coll, &rules)) < 0) {
    ec = fail("get_rules", coll, rc);
    goto out;
  }
  json_t *wr = json_object_get(head, "rules");
  if (!json_equal(rules, wr)) {
    dtx_collection_rules_t r = {json_object_get(wr, "validator"),
                                json_object_get(wr, "delete_guard"),
                                json_object_get(wr, "transition")};
    if (json_is_null(r.validator)) r.validator = NULL;
    if (json_is_null(r.delete_guard)) r.delete_guard = NULL;
    if (json_is_null(r.transition)) r.transition = NULL;
    if ((rc = dtx_store_set_rules(st, coll, &r)) < 0) {
      ec = fail("set_rules", coll, rc);
      goto out;
    }
    (*nr)++;
  }
  if ((rc = dtx_store_list_indexes(st, coll, &idx)) < 0) {
    ec = fail("list_indexes", coll, rc);
    goto out;
  }
  size_t i;
  json_t *w;
  json_array_foreach(json_object_get(head, "indexes"), i, w) {
    const char *name = json_string_value(json_object_get(w, "name"));
    size_t j;
    json_t *have;
    int found = 0;
    json_array_foreach(idx, j, have) found |= json_equal(have, w);
    if (found || !name || !strcmp(name, "_id_"))
      continue;
    dtx_index_opts_t o = {.unique = json_is_true(json_object_get(w, "unique")),
                          .sparse = json_is_true(json_object_get(w, "sparse")),
                          .name = name};
    if ((rc = dtx_store_create_index(st, coll, json_object_get(w, "key"), &o, NULL)) < 0) {
      ec = fail("create_index", coll, rc);
      goto out;
    }
  }
  if ((rc = dtx_store_find(st, coll, NULL, NULL, &docs)) < 0) {
    ec = fail("find", coll, rc);
    goto out;
  }
  json_array_foreach(docs, i, w) {
    char *k = id_key(w), *have = dtx_json_dump(w), *snapd = NULL;
    json_t *sd = json_object_get(want, k);
    if (sd)
      snapd = dtx_json_dump(sd);
    if (snapd && !strcmp(have, snapd)) {
      json_object_set_new(kept, k, json_true());
    } else {
      json_t *f = json_pack("{s:O}", "_id", json_object_get(w, "_id"));
      rc = dtx_store_delete_ex(st, coll, f, &dopt, NULL);
      json_decref(f);
      if (rc < 0)
        ec = fail("delete", coll, rc);
      changed(coll, k);
      json_object_set_new(kept, k, json_false());
      (*nd)++;
    }
    free(k);
    free(have);
    free(snapd);
    if (ec)
      goto out;
  }
  const char *k;
  json_object_foreach(want, k, w) {
    json_t *seen = json_object_get(kept, k);
    if (json_is_true(seen))
      continue;
    if (!seen)
      changed(coll, k);
    if ((rc = dtx_store_insert_ex(st, coll, w, &io, NULL)) < 0) {
      ec = fail("insert", coll, rc);
      goto out;
    }
    (*ni)++;
  }
out:
  json_decref(rules);
  json_decref(idx);
  json_decref(docs);
  json_decref(kept);
  return ec;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    verbose = 1;
    argv++;
    argc--;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: crash_restore [-v] URI DUMP [COLL...]\n");
    return 2;
  }
  json_t *snap = read_dump(argv[2]), *names = NULL;
  dtx_store_t *st = NULL;
  long nd = 0, ni = 0, nr = 0, ndrop = 0;
  int rc, ec = 0;
  if (!snap)
    return 1;
  if ((rc = dtx_store_open(argv[1], &st)) < 0) {
    json_decref(snap);
    return fail("open", argv[1], rc);
  }
  if (argc > 3) { /* only these: as if the store held nothing else */
    json_t *only = json_object();
    for (int i = 3; i < argc; i++) {
      json_t *s = json_object_get(snap, argv[i]);
      if (s)
        json_object_set(only, argv[i], s);
      else /* none in the dump: emptied */
        json_object_set_new(only, argv[i],
                            json_pack("{s:{s:s,s:[],s:{},s:i},s:{}}", "head",
                                      "collection", argv[i], "indexes",
                                      "rules", "count", 0, "docs"));
    }
    json_decref(snap);
    snap = only;
    names = json_array();
  } else if ((rc = dtx_store_list_collections(st, &names)) < 0) {
    ec = fail("list_collections", NULL, rc);
  }
  size_t i;
  json_t *n;
  json_array_foreach(names, i, n) {
    const char *c = json_string_value(n);
    if (ec || json_object_get(snap, c))
      continue;
    const dtx_drop_opts_t o = {.bypass_validation = 1};
    if ((rc = dtx_store_drop_collection_ex(st, c, &o)) < 0)
      ec = fail("drop", c, rc);
    changed(c, "*");
    ndrop++;
  }
  const char *c;
  json_t *s;
  json_object_foreach(snap, c, s) {
    if (ec)
      break;
    ec = restore_coll(st, c, s, &nd, &ni, &nr);
  }
  if (!ec)
    printf("{\"dropped\":%ld,\"deleted\":%ld,\"inserted\":%ld,\"rules\":%ld}\n",
           ndrop, nd, ni, nr);
  json_decref(names);
  json_decref(snap);
  dtx_store_close(st);
  return ec;
}
