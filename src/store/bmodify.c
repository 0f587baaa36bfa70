/* bmodify.c -- a modify request's BSON forms (store.h, dtx__bforms_t):
 * what a backend needs to write one document on its stored bytes
 * (docs/engine.md, "Stages", 2b step 1), compiled from the json_t request
 * that store.c checked.
 *
 * The json_t request stays the contract: the backend asks for these forms
 * when it writes, so a call that never reaches a document (a refused
 * argument) pays nothing for them.  Where the BSON engine refuses what the
 * json_t engine compiled (none is known: the differential suites run
 * every row through both), the answer is 1 and the backend takes its
 * json_t path, so a request never fails only because of the engine. */
#include "store/store.h"

#include "util/err.h"

#include <string.h>

void dtx__bforms_free(dtx__bforms_t *f) {
  if (!f)
    return;
  dtx__bupdate_free(f->update);
  dtx__bfilter_free(f->filter);
  if (f->filter_bytes)
    bson_destroy(f->filter_bytes);
  memset(f, 0, sizeof *f);
}

/* 1 (the json_t path) after an engine refusal; the request itself was
 * judged good by the json_t engine, so its detail is not the caller's. */
static int decline(dtx__bforms_t *f) {
  dtx__bforms_free(f);
  dtx__err_clear();
  return 1;
}

int dtx__bforms_compile(const dtx__modify_t *m, dtx__bforms_t *f) {
  memset(f, 0, sizeof *f);
  bson_t *spec = NULL, *afs = NULL;
  int rc;
  if (!(f->filter_bytes = bson_new()))
    return dtx__err(DTX_ENOMEM, "compiling a filter for BSON");
  if (m->filter_spec && (rc = dtx__bson_from_json(m->filter_spec,
                                                  f->filter_bytes)) < 0)
    return rc == DTX_ENOMEM ? (dtx__bforms_free(f), rc) : decline(f);
  if ((rc = dtx__bfilter_compile(f->filter_bytes, &f->filter)) < 0)
    return rc == DTX_ENOMEM ? (dtx__bforms_free(f), rc) : decline(f);
  if (!m->update_spec)
    return 0;
  dtx__bval_t afv = {0}, *afp = NULL;
  if (!(spec = bson_new()) || (m->array_filters && !(afs = bson_new()))) {
    rc = dtx__err(DTX_ENOMEM, "compiling an update for BSON");
    goto out;
  }
  if ((rc = dtx__bson_from_json(m->update_spec, spec)) < 0)
    goto out;
  if (m->array_filters) {
    if ((rc = dtx__bval_from_json(m->array_filters, afs, &afv)) < 0)
      goto out;
    afp = &afv;
  }
  if ((rc = dtx__bupdate_compile(bson_get_data(spec), spec->len, afp, 0,
                                 &f->update)) < 0)
    goto out;
  dtx__bupdate_bind_filter(f->update, f->filter);
out:
  if (spec)
    bson_destroy(spec);
  if (afs)
    bson_destroy(afs);
  if (rc < 0)
    return rc == DTX_ENOMEM ? (dtx__bforms_free(f), rc) : decline(f);
  return 0;
}
