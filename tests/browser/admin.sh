#!/usr/bin/env bash
# admin.sh -- doctxd's admin page in a real browser, and its OpenAPI
# description checked by a real validator (docs/admin.md).
#
# One doctxd on a SQLite store.  The CLI makes what the page must act on:
# a pending transfer (transfer --async), a dead job (a job with one
# attempt and a worker whose command fails), a held lock.  Then
#   admin.test.mjs   drives Debian's chromium headless (puppeteer-core):
#                    signs in, runs an audit, cancels the transfer,
#                    retries the dead job, force-releases the lock -- and
#                    fails on any JavaScript error or console error;
#   openapi.test.mjs validates GET /openapi.json (@apidevtools/
#                    swagger-parser) and checks that every route of
#                    src/server/routes.c is in it.
# Needs scripts/setup.sh's chromium and `npm ci` of tests/browser.
# DTX_SHOTS=docs/img writes the screenshots there (the committed ones);
# otherwise they go to the suite's scratch directory.
# Ends with "N passed, M failed".  Budget: 30 s.
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/store.sh"
source "$HERE/../server/lib/server.sh"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

if [ ! -x "$CHROMIUM" ] || [ ! -d "$HERE/node_modules/puppeteer-core" ] ||
   [ ! -d "$HERE/node_modules/@apidevtools/swagger-parser" ]; then
  bad "needs $CHROMIUM and tests/browser/node_modules: run scripts/setup.sh"
  finish
  exit 1
fi

new_store admin
expect 0 "account ann" -- d account create ann --balance 1000
expect 0 "account bob" -- d account create bob
expect 0 "pending transfer" -- d transfer ann bob 250 --id tx-pending --async
expect 0 "a job" -- d job add mail send '{"to":"ann"}' --id job-dead --max-attempts 1
expect 0 "a canceled job" -- d job add mail send '{"to":"bob"}' --id job-old --delay-ms 600000
expect 0 "... canceled" -- d job cancel job-old
run_bounded 20 "$WORK/work.log" "$DOCTX" --store "$S" job work mail \
  --exec false --once >/dev/null
expect 0 "the job is dead" -- d job show job-dead
case $(out) in *'"dead"'*) ok ;; *) bad "job-dead is not dead: $(out)" ;; esac
expect 0 "a lock" -- d lock acquire nightly-report --ttl-ms 600000 --owner cron@host1

make_tokens "$WORK/tokens"
start_doctxd "$WORK/doctxd.log" --store "$S" --tokens "$WORK/tokens" \
  --threads 2 || { bad "doctxd start"; finish; exit 1; }

# Some traffic for the dashboard's charts, a refused request among it.
for _ in 1 2 3; do req GET /v1/accounts "$T_READ"; done
req GET /v1/transfers/nope "$T_READ"
req GET /v1/nowhere "$T_READ"

# GET /v1/admin/stats: admin only; the ring counted the requests above in
# their classes (3 accounts, 1 transfers 404, 1 unmatched 404).
req GET /v1/admin/stats ""
[ "$CODE" = 401 ] && ok || bad "stats without a token: $CODE"
req GET /v1/admin/stats "$T_READ"
[ "$CODE" = 403 ] && ok || bad "stats with a read token: $CODE"
req GET /v1/admin/stats "$T_ADMIN"
ring=$(jq -c '[([.series.accounts.requests[]] | add),
  ([.series.transfers.client_errors[]] | add),
  ([.series.unmatched.client_errors[]] | add), .counts.transfers.initiated,
  .counts.jobs.dead, .counts.jobs_by_queue.mail.dead, .counts.locks.held, (.series.accounts.requests | length)]' "$WORK/rb")
[ "$CODE" = 200 ] && [ "$ring" = "[3,1,1,1,1,1,1,60]" ] && ok ||
  bad "stats: $CODE $ring: $(head -c 300 "$WORK/rb")"
# The page's CSP lets it run its own files; the API's stays strict.
req GET /admin ""
tr -d '\r' <"$WORK/rh" | grep -qi "^content-security-policy: default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';" &&
  ok || bad "/admin CSP: $(tr -d '\r' <"$WORK/rh" | grep -i security)"
req GET /admin/app.js ""
[ "$CODE" = 200 ] && tr -d '\r' <"$WORK/rh" | grep -qi '^content-type: text/javascript' &&
  ok || bad "/admin/app.js: $CODE"
req GET /v1/accounts "$T_READ"
tr -d '\r' <"$WORK/rh" | grep -qix "content-security-policy: default-src 'none'; frame-ancestors 'none'" &&
  ok || bad "API CSP: $(tr -d '\r' <"$WORK/rh" | grep -i security)"

shots=${DTX_SHOTS:-$WORK/shots}
mkdir -p "$shots"
export ADMIN_URL=$URL ADMIN_TOKEN=$T_ADMIN READ_TOKEN=$T_READ \
  CHROMIUM SHOTS=$shots ROUTES_C="$HERE/../../src/server/routes.c"
cd "$HERE" || exit 1
if run_bounded 60 "$WORK/browser.log" node admin.test.mjs; then ok; else
  bad "admin.test.mjs"; log_tail "$WORK/browser.log" 40 >&2
fi
grep '^#' "$WORK/browser.log"
if run_bounded 30 "$WORK/openapi.log" node openapi.test.mjs; then ok; else
  bad "openapi.test.mjs"; log_tail "$WORK/openapi.log" 40 >&2
fi
grep '^#' "$WORK/openapi.log"
stop_bg "$DPID" 10 "$WORK/doctxd.log" >/dev/null || bad "doctxd did not stop"
finish
