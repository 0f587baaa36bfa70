# scenarios/lock.sh -- the lease lock's points (src/txn/lock/lock.c) for
# faults.sh and pause.sh: lock.register, lock.create (the first acquire of
# a name registers it and creates the lock free), lock.acquire and
# lock.acquired on a fresh lock, lock.renew and lock.release on token 1
# held since the set-up; lock.reserve on the first acquire of semaphore S
# (--max 3: it reserves the fence names S:0..S:2, src/txn/lock/sem.c);
# lock.enqueue, lock.ticket and lock.dequeue on a waiter of L, held since
# the set-up, that takes a ticket, renews it (past half its 1 s lease;
# lock.ticket's waiter waits 1.5 s, as 0.7 s gave a loaded CI run's
# waiter up before its first renewal) and gives up (src/txn/lock/queue.c): whatever happened, a ticket it
# left lapses, and the next waiter gets L once it is released.
# Whatever
# happened (crash, injected error, pause and resume, a recovery pass in
# between), the lock's token is 0 or 1 as the point allows, the next
# acquire (after a release of a live holder) gets exactly the next token,
# a fenced write with it lands, and one with the older token is FENCED.
# tests/crash/kleppmann.sh pauses at these points with a second holder
# acting meanwhile.

scenario_setup() {
  d insert res '{"_id":"r","v":0}' >/dev/null || return
  # $p: the point the calling suite (faults.sh, pause.sh) is at.
  case "${p:-}" in
  lock.renew | lock.release | lock.enqueue | lock.ticket | lock.dequeue)
    d lock acquire L --ttl-ms 60000 --owner c1 >/dev/null ;;
  esac
}

scenario_cmd() {
  case "$1" in
  lock.register | lock.create | lock.acquire | lock.acquired)
    echo 'lock acquire L --ttl-ms 60000 --owner c1' ;;
  lock.reserve) echo 'lock acquire S --max 3 --ttl-ms 60000 --owner c1' ;;
  lock.enqueue | lock.dequeue) echo 'lock acquire L --owner w --wait-ms 100' ;;
  lock.ticket) echo 'lock acquire L --owner w --wait-ms 1500' ;;
  lock.renew) echo 'lock renew L 1 --ttl-ms 60000' ;;
  lock.release) echo 'lock release L 1' ;;
  *) echo UNKNOWN ;;
  esac
}

# The semaphore after lock.reserve: its token 0 or 1, the next acquire
# gets the next one and writes under its own slot's fence, and every
# slot's fence name is reserved (a plain lock of that name exit 2).
check_sem() {
  local label=$1 doc t next fence
  d audit --settled >/dev/null || { bad "$label: audit not clean"; return; }
  doc=$(d lock show S 2>/dev/null) || doc='{"token":0}'
  t=$(field "$doc" token)
  case $t in 0 | 1) ;; *) bad "$label: token $t: $doc"; return ;; esac
  doc=$(d lock acquire S --max 3 --ttl-ms 60000 --owner c2) || { bad "$label: next acquire"; return; }
  next=$(field "$doc" token)
  fence=$(field "$doc" fence)
  [ "$next" = $((t + 1)) ] || { bad "$label: next token $next after $t"; return; }
  d update res '{"_id":"r"}' '{"$set":{"v":2}}' --fence "$fence:$next" >/dev/null ||
    { bad "$label: fenced write with the new token"; return; }
  [ "$(d count lock_names '{"slot_of":"S"}')" = 3 ] || { bad "$label: slots not reserved"; return; }
  d lock acquire S:2 >/dev/null 2>&1
  [ $? = 2 ] || { bad "$label: a slot's fence name taken as a lock"; return; }
  d audit --settled >/dev/null || { bad "$label: audit after"; return; }
  ok
}

check_final() {
  local label=$1 doc t owner next rc
  case $label in lock.reserve*) check_sem "$label"; return ;; esac
  d audit --settled >/dev/null || { bad "$label: audit not clean"; return; }
  doc=$(d lock show L 2>/dev/null) || doc='{"token":0,"owner":null}'
  t=$(field "$doc" token)
  owner=$(field "$doc" owner)
  case "$label:$t" in
  lock.register*:[01] | lock.create*:[01] | lock.acquire*:[01] | lock.renew*:1 | lock.release*:1) ;;
  lock.enqueue*:1 | lock.ticket*:1 | lock.dequeue*:1) ;;
  *) bad "$label: token $t: $doc"; return ;;
  esac
  case "$label:$owner" in
  lock.renew*:null) bad "$label: renew released the lock: $doc"; return ;;
  lock.release:crash:null) bad "$label: released without reaching the step"; return ;;
  lock.enqueue*:null | lock.ticket*:null | lock.dequeue*:null) bad "$label: a waiter freed the lock: $doc"; return ;;
  esac
  if [ "$owner" != null ]; then
    d lock release L "$t" >/dev/null || { bad "$label: release of the holder $t"; return; }
  fi
  # (waiting: a ticket a crashed waiter left lapses within its 1 s lease)
  next=$(field "$(d lock acquire L --ttl-ms 60000 --owner c2 --wait-ms 3000)" token)
  [ "$next" = $((t + 1)) ] || { bad "$label: next token $next after $t"; return; }
  d update res '{"_id":"r"}' '{"$set":{"v":2}}' --fence "L:$next" >/dev/null ||
    { bad "$label: fenced write with the new token"; return; }
  if [ "$t" -ge 1 ]; then
    d update res '{"_id":"r"}' '{"$set":{"v":1}}' --fence "L:$t" >/dev/null 2>&1
    rc=$?
    [ $rc = 3 ] || { bad "$label: stale token $t not FENCED (exit $rc)"; return; }
  fi
  [ "$(field "$(d find res '{"_id":"r"}')" v)" = 2 ] || { bad "$label: r changed by the stale token"; return; }
  ok
}
