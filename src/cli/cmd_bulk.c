/* cmd_bulk.c -- doctx bulk COLL: many single-document writes from stdin
 * (or --file), one JSON operation per line in the shape of MongoDB's
 * bulkWrite, run through dtx_store_bulk_write, one JSON result per line.
 *
 * Like every document command it runs in two phases: every line is read,
 * parsed and checked first (the operation's shape, its filter, update,
 * sort and projection compiled by the document layer, as the other
 * commands do); a malformed line exits 2 naming it, before the store is
 * opened, so nothing runs.  Then the operations go to the store in
 * batches of BULK_CHUNK, each one dtx_store_bulk_write (on SQLite one
 * transaction), and each line's result is printed in input order.
 *
 * Exit code: 0 when every operation succeeded; 3 when some failed with
 * an error of their own (NOMATCH of a findOneAndUpdate, DUPKEY,
 * VALIDATION, a bad operator the store found ...); 4 when some failed
 * because of the store (UNAVAILABLE, BACKEND, BUSY, FAULT), which wins
 * over 3; 2 when a line is malformed (nothing ran). */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#define BULK_CHUNK 1000

/* One parsed line: the op (borrowing from `line`, which it owns). */
typedef struct bline {
  dtx__cli_jline_t j; /* first: the line number and the parsed line */
  dtx_bulk_op_t op;
  dtx_update_opts_t uo;
  dtx_fam_opts_t fo;
  dtx_insert_opts_t io;
  dtx_delete_opts_t dopt;
} bline_t;

static const struct {
  const char *name;
  dtx_bulk_kind_t kind;
  const char *const *keys; /* allowed keys of the op's body */
} kinds[] = {
    {"insertOne", DTX_BULK_INSERT,
     (const char *const[]){"document", "bypassDocumentValidation", NULL}},
    {"updateOne", DTX_BULK_UPDATE_ONE,
     (const char *const[]){"filter", "update", "upsert", "arrayFilters",
                           "bypassDocumentValidation", NULL}},
    {"deleteOne", DTX_BULK_DELETE_ONE,
     (const char *const[]){"filter", "bypassDocumentValidation", NULL}},
    {"findOneAndUpdate", DTX_BULK_FIND_ONE_AND_UPDATE,
     (const char *const[]){"filter", "update", "upsert", "arrayFilters",
                           "sort", "projection", "returnDocument",
                           "bypassDocumentValidation", NULL}},
    {"findOneAndDelete", DTX_BULK_FIND_ONE_AND_DELETE,
     (const char *const[]){"filter", "sort", "projection",
                           "bypassDocumentValidation", NULL}},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* A boolean member (absent: 0); -1 when it is not a boolean. */
static int get_bool(const json_t *body, const char *key) {
  const json_t *v = json_object_get(body, key);
  return !v ? 0 : json_is_boolean(v) ? json_is_true(v) : -1;
}

/* Checks one line's shape and compiles its parts; fills l->op.  0 or an
 * exit code (printed). */
static int parse_line(const char *coll, bline_t *l) {
  size_t ln = l->j.lineno;
  json_t *v = l->j.line;
  if (!json_is_object(v) || json_object_size(v) != 1)
    return dtx__cli_bad_line(ln, DTX_EINVAL, "%s",
                    "an operation is an object with one key: insertOne, "
                    "updateOne, deleteOne, findOneAndUpdate or "
                    "findOneAndDelete");
  const char *name = json_object_iter_key(json_object_iter(v));
  json_t *body = json_object_iter_value(json_object_iter(v));
  size_t k = 0;
  while (k < NKINDS && strcmp(kinds[k].name, name) != 0)
    k++;
  if (k == NKINDS)
    return dtx__cli_bad_line(ln, DTX_EINVAL, "unknown operation '%.200s'",
                             name);
  if (!json_is_object(body))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "%.200s must be an object",
                             name);
  const char *key;
  json_t *f;
  json_object_foreach(body, key, f) {
    size_t j = 0;
    while (kinds[k].keys[j] && strcmp(kinds[k].keys[j], key) != 0)
      j++;
    if (!kinds[k].keys[j])
      return dtx__cli_bad_line(ln, DTX_EINVAL, "unknown field '%.200s'",
                               key);
  }
  dtx_bulk_op_t *op = &l->op;
  op->kind = kinds[k].kind;
  op->coll = coll;
  op->doc = json_object_get(body, "document");
  op->filter = json_object_get(body, "filter");
  op->update = json_object_get(body, "update");
  const json_t *afs = json_object_get(body, "arrayFilters");
  const json_t *sort = json_object_get(body, "sort");
  const json_t *proj = json_object_get(body, "projection");
  const json_t *ret = json_object_get(body, "returnDocument");
  int upsert = get_bool(body, "upsert");
  int bypass = get_bool(body, "bypassDocumentValidation");
  if (upsert < 0 || bypass < 0)
    return dtx__cli_bad_line(ln, DTX_EINVAL, "%s",
                    "upsert and bypassDocumentValidation are booleans");
  if (ret && (!json_is_string(ret) ||
              (strcmp(json_string_value(ret), "before") != 0 &&
               strcmp(json_string_value(ret), "after") != 0)))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "%s",
                    "returnDocument is \"before\" or \"after\"");
  int rc = 0;
  if (op->kind == DTX_BULK_INSERT) {
    if (!json_is_object(op->doc))
      return dtx__cli_bad_line(ln, DTX_EINVAL, "%s",
                      "insertOne needs a \"document\" object");
    const json_t *id = json_object_get(op->doc, "_id");
    if (id && (rc = dtx_check_id(id)) < 0)
      return dtx__cli_bad_line(ln, rc, "%s", dtx_errdetail());
  } else {
    if (!json_is_object(op->filter))
      return dtx__cli_bad_line(ln, DTX_EBADQUERY, "%s",
                      "\"filter\" must be an object");
    if ((rc = dtx_check_filter(op->filter)) < 0)
      return dtx__cli_bad_line(ln, rc, "filter: %s", dtx_errdetail());
  }
  int updates = op->kind == DTX_BULK_UPDATE_ONE ||
                op->kind == DTX_BULK_FIND_ONE_AND_UPDATE;
  if (updates) {
    if (!json_is_object(op->update))
      return dtx__cli_bad_line(ln, DTX_EBADUPDATE, "%s",
                      "\"update\" must be an object");
    if ((rc = dtx_check_update(op->update, afs, 0)) < 0)
      return dtx__cli_bad_line(ln, rc, "update: %s", dtx_errdetail());
  }
  if ((sort && (rc = dtx_check_sort(sort)) < 0) ||
      (proj && (rc = dtx_check_projection(proj)) < 0))
    return dtx__cli_bad_line(ln, rc, "%s", dtx_errdetail());
  switch (op->kind) {
  case DTX_BULK_INSERT:
    l->io.bypass_validation = bypass;
    op->insert_opts = &l->io;
    break;
  case DTX_BULK_UPDATE_ONE:
    l->uo = (dtx_update_opts_t){.upsert = upsert, .array_filters = afs,
                                .bypass_validation = bypass};
    op->update_opts = &l->uo;
    break;
  case DTX_BULK_DELETE_ONE:
    l->dopt.bypass_validation = bypass;
    op->delete_opts = &l->dopt;
    break;
  default:
    l->fo = (dtx_fam_opts_t){
        .sort = sort, .projection = proj, .upsert = upsert,
        .return_new = ret && strcmp(json_string_value(ret), "after") == 0,
        .array_filters = afs, .bypass_validation = bypass};
    op->fam_opts = &l->fo;
  }
  return 0;
}

/* The result line of one operation. */
static json_t *result_json(const dtx_bulk_op_t *op,
                           const dtx_bulk_result_t *r) {
  if (r->rc < 0)
    return json_pack("{s:b,s:s,s:s}", "ok", 0, "error", dtx_errname(r->rc),
                     "detail", r->detail ? r->detail : "");
  switch (op->kind) {
  case DTX_BULK_INSERT:
    return json_pack("{s:b,s:O}", "ok", 1, "insertedId", r->id);
  case DTX_BULK_UPDATE_ONE:
    return r->id ? json_pack("{s:b,s:I,s:I,s:O}", "ok", 1, "matched",
                             (json_int_t)r->matched, "modified",
                             (json_int_t)r->modified, "upsertedId", r->id)
                 : json_pack("{s:b,s:I,s:I}", "ok", 1, "matched",
                             (json_int_t)r->matched, "modified",
                             (json_int_t)r->modified);
  case DTX_BULK_DELETE_ONE:
    return json_pack("{s:b,s:I}", "ok", 1, "deleted", (json_int_t)r->modified);
  default:
    return r->id ? json_pack("{s:b,s:O?,s:O}", "ok", 1, "doc", r->doc,
                             "upsertedId", r->id)
                 : json_pack("{s:b,s:O?}", "ok", 1, "doc", r->doc);
  }
}

/* Exit code of one failed operation: 4 for the store's failures, else 3. */
static int op_exit(int rc) {
  return dtx__cli_exit_code(rc) == DTX_EXIT_BACKEND ? DTX_EXIT_BACKEND
                                                    : DTX_EXIT_CONSTRAINT;
}

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *coll = a->pos[0], *file = dtx__cli_str(a, "--file");
  int rc = dtx_check_collection(coll);
  if (rc < 0)
    return dtx__cli_fail(rc);
  bline_t *ls = NULL;
  size_t n = 0;
  int ec = dtx__cli_read_jlines(file, "bulk: reading the operations",
                                sizeof *ls, (void **)&ls, &n);
  for (size_t i = 0; !ec && i < n; i++)
    ec = parse_line(coll, &ls[i]);
  dtx_store_t *st = ec ? NULL : dtx__cli_store(cli, &ec);
  dtx_bulk_op_t *ops = st ? calloc(n ? n : 1, sizeof *ops) : NULL;
  dtx_bulk_result_t *res = st ? calloc(n ? n : 1, sizeof *res) : NULL;
  if (st && (!ops || !res))
    ec = dtx__cli_error(DTX_ENOMEM, "bulk of %zu operations", n);
  for (size_t i = 0; !ec && i < n; i++)
    ops[i] = ls[i].op;
  int worst = DTX_EXIT_OK;
  for (size_t from = 0; !ec && from < n; from += BULK_CHUNK) {
    size_t k = n - from < BULK_CHUNK ? n - from : BULK_CHUNK;
    (void)dtx_store_bulk_write(st, ops + from, k, res + from);
    for (size_t i = from; i < from + k; i++) {
      json_t *out = result_json(&ops[i], &res[i]);
      if (out)
        dtx__cli_print_json(out);
      else
        puts("{\"ok\":false,\"error\":\"NOMEM\"}");
      json_decref(out);
      if (res[i].rc < 0 && op_exit(res[i].rc) > worst)
        worst = op_exit(res[i].rc);
    }
    dtx_bulk_results_clear(res + from, k);
  }
  dtx__cli_jlines_free(ls, n, sizeof *ls);
  free(ops);
  free(res);
  return ec ? ec : worst;
}

const dtx__cli_spec_t dtx__cmd_bulk = {
    "bulk", run, "COLL", (const dtx__cli_opt_t[]){DTX__CLI_OPT_FILE, {NULL}},
    DTX__CLI_DOC, NULL,
    "one write per input line (bulkWrite shape); one result per line",
    "Runs many single-document writes on COLL, one JSON operation per line\n"
    "of stdin (or PATH), in MongoDB's bulkWrite shape:\n"
    "  {\"insertOne\":{\"document\":DOC}}\n"
    "  {\"updateOne\":{\"filter\":F,\"update\":U,\"upsert\":B,\"arrayFilters\":A}}\n"
    "  {\"deleteOne\":{\"filter\":F}}\n"
    "  {\"findOneAndUpdate\":{\"filter\":F,\"update\":U,\"sort\":S,\"projection\":P,\n"
    "      \"upsert\":B,\"returnDocument\":\"before\"|\"after\",\"arrayFilters\":A}}\n"
    "  {\"findOneAndDelete\":{\"filter\":F,\"sort\":S,\"projection\":P}}\n"
    "(each may also carry \"bypassDocumentValidation\":true; blank lines\n"
    "are skipped).  Each operation is atomic on its own, as the single\n"
    "command; the batch is not a transaction (unordered: every operation\n"
    "runs, whatever the others do).  Prints one result per operation, in\n"
    "order: {\"ok\":true,\"insertedId\":ID}, {\"ok\":true,\"matched\":N,\n"
    "\"modified\":M[,\"upsertedId\":ID]}, {\"ok\":true,\"deleted\":N},\n"
    "{\"ok\":true,\"doc\":DOC|null[,\"upsertedId\":ID]}, or for a failed one\n"
    "{\"ok\":false,\"error\":NAME,\"detail\":TEXT} (a findOneAndUpdate that\n"
    "matched nothing fails with NOMATCH).  Lines go to the store in batches\n"
    "of 1000 (on SQLite, one transaction each).\n"
    "Exit: 0 every operation succeeded; 3 some failed; 4 some failed because\n"
    "of the store (wins over 3); 2 a line is malformed (it is named on\n"
    "stderr and nothing runs).\n"};
