/* testlib.c -- the test harness behind testlib.h. */
#include "testlib.h"

#include "bdiff.h"
#include "bfilterdiff.h"

#include "doc/doc.h"

#include <string.h>

int dtx_t_failed, dtx_t_checks, dtx_t_tests_failed, dtx_t_tests;
const char *dtx_t_current = "";
size_t dtx_t_bpath_walks;

void dtx_t_run(const char *name, void (*fn)(void)) {
  int before = dtx_t_failed;
  dtx_t_current = name;
  dtx_t_tests++;
  fn();
  if (dtx_t_failed != before) {
    dtx_t_tests_failed++;
    fprintf(stderr, "FAIL %s\n", name);
  } else {
    printf("ok   %s\n", name);
  }
}

int dtx_t_done(void) {
  if (dtx_t_bpath_walks)
    printf("%zu path walks through both engines\n", dtx_t_bpath_walks);
  printf("%d checks, %d failed checks\n", dtx_t_checks, dtx_t_failed);
  printf("%d passed, %d failed\n", dtx_t_tests - dtx_t_tests_failed,
         dtx_t_tests_failed);
  return dtx_t_tests_failed ? 1 : 0;
}

dtx_store_t *dtx_t_open(const char *uri) {
  dtx_store_t *st = NULL;
  if (dtx_store_open(uri, &st) != 0) {
    fprintf(stderr, "open %s: %s\n", uri, dtx_errdetail());
    exit(1);
  }
  return st;
}

json_t *J(const char *text) {
  json_error_t e;
  json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
  if (!v) {
    fprintf(stderr, "test JSON error in %s: %s\n", text, e.text);
    abort();
  }
  return v;
}

json_t *JQNEW(const char *text) {
  char *s = strdup(text);
  if (!s)
    abort();
  for (char *p = s; *p; p++)
    if (*p == '\'')
      *p = '"';
  json_t *v = J(s);
  free(s);
  return v;
}

char *JDUMP(const json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

const char *JS(const json_t *v) {
  static _Thread_local char buf[8][1024];
  static _Thread_local int slot;
  char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  char *out = buf[slot++ % 8];
  snprintf(out, 1024, "%s", s ? s : "(null)");
  free(s);
  return out;
}

void dtx_t_filter_table(const char *name, const dtx_t_fcase_t *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    json_t *spec = JQNEW(t[i].filter), *doc = JQNEW(t[i].doc);
    dtx__filter_t *f = NULL;
    int rc = dtx__filter_compile(spec, &f);
    CHECKF(rc == 0, "%s[%zu] compile %s: %s (%s)", name, i, t[i].filter,
           dtx_errname(rc), dtx_errdetail());
    if (rc == 0) {
      int got = dtx__filter_match(f, doc);
      CHECKF(got == t[i].want, "%s[%zu] filter %s doc %s: got %d want %d",
             name, i, t[i].filter, t[i].doc, got, t[i].want);
      CHECK(dtx__filter_error(f) == 0);
    }
    dtx__filter_free(f);
    /* The BSON engine must answer every row the same (bfilterdiff.h). */
    dtx_t_bfilter_row(name, i, spec, doc);
    /* The BSON engine's path leg: every path the filter names walks the
     * row's document the same in both engines (tests/common/bdiff.c). */
    CHECKF(bdiff_walk_spec(name, spec, doc, &dtx_t_bpath_walks) == 0,
           "%s[%zu] paths of %s differ between the engines", name, i,
           t[i].filter);
    json_decref(spec);
    json_decref(doc);
  }
}

json_t *JNEST(int levels, const char *k) {
  json_t *v = json_pack("{s:i}", "leaf", 1);
  for (int i = 1; v && i < levels; i++)
    v = json_pack("{s:o}", k, v);
  if (!v)
    abort();
  return v;
}

void dtx_t_drop_transfers(dtx_store_t *st) {
  dtx_store_drop_collection_ex(st, DTX_ACCOUNTS, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_OPENINGS, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_TRANSFERS, &(dtx_drop_opts_t){1});
}

char *dtx_t_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  long len = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) &&
      fread(buf, 1, (size_t)len, f) == (size_t)len) {
    buf[len] = '\0';
  } else {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}
