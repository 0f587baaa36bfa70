/* script.c -- a transaction given as data: a JSON array of steps
 * (find_one, find, require, insert, update, delete), checked whole before
 * anything runs and then run in one transaction under dtx_txn_run.  The
 * form `doctx txn SCRIPT` takes (src/cli/cmd_txn.c) and doctxd's route
 * will take (docs/transactions.md, "Scripts"). */
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "txn/multi/multi.h"
#include "util/err.h"

static const char *const verbs[] = {"find_one", "find",   "require",
                                    "insert",   "update", "delete", NULL};

/* The keys each verb takes beside itself. */
static int key_ok(const char *verb, const char *key) {
  if (strcmp(key, verb) == 0)
    return 1;
  if (strcmp(verb, "find_one") == 0)
    return !strcmp(key, "filter") || !strcmp(key, "as");
  if (strcmp(verb, "find") == 0)
    return !strcmp(key, "filter") || !strcmp(key, "as") ||
           !strcmp(key, "limit");
  if (strcmp(verb, "require") == 0)
    return !strcmp(key, "filter");
  if (strcmp(verb, "insert") == 0)
    return !strcmp(key, "doc");
  if (strcmp(verb, "update") == 0)
    return !strcmp(key, "filter") || !strcmp(key, "with") ||
           !strcmp(key, "upsert");
  return !strcmp(key, "filter"); /* delete */
}

static const char *verb_of(const json_t *step) {
  for (int i = 0; verbs[i]; i++)
    if (json_object_get(step, verbs[i]))
      return verbs[i];
  return NULL;
}

/* 1 when path is _txn or under it: doctx's field, never a script's. */
static int reserved(const char *path) {
  return dtx__path_covers(DTX__TXN_FIELD, path);
}

/* 1 when update u (operators or a replacement) names _txn. */
static int touches_meta(const json_t *u) {
  const char *op, *path;
  json_t *args, *v;
  json_object_foreach((json_t *)u, op, args) {
    if (op[0] != '$') {
      if (reserved(op))
        return 1;
      continue;
    }
    if (json_is_object(args))
      json_object_foreach(args, path, v) if (reserved(path) ||
                                             (json_is_string(v) &&
                                              !strcmp(op, "$rename") &&
                                              reserved(json_string_value(v))))
          return 1;
  }
  return 0;
}

/* 1 when filter f names _txn (at its top or under $and/$or/$nor): a
 * transaction matches bodies, which never hold it, and an upsert would
 * copy it into the document. */
static int filter_meta(const json_t *f) {
  const char *k;
  json_t *v, *e;
  size_t i;
  json_object_foreach((json_t *)f, k, v) {
    if (reserved(k))
      return 1;
    if (k[0] == '$' && json_is_array(v))
      json_array_foreach(v, i, e) if (json_is_object(e) && filter_meta(e))
          return 1;
  }
  return 0;
}

/* 1 when doc has a top-level name that is empty or starts with '$': the
 * roll forward's update cannot name it (txn.c's no_meta refuses it too,
 * at run time). */
static int dollar_name(const json_t *doc) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)doc, k, v) if (k[0] == '$' || !k[0]) return 1;
  return 0;
}

static int check_step(const json_t *step, size_t n, json_t *names) {
  const char *verb = json_is_object(step) ? verb_of(step) : NULL, *key;
  json_t *v;
  if (!verb)
    return dtx__err(DTX_EINVAL, "txn script step %zu: not an object with "
                                "one of find_one, find, require, insert, "
                                "update, delete",
                    n);
  json_object_foreach((json_t *)step, key, v) if (!key_ok(verb, key)) return
      dtx__err(DTX_EINVAL, "txn script step %zu (%s): unknown key '%s'", n,
               verb, key);
  const json_t *target = json_object_get(step, verb);
  const json_t *filter = json_object_get(step, "filter");
  int rc = 0;
  if (strcmp(verb, "require") == 0) {
    if (!json_is_string(target) ||
        !json_is_true(json_object_get(names, json_string_value(target))))
      return dtx__err(DTX_EINVAL, "txn script step %zu (require): names no "
                                  "document an earlier find_one read as",
                      n);
  } else if (!json_is_string(target) ||
             (rc = dtx__check_user_coll("txn script",
                                         json_string_value(target)))) {
    return rc ? dtx__err_wrap(rc, "txn script step %zu (%s)", n, verb)
              : dtx__err(DTX_EINVAL, "txn script step %zu (%s): not a "
                                     "valid collection name",
                         n, verb);
  }
  if (filter || strcmp(verb, "insert")) {
    dtx__filter_t *f = NULL;
    if (!json_is_object(filter))
      return dtx__err(DTX_EINVAL, "txn script step %zu (%s): filter is not "
                                  "an object",
                      n, verb);
    if ((rc = dtx__filter_compile(filter, &f)))
      return dtx__err_wrap(rc, "txn script step %zu (%s): filter", n, verb);
    dtx__filter_free(f);
    if (filter_meta(filter))
      return dtx__err(DTX_EINVAL, "txn script step %zu (%s): the filter "
                                  "names %s, doctx's transaction field "
                                  "(docs/transactions.md)",
                      n, verb, DTX__TXN_FIELD);
  }
  const json_t *as = json_object_get(step, "as");
  if (!strcmp(verb, "find_one") || !strcmp(verb, "find")) {
    if (!json_is_string(as) || json_string_length(as) < 1 ||
        json_string_length(as) > 64)
      return dtx__err(DTX_EINVAL, "txn script step %zu (%s): as is not a "
                                  "name of 1..64 bytes",
                      n, verb);
    json_object_set_new(names, json_string_value(as),
                        json_boolean(!strcmp(verb, "find_one")));
  }
  if (!strcmp(verb, "find")) {
    const json_t *l = json_object_get(step, "limit");
    if (!json_is_integer(l) || json_integer_value(l) < 1 ||
        json_integer_value(l) > 1000)
      return dtx__err(DTX_EINVAL, "txn script step %zu (find): limit is not "
                                  "an integer in 1..1000",
                      n);
  }
  if (!strcmp(verb, "insert") &&
      !json_is_object(json_object_get(step, "doc")))
    return dtx__err(DTX_EINVAL, "txn script step %zu (insert): doc is not "
                                "an object",
                    n);
  if (!strcmp(verb, "insert")) { /* the checks of a plain insert */
    json_t *copy = NULL;
    rc = dtx__st_prepare_doc(json_string_value(target),
                             json_object_get(step, "doc"), &copy);
    json_decref(copy);
    if (rc)
      return dtx__err_wrap(rc, "txn script step %zu (insert): doc", n);
  }
  if (!strcmp(verb, "insert") && dollar_name(json_object_get(step, "doc")))
    return dtx__err(DTX_EINVAL, "txn script step %zu (insert): a top-level "
                                "field of doc is empty or starts with '$'",
                    n);
  if ((!strcmp(verb, "insert") &&
       json_object_get(json_object_get(step, "doc"), DTX__TXN_FIELD)) ||
      (!strcmp(verb, "update") && touches_meta(json_object_get(step, "with"))))
    return dtx__err(DTX_EINVAL, "txn script step %zu (%s): %s is doctx's "
                                "transaction field (docs/transactions.md)",
                    n, verb, DTX__TXN_FIELD);
  if (!strcmp(verb, "update")) {
    dtx__update_t *u = NULL;
    const json_t *up = json_object_get(step, "upsert");
    if (up && !json_is_boolean(up))
      return dtx__err(DTX_EINVAL, "txn script step %zu (update): upsert is "
                                  "not a boolean",
                      n);
    if ((rc = dtx__update_compile(json_object_get(step, "with"), &u)))
      return dtx__err_wrap(rc, "txn script step %zu (update): with", n);
    dtx__update_free(u);
  }
  return 0;
}

int dtx_txn_script_check(const json_t *script) {
  if (!json_is_array(script) || json_array_size(script) == 0 ||
      json_array_size(script) > DTX__TXN_MAX_KEYS)
    return dtx__err(DTX_EINVAL, "txn script: not an array of 1..%d steps",
                    DTX__TXN_MAX_KEYS);
  json_t *names = json_object(), *step;
  size_t i;
  int rc = names ? 0 : DTX_ENOMEM;
  json_array_foreach(script, i, step) if (rc == 0) rc =
      check_step(step, i + 1, names);
  json_decref(names);
  return rc;
}

typedef struct run {
  const json_t *script;
  json_t *reads;
  int required_failed;
} run_t;

static int run_steps(dtx_txn_t *t, void *arg) {
  run_t *r = arg;
  json_t *step;
  size_t i;
  json_object_clear(r->reads);
  json_array_foreach(r->script, i, step) {
    const char *verb = verb_of(step);
    const json_t *target = json_object_get(step, verb);
    const char *coll = json_string_value(target);
    const json_t *filter = json_object_get(step, "filter");
    json_t *out = NULL;
    int rc = 0;
    if (!strcmp(verb, "find_one")) {
      rc = dtx_txn_find_one(t, coll, filter, &out);
      if (rc == 0)
        json_object_set_new(r->reads, dtx__str(step, "as"),
                            out ? out : json_null());
    } else if (!strcmp(verb, "find")) {
      rc = dtx_txn_find(t, coll, filter, dtx__int(step, "limit"), &out);
      if (rc == 0)
        json_object_set_new(r->reads, dtx__str(step, "as"), out);
    } else if (!strcmp(verb, "require")) {
      const json_t *d = json_object_get(r->reads, coll);
      dtx__filter_t *f = NULL;
      rc = dtx__filter_compile(filter, &f);
      int ok = rc == 0 && json_is_object(d) && dtx__filter_match(f, d) == 1;
      dtx__filter_free(f);
      if (rc == 0 && !ok) {
        r->required_failed = 1;
        return dtx__err(DTX_ENOMATCH, "txn %s: step %zu: %s does not match "
                                      "the require filter",
                        dtx_txn_id(t), i + 1, coll);
      }
    } else if (!strcmp(verb, "insert")) {
      rc = dtx_txn_insert(t, coll, json_object_get(step, "doc"));
    } else if (!strcmp(verb, "update")) {
      rc = dtx_txn_update(t, coll, filter, json_object_get(step, "with"),
                          json_is_true(json_object_get(step, "upsert")),
                          NULL);
    } else {
      rc = dtx_txn_delete(t, coll, filter, NULL);
    }
    if (rc)
      return rc;
  }
  return 0;
}

int dtx_txn_script_run(dtx_store_t *st, const dtx_txn_opts_t *opts,
                       const json_t *script, json_t **out) {
  *out = NULL;
  int rc = dtx_txn_script_check(script);
  if (rc == 0)
    rc = dtx_txn_opts_check(opts);
  if (rc)
    return rc;
  run_t r = {.script = script, .reads = json_object()};
  if (!r.reads)
    return DTX_ENOMEM;
  rc = dtx_txn_run(st, opts, run_steps, &r);
  if (rc == 0 || (rc == DTX_ENOMATCH && r.required_failed)) {
    *out = json_pack("{s:s,s:O}", "outcome", rc ? "aborted" : "committed",
                     "reads", r.reads);
    if (!*out)
      rc = DTX_ENOMEM;
  }
  json_decref(r.reads);
  return rc;
}
