#!/usr/bin/env bash
# fresh-store.sh NAME -- prints a store URI for one test scenario after
# emptying the Redis server(s) behind it (FLUSHALL on every master), so
# each scenario of the shell suites starts from an empty store.
#
# tests/lib/txn.sh calls it through DTX_TEST_STORE_CMD (new_store NAME);
# run-redis.sh sets DTX_REDIS_URI to the URI to hand out (redis://H:P or
# redis://H:P,H:P...).  For a cluster it asks the first seed for the
# masters (CLUSTER NODES) and flushes each; a standalone server is just
# flushed.  NAME only labels the scenario.
set -eu
: "${DTX_REDIS_URI:?DTX_REDIS_URI must name the Redis store}"
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
for m in $masters; do
  redis-cli -h "${m%:*}" -p "${m##*:}" flushall >/dev/null
done
echo "$DTX_REDIS_URI"
