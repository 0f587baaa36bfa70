/* cmd_version.c -- `doctx version ...`: the CLI face of versioned
 * documents (src/txn/version/, docs/versions.md).  The library checks
 * the item, the keys and the documents before it writes; this file splits
 * arguments (--child and --remove-child may repeat, so it reads them
 * itself) and maps errors to exit codes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char *version_help =
    "usage: doctx version put ITEM ROOT [--child KEY=DOC ...]\n"
    "                     [--remove-child KEY ...] [--expect-version N]\n"
    "       doctx version get ITEM [--version N]\n"
    "       doctx version history ITEM\n"
    "       doctx version gc [--keep N] [--grace-ms G]\n"
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
    "      there; doctx audit reports it)\n";

#define MAX_CHANGES DTX_VERSION_MAX_CHILDREN

typedef struct vargs {
  const char *pos[3];
  int npos;
  dtx_version_child_t ch[MAX_CHANGES];
  char *keys[MAX_CHANGES];
  size_t nch;
  const char *expect, *version, *keep, *grace;
  int puts; /* --child / --remove-child seen */
} vargs_t;

static void vargs_free(vargs_t *a) {
  for (size_t i = 0; i < a->nch; i++) {
    free(a->keys[i]);
    json_decref((json_t *)a->ch[i].doc);
  }
}

/* --child KEY=DOC: the key and the parsed document, or a usage error. */
static int add_child(vargs_t *a, const char *arg, int remove) {
  if (a->nch == MAX_CHANGES)
    return dtx__cli_usage("version put: at most %d child changes",
                          MAX_CHANGES);
  const char *eq = remove ? NULL : strchr(arg, '=');
  if (!remove && !eq)
    return dtx__cli_usage("version put: --child expects KEY=DOC, got '%s'",
                          arg);
  size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
  char *key = strndup(arg, klen);
  json_t *doc = NULL;
  if (!key)
    return dtx__cli_usage("version put: out of memory");
  if (!remove && !(doc = dtx__cli_json(eq + 1, "child DOC"))) {
    free(key);
    return DTX_EXIT_USAGE;
  }
  a->keys[a->nch] = key;
  a->ch[a->nch].key = key;
  a->ch[a->nch++].doc = doc;
  return 0;
}

static int parse(vargs_t *a, int argc, char **argv) {
  static const char *const valued[] = {"--child", "--remove-child",
                                       "--expect-version", "--version",
                                       "--keep", "--grace-ms"};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
      if (a->npos == 3)
        return dtx__cli_usage("version: unexpected argument '%s'", arg);
      a->pos[a->npos++] = arg;
      continue;
    }
    size_t k, len = strcspn(arg, "=");
    for (k = 0; k < sizeof valued / sizeof *valued; k++)
      if (strlen(valued[k]) == len && strncmp(valued[k], arg, len) == 0)
        break;
    if (k == sizeof valued / sizeof *valued)
      return dtx__cli_usage("version: unknown option %s", arg);
    const char *val = arg[len] ? arg + len + 1 : i + 1 < argc ? argv[++i]
                                                              : NULL;
    if (!val)
      return dtx__cli_usage("version: %.*s needs a value", (int)len, arg);
    int code = 0;
    switch (k) {
    case 0:
    case 1:
      a->puts = 1;
      code = add_child(a, val, k == 1);
      break;
    case 2: a->expect = val; break;
    case 3: a->version = val; break;
    case 4: a->keep = val; break;
    default: a->grace = val; break;
    }
    if (code)
      return code;
  }
  return 0;
}

/* An integer option value >= min (NULL: *out untouched). */
static int int_opt(const char *cmd, const char *name, const char *val,
                   int64_t min, int64_t *out) {
  if (val && (dtx__cli_int64(val, 0, out) != 0 || *out < min))
    return dtx__cli_usage("%s: %s expects an integer >= %lld, got '%s'", cmd,
                          name, (long long)min, val);
  return 0;
}

/* Options given that sub does not take: a usage error naming one. */
static int stray(const vargs_t *a, const char *sub) {
  const char *bad = NULL;
  int is_put = strcmp(sub, "put") == 0, is_get = strcmp(sub, "get") == 0,
      is_gc = strcmp(sub, "gc") == 0;
  if (a->puts && !is_put)
    bad = "--child/--remove-child";
  else if (a->expect && !is_put)
    bad = "--expect-version";
  else if (a->version && !is_get)
    bad = "--version";
  else if ((a->keep || a->grace) && !is_gc)
    bad = a->keep ? "--keep" : "--grace-ms";
  return bad ? dtx__cli_usage("version %s: does not take %s", sub, bad) : 0;
}

static int version_put(dtx_cli_t *cli, vargs_t *a) {
  int64_t expect = DTX_VERSION_ANY;
  int code;
  if (a->npos != 3)
    return dtx__cli_usage("version put: expected ITEM ROOT");
  if ((code = int_opt("version put", "--expect-version", a->expect, 0,
                      &expect)))
    return code;
  json_t *root = dtx__cli_json(a->pos[2], "ROOT");
  if (!root)
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  json_t *res = NULL;
  int rc = 0;
  if (st) {
    dtx_version_put_req_t req = {.item = a->pos[1], .root = root,
                                 .children = a->ch, .nchildren = a->nch,
                                 .expect_version = expect};
    rc = dtx_version_put(st, &req, NULL, &res);
  }
  json_decref(root);
  return st ? dtx__cli_summary(rc, res) : code;
}

static int version_get(dtx_cli_t *cli, vargs_t *a) {
  int64_t v = DTX_VERSION_LATEST;
  int code;
  if (a->npos != 2)
    return dtx__cli_usage("version get: expected ITEM");
  if ((code = int_opt("version get", "--version", a->version, 1, &v)))
    return code;
  dtx_store_t *st = dtx__cli_store_read(cli, &code);
  if (!st)
    return code;
  json_t *out = NULL;
  int rc = dtx_version_get(st, a->pos[1], v, &out);
  return dtx__cli_summary(rc, out);
}

static int version_history(dtx_cli_t *cli, vargs_t *a) {
  int code;
  if (a->npos != 2)
    return dtx__cli_usage("version history: expected ITEM");
  dtx_store_t *st = dtx__cli_store_read(cli, &code);
  if (!st)
    return code;
  json_t *out = NULL;
  int rc = dtx_version_history(st, a->pos[1], &out);
  if (rc)
    return dtx__cli_fail(rc);
  return dtx__cli_print_items(out, 0);
}

static int version_gc(dtx_cli_t *cli, vargs_t *a) {
  dtx_version_gc_opts_t o = {.keep = DTX_VERSION_KEEP, .grace_ms = -1};
  int code;
  if (a->npos != 1)
    return dtx__cli_usage("version gc: takes no arguments");
  if ((code = int_opt("version gc", "--keep", a->keep, 1, &o.keep)) ||
      (code = int_opt("version gc", "--grace-ms", a->grace, 0, &o.grace_ms)))
    return code;
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  json_t *sum = NULL;
  int rc = dtx_version_gc(st, &o, &sum);
  return dtx__cli_summary(rc, sum);
}

int dtx__cmd_version(dtx_cli_t *cli, int argc, char **argv) {
  vargs_t a;
  memset(&a, 0, sizeof a);
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(version_help);
  int code = parse(&a, argc, argv);
  const char *sub = a.npos ? a.pos[0] : NULL;
  if (!code && !sub)
    code = dtx__cli_usage("version: expected put, get, history or gc");
  if (!code)
    code = stray(&a, sub);
  if (!code) {
    if (strcmp(sub, "put") == 0)
      code = version_put(cli, &a);
    else if (strcmp(sub, "get") == 0)
      code = version_get(cli, &a);
    else if (strcmp(sub, "history") == 0)
      code = version_history(cli, &a);
    else if (strcmp(sub, "gc") == 0)
      code = version_gc(cli, &a);
    else
      code = dtx__cli_usage("version: expected put, get, history or gc; got "
                            "'%s'", sub);
  }
  vargs_free(&a);
  return code;
}
