/* cmd_version.c -- doctx version: the CLI face of versioned documents
 * (src/txn/version/, docs/versions.md).  The library checks the item,
 * the keys, the number of children and the documents before it writes;
 * this file reads the arguments and maps its errors to exit codes. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* The --child KEY=DOC and --remove-child KEY changes, in their order, into
 * ch (keys malloc'd, docs parsed); 0 or the exit code. */
static int changes(const dtx__cli_args_t *a, dtx_version_child_t *ch,
                   size_t *n) {
  int child = dtx__cli_opt_index(a->spec, "--child");
  int remove = dtx__cli_opt_index(a->spec, "--remove-child");
  for (int i = 0; i < a->nocc; i++) {
    const char *arg = a->occval[i], *eq = strchr(arg, '=');
    if (a->occ[i] != child && a->occ[i] != remove)
      continue;
    if (a->occ[i] == child && !eq)
      return dtx__cli_usage("version put: --child expects KEY=DOC, got '%s'",
                            arg);
    json_t *doc = NULL;
    char *key = strndup(arg, a->occ[i] == child ? (size_t)(eq - arg)
                                                : strlen(arg));
    if (!key)
      return dtx__cli_error(DTX_ENOMEM, "version put");
    ch[(*n)++] = (dtx_version_child_t){.key = key};
    if (a->occ[i] == child && !(doc = dtx__cli_json(eq + 1, "child DOC")))
      return DTX_EXIT_USAGE;
    ch[*n - 1].doc = doc;
  }
  return 0;
}

static int put(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_version_child_t *ch = calloc((size_t)a->nocc + 1, sizeof *ch);
  dtx_version_put_req_t req = {
      .item = a->pos[0], .children = ch,
      .expect_version = dtx__cli_num(a, "--expect-version", DTX_VERSION_ANY)};
  json_t *root = NULL, *res = NULL;
  int code = ch ? changes(a, ch, &req.nchildren)
                : dtx__cli_error(DTX_ENOMEM, "version put");
  dtx_store_t *st = NULL;
  if (!code && !(root = dtx__cli_json(a->pos[1], "ROOT")))
    code = DTX_EXIT_USAGE;
  req.root = root;
  int rc = code ? 0 : dtx_version_put_req_check(&req); /* before the open */
  if (rc)
    code = dtx__cli_fail(rc);
  else if (!code && (st = dtx__cli_store(cli, &code))) {
    code = dtx__cli_summary(dtx_version_put(st, &req, NULL, &res), &res);
  }
  for (size_t i = 0; i < req.nchildren; i++) {
    free((char *)ch[i].key);
    json_decref((json_t *)ch[i].doc);
  }
  free(ch);
  json_decref(root);
  return code;
}

static int get(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *out = NULL;
  int code, history = strcmp(a->spec->name, "history") == 0, rc;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  if (!history)
    return dtx__cli_summary(
        dtx_version_get(st, a->pos[0],
                        dtx__cli_num(a, "--version", DTX_VERSION_LATEST), &out),
        &out);
  rc = dtx_version_history(st, a->pos[0], &out);
  return dtx__cli_items(rc, &out, 1, 0);
}

static int gc(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_version_gc_opts_t o = {
      .keep = dtx__cli_num(a, "--keep", DTX_VERSION_KEEP),
      .grace_ms = dtx__cli_num(a, "--grace-ms", -1)};
  json_t *sum = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  return st ? dtx__cli_summary(dtx_version_gc(st, &o, &sum), &sum) : code;
}

const dtx__cli_spec_t dtx__cmd_version = {
    "version", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"put", put, "ITEM ROOT",
         (const dtx__cli_opt_t[]){{"--child", DTX__CLI_LIST, "KEY=DOC"},
                                  {"--remove-child", DTX__CLI_LIST, "KEY"},
                                  {"--expect-version", DTX__CLI_COUNT, "N"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"get", get, "ITEM",
         (const dtx__cli_opt_t[]){{"--version", DTX__CLI_POS, "N"}, {NULL}},
         DTX__CLI_READS},
        {"history", get, "ITEM", NULL, DTX__CLI_READS},
        {"gc", gc, NULL,
         (const dtx__cli_opt_t[]){{"--keep", DTX__CLI_POS, "N"},
                                  {"--grace-ms", DTX__CLI_COUNT, "G"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {NULL}},
    NULL,
    "put writes a new version of ITEM: ROOT (a JSON object) and the children\n"
    "of the previous version, with each --child KEY=DOC (a JSON object) set\n"
    "and each --remove-child KEY dropped (KEY: 1..64 of [A-Za-z0-9_-]); the\n"
    "others carry over.  It prints {\"item\",\"version\"}.  With\n"
    "--expect-version N it exits 3 unless the committed version is N (0: the\n"
    "item has none); without, a put that loses a race tries again.\n"
    "get prints {\"item\",\"version\",\"root\",\"children\":{KEY: DOC}} of the\n"
    "committed version, or of version N if it is kept: never a mix.\n"
    "history prints one line per committed version kept, oldest first:\n"
    "{\"version\",\"committed\" (ms),\"children\":[KEYS]}.\n"
    "gc keeps the last N (default 10) committed versions of every item and\n"
    "removes older ones superseded more than G ms ago (default 60000: a\n"
    "reader that started before may still be reading them), then what no\n"
    "kept version refers to; it prints {\"ok\",\"items\",\"removed\",\"deleted\"}.\n"
    "doctx recover (and worker) abandon reservations whose writer's lease\n"
    "lapsed and remove what they wrote.\n"
    "exit: 0 ok; 1 no such item, version or child to remove; 2 invalid\n"
    "      input (nothing is written); 3 --expect-version not met, a write\n"
    "      refused by a collection's rules; 4 store error, or a root or\n"
    "      document written past the rules (nothing is written or removed\n"
    "      there; doctx audit reports it)\n"};
