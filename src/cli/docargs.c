/* docargs.c -- the arguments of the document commands (cmd_insert.c ...
 * cmd_rules.c): a collection name, FILTER, UPDATE with --array-filters,
 * --sort and --project, each parsed and compiled by the library's own
 * checks before the store is opened.  So a typo in the last argument can
 * never leave a half-done change behind, and bad input always exits 2. */
#include "cli/cli.h"

#include <string.h>

int dtx__cli_coll(const char *coll) {
  int rc = dtx_check_collection(coll);
  return rc < 0 ? dtx__cli_fail(rc) : 0;
}

/* A JSON value that must be an object (rc names what it is not), then
 * checked by check (NULL: not). */
static int object(const char *text, const char *what, int rc,
                  int (*check)(const json_t *), json_t **out) {
  json_t *v = dtx__cli_json(text, what);
  int ec = 0;
  *out = NULL;
  if (!v)
    return DTX_EXIT_USAGE;
  if (!json_is_object(v))
    ec = dtx__cli_error(rc, "%s must be a JSON object", what);
  else if (check && (rc = check(v)) < 0)
    ec = dtx__cli_fail(rc);
  if (ec)
    json_decref(v);
  else
    *out = v;
  return ec;
}

int dtx__cli_filter(const char *text, json_t **out) {
  if (!text)
    return (*out = json_object()) ? 0 : dtx__cli_fail(DTX_ENOMEM);
  return object(text, "FILTER", DTX_EBADQUERY, dtx_check_filter, out);
}

int dtx__cli_update(const char *text, const char *aftext, int many,
                    json_t **out, json_t **afs) {
  *out = NULL;
  *afs = NULL;
  if (aftext && !(*afs = dtx__cli_json(aftext, "--array-filters")))
    return DTX_EXIT_USAGE;
  /* Compiled with its array filters: each $[id] needs its filter and
   * each filter its $[id]. */
  int rc, ec = object(text, "UPDATE", DTX_EBADUPDATE, NULL, out);
  if (!ec && (rc = dtx_check_update(*out, *afs, many ? DTX_CHECK_MANY : 0)))
    ec = dtx__cli_fail(rc);
  if (ec) {
    json_decref(*out);
    json_decref(*afs);
    *out = *afs = NULL;
  }
  return ec;
}

int dtx__cli_checked(const char *text, const char *what,
                     int (*check)(const json_t *), json_t **out) {
  *out = NULL;
  if (!text)
    return 0;
  if (!(*out = dtx__cli_json(text, what)))
    return DTX_EXIT_USAGE;
  int rc = check(*out);
  if (rc < 0) {
    json_decref(*out);
    *out = NULL;
    return dtx__cli_fail(rc);
  }
  return 0;
}
