/* cmd_doc.c -- the document commands: insert, find, count, update,
 * find-and-modify, aggregate, delete, index, indexes, drop, collections
 * and rules.
 *
 * Each command runs in two phases.  First it parses and checks every
 * argument -- options, numbers, the collection name, and each JSON value,
 * compiling filters and updates with the document layer -- without
 * touching the store.  Only then does it open the store and make one
 * library call.  So a typo in the last argument can never leave a
 * half-done change behind, and bad input always exits 2. */
#include "cli/cli.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- argument parsing ------------------------------------------------------ */

enum {
  O_SORT = 1 << 0,
  O_LIMIT = 1 << 1,
  O_SKIP = 1 << 2,
  O_PROJECT = 1 << 3,
  O_MANY = 1 << 4,
  O_UPSERT = 1 << 5,
  O_NEW = 1 << 6,
  O_UNIQUE = 1 << 7,
  O_SPARSE = 1 << 8,
  O_ARRAY_FILTERS = 1 << 9,
  O_BYPASS = 1 << 10,
  O_VALIDATOR = 1 << 11,
  O_GUARD = 1 << 12,
  O_CLEAR = 1 << 13,
  O_FENCE = 1 << 14,
  O_TRANSITION = 1 << 15,
};

static const struct option {
  const char *name;
  unsigned bit;
  int takes_value;
} options[] = {
    {"--sort", O_SORT, 1},     {"--limit", O_LIMIT, 1},
    {"--skip", O_SKIP, 1},     {"--project", O_PROJECT, 1},
    {"--many", O_MANY, 0},     {"--upsert", O_UPSERT, 0},
    {"--new", O_NEW, 0},       {"--unique", O_UNIQUE, 0},
    {"--sparse", O_SPARSE, 0}, {"--array-filters", O_ARRAY_FILTERS, 1},
    {"--bypass-validation", O_BYPASS, 0},
    {"--validator", O_VALIDATOR, 1}, {"--delete-guard", O_GUARD, 1},
    {"--clear", O_CLEAR, 0},       {"--fence", O_FENCE, 1},
    {"--transition", O_TRANSITION, 1},
};
#define NOPTIONS (sizeof options / sizeof options[0])

/* What one command accepts, and what the command line gave it. */
typedef struct args {
  const char *cmd;
  unsigned allowed;   /* O_* bits */
  const char *const *posnames; /* names of positionals, for messages */
  int minpos, maxpos; /* maxpos -1: any number */
  unsigned given;
  const char *value[NOPTIONS]; /* by option index */
  char **pos;
  int npos;
} args_t;

static int option_index(unsigned bit) {
  for (int i = 0; i < (int)(sizeof options / sizeof options[0]); i++)
    if (options[i].bit == bit)
      return i;
  return -1;
}

static const char *optval(const args_t *a, unsigned bit) {
  return (a->given & bit) ? a->value[option_index(bit)] : NULL;
}

/* Splits argv into options and positionals.  Options may come anywhere;
 * "--" ends them.  Returns 0 or an exit code (usage already printed).
 * a->pos points into a malloc'd array the caller frees. */
static int parse_args(args_t *a, int argc, char **argv) {
  int dashdash = 0;
  a->cmd = argv[0];
  a->pos = calloc((size_t)argc + 1, sizeof *a->pos);
  if (!a->pos)
    return dtx__cli_error(DTX_ENOMEM, "parsing arguments");
  for (int i = 1; i < argc; i++) {
    char *arg = argv[i];
    if (dashdash || arg[0] != '-' || arg[1] == '\0') {
      a->pos[a->npos++] = arg;
      continue;
    }
    if (strcmp(arg, "--") == 0) {
      dashdash = 1;
      continue;
    }
    const char *eq = strchr(arg, '=');
    size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
    int k = -1;
    for (int j = 0; j < (int)(sizeof options / sizeof options[0]); j++)
      if (strlen(options[j].name) == nlen &&
          strncmp(options[j].name, arg, nlen) == 0 &&
          (a->allowed & options[j].bit))
        k = j;
    if (k < 0)
      return dtx__cli_usage("%s: unknown option '%.*s' (see doctx %s --help)",
                            a->cmd, (int)nlen, arg, a->cmd);
    const struct option *o = &options[k];
    if (a->given & o->bit)
      return dtx__cli_usage("%s: option %s given twice", a->cmd, o->name);
    if (o->takes_value) {
      if (eq)
        a->value[k] = eq + 1;
      else if (i + 1 < argc)
        a->value[k] = argv[++i];
      else
        return dtx__cli_usage("%s: option %s needs a value", a->cmd, o->name);
    } else if (eq) {
      return dtx__cli_usage("%s: option %s takes no value", a->cmd, o->name);
    }
    a->given |= o->bit;
  }
  if (a->npos < a->minpos)
    return dtx__cli_usage("%s: missing argument %s (see doctx %s --help)",
                          a->cmd, a->posnames[a->npos], a->cmd);
  if (a->maxpos >= 0 && a->npos > a->maxpos)
    return dtx__cli_usage("%s: unexpected argument '%s' (see doctx %s --help)",
                          a->cmd, a->pos[a->maxpos], a->cmd);
  return 0;
}

/* ---- argument checks (no store access) ----------------------------------------- */

/* --fence NAME:TOKEN (split at the last ':', since lock names such as
 * "job:7" hold one), checked as the library will check it, so that bad
 * input exits 2 before the store is opened.  *name points into argv. */
static int parse_fence(const args_t *a, const char **name, int64_t *token) {
  return dtx__cli_fence(a->cmd, optval(a, O_FENCE), name, token);
}

static int check_coll(const char *coll) {
  int rc = dtx_check_collection(coll);
  return rc < 0 ? dtx__cli_fail(rc) : 0;
}

/* The strict non-negative integer of --limit/--skip; absent means 0. */
static int opt_count(const args_t *a, unsigned bit, int64_t *out) {
  const char *v = optval(a, bit);
  *out = 0;
  if (v && dtx__cli_int64(v, 0, out) < 0)
    return dtx__cli_usage("%s: %s needs a non-negative integer, not '%s'",
                          a->cmd, options[option_index(bit)].name, v);
  return 0;
}

/* Parses a FILTER and compiles it once, so unknown operators are caught
 * before the store is opened.  A missing text means {}. */
static int parse_filter(const char *text, json_t **out) {
  *out = NULL;
  if (!text)
    return (*out = json_object()) ? 0 : dtx__cli_fail(DTX_ENOMEM);
  json_t *f = dtx__cli_json(text, "FILTER");
  if (!f)
    return DTX_EXIT_USAGE;
  if (!json_is_object(f)) {
    json_decref(f);
    return dtx__cli_error(DTX_EBADQUERY, "FILTER must be a JSON object");
  }
  int rc = dtx_check_filter(f);
  if (rc < 0) {
    json_decref(f);
    return dtx__cli_fail(rc);
  }
  *out = f;
  return 0;
}

/* UPDATE, and --array-filters with it (*afs NULL when absent): compiled
 * together, since each $[id] needs its filter and each filter its $[id]. */
static int parse_update(const args_t *a, const char *text, int many,
                        json_t **out, json_t **afs) {
  *out = NULL;
  *afs = NULL;
  const char *aftext = optval(a, O_ARRAY_FILTERS);
  if (aftext && !(*afs = dtx__cli_json(aftext, "--array-filters")))
    return DTX_EXIT_USAGE;
  json_t *u = dtx__cli_json(text, "UPDATE");
  if (!u) {
    json_decref(*afs);
    *afs = NULL;
    return DTX_EXIT_USAGE;
  }
  int ec = 0, rc;
  if (!json_is_object(u))
    ec = dtx__cli_error(DTX_EBADUPDATE, "UPDATE must be a JSON object");
  else if ((rc = dtx_check_update(u, *afs, many ? DTX_CHECK_MANY : 0)) < 0)
    ec = dtx__cli_fail(rc);
  if (ec) {
    json_decref(u);
    json_decref(*afs);
    *afs = NULL;
    return ec;
  }
  *out = u;
  return 0;
}

/* --sort and --project (optional; NULL when absent). */
static int parse_sort(const args_t *a, json_t **out) {
  const char *text = optval(a, O_SORT);
  *out = NULL;
  if (!text)
    return 0;
  json_t *s = dtx__cli_json(text, "--sort");
  if (!s)
    return DTX_EXIT_USAGE;
  int rc = dtx_check_sort(s);
  if (rc < 0) {
    json_decref(s);
    return dtx__cli_fail(rc);
  }
  *out = s;
  return 0;
}

static int parse_projection(const args_t *a, json_t **out) {
  const char *text = optval(a, O_PROJECT);
  *out = NULL;
  if (!text)
    return 0;
  json_t *p = dtx__cli_json(text, "--project");
  if (!p)
    return DTX_EXIT_USAGE;
  int rc = dtx_check_projection(p);
  if (rc < 0) {
    json_decref(p);
    return dtx__cli_fail(rc);
  }
  *out = p;
  return 0;
}

/* ---- commands ------------------------------------------------------------------ */

static const char *const pn_coll[] = {"COLL"};
static const char *const pn_doc[] = {"COLL", "DOC"};
static const char *const pn_filter[] = {"COLL", "FILTER"};
static const char *const pn_update[] = {"COLL", "FILTER", "UPDATE"};
static const char *const pn_keys[] = {"COLL", "KEYS"};

int dtx__cmd_insert(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.allowed = O_BYPASS, .posnames = pn_doc, .minpos = 2,
              .maxpos = -1};
  json_t *docs = NULL, *ids = NULL;
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = check_coll(a.pos[0])))
    goto out;
  if (!(docs = json_array())) {
    ec = dtx__cli_fail(DTX_ENOMEM);
    goto out;
  }
  for (int i = 1; i < a.npos; i++) {
    char what[32];
    snprintf(what, sizeof what, a.npos > 2 ? "DOC %d" : "DOC", i);
    json_t *d = dtx__cli_json(a.pos[i], what);
    if (!d) {
      ec = DTX_EXIT_USAGE;
      goto out;
    }
    json_array_append_new(docs, d);
    json_t *id = json_object_get(d, "_id");
    int rc = 0;
    if (!json_is_object(d)) {
      ec = dtx__cli_error(DTX_EINVAL, "%s must be a JSON object", what);
      goto out;
    }
    if (id && (rc = dtx_check_id(id)) < 0) {
      ec = dtx__cli_error(rc, "%s: %s", what, dtx_errdetail());
      goto out;
    }
  }
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  size_t n = 0;
  dtx_insert_opts_t io = {.bypass_validation = (a.given & O_BYPASS) != 0};
  int rc = dtx_store_insert_many_ex(st, a.pos[0], docs, &io, &n, &ids);
  for (size_t i = 0; i < json_array_size(ids); i++)
    dtx__cli_print_json(json_array_get(ids, i));
  if (rc < 0)
    ec = dtx__cli_fail(rc);
out:
  json_decref(docs);
  json_decref(ids);
  free(a.pos);
  return ec;
}

int dtx__cmd_find(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.allowed = O_SORT | O_LIMIT | O_SKIP | O_PROJECT,
              .posnames = pn_filter, .minpos = 1, .maxpos = 2};
  json_t *filter = NULL, *sort = NULL, *proj = NULL, *docs = NULL;
  dtx_find_opts_t fo = {0};
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = opt_count(&a, O_LIMIT, &fo.limit)) ||
      (ec = opt_count(&a, O_SKIP, &fo.skip)) || (ec = check_coll(a.pos[0])) ||
      (ec = parse_filter(a.npos > 1 ? a.pos[1] : NULL, &filter)) ||
      (ec = parse_sort(&a, &sort)) || (ec = parse_projection(&a, &proj)))
    goto out;
  fo.sort = sort;
  fo.projection = proj;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  int rc = dtx_store_find(st, a.pos[0], filter, &fo, &docs);
  if (rc < 0) {
    ec = dtx__cli_fail(rc);
    goto out;
  }
  for (size_t i = 0; i < json_array_size(docs); i++)
    dtx__cli_print_json(json_array_get(docs, i));
out:
  json_decref(filter);
  json_decref(sort);
  json_decref(proj);
  json_decref(docs);
  free(a.pos);
  return ec;
}

int dtx__cmd_count(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.posnames = pn_filter, .minpos = 1, .maxpos = 2};
  json_t *filter = NULL;
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = check_coll(a.pos[0])) ||
      (ec = parse_filter(a.npos > 1 ? a.pos[1] : NULL, &filter)))
    goto out;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  int64_t n;
  int rc = dtx_store_count(st, a.pos[0], filter, &n);
  if (rc < 0)
    ec = dtx__cli_fail(rc);
  else
    printf("%lld\n", (long long)n);
out:
  json_decref(filter);
  free(a.pos);
  return ec;
}

int dtx__cmd_update(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.allowed =
                  O_MANY | O_UPSERT | O_ARRAY_FILTERS | O_BYPASS | O_FENCE,
              .posnames = pn_update, .minpos = 3, .maxpos = 3};
  json_t *filter = NULL, *update = NULL, *afs = NULL;
  const char *fname;
  int64_t ftoken;
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = check_coll(a.pos[0])) ||
      (ec = parse_fence(&a, &fname, &ftoken)) ||
      (ec = parse_filter(a.pos[1], &filter)) ||
      (ec = parse_update(&a, a.pos[2], (a.given & O_MANY) != 0, &update,
                         &afs)))
    goto out;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  dtx_update_opts_t uo = {.many = (a.given & O_MANY) != 0,
                          .upsert = (a.given & O_UPSERT) != 0,
                          .array_filters = afs,
                          .bypass_validation = (a.given & O_BYPASS) != 0,
                          .fence_name = fname,
                          .fence_token = ftoken};
  dtx_update_result_t res;
  int rc = dtx_store_update(st, a.pos[0], filter, update, &uo, &res);
  if (rc < 0) {
    ec = dtx__cli_fail(rc);
    goto out;
  }
  json_t *r = json_pack("{sIsI}", "matched", (json_int_t)res.matched,
                        "modified", (json_int_t)res.modified);
  if (r && res.upserted_id)
    json_object_set(r, "upserted", res.upserted_id);
  dtx__cli_print_json(r);
  json_decref(r);
  json_decref(res.upserted_id);
out:
  json_decref(filter);
  json_decref(update);
  json_decref(afs);
  free(a.pos);
  return ec;
}

int dtx__cmd_find_and_modify(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.allowed = O_SORT | O_NEW | O_UPSERT | O_ARRAY_FILTERS |
                         O_BYPASS | O_FENCE,
              .posnames = pn_update, .minpos = 3, .maxpos = 3};
  json_t *filter = NULL, *update = NULL, *sort = NULL, *doc = NULL,
         *afs = NULL;
  const char *fname;
  int64_t ftoken;
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = check_coll(a.pos[0])) ||
      (ec = parse_fence(&a, &fname, &ftoken)) ||
      (ec = parse_filter(a.pos[1], &filter)) ||
      (ec = parse_update(&a, a.pos[2], 0, &update, &afs)) ||
      (ec = parse_sort(&a, &sort)))
    goto out;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  dtx_fam_opts_t fo = {.sort = sort,
                       .upsert = (a.given & O_UPSERT) != 0,
                       .return_new = (a.given & O_NEW) != 0,
                       .array_filters = afs,
                       .bypass_validation = (a.given & O_BYPASS) != 0,
                       .fence_name = fname,
                       .fence_token = ftoken};
  int rc =
      dtx_store_find_one_and_update(st, a.pos[0], filter, update, &fo, &doc);
  if (rc == DTX_ENOMATCH) {
    ec = DTX_EXIT_NOMATCH; /* silent, like grep: the exit code says it */
    goto out;
  }
  if (rc < 0) {
    ec = dtx__cli_fail(rc);
    goto out;
  }
  if (doc)
    dtx__cli_print_json(doc);
  else
    puts("null"); /* upserted, and there was no document before */
out:
  json_decref(filter);
  json_decref(update);
  json_decref(afs);
  json_decref(sort);
  json_decref(doc);
  free(a.pos);
  return ec;
}

static const char *const pn_pipeline[] = {"COLL", "PIPELINE"};

/* The pipeline is compiled before the store is opened, like every other
 * argument, so a bad stage exits 2 having touched nothing. */
int dtx__cmd_aggregate(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.posnames = pn_pipeline, .minpos = 2, .maxpos = 2};
  json_t *pipeline = NULL, *docs = NULL;
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = check_coll(a.pos[0])))
    goto out;
  if (!(pipeline = dtx__cli_json(a.pos[1], "PIPELINE"))) {
    ec = DTX_EXIT_USAGE;
    goto out;
  }
  int rc = dtx_check_pipeline(pipeline);
  if (rc < 0) {
    ec = dtx__cli_fail(rc);
    goto out;
  }
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  if ((rc = dtx_store_aggregate(st, a.pos[0], pipeline, NULL, &docs)) < 0) {
    ec = dtx__cli_fail(rc);
    goto out;
  }
  for (size_t i = 0; i < json_array_size(docs); i++)
    dtx__cli_print_json(json_array_get(docs, i));
out:
  json_decref(pipeline);
  json_decref(docs);
  free(a.pos);
  return ec;
}

int dtx__cmd_delete(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.allowed = O_MANY | O_BYPASS | O_FENCE, .posnames = pn_filter,
              .minpos = 2, .maxpos = 2};
  json_t *filter = NULL;
  const char *fname;
  int64_t ftoken;
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = check_coll(a.pos[0])) ||
      (ec = parse_fence(&a, &fname, &ftoken)) ||
      (ec = parse_filter(a.pos[1], &filter)))
    goto out;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  int64_t n = 0;
  dtx_delete_opts_t dopt = {.many = (a.given & O_MANY) != 0,
                            .bypass_validation = (a.given & O_BYPASS) != 0,
                            .fence_name = fname,
                            .fence_token = ftoken};
  int rc = dtx_store_delete_ex(st, a.pos[0], filter, &dopt, &n);
  if (rc < 0)
    ec = dtx__cli_fail(rc);
  else
    printf("{\"deleted\":%lld}\n", (long long)n);
out:
  json_decref(filter);
  free(a.pos);
  return ec;
}

int dtx__cmd_index(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.allowed = O_UNIQUE | O_SPARSE | O_BYPASS, .posnames = pn_keys,
              .minpos = 2, .maxpos = 2};
  json_t *keys = NULL;
  char *name = NULL;
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = check_coll(a.pos[0])))
    goto out;
  if (!(keys = dtx__cli_json(a.pos[1], "KEYS"))) {
    ec = DTX_EXIT_USAGE;
    goto out;
  }
  dtx_index_opts_t io = {.unique = (a.given & O_UNIQUE) != 0,
                         .sparse = (a.given & O_SPARSE) != 0,
                         .bypass_validation = (a.given & O_BYPASS) != 0};
  int rc = dtx_check_index(keys, &io);
  if (rc < 0) {
    ec = dtx__cli_fail(rc);
    goto out;
  }
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  if ((rc = dtx_store_create_index(st, a.pos[0], keys, &io, &name)) < 0)
    ec = dtx__cli_fail(rc);
  else
    puts(name);
out:
  json_decref(keys);
  free(name);
  free(a.pos);
  return ec;
}

/* indexes takes just COLL; drop COLL [--bypass-validation]. */
static int coll_only(dtx_cli_t *cli, int argc, char **argv, int list) {
  args_t a = {.allowed = list ? 0 : O_BYPASS, .posnames = pn_coll,
              .minpos = 1, .maxpos = 1};
  json_t *out = NULL;
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = check_coll(a.pos[0])))
    goto done;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto done;
  int rc = list ? dtx_store_list_indexes(st, a.pos[0], &out)
                : dtx_store_drop_collection_ex(
                      st, a.pos[0],
                      &(dtx_drop_opts_t){(a.given & O_BYPASS) != 0});
  if (rc < 0) {
    ec = dtx__cli_fail(rc);
    goto done;
  }
  for (size_t i = 0; i < json_array_size(out); i++)
    dtx__cli_print_json(json_array_get(out, i));
done:
  json_decref(out);
  free(a.pos);
  return ec;
}

int dtx__cmd_indexes(dtx_cli_t *cli, int argc, char **argv) {
  return coll_only(cli, argc, argv, 1);
}

int dtx__cmd_drop(dtx_cli_t *cli, int argc, char **argv) {
  return coll_only(cli, argc, argv, 0);
}

int dtx__cmd_collections(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.minpos = 0, .maxpos = 0};
  json_t *names = NULL;
  int ec = parse_args(&a, argc, argv);
  if (ec)
    goto out;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  int rc = dtx_store_list_collections(st, &names);
  if (rc < 0) {
    ec = dtx__cli_fail(rc);
    goto out;
  }
  /* Plain names: they are [A-Za-z0-9_.-] only, and shell loops want them
   * unquoted. */
  for (size_t i = 0; i < json_array_size(names); i++)
    puts(json_string_value(json_array_get(names, i)));
out:
  json_decref(names);
  free(a.pos);
  return ec;
}

/* dump: every collection's header line (indexes, rules, count) and its
 * documents by _id.  The crash and bad-input suites compare whole stores
 * after each row; one process doing it replaces some ten per row. */
int dtx__cmd_dump(dtx_cli_t *cli, int argc, char **argv) {
  args_t a = {.minpos = 0, .maxpos = 0};
  json_t *names = NULL, *sort = json_pack("{s:i}", "_id", 1);
  int ec = parse_args(&a, argc, argv);
  if (ec)
    goto out;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  int rc = dtx_store_list_collections(st, &names);
  for (size_t i = 0; rc >= 0 && i < json_array_size(names); i++) {
    const char *c = json_string_value(json_array_get(names, i));
    json_t *idx = NULL, *rules = NULL, *docs = NULL;
    dtx_find_opts_t fo = {.sort = sort};
    if ((rc = dtx_store_list_indexes(st, c, &idx)) >= 0 &&
        (rc = dtx_store_get_rules(st, c, &rules)) >= 0 &&
        (rc = dtx_store_find(st, c, NULL, &fo, &docs)) >= 0) {
      json_t *head = json_pack("{s:s,s:O,s:O,s:I}", "collection", c, "indexes",
                               idx, "rules", rules, "count",
                               (json_int_t)json_array_size(docs));
      dtx__cli_print_json(head);
      json_decref(head);
      for (size_t j = 0; j < json_array_size(docs); j++)
        dtx__cli_print_json(json_array_get(docs, j));
    }
    json_decref(idx);
    json_decref(rules);
    json_decref(docs);
  }
  if (rc < 0)
    ec = dtx__cli_fail(rc);
out:
  json_decref(names);
  json_decref(sort);
  free(a.pos);
  return ec;
}

/* rules COLL [--validator JSON] [--delete-guard JSON] [--transition JSON]
 * [--clear]: without options prints the rules; --validator /
 * --delete-guard / --transition replace that rule (JSON null removes it)
 * and keep the others; --clear removes them all.  The
 * library compiles the rules (a bad one exits 2 and changes nothing); the
 * result is printed as the store holds it. */
int dtx__cmd_rules(dtx_cli_t *cli, int argc, char **argv) {
  const unsigned set = O_VALIDATOR | O_GUARD | O_TRANSITION;
  args_t a = {.allowed = set | O_CLEAR | O_BYPASS, .posnames = pn_coll,
              .minpos = 1, .maxpos = 1};
  json_t *v = NULL, *g = NULL, *t = NULL, *cur = NULL;
  int ec = parse_args(&a, argc, argv);
  if (ec || (ec = check_coll(a.pos[0])))
    goto out;
  if ((a.given & O_CLEAR) && (a.given & set)) {
    ec = dtx__cli_usage("rules: --clear cannot be combined with --validator, "
                        "--delete-guard or --transition");
    goto out;
  }
  if (((a.given & O_VALIDATOR) &&
       !(v = dtx__cli_json(optval(&a, O_VALIDATOR), "--validator"))) ||
      ((a.given & O_GUARD) &&
       !(g = dtx__cli_json(optval(&a, O_GUARD), "--delete-guard"))) ||
      ((a.given & O_TRANSITION) &&
       !(t = dtx__cli_json(optval(&a, O_TRANSITION), "--transition")))) {
    ec = DTX_EXIT_USAGE;
    goto out;
  }
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (!st)
    goto out;
  int rc = 0;
  if (a.given & (set | O_CLEAR)) {
    dtx_collection_rules_t r = {NULL, NULL, NULL};
    if (!(a.given & O_CLEAR) &&
        (rc = dtx_store_get_rules(st, a.pos[0], &cur)) == 0) {
      r.validator = (a.given & O_VALIDATOR) ? v
                                            : json_object_get(cur, "validator");
      r.delete_guard = (a.given & O_GUARD)
                           ? g
                           : json_object_get(cur, "delete_guard");
      r.transition = (a.given & O_TRANSITION)
                         ? t
                         : json_object_get(cur, "transition");
    }
    /* The pattern a collection's rules belong to stays theirs. */
    dtx_rules_opts_t ro = {.bypass_validation = (a.given & O_BYPASS) != 0,
                           .pattern = json_string_value(
                               json_object_get(cur, "pattern"))};
    if (rc == 0)
      rc = dtx_store_set_rules_ex(st, a.pos[0], &r, &ro);
    json_decref(cur);
    cur = NULL;
  }
  if (rc == 0)
    rc = dtx_store_get_rules(st, a.pos[0], &cur);
  if (rc < 0)
    ec = dtx__cli_fail(rc);
  else
    dtx__cli_print_json(cur);
out:
  json_decref(v);
  json_decref(g);
  json_decref(t);
  json_decref(cur);
  free(a.pos);
  return ec;
}
