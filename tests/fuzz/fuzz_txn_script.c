/* fuzz_txn_script.c -- libFuzzer target for transaction scripts
 * (src/txn/multi/script.c, docs/transactions.md "Scripts"): any JSON is
 * accepted or refused by dtx_txn_script_check with a usage error only; a
 * script it accepts then runs in one transaction on a fresh in-memory
 * store and never fails with a usage error there -- the check finds every
 * one before the first write -- nor leaves the audit unclean.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined ... (CMake: DTX_FUZZ=ON).
 */
#include <stdint.h>
#include <stdlib.h>

#include "doctx.h"
#include "fuzz_common.h"

static int usage_error(int rc) {
  return rc == DTX_EINVAL || rc == DTX_EBADJSON || rc == DTX_EBADQUERY ||
         rc == DTX_EBADUPDATE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096)
    return 0;
  json_t *script = fuzz_parse((const char *)data, size);
  if (!script)
    return 0;
  int rc = dtx_txn_script_check(script);
  if (rc && !usage_error(rc) && rc != DTX_ELIMIT)
    abort();
  dtx_store_t *st = NULL;
  if (rc == 0 && dtx_store_open("sqlite::memory:", &st) == 0) {
    dtx_txn_opts_t o = {.isolation = size % 2 ? DTX_TXN_SERIALIZABLE
                                              : DTX_TXN_SNAPSHOT,
                        .deadline_ms = 2000};
    json_t *out = NULL;
    rc = dtx_txn_script_run(st, &o, script, &out);
    if (usage_error(rc))
      abort(); /* a usage error the check let through */
    json_decref(out);
    json_t *report = NULL;
    if (dtx_audit(st, DTX_AUDIT_SETTLED, &report) == DTX_EAUDIT)
      abort(); /* a committed or aborted script left state wrong */
    json_decref(report);
    dtx_store_close(st);
  }
  json_decref(script);
  return 0;
}
