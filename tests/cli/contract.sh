#!/usr/bin/env bash
# contract.sh -- the doctx command's contract as users and scripts rely on
# it: the output format of every document command, exit codes 0 to 4,
# --help everywhere, find's options, upserts, the index commands, JSON
# from stdin, messages, and which commands may create a store.
#
# Run by ctest with $DOCTX set to the doctx binary, on SQLite; run-redis.sh
# runs it again on a standalone redis-server and on the 3+3 cluster (its
# store comes from tests/lib/store.sh).  Exits non-zero when any check
# fails and ends with "N passed, N failed".
set -u

DOCTX=${DOCTX:?set DOCTX to the doctx binary}
source "$(dirname "$0")/../lib/harness.sh" # WORK, removed on exit; new_store
TMP=$WORK
new_store contract
PASS=0
FAIL=0

# run ARGS...: runs doctx on the test store, with $IN on stdin when set
# (IN=TEXT run ...), killed after $BOUND seconds when set (BOUND=N run
# ...: a command told to wait as long as it takes); sets OUT, ERR and RC.
run() {
  RC=0
  local t=() store=(--store "$S")
  [ -n "${BOUND:-}" ] && t=(timeout -k 5 "$BOUND")
  # A line that names its own --store gets no other (two are refused).
  case " $* " in *" --store "* | *" --store="*) store=() ;; esac
  if [ -n "${IN+set}" ]; then
    printf '%s' "$IN" | "${t[@]}" "$DOCTX" "${store[@]}" "$@" >"$TMP/out" 2>"$TMP/err" || RC=$?
  else
    "${t[@]}" "$DOCTX" "${store[@]}" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null || RC=$?
  fi
  OUT=$(<"$TMP/out")
  ERR=$(<"$TMP/err")
}

ok() { PASS=$((PASS + 1)); }
bad() {
  FAIL=$((FAIL + 1))
  printf 'FAIL: %s\n' "$1" >&2
  [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/      /' >&2
  return 0
}

# expect CODE STDOUT ARGS...: exact exit code and exact stdout.
expect() {
  local code=$1 want=$2
  shift 2
  run "$@"
  if [ "$RC" -eq "$code" ] && [ "$OUT" == "$want" ]; then ok; else
    bad "doctx $* -> exit $RC, want $code" \
        "stdout: $OUT"$'\n'"want:   $want"$'\n'"stderr: $ERR"
  fi
}

# expect_err CODE ERRNAME ARGS...: exit code, empty stdout and a
# "doctx: ERRNAME: " line on stderr.
expect_err() {
  local code=$1 name=$2
  shift 2
  run "$@"
  if [ "$RC" -eq "$code" ] && [ -z "$OUT" ] &&
     [[ $ERR == "doctx: $name: "* ]]; then ok; else
    bad "doctx $* -> exit $RC, want $code $name" "stdout: $OUT"$'\n'"stderr: $ERR"
  fi
}

check() { # check DESCRIPTION CONDITION-RESULT(0/1)
  if [ "$2" -eq 0 ]; then ok; else bad "$1"; fi
}

# ---- insert ----------------------------------------------------------------
expect 0 '"a"' insert c '{"_id":"a","n":1}'
expect 0 '5' insert c '{"_id":5,"n":2}'
expect 0 $'"b"\n"c"\n7' insert c '{"_id":"b","n":3}' '{"_id":"c","n":4}' \
  '{"_id":7,"n":5,"s":"x"}'
run insert c '{"n":6}'
check "generated _id is 24 hex digits: $OUT" \
  "$([[ $RC -eq 0 && $OUT =~ ^\"[0-9a-f]{24}\"$ ]]; echo $?)"
GEN=$OUT
# Ids already inserted are printed even when a later document fails.
run insert c '{"_id":"d","n":7}' '{"_id":"a"}' '{"_id":"e"}'
check "insert stops at a duplicate and prints earlier ids (rc=$RC out=$OUT)" \
  "$([[ $RC -eq 3 && $OUT == '"d"' && $ERR == 'doctx: DUPKEY: '* ]]; echo $?)"
expect 0 '0' count c '{"_id":"e"}'

# ---- find: format, filter, options ---------------------------------------------
run insert order '{"_id":"k","z":1,"a":{"y":2,"b":[3,"x",null,true]},"big":9223372036854775807,"m":-12}'
expect 0 '{"_id":"k","z":1,"a":{"y":2,"b":[3,"x",null,true]},"big":9223372036854775807,"m":-12}' \
  find order
expect 0 '{"_id":"a","n":1}' find c '{"_id":"a"}'
expect 0 $'{"_id":"b","n":3}\n{"_id":"c","n":4}' find c '{"n":{"$in":[3,4]}}'
expect 0 $'{"_id":"d","n":7}\n'"{\"_id\":$GEN,\"n\":6}" \
  find c '{"n":{"$gte":6}}' --sort '{"n":-1}'
expect 0 $'{"_id":5,"n":2}\n{"_id":"b","n":3}' \
  find c --sort '{"n":1}' --skip 1 --limit 2
expect 0 $'{"_id":5,"n":2}\n{"_id":"b","n":3}' \
  find --sort='{"n":1}' --limit=2 c --skip=1
expect 0 '{"n":5}' find c '{"_id":7}' --project '{"n":1,"_id":0}'
expect 0 '{"_id":7,"s":"x"}' find c '{"_id":7}' --project '{"n":0}'
expect 0 '{"_id":7,"n":5}' find c '{"_id":7}' --project '{"n":1}'
expect 0 '' find c '{"n":{"$gt":100}}'
expect 0 '' find nosuchcoll
expect 0 $'{"_id":"c","n":4}\n{"_id":7,"n":5,"s":"x"}' \
  find c '{"n":{"$gt":3}}' --sort '{"n":1}' --limit 2
expect 0 $'{"_id":"a","n":1}' find c '{}' --sort '{"n":1}' --limit 1 --skip 0

# ---- count -------------------------------------------------------------------------
expect 0 '7' count c
expect 0 '3' count c '{"n":{"$lt":4}}'
expect 0 '0' count nosuchcoll

# ---- update ------------------------------------------------------------------------
expect 0 '{"matched":1,"modified":1}' update c '{"_id":"a"}' '{"$inc":{"n":10}}'
expect 0 '{"_id":"a","n":11}' find c '{"_id":"a"}'
expect 0 '{"matched":1,"modified":0}' update c '{"_id":"a"}' '{"$set":{"n":11}}'
expect 0 '{"matched":0,"modified":0}' update c '{"_id":"zz"}' '{"$set":{"n":1}}'
expect 0 '{"matched":3,"modified":3}' update c '{"n":{"$lt":5}}' \
  '{"$set":{"small":true}}' --many
expect 0 '3' count c '{"small":true}'
expect 0 '{"matched":0,"modified":0,"upserted":"u1"}' \
  update c '{"_id":"u1"}' '{"$set":{"n":100}}' --upsert
expect 0 '{"_id":"u1","n":100}' find c '{"_id":"u1"}'
expect 0 '{"matched":1,"modified":1}' \
  update --upsert c '{"_id":"u1"}' '{"$set":{"n":101}}'
run update c '{"name":"fresh"}' '{"$set":{"n":1}}' --upsert --many
check "upsert with --many inserts one document (out=$OUT err=$ERR)" \
  "$([[ $RC -eq 0 && $OUT =~ ^\{\"matched\":0,\"modified\":0,\"upserted\":\"[0-9a-f]{24}\"\}$ ]]; echo $?)"
expect 0 '1' count c '{"name":"fresh","n":1}'
expect 0 '{"matched":1,"modified":1}' update c '{"_id":"u1"}' '{"n":5,"r":1}'
expect 0 '{"_id":"u1","n":5,"r":1}' find c '{"_id":"u1"}'

# ---- find-and-modify: the primitive ---------------------------------------------------
run insert acct '{"_id":"A","balance":100,"pending":[]}' '{"_id":"B","balance":50}'
expect 0 '{"_id":"A","balance":100,"pending":[]}' \
  find-and-modify acct '{"_id":"A","balance":{"$gte":30}}' '{"$inc":{"balance":-30}}'
expect 0 '{"_id":"A","balance":40,"pending":[]}' \
  find-and-modify acct '{"_id":"A","balance":{"$gte":30}}' '{"$inc":{"balance":-30}}' --new
expect 1 '' find-and-modify acct '{"_id":"A","balance":{"$gte":500}}' \
  '{"$inc":{"balance":-500}}'
check "no match prints nothing on stderr either" "$([ -z "$ERR" ]; echo $?)"
expect 0 '{"_id":"A","balance":40,"pending":[]}' find acct '{"_id":"A"}'
expect 0 '{"_id":"A","balance":40,"pending":["t1"]}' find-and-modify --new \
  acct '{"_id":"A","pending":{"$ne":"t1"}}' '{"$push":{"pending":"t1"}}'
expect 1 '' find-and-modify acct '{"_id":"A","pending":{"$ne":"t1"}}' \
  '{"$push":{"pending":"t1"}}' --new
expect 0 '{"_id":"B","balance":51}' \
  find-and-modify acct '{}' '{"$inc":{"balance":1}}' --sort '{"balance":-1}' --new
expect 0 '{"_id":"N","balance":0}' \
  find-and-modify acct '{"_id":"N"}' '{"$set":{"balance":0}}' --upsert --new
expect 0 'null' \
  find-and-modify acct '{"_id":"P"}' '{"$set":{"balance":0}}' --upsert
expect 0 '{"_id":"P","balance":0}' find acct '{"_id":"P"}'

# ---- arrayFilters, positional updates, aggregate -----------------------------------------
run insert g '{"_id":1,"grades":[{"g":80,"m":75},{"g":85,"m":90},{"g":90,"m":85}]}' \
  '{"_id":2,"grades":[{"g":70,"m":60}]}'
expect 0 '{"matched":1,"modified":1}' \
  update g '{"_id":1}' '{"$set":{"grades.$[e].m":100}}' \
  --array-filters '[{"e.g":{"$gte":85}}]'
expect 0 '{"_id":1,"grades":[{"g":80,"m":75},{"g":85,"m":100},{"g":90,"m":100}]}' \
  find g '{"_id":1}'
expect 0 '{"_id":2,"grades":[{"g":71,"m":60}]}' \
  find-and-modify g '{"_id":2,"grades.g":70}' '{"$inc":{"grades.$.g":1}}' --new
expect 0 '{"_id":2,"grades":[{"g":71,"m":61}]}' \
  find-and-modify g '{"_id":2}' '{"$inc":{"grades.$[x].m":1}}' --new \
  --array-filters='[{"x.g":71}]'
expect 0 $'{"_id":85,"n":1}\n{"_id":90,"n":1}' \
  aggregate g '[{"$unwind":"$grades"},{"$match":{"grades.m":{"$gte":100}}},{"$group":{"_id":"$grades.g","n":{"$sum":1}}}]'
expect 0 '{"n":2}' aggregate g '[{"$count":"n"}]'
expect 0 '' aggregate g '[{"$match":{"_id":3}},{"$count":"n"}]'
expect 0 '{"_id":1,"grades":[{"g":85,"m":100}]}' \
  find g '{"grades.g":85}' --project '{"grades.$":1}'
run drop g

# ---- delete ----------------------------------------------------------------------------
expect 0 '{"deleted":1}' delete acct '{"_id":"P"}'
expect 0 '{"deleted":0}' delete acct '{"_id":"P"}'
expect 0 '{"deleted":1}' delete c '{"small":true}'
expect 0 '2' count c '{"small":true}'
expect 0 '{"deleted":2}' delete c '{"small":true}' --many
expect 0 '0' count c '{"small":true}'

# ---- index, indexes, drop, collections -------------------------------------------------
run insert users '{"_id":1,"email":"a@x","age":30}' '{"_id":2,"email":"b@x","age":40}'
expect 0 'email_1' index users '{"email":1}' --unique
expect 0 'email_1' index users '{"email":1}' --unique
expect 0 'age_-1_email_1' index users '{"age":-1,"email":1}' --sparse
run indexes users
check "indexes lists email_1 as unique (got $OUT)" "$(grep -qx '{"name":"email_1","key":{"email":1},"unique":true,"sparse":false}' <<<"$OUT"; echo $?)"
check "indexes lists the compound sparse index (got $OUT)" "$(grep -qx '{"name":"age_-1_email_1","key":{"age":-1,"email":1},"unique":false,"sparse":true}' <<<"$OUT"; echo $?)"
expect_err 3 DUPKEY insert users '{"_id":3,"email":"a@x"}'
check "duplicate key detail names the key and the quoted index (got $ERR)" \
  "$([[ $ERR == "doctx: DUPKEY: duplicate key {\"email\":\"a@x\"} in unique index 'email_1'" ]]; echo $?)"
expect_err 3 DUPKEY update users '{"_id":2}' '{"$set":{"email":"a@x"}}'
expect 0 '"3"' insert users '{"_id":"3","email":"c@x"}'
expect 0 $'acct\nc\norder\nusers' collections
expect 0 '' drop order
expect 0 '' drop order
# dump: a header per collection, then its documents by _id.
run dump
check "dump: users' header, then users 1, 2 and \"3\" by _id (got $OUT)" \
  "$(grep -A3 '^{"collection":"users",' <<<"$OUT" | tail -3 | jq -c ._id | tr '\n' ' ' | grep -qx '1 2 "3" '; echo $?)"
check "dump: users' header carries its count and unique index (got $OUT)" \
  "$(grep '^{"collection":"users",' <<<"$OUT" | jq -e '.count == 3 and (.indexes | map(.name) | index("email_1")) and .rules.validator == null' >/dev/null; echo $?)"
check "dump: no header for a dropped collection" "$(! grep -q '"collection":"order"' <<<"$OUT"; echo $?)"
expect 0 $'acct\nc\nusers' collections
expect 0 '' find order
expect 0 '' drop users
expect 0 '' indexes users
expect 0 'email_1' index users '{"email":1}'

# ---- exit code 2: usage and invalid input -----------------------------------------------
expect_err 2 BADJSON find c '{"a":'
check "BADJSON names the argument (got $ERR)" "$([[ $ERR == 'doctx: BADJSON: FILTER: '* ]]; echo $?)"
expect_err 2 BADQUERY find c '{"a":{"$foo":1}}'
expect_err 2 BADUPDATE update c '{}' '{"$foo":{"a":1}}'
expect_err 2 USAGE find c --limit -1
expect_err 2 USAGE bogus-command
expect_err 2 BADURI --store=bogus:x collections
check "a bad scheme names every scheme (got $ERR)" \
  "$([[ $ERR == *"expected sqlite:PATH or redis://HOST:PORT"* ]]; echo $?)"

# ---- `--` ends the options of every command (src/cli/spec.c, the one parser) ------------
# After --, an argument that starts with -- is a positional -- a name, an
# id, JSON -- never an option; without the -- each of these is "unknown
# option" (exit 2).  Options go before the --.  A store of their own: the
# pattern collections they fill are checked empty further down.
S_MAIN=$S
new_store dashdash
expect_err 2 BADJSON find c -- --limit
check "find c -- --limit: --limit is FILTER (got $ERR)" "$([[ $ERR == 'doctx: BADJSON: FILTER: '* ]]; echo $?)"
expect_err 2 BADJSON insert c -- --x
check "insert c -- --x: --x is DOC (got $ERR)" "$([[ $ERR == 'doctx: BADJSON: DOC: '* ]]; echo $?)"
# one: the named field of what doctx ARGS... printed (exit 0) is --NAME
dd() { # dd FIELD ARGS...
  local f=$1
  shift
  run "$@"
  check "doctx $* (rc=$RC out=$OUT err=$ERR)" \
    "$([[ $RC -eq 0 && $(jq -r ".$f" <<<"$OUT" | head -1) == --* ]]; echo $?)"
}
dd name lock acquire --ttl-ms 60000 -- --L
dd name lock show -- --L
dd queue job add -- --q t
dd queue job list -- --q
dd _id account create --balance 10 -- --a
run account create dd-b
dd from transfer --id --t -- --a dd-b 5
dd _id transfer show -- --t
dd _id order create --account dd-b --amount 5 -- --o1
dd _id order show -- --o1
dd item version put -- --i '{}'
dd item version get -- --i
dd _id ledger account create -- --la
dd account ledger balance -- --la
expect_err 1 NOTFOUND sync show -- --r
expect_err 2 USAGE worker -- --once
check "worker -- --once: an argument, not the option (got $ERR)" "$([[ $ERR == *"unexpected argument '--once'"* ]]; echo $?)"
expect_err 2 USAGE interest run --rate-ppm 1 --day 2026-01-01 -- --settlement
expect_err 2 USAGE batch-update nodocs '{}' '{"$set":{"x":1}}' -- --id b
check "batch-update ... -- --id b: not the option (got $ERR)" "$([[ $ERR == *"--id BATCH_ID is required"* ]]; echo $?)"
expect 0 '{"matched":0,"modified":0,"already":0}' batch-update nodocs '{}' '{"$set":{"x":1}}' --id=--b
S=$S_MAIN

# ---- global options, environment, help ---------------------------------------------------
RC=0; OUT=$("$DOCTX" --store="$S" count acct 2>&1) || RC=$?
check "--store=URI form (rc=$RC out=$OUT)" "$([[ $RC -eq 0 && $OUT == 3 ]]; echo $?)"
RC=0; OUT=$(DOCTX_STORE="$S" "$DOCTX" count acct 2>&1) || RC=$?
check "DOCTX_STORE is the default store (rc=$RC out=$OUT)" "$([[ $RC -eq 0 && $OUT == 3 ]]; echo $?)"
RC=0; OUT=$("$DOCTX" count acct --store "$S" 2>&1) || RC=$?
check "--store after the command (rc=$RC out=$OUT)" "$([[ $RC -eq 0 && $OUT == 3 ]]; echo $?)"
RC=0; OUT=$(cd "$TMP" && env -u DOCTX_STORE "$DOCTX" insert here '{"_id":1}' 2>&1 && ls "$TMP") || RC=$?
check "default store is ./doctx.db (rc=$RC out=$OUT)" "$([[ $RC -eq 0 && $OUT == *doctx.db* ]]; echo $?)"

RC=0; "$DOCTX" > "$TMP/out" 2> "$TMP/err" || RC=$?
check "no command: usage on stderr, exit 2 (rc=$RC)" \
  "$([[ $RC -eq 2 && ! -s $TMP/out ]] && grep -q '^usage: doctx' "$TMP/err"; echo $?)"
RC=0; "$DOCTX" --help > "$TMP/out" 2> "$TMP/err" || RC=$?
check "doctx --help exits 0 on stdout" "$([[ $RC -eq 0 && ! -s $TMP/err ]]; echo $?)"
for want in 'Exit codes' 'DOCTX_STORE' '--store' '  0  ' '  1  ' '  2  ' '  3  ' \
            '  4  ' '  5  ' find-and-modify aggregate collections account transfer; do
  check "doctx --help mentions $want" "$(grep -qF -- "$want" "$TMP/out"; echo $?)"
done
for cmd in insert find count update find-and-modify aggregate delete index \
           indexes drop collections demo; do
  RC=0; "$DOCTX" "$cmd" --help > "$TMP/out" 2> "$TMP/err" || RC=$?
  check "doctx $cmd --help (rc=$RC)" \
    "$([[ $RC -eq 0 && ! -s $TMP/err ]] && grep -q "^usage: doctx .*$cmd" "$TMP/out"; echo $?)"
  RC=0; "$DOCTX" --store "$S" "$cmd" c --help > "$TMP/out" 2>&1 || RC=$?
  check "doctx $cmd ARG --help (rc=$RC)" "$([[ $RC -eq 0 ]] && grep -q "^usage:" "$TMP/out"; echo $?)"
done

# ---- JSON from stdin: - stands for one JSON argument -----------------------------------------
IN='{"_id":"s1","n":1}' expect 0 '"s1"' insert stdin -
IN='{"n":1}' expect 0 '{"_id":"s1","n":1}' find stdin -
IN='{"n":1}' expect 0 '1' count stdin -
IN='{"$inc":{"n":1}}' expect 0 '{"matched":1,"modified":1}' update stdin '{"_id":"s1"}' -
IN='{"$inc":{"n":1}}' expect 0 '{"_id":"s1","n":3}' find-and-modify stdin '{"_id":"s1"}' - --new
IN='{"n":1,"_id":0}' expect 0 '{"n":3}' find stdin '{}' --project -
IN='{"n":-1}' expect 0 'n_-1' index stdin -
IN='{"n":99}' expect 0 '{"deleted":0}' delete stdin -
IN='{"n":3}' run update stdin - -
check "only one argument can be - (rc=$RC err=$ERR)" \
  "$([[ $RC -eq 2 && -z $OUT && $ERR == "doctx: USAGE: UPDATE: only one argument can be - (stdin is read once)" ]]; echo $?)"
IN='{"n":' run find stdin -
check "bad JSON on stdin names the argument (rc=$RC err=$ERR)" \
  "$([[ $RC -eq 2 && $ERR == "doctx: BADJSON: FILTER: "* ]]; echo $?)"
expect 0 '{"_id":"s1","n":3}' find stdin

# ---- only commands that write create a store ---------------------------------------------------
# A read on a missing SQLite path says so (exit 4) and leaves no file;
# account show/list and transfer show/list too (their specs carry
# DTX__CLI_READS, src/cli/cli.h).
mkdir -p "$TMP/none"
NS="$TMP/none/x.db"
READS=("find c" "count c" "indexes c" "collections" "dump" "audit"
  "account list" "account show A" "transfer list" "transfer show t1")
for c in "${READS[@]}"; do
  RC=0
  # shellcheck disable=SC2086
  "$DOCTX" --store "sqlite:$NS" $c >"$TMP/out" 2>"$TMP/err" || RC=$?
  ERR=$(<"$TMP/err")
  check "doctx $c on a missing store: exit 4, no store, nothing created (rc=$RC err=$ERR)" \
    "$([[ $RC -eq 4 && ! -s $TMP/out && $ERR == "doctx: UNAVAILABLE: no store at $NS "* ]] &&
       [ -z "$(ls -A "$TMP/none")" ]; echo $?)"
done
: >"$TMP/none/empty.db"
RC=0; "$DOCTX" --store "sqlite:$TMP/none/empty.db" count c >"$TMP/out" 2>"$TMP/err" || RC=$?
check "a file with no doctx store is no store either (rc=$RC)" \
  "$([[ $RC -eq 4 ]] && grep -q "no store at $TMP/none/empty.db" "$TMP/err"; echo $?)"
rm -f "$TMP/none/"*
RC=0; "$DOCTX" --store "sqlite:$NS" insert c '{"_id":1}' >"$TMP/out" 2>&1 || RC=$?
check "a command that writes creates the store (rc=$RC)" "$([[ $RC -eq 0 && -e $NS ]]; echo $?)"
RC=0; OUT=$("$DOCTX" --store "sqlite:$NS" count c 2>&1) || RC=$?
check "then reads work (rc=$RC out=$OUT)" "$([[ $RC -eq 0 && $OUT == 1 ]]; echo $?)"

# ---- Redis only: ?wait=N fails fast without N replicas; whole AUTH errors ------------------------
case $S in
redis://*)
  case $S in *\?*) W="$S&wait=2" ;; *) W="$S?wait=2" ;; esac
  RC=0
  timeout 60 "$DOCTX" --store "$W" insert waitc '{"_id":1}' >"$TMP/out" 2>"$TMP/err" || RC=$?
  ERR=$(<"$TMP/err")
  check "?wait=2 without 2 replicas per master: exit 4 at open, naming the master (rc=$RC err=$ERR)" \
    "$([[ $RC -eq 4 && ! -s $TMP/out &&
          $ERR =~ ^doctx:\ UNAVAILABLE:\ redis:\ \?wait=2:\ master\ [0-9.]+:[0-9]+\ has\ [01]\ connected\ replicas?,\ fewer\ than\ the\ 2\ each\ write\ must\ reach ]]; echo $?)"
  expect 0 '0' count waitc
  case $S in *\?*) W="$S&password=not-set" ;; *) W="$S?password=not-set" ;; esac
  seed=${S#redis://}
  seed=${seed%%[,?]*}
  want=$(redis-cli -h "${seed%:*}" -p "${seed##*:}" AUTH not-set 2>&1)
  RC=0
  timeout 60 "$DOCTX" --store "$W" count c >"$TMP/out" 2>"$TMP/err" || RC=$?
  ERR=$(<"$TMP/err")
  check "a refused AUTH shows the server's whole reason (rc=$RC err=$ERR want=$want)" \
    "$([[ $RC -eq 4 && -n $want && $ERR == *"failed: $want" ]]; echo $?)"
  ;;
esac

# ---- durations and deadlines at the edge of int64 ----------------------------------------------
# Every option that takes a duration or a deadline, at INT64_MAX (its
# sum with either clock wraps), INT64_MAX - 10^12 (wraps with the wall
# clock only) and 100 years + 1 ms (past the bounds): each either works as
# "practically forever" -- exit 0 AND the command did its work, checked
# below -- or is refused with exit 2 naming it (those rows are in
# bad_input.sh, which also checks that they change nothing).  Never exit
# 0 having done nothing: `recover --deadline-ms 9223372036854775807` once
# skipped every pattern as "deadline passed" and printed "ok":true.
# docs/deadlines.md ("Huge durations") gives each option's rule.
S_MAIN=$S
new_store durations
# works DESC ERE ARGS...: exit 0, no deadline passed, and the last line
# of stdout (the command's result or summary) matches ERE (bash =~: no
# jq per row, which would cost more CPU than the commands).
works() {
  local desc=$1 re=$2
  shift 2
  run "$@"
  if [ "$RC" -eq 0 ] && [[ $OUT != *"deadline passed"* ]] &&
     [[ ${OUT##*$'\n'} =~ $re ]]; then ok; else
    bad "$desc: doctx $* -> exit $RC" "stdout: $OUT"$'\n'"stderr: $ERR"
  fi
}
quiet() { run "$@"; [ "$RC" -eq 0 ] || bad "set-up: doctx $* -> exit $RC" "stderr: $ERR"; }
quiet account create a --balance 100000000
quiet account create b
quiet ledger account create LA --min-balance none
quiet ledger account create LB
quiet sync rule r1 --master users --dependents posts --link uid --copy name:uname
quiet insert users '{"_id":"u1","name":"x"}'
quiet insert posts '{"_id":"p1","uid":"u1"}'
quiet insert bu '{"_id":1,"n":0}'
J='cat >/dev/null; echo "{}"'
i=0
for V in 9223372036854775807 9223371036854775807 3153600000001; do
  i=$((i + 1))
  # transfers, worker, recover
  works "transfer --deadline-ms $V" '"state":"succeeded"' transfer a b 1 --deadline-ms "$V"
  IN='{"from":"a","to":"b","amount":1}' works "transfer batch --deadline-ms $V" \
    '"state":"succeeded"' transfer batch --deadline-ms "$V"
  quiet transfer a b 1 --async --id "old$i"
  works "recover --older-than-ms $V: nothing is that old" \
    '"updated within --older-than-ms":\{"count":[1-9]' \
    recover --older-than-ms "$V"
  works "worker --deadline-ms $V" '"transfer":\{"ran":\{[^}]*"succeeded":[1-9]' \
    worker --once --deadline-ms "$V"
  quiet transfer a b 1 --async
  works "worker --lease-ms $V" '"transfer":\{"ran":\{[^}]*"succeeded":1[,}]' worker --once --lease-ms "$V"
  for o in --deadline-ms --tombstone-ttl-ms --retention-ms; do
    quiet transfer a b 1 --async
    works "recover $o $V" '"transfer":\{"ran":\{[^}]*"executed":1[,}]' \
      recover --older-than-ms 0 "$o" "$V"
  done
  # jobs: the handler's time, the lease, the budget
  for o in --timeout-ms --lease-ms --deadline-ms; do
    quiet job add "q$i" t
    BOUND=60 works "job work $o $V" '"ran":\{"succeeded":1,"retried":0,' \
      job work "q$i" --exec "$J" --once "$o" "$V"
  done
  works "recover --retention-ms $V keeps a succeeded job" '"job":\{"ran":\{("[a-z_]+":[0-9]+,?)*\}' \
    recover --retention-ms "$V"
  check "recover --retention-ms $V purged nothing (out=$OUT)" "$([[ $OUT != *purged* ]]; echo $?)"
  # locks: a wait as long as it takes (this one's holder lapses in 200 ms)
  quiet lock acquire "W$i" --ttl-ms 200
  BOUND=60 works "lock acquire --wait-ms $V waits out the holder" '"token":2,' \
    lock acquire "W$i" --wait-ms "$V"
  works "lock acquire --deadline-ms $V" '"token":1,' lock acquire "D$i" --deadline-ms "$V"
  # ledger
  works "ledger post --deadline-ms $V" '"state":"posted"' ledger post LA:-1 LB:1 --deadline-ms "$V"
  [[ $OUT =~ \"_id\":\"([^\"]+)\" ]] && E=${BASH_REMATCH[1]}
  works "ledger reverse --deadline-ms $V" '"state":"posted"' ledger reverse "$E" --deadline-ms "$V"
  IN='{"legs":[{"account":"LA","value":-1},{"account":"LB","value":1}]}' \
    works "ledger post-many --deadline-ms $V" '"state":"posted"' ledger post-many --deadline-ms "$V"
  IN='{"legs":[{"account":"LA","value":-1},{"account":"LB","value":1}],"pending":true,"timeout_ms":'$V'}' \
    run ledger post-many
  check "ledger post-many \"timeout_ms\":$V is refused on its line (rc=$RC out=$OUT)" \
    "$([[ $RC -eq 2 && $OUT == '{"error":"INVAL","detail":"timeout_ms '$V': a timeout of more than 100 years","line":1}' ]]; echo $?)"
  # orders, batch-update, interest, sync, versions
  quiet order create "o$i" --account a --amount 1
  works "order confirm --lease-ms $V" '"state":"success"' order confirm "o$i" --lease-ms "$V"
  quiet order create "p$i" --account a --amount 1
  works "order confirm --deadline-ms $V" '"state":"success"' order confirm "p$i" --deadline-ms "$V"
  works "batch-update --deadline-ms $V" '"modified":1,' \
    batch-update bu '{}' '{"$inc":{"n":1}}' --id "b$i" --deadline-ms "$V"
  works "interest run --lease-ms $V" '"credited":[1-9]' \
    interest run --rate-ppm 1000 --day "2024-01-0$i" --lease-ms "$V"
  works "interest run --deadline-ms $V" '"credited":[1-9]' \
    interest run --rate-ppm 1000 --day "2024-02-0$i" --deadline-ms "$V"
  works "sync update --lease-ms $V" '"dependents":1,"flag_cleared":true' \
    sync update r1 u1 "{\"\$set\":{\"name\":\"l$i\"}}" --lease-ms "$V"
  works "sync update --deadline-ms $V" '"dependents":1,"flag_cleared":true' \
    sync update r1 u1 "{\"\$set\":{\"name\":\"d$i\"}}" --deadline-ms "$V"
  # a flag left by a crash: not "older than" V, and repaired under budget V
  RC=0; DOCTX_FAULT=sync.propagate:crash "$DOCTX" --store "$S" sync update r1 u1 \
    "{\"\$set\":{\"name\":\"c$i\"}}" >/dev/null 2>&1 || RC=$?
  check "sync update crashed at sync.propagate (rc=$RC)" "$([ "$RC" -ne 0 ]; echo $?)"
  works "sync repair --older-than-ms $V: the flag is not that old" \
    '"flag not stale":\{"count":1,' sync repair --older-than-ms "$V"
  works "sync repair --deadline-ms $V" '"repaired":1[,}]' \
    sync repair --older-than-ms 0 --deadline-ms "$V"
  quiet version put "it$i" '{"v":1}'
  quiet version put "it$i" '{"v":2}'
  works "version gc --grace-ms $V removes nothing superseded that recently" \
    '"ok":true,.*"removed":0,' version gc --keep 1 --grace-ms "$V"
done
works "version gc --grace-ms 0 then removes them" '"removed":3,' version gc --keep 1 --grace-ms 0
# 15a: a pending timeout of 0 is one rule, the library's: refused on its
# line by post-many as --timeout-ms 0 is by post (bad_input.sh); the
# other lines post.
IN=$'{"legs":[{"account":"LA","value":-1},{"account":"LB","value":1}],"pending":true,"timeout_ms":0}\n{"legs":[{"account":"LA","value":-2},{"account":"LB","value":2}],"pending":true}' \
  run ledger post-many
check "post-many \"timeout_ms\":0 is refused on its line, the next posts with the usual hour (rc=$RC out=$OUT)" \
  "$([[ $RC -eq 2 && $(head -n 1 <<<"$OUT") == '{"error":"INVAL","detail":"timeout_ms 0: a pending entry'\''s timeout must be 1 ms to 100 years (one hour is 3600000)","line":1}' ]] &&
     tail -n 1 <<<"$OUT" | jq -e '.state == "pending" and (.expires_at / 1000 - now | . > 3500 and . < 3700)' >/dev/null; echo $?)"
case $S in
redis://*) # the URI's own durations are bounded: refused, not wrapped
  for q in timeout_ms retry_ms; do
    case $S in *\?*) W="$S&$q=9223372036854775807" ;; *) W="$S?$q=9223372036854775807" ;; esac
    RC=0; "$DOCTX" --store "$W" count c >"$TMP/out" 2>"$TMP/err" || RC=$?
    check "?$q=INT64_MAX is a bad URI naming it (rc=$RC err=$(<"$TMP/err"))" \
      "$([[ $RC -eq 2 ]] && grep -q "$q" "$TMP/err"; echo $?)"
  done
  ;;
esac
S=$S_MAIN

# ---- rules a pattern owns: no plain change of rules takes them away --------------------------
run account create own1 --balance 5
expect_err 3 VALIDATION rules accounts --clear
check "rules accounts --clear names the pattern (err=$ERR)" \
  "$([[ $ERR == *"the rules of accounts are the transfer pattern's"* ]]; echo $?)"
expect_err 3 VALIDATION rules accounts --validator '{}'
run rules accounts
check "the accounts' rules still name their pattern (rc=$RC out=${OUT:0:80})" \
  "$([[ $RC -eq 0 ]] && jq -e '.pattern == "transfer" and .transition != null' <<<"$OUT" >/dev/null; echo $?)"
run transfer list # nothing yet: transfers is empty, and the transfer pattern's
expect_err 3 VALIDATION drop transfers
check "an empty pattern collection keeps its rules: no plain drop (err=$ERR)" \
  "$([[ $ERR == *"is the transfer pattern's: a drop would take its rules"* ]]; echo $?)"
expect_err 3 VALIDATION index accounts '{"balance":1}' --unique
check "no unique index of yours on a pattern's collection (err=$ERR)" \
  "$([[ $ERR == *"is the transfer pattern's: a unique index of yours"* ]]; echo $?)"
run index accounts '{"balance":1}'
check "a plain index there is harmless (rc=$RC out=$OUT)" "$([[ $RC -eq 0 && $OUT == balance_1 ]]; echo $?)"
run rules accounts --clear --bypass-validation
check "past the rules they go (rc=$RC out=$OUT)" \
  "$([[ $RC -eq 0 && $OUT == '{"validator":null,"delete_guard":null,"transition":null}' ]]; echo $?)"
run account create own2
run rules accounts
check "the pattern's next write puts them back (rc=$RC out=${OUT:0:80})" \
  "$([[ $RC -eq 0 ]] && jq -e '.pattern == "transfer"' <<<"$OUT" >/dev/null; echo $?)"

# ---- the demo command runs and narrates ------------------------------------------------------
RC=0; "$DOCTX" demo > "$TMP/out" 2>&1 || RC=$?
check "doctx demo exits 0 (rc=$RC)" "$([[ $RC -eq 0 ]]; echo $?)"
check "doctx demo shows the debited account" \
  "$(grep -qF '{"_id":"A","balance":70,"pending":[]}' "$TMP/out"; echo $?)"

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
