/* fuzz_pipeline.c -- libFuzzer target for aggregation pipelines.
 *
 * The input is "<pipeline JSON>\n<documents JSON>".  Compilation succeeds
 * or fails with DTX_EBADQUERY; a run over the documents (after the source
 * filter, as the store would apply it) succeeds with an array or fails
 * with a doctx error and no output, within a small memory limit so $group
 * and $sort are driven into DTX_ELIMIT too.  $lookup reads an empty
 * collection.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined ... (CMake: DTX_FUZZ=ON).
 */
#include "fuzz_common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int empty_find(void *ctx, const char *coll, const json_t *filter,
                      json_t **out) {
  (void)ctx;
  (void)coll;
  dtx__filter_t *f = NULL;
  int rc = dtx__filter_compile(filter, &f);
  dtx__filter_free(f);
  *out = rc ? NULL : json_array();
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *t = (const char *)data;
  const char *nl = memchr(t, '\n', size);
  size_t plen = nl ? (size_t)(nl - t) : size;
  json_t *pl = fuzz_parse(t, plen);
  json_t *docs = nl ? fuzz_parse(nl + 1, size - plen - 1) : json_array();
  dtx__pipeline_t *p = NULL;
  if (!pl)
    goto out;
  int rc = dtx__pipeline_compile(pl, &p);
  if (rc) {
    if (p || (rc != DTX_EBADQUERY && rc != DTX_ENOMEM))
      abort();
    goto out;
  }
  json_decref(pl); /* the compiled pipeline must not need it */
  pl = NULL;
  const json_t *fs, *sort;
  int64_t skip, limit;
  dtx__pipeline_source(p, &fs, &sort, &skip, &limit);
  dtx__filter_t *f = NULL;
  if (!json_is_array(docs) || dtx__filter_compile(fs, &f))
    goto out;
  json_t *in = json_array();
  for (size_t i = 0; i < json_array_size(docs); i++)
    if (json_is_object(json_array_get(docs, i)) &&
        dtx__filter_match(f, json_array_get(docs, i)))
      json_array_append(in, json_array_get(docs, i));
  dtx__filter_free(f);
  if (sort && dtx__sort_array(in, sort))
    abort();
  char *before = dtx__json_dump(docs);
  dtx__agg_env_t env = {4096, empty_find, NULL};
  json_t *out = NULL;
  rc = dtx__pipeline_run(p, in, &env, &out);
  if (rc ? out != NULL : !json_is_array(out))
    abort();
  char *after = dtx__json_dump(docs);
  if (!before || !after || strcmp(before, after))
    abort(); /* the input documents are never changed in place */
  free(before);
  free(after);
  json_decref(out);
out:
  dtx__pipeline_free(p);
  json_decref(pl);
  json_decref(docs);
  return 0;
}
