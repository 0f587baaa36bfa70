#!/bin/sh
# job_handler.sh -- the handler the job suites run with `doctx job work
# --exec`: it applies the job's one effect (key k1: $inc n in the
# counters document named after the job), then fails when the payload
# says {"fail":true}, else prints a result.  The effect applies at most
# once per job however often the handler runs, so the suites can count.
# Needs $DOCTX (the binary) in its environment; the job arrives on stdin.
job=$(cat)
"$DOCTX" job effect "$DOCTX_JOB_ID" "$DOCTX_JOB_EPOCH" k1 counters \
  "{\"_id\":\"$DOCTX_JOB_ID\"}" '{"$inc":{"n":1}}' >/dev/null || exit 1
case "$job" in
*'"fail":true'*) echo "asked to fail" >&2; exit 1 ;;
esac
echo '{"done":true}'
