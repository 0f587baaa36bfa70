#!/usr/bin/env bash
# layers.sh -- the include arrows of STYLE.md's layering, checked on the
# source tree: doctx.h -> src/util -> src/doc -> src/store -> src/txn ->
# src/cli.  A file may include doctx.h, its own layer and the layers to its
# left; the CLI includes only doctx.h and its own cli/ headers, so every
# check it makes goes through the public API (the rules live once, in the
# library).  Prints each include that runs the wrong way; exits 1 if any.
set -uo pipefail
cd "$(dirname "$0")/.."
order=(util doc store txn cli)
bad=0
for i in "${!order[@]}"; do
  layer=${order[$i]}
  allowed=" doctx.h ${order[*]:0:$((i + 1))} "
  [ "$layer" = cli ] && allowed=" doctx.h cli "
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
[ "$bad" -eq 0 ] && echo "layers: every include runs one way"
exit "$bad"
