#!/usr/bin/env bash
# acl.sh -- doctx as a Redis ACL user (docs/redis.md, "ACL users"): the
# least-privilege rule written in docs/redis.md (read from there, so the
# doc and the test cannot drift) is enough for the CLI's core -- a
# transfer, a job, a lock, the audit -- and every way to get the user
# wrong fails at once with exit 4, the server's reason, host:port and
# the user, and never the password.
#
# On a standalone target (DTX_REDIS_URI unset or redis://H:P) the suite
# starts a redis-server of its own whose default user is OFF, so a
# connection that skipped AUTH could do nothing.  On a cluster target
# (DTX_REDIS_URI names one, as run-redis.sh's shell phase gives it) it
# adds the users to every node of that shared cluster (whose default user
# the other suites need) and proves that the connection to EACH master
# authenticates: the doctx user loses EVALSHA on that master alone, and a
# write that reaches every master must then fail there.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
source "$HERE/../lib/harness.sh"

# The rule: docs/redis.md's block between the acl-rule markers, past its
# "ACL SETUSER doctx on >PASSWORD".  read -a splits it without globbing
# ~dtx:*.
text=$(sed -n '/^<!-- acl-rule -->$/,/^<!-- \/acl-rule -->$/p' "$ROOT/docs/redis.md" |
  grep -v -e '^<!--' -e '^```' | tr '\n' ' ')
text=${text#*'>PASSWORD'}
read -ra RULE <<<"$text"
[ ${#RULE[@]} -gt 3 ] || { bad "no ACL rule found in docs/redis.md"; finish; exit 1; }

PW="pw-$SRANDOM-S3cret"   # the password no output may show
ADMIN="adm-$SRANDOM"
rcli() { redis-cli -h "$1" -p "$2" --user admin --pass "$ADMIN" --no-auth-warning "${@:3}"; }

target=${DTX_REDIS_URI:-}
seeds=${target#redis://}
seeds=${seeds%%\?*}
seed=${seeds%%,*}
CLUSTER=0
if [ -n "$target" ] &&
  redis-cli -h "${seed%:*}" -p "${seed##*:}" info cluster 2>/dev/null |
  tr -d '\r' | grep -q '^cluster_enabled:1$'; then
  CLUSTER=1
fi

if [ $CLUSTER = 0 ]; then
  P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  start_bg "$WORK/redis.log" redis-server --port "$P" --bind 127.0.0.1 \
    --save '' --appendonly no --dir "$WORK" \
    --user default off \
    --user admin on ">$ADMIN" '~*' '&*' '+@all' \
    --user doctx on ">$PW" "${RULE[@]}" \
    --user doctx-noevalsha on ">$PW" "${RULE[@]}" -evalsha
  SRV=$BG_PID
  on_exit 'stop_bg $SRV 5'
  up=0
  for _ in $(seq 1 100); do
    rcli 127.0.0.1 "$P" ping 2>/dev/null | grep -q PONG && { up=1; break; }
    nap 0.05
  done
  [ $up = 1 ] || { bad "redis-server did not start: $(log_tail "$WORK/redis.log")"; finish; exit 1; }
  seeds=127.0.0.1:$P
  NODES=$seeds
  MASTERS=$seeds
  # the default user is off: a connection without AUTH may do nothing
  r=$(redis-cli -p "$P" ping 2>&1)
  [[ $r == *NOAUTH* ]] && ok || bad "the default user answered: $r"
else
  ADMIN="" # the shared cluster's default user: redis-cli as it is
  rcli() { redis-cli -h "$1" -p "$2" "${@:3}"; }
  NODES=$(redis-cli -h "${seed%:*}" -p "${seed##*:}" cluster nodes |
    awk '{ split($2, a, "@"); print a[1] }')
  MASTERS=$(redis-cli -h "${seed%:*}" -p "${seed##*:}" cluster nodes |
    awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "@"); print a[1] }')
  setuser() { # NODE USER [extra rules...]
    local n=$1 u=$2
    shift 2
    rcli "${n%:*}" "${n##*:}" ACL SETUSER "$u" reset on ">$PW" "${RULE[@]}" "$@" >/dev/null
  }
  for n in $NODES; do
    setuser "$n" doctx
    setuser "$n" doctx-noevalsha -evalsha
  done
  on_exit 'for n in $NODES; do rcli "${n%:*}" "${n##*:}" ACL DELUSER doctx doctx-noevalsha >/dev/null; done'
fi

ns="acl-$SRANDOM"
U="redis://doctx:$PW@$seeds?ns=$ns"
U2="redis://$seeds?ns=$ns&user=doctx&password=$PW" # the options' form
dx() { "$DOCTX" --store "$U" "$@"; }

# no_secret LABEL: neither the last output nor its errors show the password
no_secret() {
  if grep -qF -- "$PW" "$WORK/out" "$WORK/err"; then
    bad "$1: the password shows: $(head -c 300 "$WORK/err")"
  else ok; fi
}
# fails4 LABEL PATTERN URI ARGS...: exit 4, PATTERN in stderr, no password
fails4() {
  local label=$1 pat=$2 uri=$3
  shift 3
  expect 4 "$label" -- timeout 30 "$DOCTX" --store "$uri" "$@"
  if grep -qE -- "$pat" "$WORK/err"; then ok; else
    bad "$label: stderr lacks /$pat/: $(head -c 400 "$WORK/err")"
  fi
  no_secret "$label"
}

# ---- the core through the ACL user ------------------------------------------------
expect 0 "account create A" -- dx account create A --balance 100
no_secret "account create"
expect 0 "account create B" -- dx account create B
expect 0 "transfer A B 30" -- dx transfer A B 30 --id t1
no_secret "transfer"
expect 0 "transfer through user= and password=" -- \
  "$DOCTX" --store "$U2" transfer B A 5 --id t2
# The job's command opens the store through DOCTX_STORE, which must be the
# URI with its password (dtx_store_uri masks it): the job succeeds only
# if the child could authenticate.
expect 0 "job add" -- dx job add q mail '{"to":"x"}' --id j1
expect 0 "job work --once" -- timeout 30 "$DOCTX" --store "$U" job work q \
  --exec "'$DOCTX' count accounts" --once
no_secret "job work"
expect 0 "job show j1" -- dx job show j1
[[ $(out) == *'"state":"succeeded"'* ]] && ok ||
  bad "job j1 did not succeed through DOCTX_STORE: $(out)"
expect 0 "lock acquire" -- dx lock acquire L --owner me
tok=$(field "$(out)" token)
expect 0 "lock release" -- dx lock release L "$tok"
expect 0 "audit clean" -- dx audit
no_secret "audit"
expect 0 "balance A" -- dx account show A
[[ $(out) == *'"balance":75'* ]] && ok || bad "A's balance: $(out)"
expect 0 "demo" -- timeout 60 "$DOCTX" --store "redis://doctx:$PW@$seeds?ns=$ns-demo" demo
no_secret "demo"
grep -qF "redis://doctx:***@$seeds" "$WORK/out" && ok ||
  bad "demo does not name the store masked: $(head -c 300 "$WORK/out")"

# ---- every way to get the user wrong: exit 4, the reason, no password -------------
# (a cluster's message names the last seed tried)
node='127\.0\.0\.1:[0-9]+'
fails4 "a wrong password" \
  "authentication to $node as user 'doctx' failed: WRONGPASS" \
  "redis://doctx:not-$PW@$seeds?ns=$ns" count c
grep -qF -- "not-$PW" "$WORK/err" && bad "the wrong password shows" || ok
fails4 "an unknown user" \
  "authentication to $node as user 'nobody' failed: WRONGPASS" \
  "redis://nobody:$PW@$seeds?ns=$ns" count c
fails4 "a user without EVALSHA" "NOPERM.*evalsha" \
  "redis://doctx-noevalsha:$PW@$seeds?ns=$ns" transfer A B 1 --id t3

# Usage errors (exit 2) name the URI masked.
expect 2 "a user without a password" -- "$DOCTX" --store "redis://doctx@$seeds" count c
grep -q "names a user without a password" "$WORK/err" && ok || bad "$(<"$WORK/err")"
expect 2 "userinfo and password= both" -- "$DOCTX" --store "$U&password=$PW" count c
grep -qF "redis://doctx:***@$seeds?ns=$ns&password=***" "$WORK/err" && ok ||
  bad "not masked: $(<"$WORK/err")"
no_secret "userinfo and password= both"

# ---- the cluster: every master's connection authenticates as the user -------------
# The doctx user loses EVALSHA on one master at a time; inserts into a
# collection of 64 buckets (slots) reach every master, so one must meet
# the NOPERM -- which it could not, had that connection skipped AUTH (the
# shared cluster's default user may run everything).
if [ $CLUSTER = 1 ]; then
  k=0
  for m in $MASTERS; do
    k=$((k + 1))
    setuser "$m" doctx -evalsha -eval
    docs=()
    for i in $(seq 1 64); do docs+=("{\"_id\":\"m$k-$i\"}"); done
    fails4 "no EVALSHA on master $m alone" "NOPERM" \
      "redis://doctx:$PW@$seeds?ns=$ns-m$k&buckets=64" insert spread "${docs[@]}"
    setuser "$m" doctx
  done
  expect 0 "audit after the refusals" -- dx audit
fi

finish
