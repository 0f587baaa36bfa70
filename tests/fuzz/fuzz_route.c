/* fuzz_route.c -- libFuzzer target for doctxd's dispatcher
 * (src/server/dispatch.c) and the handlers behind it: arbitrary method,
 * target and body, with an admin token (so every route's body parsing and
 * library calls are reached) or another Authorization, against a SQLite
 * store in a temporary directory opened once.  Every answer must be a
 * known status with a JSON body that parses (or, for /metrics and the
 * admin page's files, text); no crash, leak or sanitizer report.
 *
 * The input: a selector byte (method and Authorization), then the target
 * up to the first newline, then the body. */
#include "server/server.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static dtx__srv_t d;
static const char *const methods[] = {"GET", "POST", "PUT",     "DELETE",
                                      "",    "post", "OPTIONS", "HEAD"};
static const char *const auths[] = {"Bearer fuzz-admin-0123456789",
                                    "Bearer fuzz-read-01234567890",
                                    "Bearer wrong-token-0123456789",
                                    NULL,
                                    "Bearer ",
                                    "Basic x"};

static void setup(void) {
  char dir[] = "/tmp/fuzz_route.XXXXXX", path[128], uri[160];
  if (!mkdtemp(dir))
    abort();
  snprintf(path, sizeof path, "%s/tokens", dir);
  FILE *f = fopen(path, "w");
  if (!f)
    abort();
  fputs("admin fuzz-admin-0123456789 admin\n"
        "reader fuzz-read-01234567890 read\n",
        f);
  fclose(f);
  chmod(path, 0600);
  char err[256];
  d.tokens.rate = 0; /* no limit: the fuzzer's pace is not a flood */
  if (dtx__srv_tokens_load(path, &d.tokens, err, sizeof err) ||
      dtx__srv_init(&d))
    abort();
  snprintf(uri, sizeof uri, "sqlite:%s/fuzz.db?sync=off", dir);
  if (dtx_store_open(uri, &d.st))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!d.st)
    setup();
  if (size < 1)
    return 0;
  uint8_t sel = data[0];
  const char *p = (const char *)data + 1, *end = (const char *)data + size;
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  size_t tlen = nl ? (size_t)(nl - p) : (size_t)(end - p);
  char *target = malloc(tlen + 1);
  if (!target)
    return 0;
  memcpy(target, p, tlen);
  target[tlen] = '\0'; /* an embedded NUL ends the target, as in HTTP */
  const char *body = nl ? nl + 1 : end;
  dtx__srv_req_t req = {.method = methods[sel & 7],
                        .target = target,
                        .auth = auths[(sel >> 3) % 6],
                        .body = body,
                        .body_len = (size_t)(end - body)};
  dtx__srv_resp_t resp;
  dtx__srv_dispatch(&d, &req, &resp);
  static const int known[] = {200, 201, 400, 401, 403, 404,
                              405, 409, 413, 429, 500, 503};
  size_t k = 0;
  while (k < sizeof known / sizeof known[0] && known[k] != resp.status)
    k++;
  if (k == sizeof known / sizeof known[0] || !resp.ctype || !resp.body)
    abort();
  if (strncmp(resp.ctype, "text/", 5) != 0) { /* /metrics, the admin page */
    json_t *v = NULL;
    if (dtx_json_parse(resp.body, &v) || !json_is_object(v))
      abort();
    json_decref(v);
  }
  dtx__srv_resp_free(&resp);
  free(target);
  return 0;
}
