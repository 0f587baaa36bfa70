/* cmd_lock.c -- doctx lock: lease locks with fencing tokens
 * (src/txn/lock/, docs/locks.md). */
#include "cli/cli.h"

#include <string.h>

/* TOKEN's shape; its value (>= 1) is the library's to judge. */
static int token_of(const dtx__cli_args_t *a, int64_t *token) {
  if (dtx__cli_int64(a->pos[1], 1, token) != 0)
    return dtx__cli_usage("%s: TOKEN must be an integer >= 1, got '%s'",
                          a->cmd, a->pos[1]);
  return 0;
}

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *sub = a->spec->name, *name = a->pos[0];
  int campaign = strcmp(sub, "campaign") == 0, code, rc;
  int acquire = campaign || strcmp(sub, "acquire") == 0;
  dtx_lock_opts_t lo = {
      .ttl_ms = dtx__cli_opt_index(a->spec, "--ttl-ms") < 0
                    ? 0 : dtx__cli_num(a, "--ttl-ms", 0),
      .owner = acquire ? dtx__cli_str(a, "--owner") : NULL,
      .wait_ms = acquire ? dtx__cli_num(a, "--wait-ms", 0) : 0,
      .deadline_ms = acquire ? dtx__cli_num(a, "--deadline-ms", 0) : 0,
      .max = campaign || !acquire ? 0 : dtx__cli_num(a, "--max", 0)};
  int64_t token = 0;
  if (a->npos == 2 && (code = token_of(a, &token)))
    return code;
  /* The library's check before the store opens: bad input creates no
   * store. */
  if ((acquire || a->npos == 2) && (rc = dtx_lock_check(name, &lo)))
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  dtx_page_t page = strcmp(sub, "list") == 0 ? dtx__cli_page(a)
                                             : (dtx_page_t){0};
  json_t *out = NULL;
  if (!st)
    return code;
  if (campaign)
    rc = dtx_lock_campaign(st, name, &lo, &out);
  else if (acquire)
    rc = dtx_lock_acquire(st, name, &lo, &out);
  else if (strcmp(sub, "leader") == 0)
    rc = dtx_lock_leader(st, name, &out);
  else if (strcmp(sub, "renew") == 0)
    rc = dtx_lock_renew(st, name, token, &lo, &out);
  else if (strcmp(sub, "release") == 0)
    rc = dtx_lock_release(st, name, token, &out);
  else if (strcmp(sub, "show") == 0)
    rc = dtx_lock_get(st, name, &out);
  else
    rc = dtx_lock_list(st, &page, &out);
  if (rc)
    return dtx__cli_fail(rc);
  if (acquire)
    json_object_del(out, "held"); /* acquire prints what docs/locks.md names */
  return json_is_array(out) ? dtx__cli_items(0, &out, 0, 0)
                            : dtx__cli_summary(0, &out);
}

#define TTL {"--ttl-ms", DTX__CLI_POS, "N"}
const dtx__cli_spec_t dtx__cmd_lock = {
    "lock", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"acquire", run, "NAME",
         (const dtx__cli_opt_t[]){TTL,
                                  {"--owner", DTX__CLI_STR, "O"},
                                  {"--wait-ms", DTX__CLI_COUNT, "N"},
                                  {"--deadline-ms", DTX__CLI_COUNT, "N"},
                                  {"--max", DTX__CLI_POS, "N"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"campaign", run, "NAME",
         (const dtx__cli_opt_t[]){TTL,
                                  {"--owner", DTX__CLI_STR, "O"},
                                  {"--wait-ms", DTX__CLI_COUNT, "N"},
                                  {"--deadline-ms", DTX__CLI_COUNT, "N"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"leader", run, "NAME", NULL, DTX__CLI_READS},
        {"renew", run, "NAME TOKEN", (const dtx__cli_opt_t[]){TTL, {NULL}},
         DTX__CLI_ARMED},
        {"release", run, "NAME TOKEN", NULL, DTX__CLI_ARMED},
        {"hold", dtx__cli_lock_hold, "NAME COMMAND...",
         (const dtx__cli_opt_t[]){TTL,
                                  {"--owner", DTX__CLI_STR, "O"},
                                  {"--wait-ms", DTX__CLI_COUNT, "N"},
                                  {"--deadline-ms", DTX__CLI_COUNT, "N"},
                                  {"--grace-ms", DTX__CLI_COUNT, "N"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"show", run, "NAME", NULL, DTX__CLI_READS},
        {"list", run, NULL,
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_LIMIT, DTX__CLI_OPT_SKIP, DTX__CLI_OPT_AFTER,
                                  {NULL}},
         DTX__CLI_READS},
        {NULL}},
    NULL,
    "A lease lock with fencing tokens.  acquire takes NAME when it is free\n"
    "or its lease lapsed and prints {\"name\",\"owner\",\"token\",\"expires\"}\n"
    "(expires: wall-clock ms); the token is greater than every token NAME\n"
    "issued before.  --ttl-ms is the lease (default 30000), --wait-ms how\n"
    "long to wait while another holds it (default 0).  renew extends the\n"
    "lease of TOKEN (--ttl-ms default: the lock's own), release frees it;\n"
    "both only while TOKEN is current.  A lease does not stop a paused\n"
    "holder: give every protected write the fence NAME:TOKEN (an option of\n"
    "update, find-and-modify and delete), and the store refuses an older\n"
    "token with FENCED (exit 3).\n"
    "hold runs COMMAND (give it after --) while holding NAME: acquires\n"
    "(--ttl-ms, --owner, --wait-ms, --deadline-ms as acquire), runs it in\n"
    "its own process group with DOCTX_LOCK_NAME, DOCTX_LOCK_TOKEN,\n"
    "DOCTX_LOCK_OWNER and DOCTX_LOCK_FENCE (NAME:TOKEN) in its environment,\n"
    "renews every ttl/3, and releases when it ends, exiting with its\n"
    "status.  When a renewal fails or the lease lapses (monotonic clock,\n"
    "from the last good renewal's start) the group gets SIGTERM, then\n"
    "SIGKILL --grace-ms later (default 5000), and hold exits 6.\n"
    "acquire --max N (2..100) makes NAME a semaphore of N holders, each with\n"
    "its own token, and also prints \"slot\" and \"fence\": its writes fence\n"
    "with FENCE:TOKEN (NAME:SLOT:TOKEN); every caller of NAME gives the same\n"
    "--max (else exit 2).  campaign waits until it leads NAME (up to\n"
    "--wait-ms; without it, as long as it takes) and prints the acquire's\n"
    "output, its token the term; the leader renews to keep leading.  leader\n"
    "prints {\"name\",\"leader\",\"term\",\"expires\"} (leader null: none).\n"
    "Waiters (--wait-ms, campaign) are served in the order they came, by\n"
    "ticket; while they wait, an acquire that does not wait exits 1.\n"
    "show and list also print \"held\" (a semaphore: \"max\", \"holders\").\n"
    "exit: 0 ok, 1 still held (acquire, campaign), token no longer current (renew,\n"
    "      release) or no such lock, 2 invalid input, 4 store error;\n"
    "      hold: 6 the lock was lost, else the command's own status\n"};
#undef TTL
