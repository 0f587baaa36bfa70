#!/usr/bin/env bash
# Stores written by an earlier build open without loss (docs/engine.md,
# "The store format"): tests/fixtures/json-text holds a SQLite store
# (as sqlite3's .dump text) and a standalone Redis RDB file, both written
# by the build of 2026-11-29, whose bodies are JSON text, from the
# commands of populate.sh there.  This suite opens a copy of each (the
# Redis one in a redis-server of its own on a free port) and checks:
#   - every document, every collection's count and index names are what
#     that build wrote (the .expected files: doctx dump, rules left out,
#     since a later build may own newer pattern rules);
#   - the audit is clean, the transfer that build left mid-flight
#     (crashed before its commit) is rolled back by recover, and new work (a transfer, a job claimed and
#     completed, a ledger post) runs on the old store with the audit
#     clean after it.
# A build that changes the body format must pass this unchanged: it
# upgrades the copy in place or refuses it with a clear error, never
# reads it wrong.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
FIX=$HERE/../fixtures/json-text
EXPECT_ONLY='if has("collection") then {collection, count, indexes: [.indexes[].name]} else . end'

same() { # LABEL GOT WANT
  [ "$2" = "$3" ] && ok || bad "$1: got $2, want $3"
}

check_store() { # LABEL EXPECTED-FILE
  local label=$1 want=$2 got
  got=$(d dump | jq -c "$EXPECT_ONLY") || { bad "$label: dump failed"; return; }
  if [ "$got" = "$(cat "$want")" ]; then ok; else
    bad "$label: documents differ from $want:"
    diff <(printf '%s\n' "$got") "$want" | head -20 >&2
  fi
  d audit >"$WORK/audit" 2>&1; same "$label: audit exit" $? 0
  same "$label: tx4 left in flight" "$(d transfer show tx4 | jq -r .state)" preparing
  d recover >/dev/null 2>&1; same "$label: recover exit" $? 0
  same "$label: tx4 rolled back" "$(d transfer show tx4 | jq -r .state)" failed
  same "$label: alice after recover" "$(d account show alice | jq -c '[.balance, (.pending|length)]')" '[770,0]'
  d transfer bob alice 15 --id new1 >/dev/null; same "$label: new transfer" $? 0
  same "$label: bob" "$(d account show bob | jq .balance)" 335
  local job
  job=$(d job claim mail --owner t)
  same "$label: job claimed" "$(jq -r ._id <<<"$job")" j2
  d job complete j2 "$(jq -r .epoch <<<"$job")" >/dev/null; same "$label: job completed" $? 0
  d ledger post cash:-5 wallet:5 --id e3 >/dev/null; same "$label: ledger post" $? 0
  same "$label: wallet" "$(d ledger balance wallet | jq -c '[.balance]')" '[505]'
  d audit --settled >"$WORK/audit" 2>&1
  same "$label: audit after new work" "$? $(tail -1 "$WORK/audit")" "0 audit: clean"
}

# ---- SQLite ----------------------------------------------------------------------
sqlite3 "$WORK/old.db" <"$FIX/sqlite.sql" || bad "sqlite3 could not load the fixture"
S=sqlite:$WORK/old.db
check_store sqlite "$FIX/sqlite.expected"

# ---- standalone Redis --------------------------------------------------------------
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/redis" && cp "$FIX/redis.rdb" "$WORK/redis/dump.rdb"
start_bg "$WORK/redis/out" redis-server --port "$port" --bind 127.0.0.1 \
  --dir "$WORK/redis" --dbfilename dump.rdb --save '' --appendonly no
up=0
for _ in $(seq 1 100); do
  redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && { up=1; break; }
  sleep 0.05
done
if [ $up = 1 ]; then
  S="redis://127.0.0.1:$port?ns=fx"
  check_store redis "$FIX/redis.expected"
  stop_bg "$BG_PID" 10 "$WORK/redis/out"
else
  bad "redis-server with the fixture's RDB did not start"; log_tail "$WORK/redis/out"
fi
finish
