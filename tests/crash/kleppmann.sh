#!/usr/bin/env bash
# Kleppmann's scenario, exactly (docs/locks.md): client 1 acquires the lock and
# is paused past its lease; client 2 acquires it and writes the protected
# document; client 1 resumes and writes: its write is refused with FENCED
# (exit 3) and the document holds client 2's write.  Repeated with the
# pause placed at every fault point of acquire, renew and write:
#   sigstop        client 1's shell is SIGSTOPped between acquire and write
#   lock.acquired  its acquire landed, the token not yet returned
#   lock.renew     in its renew (the renew then fails: token not current)
#   fence.write    in its fenced write, just before the atomic step
#   lock.release   in its release after writing (must not free client 2's)
#   lock.acquire   before its acquire landed: client 2 takes the lock
#                  first, and is then the one whose lease lapses -- so
#                  client 2's late write is the refused one
# Then mutual exclusion under load: MUTEX_PROCS (8) processes take the
# lock for MUTEX_SECS (2) with 150 ms leases and random pauses of up to
# 250 ms (so leases lapse), each fenced-writing a counter under it: every
# accepted write's token is greater than the one before it (in the
# counter's own order), no two accepted writes share a token, and the
# counter equals the number of accepted writes.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"

LEASE=300 # ms: client 1's lease, which the pause outlives

tok() { sed -n 's/.*"token":\([0-9]*\).*/\1/p' <<<"$1"; }

# Runs one doctx step of client 1 in the background (DOCTX_FAULT on the
# step named POINT, or POINT minus a final d: lock.acquired is in the
# acquire), its pid in $dir/pid, and waits for it.
c1_step() { # POINT STEP-NAME OUT ARGS...
  local point=$1 step=$2 out=$3
  shift 3
  if [ "$point" = "$step" ] || [ "$point" = "$step"d ]; then
    DOCTX_FAULT="$point:pause" "$DOCTX" --store "$S" "$@" >"$out" 2>>"$dir/c1.log" &
  else
    "$DOCTX" --store "$S" "$@" >"$out" 2>>"$dir/c1.log" &
  fi
  echo $! >"$dir/pid"
  wait $!
}

# Client 1: acquire, (renew), fenced write, release; every exit status in
# $dir/c1.rc as STEP=RC lines.
client1() { # POINT
  local p=$1 t
  c1_step "$p" lock.acquire "$dir/c1.acq" lock acquire L --ttl-ms "$LEASE" --owner c1 --wait-ms 5000
  echo "acquire=$?" >>"$dir/c1.rc"
  t=$(tok "$(<"$dir/c1.acq")")
  echo "$t" >"$dir/c1.token"
  : >"$dir/c1.acquired"
  [ "$p" = sigstop ] && sleep 1 # the "work" during which it is stopped
  if [ "$p" = lock.renew ]; then
    c1_step "$p" lock.renew /dev/null lock renew L "$t"
    echo "renew=$?" >>"$dir/c1.rc"
  fi
  c1_step "$p" fence.write /dev/null update res '{"_id":"r"}' '{"$set":{"v":"c1"}}' --fence "L:$t"
  echo "write=$?" >>"$dir/c1.rc"
  c1_step "$p" lock.release /dev/null lock release L "$t"
  echo "release=$?" >>"$dir/c1.rc"
}

one_case() { # POINT
  local p=$1 label="kleppmann $1" pid c1pid t1 t2 doc rc
  local dir=$WORK/job.$1
  new_store "k_${p//./_}"
  d insert res '{"_id":"r","v":0}' >/dev/null || { bad "$label: setup"; return; }
  if [ "$p" = lock.acquire ]; then
    # Client 1 pauses before its acquire lands; client 2 takes the lock
    # with a short lease meanwhile, writes, and is paused past it (it
    # simply does nothing); client 1 then acquires and writes; client 2's
    # late write is refused.
    DOCTX_FAULT=lock.acquire:pause start_bg "$dir/c1.log" "$DOCTX" --store "$S" \
      lock acquire L --ttl-ms 5000 --owner c1 --wait-ms 5000
    pid=$BG_PID
    wait_stopped "$pid" 30 || { bad "$label: client 1 never paused: $(log_tail "$dir/c1.log")"; return; }
    t2=$(tok "$(d lock acquire L --ttl-ms "$LEASE" --owner c2)") || { bad "$label: client 2 acquire"; return; }
    d update res '{"_id":"r"}' '{"$set":{"v":"c2-early"}}' --fence "L:$t2" >/dev/null || { bad "$label: client 2 write"; return; }
    kill -CONT "$pid"
    bounded_wait "$pid" 30 "$dir/c1.log" || { bad "$label: client 1 acquire failed: $(log_tail "$dir/c1.log")"; return; }
    t1=$(tok "$(grep '^{' "$dir/c1.log" | tail -1)")
    [ "$t1" = $((t2 + 1)) ] || { bad "$label: client 1 token $t1 after $t2"; return; }
    d update res '{"_id":"r"}' '{"$set":{"v":"c1"}}' --fence "L:$t1" >/dev/null || { bad "$label: client 1 write"; return; }
    d update res '{"_id":"r"}' '{"$set":{"v":"c2"}}' --fence "L:$t2" >/dev/null 2>&1
    rc=$?
    [ $rc = 3 ] || { bad "$label: client 2's late write exit $rc, want 3 (FENCED)"; return; }
    doc=$(d find res '{"_id":"r"}')
    [ "$(field "$doc" v)" = c1 ] || { bad "$label: document $doc"; return; }
    d audit >/dev/null || { bad "$label: audit"; return; }
    ok
    return
  fi
  ( client1 "$p" ) &
  c1pid=$!
  echo "$c1pid" >>"$HARNESS_PIDS"
  # Pause client 1 where the case says.
  case "$p" in
  sigstop)
    local end=$((SECONDS + 30))
    while [ ! -e "$dir/c1.acquired" ] && [ $SECONDS -lt $end ]; do sleep 0.01; done
    [ -e "$dir/c1.acquired" ] || { bad "$label: client 1 never acquired"; bounded_wait "$c1pid" 5; return; }
    kill -STOP "$c1pid"
    ;;
  *)
    local end=$((SECONDS + 30)) ok_=1
    while :; do
      pid=$(cat "$dir/pid" 2>/dev/null)
      [ -n "$pid" ] && grep -q "fault: $p pause" "$dir/c1.log" 2>/dev/null && wait_stopped "$pid" 5 && break
      [ $SECONDS -lt $end ] || { ok_=0; break; }
      sleep 0.01
    done
    [ $ok_ = 1 ] || { bad "$label: client 1 never paused: $(log_tail "$dir/c1.log")"; bounded_wait "$c1pid" 5; return; }
    ;;
  esac
  # Past client 1's lease: client 2 acquires (waiting out the lease) and
  # writes.
  t2=$(tok "$(d lock acquire L --ttl-ms 30000 --owner c2 --wait-ms 5000)") ||
    { bad "$label: client 2 could not acquire"; kill -CONT "$pid" "$c1pid" 2>/dev/null; return; }
  d update res '{"_id":"r"}' '{"$set":{"v":"c2"}}' --fence "L:$t2" >/dev/null ||
    { bad "$label: client 2's write failed"; kill -CONT "$pid" "$c1pid" 2>/dev/null; return; }
  # Client 1 resumes.
  kill -CONT "$c1pid" 2>/dev/null
  [ "$p" = sigstop ] || kill -CONT "$pid"
  bounded_wait "$c1pid" 60 "$dir/c1.log"
  t1=$(<"$dir/c1.token")
  [ "$t2" -gt "$t1" ] || { bad "$label: client 2's token $t2 not above client 1's $t1"; return; }
  local want="acquire=0"
  [ "$p" = lock.renew ] && want="$want renew=1"
  if [ "$p" = lock.release ]; then
    want="$want write=0 release=1" # it wrote in time; its release came late
  else
    want="$want write=3 release=1"
  fi
  [ "$(tr '\n' ' ' <"$dir/c1.rc")" = "$want " ] ||
    { bad "$label: client 1's steps: $(tr '\n' ' ' <"$dir/c1.rc"), want $want: $(log_tail "$dir/c1.log" 4)"; return; }
  [ "$p" = lock.release ] || grep -q "FENCED: res 'r': token $t1 of lock 'L' is stale" "$dir/c1.log" ||
    { bad "$label: no FENCED message: $(log_tail "$dir/c1.log" 4)"; return; }
  doc=$(d find res '{"_id":"r"}')
  [ "$(field "$doc" v)" = c2 ] && [ "$(field "$doc" _fence)" = "{\"L\":$t2}" ] ||
    { bad "$label: the document does not hold client 2's write: $doc"; return; }
  # Client 1's late release freed nothing: client 2 still holds it.
  doc=$(d lock show L)
  [ "$(field "$doc" owner)" = c2 ] && [ "$(field "$doc" token)" = "$t2" ] ||
    { bad "$label: client 2 lost the lock: $doc"; return; }
  d audit >/dev/null || { bad "$label: audit"; return; }
  ok
}

# ---- mutual exclusion under load ---------------------------------------------------

mutex_worker() { # N
  local n=$1 end=$(($(now_ms) + ${MUTEX_SECS:-2} * 1000)) t out rc
  while [ "$(now_ms)" -lt $end ]; do
    out=$("$DOCTX" --store "$S" lock acquire M --ttl-ms 150 --owner "w$n" --wait-ms 500 2>/dev/null) || continue
    t=$(tok "$out")
    # A random pause: sometimes past the lease.
    sleep "0.$(printf %03d $((RANDOM % 250)))"
    out=$("$DOCTX" --store "$S" find-and-modify res '{"_id":"c"}' \
      "{\"\$inc\":{\"n\":1},\"\$set\":{\"t\":$t}}" --new --fence "M:$t" 2>/dev/null)
    rc=$?
    case $rc in
    0) sed -n 's/.*"n":\([0-9]*\).*"t":\([0-9]*\).*/\1 \2/p' <<<"$out" >>"$WORK/mutex.$n" ;;
    3) echo fenced >>"$WORK/mutex.fenced.$n" ;;
    *) echo "w$n: write exit $rc" >>"$WORK/mutex.errors" ;;
    esac
    "$DOCTX" --store "$S" lock release M "$t" >/dev/null 2>&1
  done
}

mutex_test() {
  local procs=${MUTEX_PROCS:-8} pids=() i
  new_store mutex
  d insert res '{"_id":"c","n":0}' >/dev/null || { bad "mutex: setup"; return; }
  for i in $(seq 1 "$procs"); do
    mutex_worker "$i" &
    pids+=($!)
    echo "$!" >>"$HARNESS_PIDS"
  done
  for i in "${pids[@]}"; do
    bounded_wait "$i" 60
    [ $? -ne 124 ] || bad "mutex: a worker hung"
  done
  [ ! -s "$WORK/mutex.errors" ] || { bad "mutex: $(head -3 "$WORK/mutex.errors")"; return; }
  local n fenced
  n=$(field "$(d find res '{"_id":"c"}')" n)
  fenced=$(cat "$WORK"/mutex.fenced.* 2>/dev/null | wc -l)
  cat "$WORK"/mutex.[0-9]* 2>/dev/null | sort -n | python3 -c '
import sys
rows = [tuple(map(int, l.split())) for l in sys.stdin if l.strip()]
n = int(sys.argv[1])
assert [r[0] for r in rows] == list(range(1, n + 1)), "counter %d, accepted %s" % (n, [r[0] for r in rows])
toks = [r[1] for r in rows]
for a, b in zip(toks, toks[1:]):
    assert b > a, "token %d accepted after %d" % (b, a)
assert len(set(toks)) == len(toks), "a token accepted twice"
print("mutex: %d accepted writes, tokens strictly increasing" % n)
' "$n" && ok || { bad "mutex: accepted writes out of token order"; return; }
  echo "mutex: $fenced stale writes refused (FENCED)"
  [ "$n" -gt 0 ] && ok || bad "mutex: no write accepted"
  d audit >/dev/null && ok || bad "mutex: audit"
}

run_jobs "${FAULT_JOBS:-2}" one_case sigstop lock.acquired lock.renew fence.write lock.release lock.acquire
mutex_test
finish
