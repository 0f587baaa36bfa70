#!/usr/bin/env bash
# fresh-store.sh NAME -- prints a store URI for one test scenario: the
# Redis store in DTX_REDIS_URI with a namespace of its own that no one has
# used (?ns=NAME-RANDOM).  So each scenario of the shell suites starts from
# an empty store, and scenarios never see each other's keys, even when
# they run at the same time on one server or cluster.
# fresh-store.sh --all -- empties the servers instead (FLUSHALL on every
# master) and prints DTX_REDIS_URI as it is: run-redis.sh does this before
# suites that use the default namespace.
#
# tests/lib/store.sh calls it through DTX_TEST_STORE_CMD (new_store NAME);
# run-redis.sh sets DTX_REDIS_URI to the URI to hand out (redis://H:P or
# redis://H:P,H:P..., options allowed).  For --all on a cluster it asks
# the first seed for the masters (CLUSTER NODES).  A NAME outside the namespace
# alphabet is mapped into it ([A-Za-z0-9_-]; its first 22 characters).
set -eu
: "${DTX_REDIS_URI:?DTX_REDIS_URI must name the Redis store}"
: "${1:?usage: fresh-store.sh NAME | --all}"
if [ "$1" = --all ]; then
  hosts=${DTX_REDIS_URI#redis://}
  hosts=${hosts%%\?*}
  hosts=${hosts##*@} # past a USER:PASSWORD@: redis-cli is the default user
  seed=${hosts%%,*}
  host=${seed%:*}
  port=${seed##*:}
  if redis-cli -h "$host" -p "$port" info cluster 2>/dev/null |
    tr -d '\r' | grep -q '^cluster_enabled:1$'; then
    masters=$(redis-cli -h "$host" -p "$port" cluster nodes |
      awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "@"); print a[1] }')
  else
    masters=$seed
  fi
  for m in $masters; do
    redis-cli -h "${m%:*}" -p "${m##*:}" flushall >/dev/null
  done
  echo "$DTX_REDIS_URI"
  exit 0
fi

# A namespace nobody has used: the name's start and 32 random bits.  So no
# key needs deleting (the servers start empty for each run; a namespace's
# keys cannot collide with another's, since ':' cannot occur in a name),
# and handing out a store costs no round trip and no program start -- the
# crash suites ask for one per row, thousands per run.
# (tests/lib/store.sh's new_store does this same step in the suite's own
# shell, without starting this script: keep the two alike.)
base=${1//[^A-Za-z0-9_-]/_}
printf -v ns '%s-%08x' "${base:0:22}" "$SRANDOM"
case "$DTX_REDIS_URI" in
*\?*) echo "$DTX_REDIS_URI&ns=$ns" ;;
*) echo "$DTX_REDIS_URI?ns=$ns" ;;
esac
