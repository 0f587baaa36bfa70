#!/usr/bin/env bash
# The plain-write attack table, the sibling of tamper.sh (which forces
# writes past the rules): without --bypass-validation, no generic write may
# break a pattern's promise (docs/validation.md, "Transition rules").
#
# One store holds every pattern in many states at once (the fixture
# below): transfers succeeded, failed, canceled with tombstones and two
# in flight (a worker crashed mid-transfer); jobs ready, delayed, running
# (crashed after its effect), succeeded and dead with effect markers and
# pins, canceled; locks held and free, fenced writes and a fenced delete;
# a sync rule with a master mid-change (its flag set); ledger entries
# committed, uncommitted and pending; orders in every state; an item with
# three committed versions and an abandoned reservation; an interest day;
# a batch-update stopped mid-way and one finished.  `doctx dump` is taken
# before the later steps (EARLY) and after them (the fixture, S0).
#
# The rows are generated from S0, not listed by hand, so a new pattern,
# collection or field is covered without editing this file.  Every
# collection is a protocol collection but the fixture's own user fields
# (USER below: the fields it inserted into its user collections; the
# fields doctx added there -- _batches, _syncm, _syncing, _sync, the
# copied fields, dtx_fx -- are the protocol's).  For each document and
# each protocol field (nested ones too, to depth 3, arrays by their first
# element): $set to every other JSON type, to other live documents'
# values (up to 6), to an earlier value (EARLY: its own, else another
# document's), $unset, a replacement without it; for each document a
# delete, an insert of a copy under a new _id and an upsert of one.  Each
# is an updateOne or a findOneAndUpdate by turns, all of a collection's
# rows in one `doctx bulk`.  A bulk promises no order between two writes
# of one document, so a refused row counts only when no other row of its
# bulk changed its document; else it runs again in the next pass, on the
# fixture put back by crash_restore (tests/crash/restore.c), which also
# names every document it had to write: one a refused row wrote fails.
#
# A row must be refused (exit 3: VALIDATION, DUPKEY...) and change
# nothing.  A row the store admits is run alone on the fixture, then
# `doctx audit` and, when that is clean, `doctx recover --older-than-ms 0`
# and `doctx audit --settled`: the audit must report it (exit 5) -- the
# fixture alone audits clean, before and after the same recovery -- or it
# is in ALLOW below with the reason it is harmless.  Anything else fails
# the suite, and so does an ALLOW entry no row needs (a rule that now
# refuses it: drop the entry).  Under DTX_QUICK (the sanitizer stage)
# every other row runs, and so on each Redis target (PLAINWRITE_TURN).
#
# Writes the table leaves out: an operator naming _fence is refused by
# the parser before the store (rows after the table); a change of
# several fields at once; `doctx rules`, which changes the rules themselves.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
RESTORE=${CRASH_RESTORE:-$(dirname "$DOCTX")/crash_restore}
[ -x "$RESTORE" ] || { echo "no $RESTORE (build the crash_restore target)"; exit 1; }
export DOCTX

# The fixture's user fields, per user collection: everything else in any
# collection is a protocol's.
USER='{"docs":["text"],"items":["n"],"users":["name"],"posts":["author"],"wallets":["bal"],"stock":["n"]}'

# Admitted rows that are harmless: "COLL|ID|PATH|KIND" (bash patterns;
# KIND without its [op]: type:T, unset, replace, delete, insert, upsert,
# other and earlier -- with > or < for a number raised or lowered, =V for
# a short string) -> why.  They are looked up before a row is run alone,
# so an entry must name no row the audit would report, nor one a rule
# refuses today because it is harmful (with that rule gone, such a row
# must fail the suite): an ID, a direction, a state where the same write
# elsewhere is not harmless.
declare -A ALLOW=(
  # transfers (docs/transfers.md): what their delete guards let go
  ['accounts|C|*|delete']="an account with no balance and no markers: no money leaves with it"
  ['transfers|t[236]|*|delete']="a failed transfer; recovery takes its tombstones for a failed transfer's"
  # jobs (docs/jobs.md)
  ['jobs|*|*|insert']="a job inserted by hand is a new job: its effects are its own (job, key) pins and markers; one inserted running is taken over by recovery"
  ['jobs|*|*|upsert']="a job inserted by hand is a new job (as insert)"
  ['jobs|j6|*|delete']="a canceled job (its delete guard lets terminal ones go once their events are in the log) that applied no effect leaves nothing behind"
  ['jobs|j2|state|*=ready']="promote, delayed -> ready: the job runs early"
  ['jobs|j5|state|*=delayed']="fail, running -> delayed: the attempt is over; pins and markers keep each effect once"
  ['jobs|j5|attempts|*']="a running job's count of ended attempts: wrong, the job dies sooner or later (a dead one with tries left is dead_attempts); each effect stays once"
  ['jobs|j5|lease_until|*']="a running job's lease: liveness only -- a stale attempt is fenced by the epoch, its effects by their pins, markers and store-judged bounds"
  ['jobs|j5|owner|*']="a running job's lease holder: liveness only (as lease_until)"
  ['jobs|j5|updated|*']="a running job's last change: recovery's age, liveness only (as lease_until)"
  ['jobs|j5|run_at|*']="when a job is due: a running job is past it"
  ['jobs|j5|last_error|*']="what a running attempt writes when it ends (J7: the validator keeps result and finished null or absent on a live job)"
  ['jobs|j5|result|*']="what a running attempt writes when it ends (as last_error)"
  ['jobs|j5|finished|*']="what a running attempt writes when it ends (as last_error)"
  # locks (docs/locks.md): a plain write moves no lock and inserts none;
  # a name registered by hand is harmless
  ['lock_names|*|*|insert']="a name registered by hand: its lock, when created, starts past every token of the name a document records"
  ['lock_names|*|*|upsert']="a name registered by hand (as insert)"
  ['docs|*|*|delete']="a fenced document deleted: its fence tombstone keeps the record, a stale holder stays refused"
  ['docs|*|*|insert']="a copy with the same fence record: a record only refuses tokens older than it"
  ['docs|*|*|upsert']="a new document of user fields only"
  # sync (docs/sync.md, "What a plain write can do")
  ['posts|*|*|delete']="a dependent deleted: nothing is copied into it any more"
  ['posts|*|*|insert']="a copy of a dependent: it links to the same master with the same version and fields"
  ['posts|*|*|upsert']="a copy of a dependent (as insert)"
  ['posts|*|_sync*|unset']="a dependent's version removed: the next change writes it again"
  ['posts|*|_sync*|replace']="a dependent's version removed (as unset)"
  ['users|*|*|delete']="a master deleted: its dependents are orphans, counted, not judged"
  ['users|*|*|insert']="a copy of a master under a new _id, which no dependent links to"
  ['users|*|*|upsert']="a copy of a master (as insert)"
  ['users|*|_syncm.*.stamp|*']="the stamp of a master's last change: read only after a lost reply"
  ['users|*|_syncm|other']="another master's version record, at the same version"
  ['users|*|_syncm.R|other']="another master's version record, at the same version"
  ['users|*|_syncm|earlier']="an earlier version record, at the same version"
  ['users|*|_syncm.R|earlier']="an earlier version record, at the same version"
  ['users|u1|_syncing|other']="a flag set by hand on a master with none: repair propagates the master as it is and clears it"
  ['users|u1|_syncing|unset']="the empty flags object of a master with none: nothing reads it"
  ['users|u1|_syncing|replace']="the empty flags object (as unset)"
  ['users|*|_syncing.*.owner|*']="who set a flag: shown only, repair does not read it"
  # orders (docs/orders.md)
  ['orders|o3|*|delete']="a canceled order (its delete guard lets only such go): it moved no money"
  ['orders|o4|state|*=success']="finish, confirmed -> success: a confirmed order's credit is done"
  ['orders|o5|state|*=canceled']="cancel, pending -> canceled: nothing was credited"
  ['orders|o5|state|*=confirming']="confirm's first step, pending -> confirming: recovery then confirms it as a callback would (credited once, what create checked re-checked)"
  ['orders|*|lease_until|*']="a confirmation's lease: liveness only, recovery takes over and the epoch fences the old holder"
  ['orders|*|owner|*']="a confirmation's holder (as lease_until)"
  ['orders|*|updated|*']="a confirmation's last change (as lease_until)"
  # versions (docs/versions.md, "What a plain write can do")
  ['version_roots|*|res*|*']="a reservation dropped or rewritten: its writer loses and gives its number back, recovery abandons what it cannot read as live"
  ['version_roots|*|log.0|replace']="the oldest kept version trimmed from the log, as gc does"
  ['version_roots|*|updated|*']="a timestamp no step reads"
  ['version_children|*|*|insert']="a child under an id no version refers to is never read"
  ['version_children|*|*|upsert']="a child no version refers to (as insert)"
  # batch markers and job effect markers in the user's documents
  ['items|*|*|delete']="the user's document goes with its batch markers: a batch updates only documents that exist"
)

# ---- the fixture -------------------------------------------------------------------
# The patterns it puts in their states; a pattern registered later (a
# new prefix in `doctx faults`) fails the suite until the fixture gives
# it documents -- its collections and fields then come to the table by
# themselves.  (store, redis and fence are the store's own points.)
FIXTURE_PATTERNS=" transfer job lock sync ledger order batch interest version txn store redis fence "
for p in $("$DOCTX" faults); do
  [[ $FIXTURE_PATTERNS == *" ${p%%.*} "* ]] || { bad "pattern ${p%%.*} (fault point $p) has no state in the fixture"; FIXTURE_PATTERNS+="${p%%.*} "; }
done
new_store plainwrite
# Under the sanitizers, doctx runs without LeakSanitizer's exit scan but
# for recover and audit (harness.sh): some 150 starts, none of them a
# leak hunt.
scaffold_without_leak_check
setup() { # LABEL CMD...: a set-up step that must succeed
  local label=$1
  shift
  "$@" >"$WORK/setup.out" 2>&1 || { echo "setup: $label: $(head -c 600 "$WORK/setup.out")"; exit 1; }
}
# a step that crashes at a fault point (exit 137 by design)
crash_at() { # POINT[:ARRIVAL] CMD...
  local point=${1%%:*} spec
  spec=$point:crash
  [ "$1" = "$point" ] || spec+=:${1#*:}
  shift
  DOCTX_FAULT=$spec run_bounded 60 "$WORK/crash.log" "$@"
  [ $? = 137 ] || { echo "setup: $point did not crash: $(tail -c 400 "$WORK/crash.log")"; exit 1; }
}
# A job handler: one effect (debit 10 from the first wallet that has it),
# then success -- but j4 fails after its effect, and j5's worker crashes
# at its completion.
cat >"$WORK/handler.sh" <<'EOF'
"$DOCTX" --store "$DOCTX_STORE" job effect "$DOCTX_JOB_ID" "$DOCTX_JOB_EPOCH" k wallets \
  '{"bal":{"$gte":10}}' '{"$inc":{"bal":-10}}' >/dev/null || exit 1
[ "$DOCTX_JOB_ID" != j4 ] || exit 1
echo '{"ok":1}'
EOF
work() { run_bounded 60 "$WORK/work.log" "$DOCTX" --store "$S" job work "$@" --once --exec "bash $WORK/handler.sh"; }

setup accounts d account create A --balance 1000
setup accounts d account create B --balance 100
setup accounts d account create C
setup t1 d transfer A B 10 --id t1
d transfer C A 5 --id t2 >/dev/null 2>&1 # fails: C has nothing
setup t3 d transfer A B 3 --id t3 --async
setup t3 d transfer cancel t3
setup jobs d job add q t '{"n":1}' --id j1
setup jobs d job add q t '{}' --id j2 --delay-ms 3600000
setup locks d lock acquire L1 --ttl-ms 3600000
setup locks d lock acquire L2
setup locks d lock release L2 1
setup locks d lock acquire L3 --ttl-ms 3600000
setup docs d insert docs '{"_id":"d1","text":"a"}' '{"_id":"d2","text":"b"}'
setup fenced d update docs '{"_id":"d1"}' '{"$set":{"text":"a1"}}' --fence L1:1
setup fenced d update docs '{"_id":"d2"}' '{"$set":{"text":"b1"}}' --fence L2:1
setup sync d insert users '{"_id":"u1","name":"ann"}' '{"_id":"u2","name":"bob"}'
setup sync d insert posts '{"_id":"p1","author":"u1"}' '{"_id":"p2","author":"u2"}'
setup sync d sync rule R --master users --dependents posts --link author --copy name:author_name
setup sync d sync update R u1 '{"$set":{"name":"ann2"}}'
setup ledger d ledger account create L0 --min-balance none
setup ledger d ledger account create LA
setup ledger d ledger account create LB
setup ledger d ledger post L0:-500 LA:500 --id e1
setup ledger d ledger post LA:-10 LB:10 --id e2 --pending
setup orders d order create o1 --account A --amount 50
setup orders d order create o2 --account B --amount 20
setup orders d order create o3 --account C --amount 30
setup versions d version put V '{"n":1}' --child a='{"x":1}'
setup items d insert items '{"_id":"i1","n":0}' '{"_id":"i2","n":0}' '{"_id":"i3","n":0}'
setup wallets d insert wallets '{"_id":"w1","bal":100}' '{"_id":"w2","bal":100}'
setup txn d insert stock '{"_id":"s1","n":5}' '{"_id":"s2","n":0}' '{"_id":"s3","n":1}'
setup txn d txn --id x1 '[{"update":"stock","filter":{"_id":"s1"},"with":{"$inc":{"n":-2}}},{"update":"stock","filter":{"_id":"s2"},"with":{"$inc":{"n":2}}}]'
d dump >"$WORK/early.dump" || { echo "setup: dump"; exit 1; }

# the later steps: the ledger committed first (the worker would also
# roll back the transfers left in flight below)
setup ledger d ledger post-pending e2
setup worker run_bounded 60 "$WORK/worker.log" "$DOCTX" --store "$S" worker --once
setup ledger d ledger post LA:-5 LB:5 --id e3
setup ledger d ledger post LB:-1 LA:1 --id e4 --pending
setup jobs d job add q1 t '{}' --id j3
setup jobs work q1
setup jobs d job add q2 t '{}' --id j4 --max-attempts 1
setup jobs work q2
setup jobs d job add q3 t '{}' --id j5
crash_at job.complete "$DOCTX" --store "$S" job work q3 --once --lease-ms 3600000 --exec "bash $WORK/handler.sh"
setup jobs d job add q t '{}' --id j6
setup jobs d job cancel j6
# its events relayed to the log (a job with events waiting is kept)
setup jobs d job events q
setup locks d lock acquire L2
setup locks d lock release L3 1
setup fenced d delete docs '{"_id":"d2"}' --fence L2:2
setup fenced d update docs '{"_id":"d1"}' '{"$set":{"text":"a2"}}' --fence L1:1
crash_at sync.propagate "$DOCTX" --store "$S" sync update R u2 '{"$set":{"name":"bob2"}}' --lease-ms 3600000
setup orders d order confirm o1
crash_at order.credit "$DOCTX" --store "$S" order confirm o2
setup orders d order cancel o3
setup orders d order create o4 --account A --amount 5
crash_at order.finish "$DOCTX" --store "$S" order confirm o4
setup orders d order create o5 --account C --amount 8
# another settlement account (created by its first order, no limit): the
# value a settlement could be moved to
setup orders d order create o6 --account B --amount 4 --settlement bank
crash_at order.credit "$DOCTX" --store "$S" order confirm o6
setup versions d version put V '{"n":2}' --child b='{"x":2}'
setup versions d version put V '{"n":3}' --child a='{"x":3}'
crash_at version.child "$DOCTX" --store "$S" version put V '{"n":4}' --child a='{"x":4}'
setup interest d interest run --rate-ppm 1000 --day 2024-01-01
setup batch d batch-update items '{"_id":"i3"}' '{"$inc":{"n":1}}' --id B2
crash_at batch.apply:2 "$DOCTX" --store "$S" batch-update items '{}' '{"$inc":{"n":1}}' --id B1
# transactions: s3 deleted by x3 (a tombstone; a deletion always has a
# record, docs/transactions.md "The 1PC path"), x2 crashed at its commit
# point with its intents on s1 and s2 (an hour's lease), x9 fenced by a show
setup txn d txn --id x3 '[{"delete":"stock","filter":{"_id":"s3"}}]'
crash_at txn.commit "$DOCTX" --store "$S" txn --id x2 --lease-ms 3600000 '[{"update":"stock","filter":{"_id":"s1"},"with":{"$inc":{"n":-1}}},{"update":"stock","filter":{"_id":"s2"},"with":{"$inc":{"n":1}}}]'
setup txn d txn show x9
# transfers last: t6 crashed mid-way and canceled (its tombstones on A),
# t4 and t5 left in flight by a crashed worker
crash_at transfer.mark_payee "$DOCTX" --store "$S" transfer A C 2 --id t6
setup t6 d transfer cancel t6
setup t4 d transfer A B 7 --id t4 --async
crash_at transfer.commit "$DOCTX" --store "$S" worker --once
setup t5 d transfer B C 4 --id t5 --async
crash_at transfer.mark_payee "$DOCTX" --store "$S" worker --once
d dump >"$WORK/s0.dump" || { echo "setup: dump"; exit 1; }

# The states the fixture must hold (else the table would attack less than
# it claims), and what recovery makes of them.
states() { # DUMP -> one line per pattern
  jq -rn '[inputs] | reduce .[] as $l ({c: null, o: {}};
      if ($l | has("collection") and has("count")) then .c = $l.collection
      else .o[.c] += [$l] end) | .o as $o |
    def ids($c; f): [$o[$c][]? | "\(._id):\(f)"] | join(" ");
    "transfers " + ids("transfers"; .state),
    "accounts " + ids("accounts"; "\(.balance)/\(.pending | length)/\(.voids | length)"),
    "jobs " + ids("jobs"; "\(.state)/\(.fx_colls | length)"),
    "locks " + ids("locks"; "\(.token)/\(.owner != null)"),
    "users " + ids("users"; "\(._syncing.R != null)"),
    "posts " + ids("posts"; .author_name),
    "ledger " + ids("ledger_entries"; "\(.state)/\(.proc)"),
    "orders " + ids("orders"; .state),
    "versions " + ids("version_roots"; "\(.version)/\(.res | keys | join(","))"),
    "items " + ids("items"; "\(.n)/\(._batches // {} | keys | join(","))"),
    "wallets " + ids("wallets"; "\(.bal)/\(.dtx_fx // [] | length)"),
    "days " + ids("interest_days"; .rate_ppm),
    "stock " + ids("stock"; "\(.n)/\(._txn.w.id // "")/\(._txn.del // false)"),
    "txns " + ids("txn_records"; .state)' "$1"
}
want_s0='transfers interest:2024-01-01:A:succeeded order:o1:succeeded order:o4:succeeded t1:succeeded t2:failed t3:failed t4:preparing t5:preparing t6:failed
accounts A:1039/1/1 B:110/1/0 C:0/0/1 bank:0/0/0 settlement:-56/0/0
jobs j1:ready/0 j2:delayed/0 j3:succeeded/1 j4:dead/1 j5:running/1 j6:canceled/0
locks L1:1/true L2:2/true L3:1/false
users u1:false u2:true
posts p1:ann2 p2:null
ledger e1:posted/committed e2:posted/committed e3:posted/uncommitted e4:pending/uncommitted
orders o1:success o2:confirming o3:canceled o4:confirmed o5:pending o6:confirming
versions V:3/4
items i1:1/B1 i2:0/ i3:1/B2
wallets w1:70/3 w2:100/0
days 2024-01-01:1000
stock s1:3/x2/false s2:2/x2/false s3:null//true
txns x1:committed x2:pending x3:committed x9:aborted'
got=$(states "$WORK/s0.dump")
[ "$got" = "$want_s0" ] && ok || bad "the fixture's states: $(diff <(echo "$want_s0") <(echo "$got"))"

# The fixture audits clean (the leases a plain audit would find lapsed,
# a running job's and a sync flag's, last an hour), and clean again once
# recovered: a finding after a row is the row's.
expect 0 "fixture: audit" -- d audit
expect 0 "fixture: recover" -- d recover --older-than-ms 0
expect 0 "fixture: audit --settled" -- d audit --settled
d dump >"$WORK/rec.dump"
want_rec='transfers interest:2024-01-01:A:succeeded order:o1:succeeded order:o2:succeeded order:o4:succeeded order:o6:succeeded t1:succeeded t2:failed t3:failed t4:failed t5:failed t6:failed
accounts A:1046/0/2 B:134/0/2 C:0/0/2 bank:-4/0/0 settlement:-76/0/0
jobs j1:ready/0 j2:delayed/0 j3:succeeded/1 j4:dead/1 j5:delayed/1 j6:canceled/0
locks L1:1/true L2:2/true L3:1/false
users u1:false u2:false
posts p1:ann2 p2:bob2
ledger e1:posted/committed e2:posted/committed e3:posted/committed e4:pending/uncommitted
orders o1:success o2:success o3:canceled o4:success o5:pending o6:success
versions V:3/
items i1:1/B1 i2:0/ i3:1/B2
wallets w1:70/3 w2:100/0
days 2024-01-01:1000
stock s1:3//false s2:2//false s3:null//true
txns x1:committed x2:aborted x3:committed x9:aborted'
got=$(states "$WORK/rec.dump")
[ "$got" = "$want_rec" ] && ok || bad "the fixture recovered: $(diff <(echo "$want_rec") <(echo "$got"))"
expect 0 "restore the fixture" -- "$RESTORE" "$S" "$WORK/s0.dump"
d dump | cmp -s - "$WORK/s0.dump" && ok || bad "crash_restore did not restore the fixture: $(d dump | diff - "$WORK/s0.dump" | head -5)"

# ---- the rows ----------------------------------------------------------------------
# One jq over S0 (and EARLY) prints, per row: COLL, LABEL (COLL|ID|PATH|KIND
# [op]), the row's bulk line, and the _id it writes (as JSON).
# Which rows: all, or every other one on each Redis target
# (PLAINWRITE_TURN=1 or 2, run-redis.sh: the two targets share the table,
# the rules and the audit being the same code on both), or every fourth
# under DTX_QUICK (the sanitizer stage: it checks memory).
case ${PLAINWRITE_TURN:-} in '' | 1 | 2) ;; *) echo "PLAINWRITE_TURN: 1 or 2"; exit 2 ;; esac
every=2
if [ -n "${PLAINWRITE_TURN:-}" ]; then
  half=$((PLAINWRITE_TURN - 1))
elif [ -n "${DTX_QUICK:-}" ]; then
  half=0 every=4
else
  half=
fi
jq -nr --slurpfile early "$WORK/early.dump" --argjson user "$USER" \
  --argjson half "${half:-null}" --argjson every "$every" '
  def by_coll: reduce .[] as $l ({c: null, o: {}};
    if ($l | type == "object" and has("collection") and has("indexes") and has("count"))
    then .c = $l.collection | .o[.c] = [] else .o[.c] += [$l] end) | .o;
  def tname: if type == "number" then (if . == floor then "int" else "double" end)
    elif type == "boolean" then "bool" else type end;
  # the JSON types, a number once: an integer field gets a fraction
  def wrong: tname as $t | [["string", "x"], ["number", (if $t == "int" then 1.5 else 7 end)],
    ["bool", true], ["null", null], ["object", {}], ["array", []]]
    | map(select(.[0] != $t and (.[0] != "number" or $t != "double")));
  def pstr: map(tostring) | join(".");
  # how a value differs from the current one $v, for the label: a number
  # raised (>) or lowered (<), a short string named (=ready)
  def how($v): if type == "number" and ($v | type) == "number" then
      (if . > $v then ">" else "<" end)
    elif type == "string" and length <= 24 then "=\(.)" else "" end;
  # protocol paths: to depth 3, arrays by element 0; not _id, not the
  # user fields, not _fence (an operator naming it is refused before the
  # store: the rows after the table)
  def ppaths($u): [paths | select(length <= 3)
    | select(.[0] != "_id" and .[0] != "_fence" and (.[0] as $f | $u | index([$f]) | not))
    | select(all(.[]; type == "string" or . == 0))];
  ([inputs] | by_coll) as $live | ($early | by_coll) as $past |
  [ $live | to_entries[] | .key as $c | .value as $docs | ($user[$c] // []) as $u |
    ($past[$c] // []) as $pdocs |
    $docs[] | . as $d | ._id as $id | ($d | del(._fence)) as $rep | {c: $c, id: $id} as $base |
    ( ($d | ppaths($u))[] as $p | ($p | pstr) as $ps | ($d | getpath($p)) as $v |
      ( ( ($v | wrong[] | {k: "type:\(.[0])", v: .[1]}),
          ([$docs[] | select(._id != $id) | getpath($p) | select(. != null and . != $v)]
           | unique[:6][] | {k: "other\(how($v))", v: .}),
          ([([$pdocs[] | select(._id == $id)] + [$pdocs[] | select(._id != $id)])[]
            | getpath($p) | select(. != null and . != $v)][:1][] | {k: "earlier\(how($v))", v: .})
        ) | $base + {p: $ps, k: .k, up: {"$set": {($ps): .v}}} ),
      ($base + {p: $ps, k: "unset", up: {"$unset": {($ps): ""}}}),
      ($base + {p: $ps, k: "replace", up: ($rep | delpaths([$p]))}) ),
    # the document itself: deleted, copied; not a user document of user
    # fields only (the users own)
    (if ($u | length) > 0 and ($d | keys - $u - ["_id"] | length) == 0 then empty else
    ($base + {p: "*", k: "delete", line: {deleteOne: {filter: {_id: $id}}}}),
    ($base + {p: "*", k: "insert", to: "pw-\($id)",
       line: {insertOne: {document: ($d | ._id = "pw-\($id)")}}}),
    ($base + {p: "*", k: "upsert", to: "pw-u-\($id)",
       line: {updateOne: {filter: {_id: "pw-u-\($id)"}, update: {"$set": ($rep | del(._id))}, upsert: true}}})
    end)
  ] | to_entries[] | .key as $t | .value |
  select($half == null or $t % $every == $half) |
  if .line then . else
    (if ($t / 2 | floor) % 2 == 0 then "updateOne" else "findOneAndUpdate" end) as $op |
    .line = {($op): {filter: {_id: .id}, update: .up}} | .k += " [\($op)]" end |
  [.c, "\(.c)|\(.id)|\(.p)|\(.k)", (.line | tojson), (.to // .id | tojson)] | @tsv
' "$WORK/s0.dump" >"$WORK/rows.tsv" || { bad "the rows' jq failed"; finish; exit; }
nrows=$(wc -l <"$WORK/rows.tsv")

# An operator naming _fence is refused before the store (exit 2), in every
# collection holding a fence record (and the first pass's restore below
# finds nothing they wrote).
jq -rn '[inputs] | reduce .[] as $l ({c: null, o: []};
    if ($l | has("collection") and has("count")) then .c = $l.collection
    elif ($l | has("_fence")) then .o += [[.c, $l._id]] else . end)
  | .o | group_by(.[0])[] | .[0] | @tsv' "$WORK/s0.dump" >"$WORK/fenced"
[ -s "$WORK/fenced" ] && ok || bad "the fixture holds no fence record"
while IFS=$'\t' read -r coll id; do
  expect 2 "$coll.$id: \$set _fence" -- d update "$coll" "{\"_id\":\"$id\"}" '{"$set":{"_fence.L9":1}}'
  expect 2 "$coll.$id: \$unset _fence" -- d update "$coll" "{\"_id\":\"$id\"}" '{"$unset":{"_fence":""}}'
done <"$WORK/fenced"

# Each collection's rows in one bulk per pass.  A bulk promises no order
# between two writes of one document (include/doctx.h), so a row is judged
# on the document as it was only when no other row of its pass changed
# that document.  After each pass crash_restore puts the fixture back and
# names every document it had to write; then one awk judges each row:
#   ok: ADMIT (judged alone below);
#   refused (an exit-3 error): REFUSED, unless another row of the pass
#     changed its document: then it runs again in the next pass;
#   any other answer, or a document written back that no admitted row
#   wrote: FAIL.
cp "$WORK/rows.tsv" "$WORK/pending"
: >"$WORK/judged"
pass=0
while [ -s "$WORK/pending" ] && [ $pass -lt 8 ]; do
  pass=$((pass + 1))
  : >"$WORK/results"
  for coll in $(cut -f1 "$WORK/pending" | uniq); do
    awk -F'\t' -v c="$coll" '$1 == c' "$WORK/pending" >"$WORK/rows.coll"
    cut -f3 "$WORK/rows.coll" | d bulk "$coll" >"$WORK/bulk.out" 2>"$WORK/bulk.err"
    [ $? -le 3 ] && [ "$(wc -l <"$WORK/bulk.out")" = "$(wc -l <"$WORK/rows.coll")" ] ||
      { bad "$coll: bulk answered $(wc -l <"$WORK/bulk.out") of $(wc -l <"$WORK/rows.coll") rows: $(head -c 300 "$WORK/bulk.err")"; continue; }
    paste "$WORK/rows.coll" "$WORK/bulk.out" >>"$WORK/results"
  done
  "$RESTORE" -v "$S" "$WORK/s0.dump" >"$WORK/restored" || bad "pass $pass: crash_restore failed"
  : >"$WORK/pending"
  awk -F'\t' -v judged="$WORK/judged" -v pending="$WORK/pending" '
    FILENAME == ARGV[1] {
      row[n++] = $0
      if ($5 ~ /^\{"ok":true/) wrote[$1 "\t" $4] = 1
      next
    }
    NF == 2 && !(($1 "\t" $2) in wrote) { print "FAIL\t" $1 " " $2 "\ta refused row changed it" >>judged }
    END {
      for (i = 0; i < n; i++) {
        split(row[i], f, "\t")
        if (f[5] ~ /^\{"ok":true/) print "ADMIT\t" f[2] "\t" f[3] >>judged
        else if (f[5] ~ /^\{"ok":false,"error":"(VALIDATION|DUPKEY|TYPE|OVERFLOW|IMMUTABLE|CONFLICT|STATE|STALE|LIMIT|FENCED)"/) {
          if ((f[1] "\t" f[4]) in wrote) print f[1] "\t" f[2] "\t" f[3] "\t" f[4] >pending
          else print "REFUSED\t" f[2] >>judged
        } else print "FAIL\t" f[2] "\tnot a refusal: " f[5] >>judged
      }
    }' "$WORK/results" "$WORK/restored"
done
[ ! -s "$WORK/pending" ] && ok || bad "$(wc -l <"$WORK/pending") rows still judged on a changed document after $pass passes"
[ "$(grep -vc '^FAIL' "$WORK/judged")" = "$nrows" ] && ok || bad "judged $(grep -vc '^FAIL' "$WORK/judged") of $nrows rows"
d dump | cmp -s - "$WORK/s0.dump" && ok || bad "the fixture was not restored: $(d dump | diff - "$WORK/s0.dump" | head -6)"
while IFS=$'\t' read -r verdict label why; do
  bad "$label: $why"
done < <(grep '^FAIL' "$WORK/judged")

# ---- admitted rows: alone on the fixture, recovered, audited ----------------------------
REFUSAL='^\{"ok":false,"error":"(VALIDATION|DUPKEY|TYPE|OVERFLOW|IMMUTABLE|CONFLICT|STATE|STALE|LIMIT|FENCED)"'
declare -A USED=()
nadmit=0 nallow=0 nreported=0 nsame=0 nlate=0 dirty=
while IFS=$'\t' read -r verdict label line; do
  nadmit=$((nadmit + 1))
  coll=${label%%|*}
  key=${label% \[*}
  allowed=
  for pat in "${!ALLOW[@]}"; do
    # shellcheck disable=SC2053
    [[ $key == $pat ]] && { allowed=$pat; break; }
  done
  if [ -n "$allowed" ]; then
    USED[$allowed]=1
    nallow=$((nallow + 1))
    ok
    continue
  fi
  # put back what the last row changed: its collection, or everything
  # once recovery ran
  if [ -n "$dirty" ]; then
    # shellcheck disable=SC2086
    "$RESTORE" "$S" "$WORK/s0.dump" $dirty >/dev/null || { bad "$label: restore failed"; continue; }
  fi
  dirty=$coll
  d bulk "$coll" <<<"$line" >"$WORK/alone.out" 2>&1
  read -r res <"$WORK/alone.out"
  if [ "$res" = '{"ok":true,"matched":1,"modified":0}' ]; then
    nsame=$((nsame + 1)) && ok && continue
  elif [[ $res =~ $REFUSAL ]]; then
    # admitted in its pass after another row changed its document
    nlate=$((nlate + 1)) && ok && continue
  elif [[ $res != '{"ok":true'* ]]; then
    bad "$label: alone: $res" && continue
  fi
  # reported at once, or after recovery finished the work in flight
  d audit >"$WORK/audit.out" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    dirty=" "
    d recover --older-than-ms 0 >"$WORK/rec.out" 2>&1
    d audit --settled >"$WORK/audit.out" 2>&1
    rc=$?
  fi
  case $rc in
  5) ok; nreported=$((nreported + 1))
    [ -z "${PW_VERBOSE:-}" ] || echo "reported: $label: $(grep -m1 FINDING "$WORK/audit.out")" ;;
  0) bad "$label: a plain write was admitted, and after recovery the audit is clean: $line" ;;
  *) bad "$label: audit exit $rc: $(head -c 300 "$WORK/audit.out")" ;;
  esac
done < <(grep '^ADMIT' "$WORK/judged")
"$RESTORE" "$S" "$WORK/s0.dump" >/dev/null && d dump | cmp -s - "$WORK/s0.dump" && ok ||
  bad "the fixture could not be restored at the end"
expect 0 "fixture: audit, at the end" -- d audit
if [ -z "$half" ]; then
  for pat in "${!ALLOW[@]}"; do
    [ -n "${USED[$pat]:-}" ] && ok || bad "ALLOW '$pat' admits no row: the store refuses it now, drop the entry"
  done
fi
# PW_SAVE=DIR keeps the dumps, the rows and their verdicts (to study a row)
[ -z "${PW_SAVE:-}" ] || cp "$WORK/early.dump" "$WORK/s0.dump" "$WORK/rows.tsv" "$WORK/judged" "$PW_SAVE/"
echo "plain rows: $nrows in $pass passes; refused $(grep -c '^REFUSED' "$WORK/judged"), admitted $nadmit: allowed $nallow, reported by the audit $nreported, refused alone $nlate, changing nothing $nsame"
finish
