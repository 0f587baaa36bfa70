#!/usr/bin/env bash
# layers.sh -- the include arrows of STYLE.md's layering, checked on the
# source tree: doctx.h -> src/util -> src/doc -> src/store -> src/txn ->
# src/cli.  A file may include doctx.h, its own layer and the layers to its
# left; the CLI (and doctxd, src/server, the second front door) includes
# only doctx.h and its own headers, so every
# check it makes goes through the public API (the rules live once, in the
# library).  Prints each include that runs the wrong way; exits 1 if any.
# Also: no plain assert() in src/, which NDEBUG compiles out of a release
# build -- an invariant is checked by DTX_ASSERT (util/assert.h), which
# stays.
# Also checks that src/txn retries, pauses and reaches fault points only
# through its kit (src/txn/kit/), below.
set -uo pipefail
cd "$(dirname "$0")/.."
order=(util doc store txn cli server)
bad=0
for i in "${!order[@]}"; do
  layer=${order[$i]}
  allowed=" doctx.h ${order[*]:0:$((i + 1))} "
  [ "$layer" = cli ] && allowed=" doctx.h cli "
  [ "$layer" = server ] && allowed=" doctx.h server "
  while IFS=: read -r file line text; do
    [[ $text =~ \#include\ \"([^\"]*)\" ]] || continue
    inc=${BASH_REMATCH[1]}
    top=${inc%%/*}
    [ "$top" = "$inc" ] && [ "$inc" != doctx.h ] && top=$layer # same folder
    if [[ $allowed != *" $top "* ]]; then
      echo "$file:$line: includes \"$inc\": $layer may not depend on $top"
      bad=1
    fi
  done < <(grep -rn '#include "' "src/$layer")
done
while IFS=: read -r file line text; do
  echo "$file:$line: a plain assert, gone in release builds: use DTX_ASSERT"
  bad=1
done < <(grep -rnE '(^|[^_A-Za-z])assert *\(|<assert\.h>' src)
[ "$bad" -eq 0 ] && echo "layers: every include runs one way; no plain assert"

# The kit owns every retry, pause and fault point of src/txn (STYLE.md,
# docs/kit.md): the step engine (src/txn/kit/step.c) retries, the kit's
# waits pause, and each protocol step reaches its fault point through a
# kit step or dtx__kit_point.  A retry loop, a sleep or a fault point
# written anywhere else in src/txn is a second engine in the making.
# (The store's own points, in src/store and src/util, are
# DTX_FAULTPOINT_INNER and are not checked here.)
kit_only='dtx__retry_|dtx__deadline_sleep|DTX_FAULTPOINT|dtx__fault\(|dtx__fault_lost|dtx__fault_inner|dtx__rules_step_(enter|leave)|\b(usleep|nanosleep|sleep|thrd_sleep)\('
while IFS=: read -r file line text; do
  echo "$file:$line: only src/txn/kit/ may retry, pause or reach a fault point: ${text#"${text%%[![:space:]]*}"}"
  bad=1
done < <(grep -rnE "$kit_only" src/txn --include='*.c' --include='*.h' |
  grep -v '^src/txn/kit/')
[ "$bad" -eq 0 ] && echo "layers: retries, pauses and fault points live in src/txn/kit/"

# Every read and write of a document in src/txn is a kit step, so the one
# engine decides what an unsure outcome is and retries it: a direct store
# call elsewhere would meet a lost reply or a busy store with no retry.
# The set-up calls (rules, indexes, the store's URI) are not steps.
data_call='\bdtx_store_(find|count|insert(_ex|_many|_many_ex)?|update|find_one_and_(update|delete)|aggregate|delete(_ex)?|bulk_write|list_indexes|list_collections|drop_collection(_ex)?)\('
while IFS=: read -r file line text; do
  echo "$file:$line: a document read or write outside the kit (use a kit step): ${text#"${text%%[![:space:]]*}"}"
  bad=1
done < <(grep -rnE "$data_call" src/txn --include='*.c' |
  grep -v '^src/txn/kit/')
[ "$bad" -eq 0 ] && echo "layers: every document read and write in src/txn is a kit step"
exit "$bad"
