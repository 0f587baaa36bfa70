#!/usr/bin/env bash
# fresh-store.sh NAME -- prints a store URI for one test scenario: the
# Redis store in DTX_REDIS_URI with its own namespace (?ns=NAME), after
# deleting every key of that namespace on every master.  So each scenario
# of the shell suites starts from an empty store, and scenarios with
# different names never see each other's keys even when they run at the
# same time on one server or cluster.
# fresh-store.sh --all -- empties the servers instead (FLUSHALL on every
# master) and prints DTX_REDIS_URI as it is: run-redis.sh does this before
# suites that use the default namespace.
#
# tests/lib/txn.sh calls it through DTX_TEST_STORE_CMD (new_store NAME);
# run-redis.sh sets DTX_REDIS_URI to the URI to hand out (redis://H:P or
# redis://H:P,H:P..., options allowed).  For a cluster it asks the first
# seed for the masters (CLUSTER NODES).  A NAME outside the namespace
# alphabet is mapped into it ([A-Za-z0-9_-], at most 32 characters: a
# long one keeps its start and a checksum of the whole).
set -eu
: "${DTX_REDIS_URI:?DTX_REDIS_URI must name the Redis store}"
: "${1:?usage: fresh-store.sh NAME | --all}"
hosts=${DTX_REDIS_URI#redis://}
hosts=${hosts%%\?*}
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
if [ "$1" = --all ]; then
  for m in $masters; do
    redis-cli -h "${m%:*}" -p "${m##*:}" flushall >/dev/null
  done
  echo "$DTX_REDIS_URI"
  exit 0
fi

ns=$(printf '%s' "$1" | tr -c 'A-Za-z0-9_-' '_')
if [ "${#ns}" -gt 32 ]; then
  ns="${ns:0:23}-$(printf '%s' "$1" | cksum | awk '{ printf "%08x", $1 }')"
fi
# The keys of namespace NS all start "dtx@NS:" (src/store/redis/catalog.c);
# no other namespace's keys do, since ':' cannot occur in a name.  The
# script runs on each master over its own keys, binary-safe.
UNLINK_LUA='local n, cur = 0, "0"
repeat
  local r = redis.call("SCAN", cur, "MATCH", ARGV[1], "COUNT", 1000)
  cur = r[1]
  for _, k in ipairs(r[2]) do redis.call("UNLINK", k); n = n + 1 end
until cur == "0"
return n'
for m in $masters; do
  redis-cli -h "${m%:*}" -p "${m##*:}" eval "$UNLINK_LUA" 0 "dtx@$ns:*" |
    grep -q '^[0-9]*$' || { echo "fresh-store: cannot empty $ns on $m" >&2; exit 1; }
done
case "$DTX_REDIS_URI" in
*\?*) echo "$DTX_REDIS_URI&ns=$ns" ;;
*) echo "$DTX_REDIS_URI?ns=$ns" ;;
esac
