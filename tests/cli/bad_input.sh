#!/usr/bin/env bash
# bad_input.sh -- every kind of bad input is refused with the right exit
# code and a "doctx: ERRNAME: detail" line naming what was wrong, and
# leaves the store exactly as it was.
#
# The table below is one `row` per case:
#   row EXIT ERRNAME MENTION -- ARGS...
# MENTION is a string stderr must contain ("" for none).  stdin is
# /dev/null, or the file $ROW_IN (ROW_IN=FILE row ...).  After each row
# the whole store (every collection's documents, indexes and rules) is
# dumped and compared with the dump taken before it -- which is the dump
# taken after the row before, since no row may change the store.
#
# Run by ctest with $DOCTX set to the doctx binary, against a fresh SQLite
# file; run-redis.sh runs it against Redis by setting DTX_TEST_STORE_CMD
# (tests/redis/fresh-store.sh), which hands out a new namespace.  Exits
# non-zero when any check fails and ends with "N passed, N failed".
set -u

DOCTX=${DOCTX:?set DOCTX to the doctx binary}
source "$(dirname "$0")/../lib/harness.sh" # WORK, removed on exit
TMP=$WORK
if [ -n "${DTX_TEST_STORE_CMD:-}" ]; then
  S=$($DTX_TEST_STORE_CMD bad_input) || { echo "no store"; echo "0 passed, 1 failed"; exit 1; }
else
  S="sqlite:$TMP/x.db"
fi
PASS=0
FAIL=0
NROWS=0
# The store is dumped (doctx dump) after every DUMP_EVERY rows and
# compared with the dump before them: a change is still always caught, and
# a group that changed it is named row by row.  Every row under the quick
# (ASan) run would cost minutes of dumps; the release run checks each row.
if [ -n "${DTX_QUICK:-}" ]; then DUMP_EVERY=${DUMP_EVERY:-10}; else DUMP_EVERY=${DUMP_EVERY:-1}; fi
GROUP=()

dx() { "$DOCTX" --store "$S" "$@"; }

dump() { # the whole store in one process: every row compares two of these
  dx dump || echo "dump failed"
}

fail() {
  FAIL=$((FAIL + 1))
  printf 'FAIL: %s\n' "$1" >&2
  [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/      /' >&2
  return 0
}

row() {
  local code=$1 name=$2 mention=$3 rc=0 what
  shift 4 # code name mention --
  NROWS=$((NROWS + 1))
  what="doctx $*"
  [ -s "$TMP/before" ] || dump > "$TMP/before"
  # A row that names its own --store gets no other (two are refused).
  local store=(--store "$S")
  case " $* " in *" --store "* | *" --store="*) store=() ;; esac
  "$DOCTX" "${store[@]}" "$@" < "${ROW_IN:-/dev/null}" > "$TMP/out" \
    2> "$TMP/err" || rc=$?
  GROUP+=("$what")
  local err first
  err=$(cat "$TMP/err")
  first=$(head -n 1 "$TMP/err")
  local ok=1
  if [ "$rc" -ne "$code" ]; then
    fail "$what: exit $rc, want $code" "stderr: $err"; ok=0
  fi
  if [[ $first != "doctx: $name: "* ]]; then
    fail "$what: stderr does not start with 'doctx: $name: '" "stderr: $err"; ok=0
  fi
  if [ -n "$mention" ] && [[ $err != *"$mention"* ]]; then
    fail "$what: stderr does not mention '$mention'" "stderr: $err"; ok=0
  fi
  if [ -s "$TMP/out" ]; then
    fail "$what: printed on stdout" "stdout: $(cat "$TMP/out")"; ok=0
  fi
  if [ "$ok" -eq 1 ]; then PASS=$((PASS + 1)); fi
  if [ $((NROWS % DUMP_EVERY)) -eq 0 ]; then check_store; fi
}

# Compares the store with the dump before the rows run since the last
# check: none of them may have changed it.
check_store() {
  [ "${#GROUP[@]}" -eq 0 ] && return 0
  dump > "$TMP/after"
  if ! cmp -s "$TMP/before" "$TMP/after"; then
    fail "the store changed during: $(printf '\n  %s' "${GROUP[@]}")" \
      "$(diff "$TMP/before" "$TMP/after")"
    PASS=$((PASS - 1)) # count the group as one failure, not a pass
  fi
  mv "$TMP/after" "$TMP/before"
  GROUP=()
}

# ---- the store every row runs against ------------------------------------------
setup_ok=1
dx insert acc '{"_id":"A","balance":100,"tags":["x","y"],"name":"a"}' \
  '{"_id":"M","n":9223372036854775807}' '{"_id":"S","s":"text"}' \
  '{"_id":"L","n":-9223372036854775808}' \
  '{"_id":"P","name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}' \
  > /dev/null || setup_ok=0
dx insert users '{"_id":1,"email":"a@x"}' '{"_id":2,"email":"b@x"}' \
  > /dev/null || setup_ok=0
dx index users '{"email":1}' --unique > /dev/null || setup_ok=0
dx index acc '{"balance":-1}' > /dev/null || setup_ok=0
dx rules users --validator '{"$jsonSchema":{"required":["email"],"properties":{"email":{"bsonType":"string"}}},"email":{"$ne":""}}' \
  --delete-guard '{"email":"keep"}' \
  --transition '{"immutable":["since"],"increasing":["logins"]}' > /dev/null || setup_ok=0
dx insert bu '{"_id":1,"n":0}' > /dev/null || setup_ok=0
# Ledger accounts at the ends of int64: LMIN's balance is INT64_MIN,
# LMAX's INT64_MAX (the OVERFLOW messages below).
for a in LMIN LX LY; do
  dx ledger account create $a --min-balance none > /dev/null || setup_ok=0
done
dx ledger account create LMAX > /dev/null || setup_ok=0
dx ledger post LMIN:-9223372036854775807 LMAX:9223372036854775807 \
  > /dev/null || setup_ok=0
dx ledger post LMIN:-1 LX:1 > /dev/null || setup_ok=0
if [ "$setup_ok" -ne 1 ] || [ "$(dx count acc)" != 5 ]; then
  echo "setup failed" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

# ---- malformed JSON, in each JSON argument --------------------------------------
row 2 BADJSON FILTER -- find acc '{"a":'
row 2 BADJSON FILTER -- count acc '{bad}'
row 2 BADJSON FILTER -- find acc '{"a":1} x'
row 2 BADJSON FILTER -- find acc '{"a":1,"a":2}'
row 2 BADJSON FILTER -- find acc ''
row 2 BADJSON DOC -- insert acc '{"_id":"N",}'
row 2 BADJSON "DOC 2" -- insert acc '{"_id":"N1"}' '{"x":'
row 2 BADJSON UPDATE -- update acc '{"_id":"A"}' '{"$set":'
row 2 BADJSON FILTER -- update acc '{"_id":"A"' '{"$set":{"a":1}}'
row 2 BADJSON UPDATE -- find-and-modify acc '{}' 'nope'
row 2 BADJSON FILTER -- delete acc '{"_id":"A"'
row 2 BADJSON --sort -- find acc '{}' --sort '{"a":'
row 2 BADJSON --sort -- find-and-modify acc '{}' '{"$set":{"a":1}}' --sort '['
row 2 BADJSON --project -- find acc '{}' --project '[1'
row 2 BADJSON KEYS -- index acc '{"a":1'
row 2 BADJSON DOC -- insert acc "{\"_id\":\"Q\",\"s\":\"a$(printf '\001')b\"}"

# ---- integers outside int64 ----------------------------------------------------------
row 2 BADJSON DOC -- insert acc '{"n":9223372036854775808}'
row 2 BADJSON FILTER -- find acc '{"n":-9223372036854775809}'
row 2 BADJSON UPDATE -- update acc '{"_id":"A"}' '{"$inc":{"balance":99999999999999999999}}'

# ---- unknown operators -------------------------------------------------------------------
row 2 BADQUERY '$foo' -- find acc '{"a":{"$foo":1}}'
row 2 BADQUERY '$where' -- find acc '{"$where":"this.a == 1"}'
row 2 BADQUERY '$foo' -- count acc '{"$foo":[]}'
row 2 BADQUERY '$expr' -- delete acc '{"$expr":{"$eq":["$name","a"]}}' --many
row 2 BADQUERY '$where' -- find-and-modify acc '{"$where":"1"}' '{"$set":{"a":1}}'
row 2 BADUPDATE '$foo' -- update acc '{"_id":"A"}' '{"$foo":{"a":1}}'
row 2 BADUPDATE '$where' -- find-and-modify acc '{"_id":"A"}' '{"$where":{"a":1}}'

# ---- operators with arguments of the wrong type ---------------------------------------------
row 2 BADUPDATE '$inc' -- update acc '{"_id":"A"}' '{"$inc":{"balance":"x"}}'
row 2 BADQUERY '$size' -- find acc '{"tags":{"$size":-1}}'
row 2 BADQUERY '$in' -- find acc '{"a":{"$in":1}}'
row 2 BADQUERY '$nin' -- count acc '{"a":{"$nin":"x"}}'
row 2 BADQUERY '$and' -- find acc '{"$and":{"a":1}}'
row 2 BADQUERY '$elemMatch' -- find acc '{"tags":{"$elemMatch":1}}'
row 2 BADQUERY '$all' -- find acc '{"tags":{"$all":"x"}}'
row 2 BADQUERY FILTER -- find acc '5'
row 2 BADQUERY FILTER -- update acc '[{"_id":"A"}]' '{"$set":{"a":1}}'
row 2 BADUPDATE UPDATE -- update acc '{}' '[1]'
row 2 BADUPDATE '$set' -- update acc '{}' '{"$set":{}}'
row 2 BADUPDATE '$set' -- update acc '{}' '{"$set":5}'
row 2 BADQUERY '$options' -- find acc '{"name":{"$regex":"a","$options":"q"}}'
row 2 BADQUERY '$regex' -- delete acc '{"name":{"$regex":"(a"}}' --many
row 2 BADQUERY '$mod' -- count acc '{"balance":{"$mod":[0,1]}}'
row 2 BADQUERY '$type' -- find acc '{"balance":{"$type":"money"}}'
row 2 BADUPDATE '$mul' -- update acc '{"_id":"A"}' '{"$mul":{"balance":"2"}}'
row 2 BADUPDATE '$pop' -- update acc '{"_id":"A"}' '{"$pop":{"tags":2}}'
row 2 BADUPDATE '$bit' -- update acc '{"_id":"A"}' '{"$bit":{"balance":{"and":1.5}}}'
row 2 BADUPDATE 'same path' -- update acc '{"_id":"A"}' '{"$rename":{"a":"a.b"}}'
row 2 BADUPDATE 'identifier' -- update acc '{"_id":"A"}' '{"$set":{"tags.$[t]":"z"}}'
row 2 BADUPDATE 'not used' -- update acc '{"_id":"A"}' '{"$set":{"tags.$[t]":"z"}}' --array-filters '[{"t":"x"},{"u":"y"}]'
row 2 BADJSON --array-filters -- find-and-modify acc '{"_id":"A"}' '{"$set":{"tags.$[t]":"z"}}' --array-filters '[{'
row 2 USAGE --array-filters -- find acc '{}' --array-filters '[]'
row 2 BADQUERY '$facet' -- aggregate acc '[{"$facet":{}}]'
row 2 BADQUERY '$bogus' -- aggregate acc '[{"$group":{"_id":null,"n":{"$bogus":1}}}]'
row 2 BADQUERY 'pipeline' -- aggregate acc '{"$match":{}}'
row 2 BADJSON PIPELINE -- aggregate acc '[{"$match":'

# ---- conflicting update paths, replacement misuse -------------------------------------------
row 2 BADUPDATE 'a.b' -- update acc '{}' '{"$set":{"a":1,"a.b":2}}'
row 2 BADUPDATE 'balance' -- update acc '{}' '{"$set":{"balance":1},"$inc":{"balance":1}}'
row 2 BADUPDATE many -- update acc '{"_id":"A"}' '{"x":1}' --many
row 2 BADUPDATE '' -- update acc '{}' '{"$set":{"a":1},"b":2}'

# ---- constraint violations found in the store (exit 3) ------------------------------------------
row 3 OVERFLOW 'n' -- update acc '{"_id":"M"}' '{"$inc":{"n":1}}'
row 3 OVERFLOW 'n' -- find-and-modify acc '{"_id":"L"}' '{"$inc":{"n":-1}}'
row 3 OVERFLOW 'n' -- update acc '{"n":{"$gt":0}}' '{"$inc":{"n":9223372036854775807}}' --many
row 3 TYPE 's' -- update acc '{"_id":"S"}' '{"$inc":{"s":1}}'
row 3 TYPE 'balance' -- find-and-modify acc '{"_id":"A"}' '{"$push":{"balance":1}}'
row 3 TYPE 'name' -- update acc '{"_id":"A"}' '{"$set":{"name.first":"x"}}'
row 3 TYPE '$bit' -- update acc '{"_id":"A"}' '{"$bit":{"name":{"or":1}}}'
row 3 OVERFLOW '$mul' -- update acc '{"_id":"M"}' '{"$mul":{"n":2}}'
row 3 OVERFLOW '$sum' -- aggregate acc '[{"$match":{"_id":"M"}},{"$project":{"k":["$n","$n"]}},{"$unwind":"$k"},{"$group":{"_id":null,"s":{"$sum":"$k"}}}]'
row 3 TYPE '$rename' -- update acc '{"_id":"A"}' '{"$rename":{"tags.x":"y"}}'
row 2 BADUPDATE 'positional' -- update acc '{"_id":"A"}' '{"$set":{"tags.$":"q"}}'
row 2 BADQUERY 'limit' -- find acc '{"name":{"$regex":"^(a|aa)+$"},"_id":"P"}'
row 3 IMMUTABLE '_id' -- update acc '{"_id":"A"}' '{"_id":"Z","balance":1}'
row 3 IMMUTABLE '_id' -- find-and-modify acc '{"_id":"S"}' '{"_id":"T"}'
row 3 DUPKEY '' -- insert acc '{"_id":"A"}'
row 3 DUPKEY 'email' -- insert users '{"_id":3,"email":"a@x"}'
row 3 DUPKEY 'email' -- update users '{"_id":2}' '{"$set":{"email":"a@x"}}'
row 3 DUPKEY 'email' -- find-and-modify users '{"_id":"new"}' '{"$set":{"email":"b@x"}}' --upsert
row 3 DUPKEY '' -- index users '{"x":1}' --unique
row 3 DUPKEY '' -- index acc '{"name":1}' --unique

# ---- bad store URIs ------------------------------------------------------------------------------------
row 2 BADURI bogus -- --store 'bogus:x' collections
row 2 BADURI nocolon -- --store 'nocolon' find acc
row 2 BADURI mysql -- --store=mysql://h/db insert acc '{"_id":"U"}'

# ---- missing, extra and unknown arguments and options ------------------------------------------------
row 2 USAGE COLL -- find
row 2 USAGE UPDATE -- update acc '{}'
row 2 USAGE DOC -- insert acc
row 2 USAGE KEYS -- index acc
row 2 USAGE FILTER -- delete acc
row 2 USAGE extra -- delete acc '{}' extra
row 2 USAGE extra -- collections extra
row 2 USAGE --bogus -- find acc --bogus
row 2 USAGE --new -- update acc '{}' '{"$set":{"a":1}}' --new
row 2 USAGE --many -- delete acc '{}' --many=yes
row 2 USAGE frobnicate -- frobnicate acc
row 2 USAGE --verbose -- --verbose collections
row 2 USAGE --store -- --store
row 2 USAGE --limit -- find acc --limit
row 2 USAGE --limit -- find acc --limit -1
row 2 USAGE --limit -- find acc --limit 1x
row 2 USAGE --limit -- find acc --limit ' 1'
row 2 USAGE --limit -- find acc --limit +1
row 2 USAGE --skip -- find acc --skip 99999999999999999999
row 2 USAGE --limit -- find acc --limit 1 --limit 2

# ---- bad collection names, documents, projections, sorts and index keys ---------------------------------
row 2 INVAL 'bad name' -- insert 'bad name' '{}'
row 2 INVAL _dtx -- find _dtx_locks
row 2 INVAL object -- insert acc '[1]'
row 2 INVAL "DOC 2" -- insert acc '{"_id":"V"}' '"str"'
row 2 INVAL _id -- insert acc '{"_id":[1]}'
row 2 INVAL '' -- find acc '{}' --project '{"a":1,"b":0}'
row 2 INVAL '' -- find acc '{}' --sort '{"a":2}'
row 2 BADINDEX '' -- index acc '{"a":2}'
row 2 BADINDEX '' -- index acc '{}'
row 2 BADINDEX 'a.0' -- index acc '{"a.0":1}'

# ---- writes a collection's rules refuse (exit 3), and bad rules (exit 2) ---------------------------
row 3 VALIDATION "users 'R1': email is double, must be string" -- insert users '{"_id":"R1","email":1.5}'
row 3 VALIDATION "users 'R1': document is missing required field 'email'" -- insert users '{"_id":"R1"}'
row 3 VALIDATION "users 'R2': the validator condition" -- insert users '{"_id":"R2","email":""}' '{"_id":"R3","email":"c@x"}'
row 3 VALIDATION 'users 1: the validator condition {"email":{"$ne":""}}' -- update users '{"_id":1}' '{"$set":{"email":""}}'
row 3 VALIDATION "users 'new'" -- update users '{"_id":"new"}' '{"$set":{"email":5}}' --upsert
row 3 VALIDATION "users 1: email is long" -- update users '{"_id":1}' '{"_id":1,"email":5}'
row 3 VALIDATION "users 1" -- update users '{}' '{"$set":{"email":0.0}}' --many
row 3 VALIDATION "missing required field 'email'" -- find-and-modify users '{"_id":1}' '{"$unset":{"email":""}}'
row 3 VALIDATION "users 1: delete refused" -- delete users '{"_id":1}'
row 3 VALIDATION "delete refused" -- delete users '{}' --many
row 3 VALIDATION "users 1: since may not change (transition immutable)" -- update users '{"_id":1}' '{"$set":{"since":1}}'
row 3 VALIDATION "users 1: since may not change" -- update users '{}' '{"$set":{"since":1}}' --many --upsert
row 3 VALIDATION "since may not change" -- find-and-modify users '{"_id":1}' '{"_id":1,"email":"a@x","since":0}'
row 2 BADQUERY "transition[0].moves must be a non-empty array" -- rules users --transition '{"moves":[]}'
row 2 BADQUERY "transition[0]: unknown key 'grow'" -- rules users --transition '{"grow":["n"]}'
row 2 BADJSON --transition -- rules users --transition '[1'
row 2 BADQUERY "'patternProperties'" -- rules users --validator '{"$jsonSchema":{"patternProperties":{"a":{}}}}'
row 2 BADQUERY "properties.a: pattern:" -- rules users --validator '{"$jsonSchema":{"properties":{"a":{"pattern":"(x"}}}}'
row 2 BADQUERY "bsonType 'decimal'" -- rules users --validator '{"$jsonSchema":{"bsonType":"decimal"}}'
row 2 BADQUERY '$foo' -- rules users --delete-guard '{"a":{"$foo":1}}'
row 2 BADQUERY 'validator must be an object' -- rules users --validator '[1]'
row 2 BADJSON --validator -- rules users --validator '{'
row 2 USAGE --clear -- rules users --clear --validator '{}'
row 2 USAGE --bypass-validation -- find users --bypass-validation
row 2 INVAL 'bad name' -- rules 'bad name'

# ---- documents nested deeper than 100 levels, and JSON deeper than the parser takes --------------
P500=$(printf 'p.%.0s' $(seq 1 499))p
nest() { printf '{"x":%.0s' $(seq 1 "$1"); printf 1; printf '}%.0s' $(seq 1 "$1"); }
row 2 INVAL 'level 101 is reached at p.p.p' -- update acc '{"_id":"A"}' "{\"\$set\":{\"$P500\":$(nest 2040)}}"
row 2 INVAL "acc 'D' nests deeper than 100 levels (the limit): level 101 is reached at v.x.x" -- insert acc "{\"_id\":\"D\",\"v\":$(nest 100)}"
row 2 INVAL "nests deeper than 100" -- insert acc "{\"_id\":\"D\",\"v\":$(nest 100)}" --bypass-validation
row 2 INVAL "acc 'A' nests deeper" -- update acc '{"_id":"A"}' "{\"v\":$(nest 100)}"
row 2 INVAL "acc 'Z' nests deeper" -- update acc '{"_id":"Z"}' "{\"\$set\":{\"v\":$(nest 100)}}" --upsert
row 2 INVAL "nests deeper" -- find-and-modify acc '{"_id":"A"}' "{\"\$push\":{\"tags\":$(nest 99)}}"
row 2 BADJSON 'maximum parsing depth' -- find acc "$(nest 3000)"
row 2 BADJSON 'maximum parsing depth' -- update acc '{"_id":"A"}' "{\"\$set\":{\"y\":$(nest 3000)}}"
row 2 BADJSON 'maximum parsing depth' -- insert acc "{\"v\":$(nest 3000)}"

# ---- a NUL byte in a JSON argument read from stdin (-) ------------------------------------------
# The parser would stop at the NUL and drop the rest unseen (the command
# then wrote the first half and exited 0).  Every "-" goes through the
# CLI's one reader of it (dtx__cli_json), for every command that takes
# one: BADJSON naming the argument, nothing written.
nulrow() { # nulrow JSON WHAT -- ARGS...: JSON, a NUL, then more JSON on stdin
  local json=$1 what=$2
  shift 3
  printf '%s\0{"more":1}' "$json" > "$TMP/nul"
  ROW_IN="$TMP/nul" row 2 BADJSON "$what: a NUL byte at byte $((${#json} + 1)) of stdin" -- "$@"
}
nulrow '{"_id":"N0"}' DOC -- insert acc -
nulrow '{"_id":"N1"}' "DOC 2" -- insert acc '{"_id":"N2"}' -
nulrow '{"_id":"A"}' FILTER -- find acc -
nulrow '{"_id":"A"}' FILTER -- count acc -
nulrow '{"_id":"A"}' FILTER -- update acc - '{"$set":{"z":1}}'
nulrow '{"$set":{"z":1}}' UPDATE -- update acc '{"_id":"A"}' -
nulrow '{"$set":{"z":1}}' UPDATE -- find-and-modify acc '{"_id":"A"}' -
nulrow '{"_id":"S"}' FILTER -- delete acc -
nulrow '[{"$match":{}}]' PIPELINE -- aggregate acc -
nulrow '{"zz":1}' KEYS -- index acc -
nulrow '{"balance":1}' --sort -- find acc '{}' --sort -
nulrow '{"balance":1}' --project -- find acc '{}' --project -
nulrow '[{"t":"x"}]' --array-filters -- update acc '{"_id":"A"}' '{"$set":{"tags.$[t]":"z"}}' --array-filters -
nulrow '{"n":{"$type":"long"}}' --validator -- rules bu --validator -
nulrow '{"n":0}' --delete-guard -- rules bu --delete-guard -
nulrow '{"immutable":["n"]}' --transition -- rules bu --transition -
nulrow '{"k":1}' PAYLOAD -- job add q t -
nulrow '{}' FILTER -- job effect j1 1 k bu - '{"$inc":{"n":1}}'
nulrow '{"$inc":{"n":1}}' UPDATE -- job effect j1 1 k bu '{}' -
nulrow '{}' FILTER -- batch-update bu - '{"$inc":{"n":1}}' --id b1
nulrow '{"$inc":{"n":1}}' UPDATE -- batch-update bu '{}' - --id b1
nulrow '{"$set":{"name":"x"}}' UPDATE -- sync update r1 u1 -
nulrow '{"a":1}' ROOT -- version put it -
nulrow '{"c":1}' "child DOC" -- version put it '{"a":1}' --child k=-

# ---- ledger messages at the ends of int64 (a debit or credit is named by its amount) ----------
row 3 OVERFLOW "account 'LMIN': a debit of 1 could take its balance -9223372036854775808 (pending debits 0, credits 0) past int64" -- ledger post LMIN:-1 LY:1
row 2 INVAL "leg 1 (account 'LMIN') has value -9223372036854775808, whose reversal does not fit" -- ledger post LMIN:-9223372036854775808 LX:4611686018427387904 LY:4611686018427387904
row 3 OVERFLOW "account 'LMAX': a credit of 1 could take its balance 9223372036854775807 (pending debits 0, credits 0) past int64" -- ledger post LY:-1 LMAX:1
row 3 OVERFLOW "account 'LMAX': a credit of 1 could take" -- ledger post LY:-1 LMAX:1 --pending

# ---- a pending entry's timeout: one rule, the library's (0 is refused, not "one hour") -----------
row 2 INVAL "timeout_ms 0: a pending entry's timeout must be 1 ms to 100 years" -- ledger post LX:-1 LY:1 --pending --timeout-ms 0
row 2 INVAL "timeout_ms -1: a pending entry's timeout" -- ledger post LX:-1 LY:1 --pending --timeout-ms -1
row 2 INVAL "timeout_ms 5: only a pending entry has a timeout" -- ledger post LX:-1 LY:1 --timeout-ms 5

# ---- durations and deadlines near INT64_MAX that are refused (exit 2, nothing recorded) --------
# The ones that work as "practically forever" are in contract.sh; the
# rule for each is in docs/deadlines.md ("Huge durations").
for v in 9223372036854775807 9223371036854775807 3153600000001; do
  row 2 INVAL "lock ttl $v ms: must be 1..31622400000" -- lock acquire LK --ttl-ms "$v"
  row 2 INVAL "lock ttl $v ms" -- lock renew LK 1 --ttl-ms "$v"
  row 2 INVAL "delay of $v ms is more than 100 years" -- job add q t --delay-ms "$v"
  row 2 INVAL "backoff must be from 1 to 3600000 ms, got $v" -- job add q t --backoff-ms "$v"
  row 2 INVAL "timeout_ms $v: a timeout of more than 100 years" -- ledger post LX:-1 LY:1 --pending --timeout-ms "$v"
done
# ---- the command line itself (the hostile pass of docs/testing.md) ---------------------
row 2 USAGE "FROM TO AMOUNT takes 3 arguments, got 4: unexpected 'extra'" -- transfer A B 5 extra
row 2 USAGE "got 5: unexpected '--id'" -- transfer A B -- 5 --id x9
row 2 USAGE "-- before the command" -- -- collections
row 2 USAGE "--store given twice" -- --store sqlite::memory: --store=sqlite::memory: collections
row 2 USAGE "--version takes no arguments, got 'extra'" -- --version extra
DOCTX_FAULT=transfer.debit:crash:99999999999999999999 row 2 INVAL "bad count '99999999999999999999'" -- transfer A B 1
DOCTX_FAULT=, row 2 INVAL "an empty rule" -- transfer A B 1
DOCTX_FAULT=transfer.debit:crash,,transfer.credit:crash row 2 INVAL "an empty rule" -- transfer A B 1

# ---- bounds past an option's type are the library's (the CLI maps its error) -------------
row 2 INVAL "max attempts must be from 1 to 1000000, got 1000001" -- job add q t --max-attempts 1000001
row 2 USAGE "job add: --priority 99999999999 is out of range (-2147483648..2147483647)" -- job add q t --priority 99999999999
row 2 USAGE "worker: --threads 3000000000 is out of range (1..2147483647)" -- worker --threads 3000000000
row 2 INVAL "at most 256 threads" -- worker --threads 257
row 2 INVAL "worker batch 257: 1 to 256" -- worker --batch 257
row 2 USAGE "job work: --threads 9999999999 is out of range (1..2147483647)" -- job work q --exec true --threads 9999999999
row 2 INVAL "batch must be from 1 to 256 jobs, got 257" -- job work q --exec true --batch 257
row 2 INVAL "amount must be a positive integer, got 0" -- transfer A B 0
row 2 INVAL "interest rate -1 ppm: must be 0..1000000" -- interest run --rate-ppm -1 --day 2026-01-01
row 2 INVAL "amount must be a positive integer, got -5" -- order create T1 --account A --amount -5
row 2 INVAL "token 0: must be >= 1" -- lock release LK 0
row 2 USAGE "--deadline-ms" -- recover --deadline-ms 9223372036854775808
row 2 USAGE "--wait-ms" -- lock acquire LK --wait-ms 99999999999999999999

check_store

# ---- bad input is found before the store is opened or set up ---------------------------------
# (docs/validation.md: "bad input changes nothing".)  Each case runs
# (a) on a SQLite path with no store: exit 2 and no file created (opening
# a SQLite path creates it, so the library checks run before the open);
# `rules COLL` only reads: "no store", exit 4;
# (b) as a row against a second store holding one account and none of the
# patterns' collections: exit 2 and the dump unchanged (no orders, ledger,
# locks, versions... collections set up by a call that then failed).
NOSTORE_CASES=(
  "INVAL|account id ''|account create ''"
  "INVAL|lock name ''|lock acquire ''"
  "INVAL|lock name ''|lock renew '' 1"
  "INVAL|trade id 'a b'|order create 'a b' --account A --amount 1"
  "INVAL|the legs sum to -1|ledger post X:1 Y:-2"
  "INVAL|account 'X' appears in two legs|ledger post X:1 X:-1"
  "INVAL|account id ''|ledger account create ''"
  "INVAL|interest rate 2000000 ppm|interest run --rate-ppm 2000000 --day 2026-01-01"
  "INVAL|interest day '2026-13-01'|interest run --rate-ppm 20 --day 2026-13-01"
  "INVAL|item 'a b'|version put 'a b' '{}'"
  "INVAL|the root must be a JSON object|version put i '[]'"
  "INVAL|batch id 'b b'|batch-update c '{}' '{\"\$set\":{\"a\":1}}' --id 'b b'"
  "BADQUERY|unknown operator \$bogus|rules c --validator '{\"\$bogus\":1}'"
  "BADQUERY|unknown key 'bogus'|rules c --transition '{\"bogus\":1}'"
  "INVAL|account id ''|account limit '' 5"
  "INVAL|entry id ''|ledger reverse ''"
  "INVAL|entry id 'a b'|ledger reverse e1 --id 'a b'"
  "INVAL|entry id ''|ledger void ''"
  "INVAL|entry id 'a b'|ledger post-pending 'a b'"
  "INVAL|job id ''|job effect '' 1 k c '{}' '{\"\$set\":{\"a\":1}}'"
  "INVAL|collection 'jobs'|job effect j 1 k jobs '{}' '{\"\$set\":{\"a\":1}}'"
)
# Bad input only a read of the store can tell: (b) only (the library reads
# before it sets its collections up).
READ_CASES=(
  "INVAL|no account 'NOPE'|order create T --account NOPE --amount 5"
  "NOACCOUNT|no ledger account 'X'|ledger post X:1 Y:-1"
)
if [ -z "${DTX_TEST_STORE_CMD:-}" ]; then
  NONE=$TMP/none.db
  for c in "${NOSTORE_CASES[@]}" "UNAVAILABLE|no store at|rules c"; do
    IFS='|' read -r name mention args <<< "$c"
    want=2; [ "$name" = UNAVAILABLE ] && want=4
    eval "set -- $args"
    rm -f "$NONE"*
    rc=0
    "$DOCTX" --store "sqlite:$NONE" "$@" < /dev/null > "$TMP/out" 2> "$TMP/err" || rc=$?
    if [ "$rc" -ne "$want" ] || [ -e "$NONE" ] ||
       [[ $(head -n 1 "$TMP/err") != "doctx: $name: "*"$mention"* ]]; then
      fail "doctx $args on a path with no store: exit $rc (want $want), file $( [ -e "$NONE" ] && echo CREATED || echo absent)" \
        "stderr: $(cat "$TMP/err")"
    else
      PASS=$((PASS + 1))
    fi
  done
  S="sqlite:$TMP/second.db"
else
  S=$($DTX_TEST_STORE_CMD bad_input_second) || { fail "no second store"; S=; }
fi
if [ -n "$S" ] && dx account create A --balance 10 > /dev/null; then
  rm -f "$TMP/before"
  for c in "${NOSTORE_CASES[@]}" "${READ_CASES[@]}"; do
    IFS='|' read -r name mention args <<< "$c"
    eval "set -- $args"
    row 2 "$name" "$mention" -- "$@"
    check_store # each case alone: the one that set something up is named
  done
  # The batched post reads before it sets the ledger up, as the single
  # one: a batch naming only unknown accounts says so per line (stdout)
  # and installs nothing.
  printf '%s\n' '{"legs":[{"account":"X","value":-1},{"account":"Y","value":1}]}' >"$TMP/pm"
  rc=0
  "$DOCTX" --store "$S" ledger post-many --file "$TMP/pm" >"$TMP/out" 2>&1 || rc=$?
  GROUP+=("doctx ledger post-many (unknown accounts only)")
  if [ "$rc" -eq 2 ] && grep -q '"NOACCOUNT"' "$TMP/out"; then
    PASS=$((PASS + 1))
  else
    fail "ledger post-many of unknown accounts: exit $rc, want 2" "$(cat "$TMP/out")"
  fi
  check_store
else
  fail "the second store: account create failed"
fi

# The table must stay big enough to mean something.
if [ "$NROWS" -lt 40 ]; then fail "only $NROWS rows in the table"; fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
