#!/usr/bin/env bash
# tokens.sh -- doctxd refuses to start, exit 2 with a message and before
# it opens a store or binds a socket, on a token file others may read or
# write, a token shorter than 16 characters, an unknown scope, and on bad
# options: an unknown one, a missing --tokens, a bad port or address, a
# duration near INT64_MAX.  (docs/server.md, "Tokens" and "Options".)
# Run by ctest; needs no store.  Ends with "N passed, M failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/server.sh"
DB=$WORK/never.db

# refuse LABEL MENTION ARGS...: doctxd exits 2 within 10 s, stderr holds
# MENTION, and no store file was made.
refuse() {
  local label=$1 mention=$2 rc
  shift 2
  run_bounded 10 "$WORK/log" "$DOCTXD" --store "sqlite:$DB" "$@"
  rc=$?
  if [ "$rc" -ne 2 ]; then bad "$label: exit $rc, want 2: $(head -c 300 "$WORK/log")"
  elif ! grep -qF -- "$mention" "$WORK/log"; then
    bad "$label: message lacks '$mention': $(head -c 300 "$WORK/log")"
  elif [ -e "$DB" ]; then bad "$label: a store was created"; rm -f "$DB"*
  else ok; fi
}

make_tokens "$WORK/good"
cp "$WORK/good" "$WORK/open"
chmod 644 "$WORK/open"
refuse "token file mode 0644" "chmod 600" --tokens "$WORK/open" --listen 127.0.0.1:0
chmod 640 "$WORK/open"
refuse "token file readable by the group" "mode 640" --tokens "$WORK/open" --listen 127.0.0.1:0
chmod 602 "$WORK/open"
refuse "token file writable by others" "mode 602" --tokens "$WORK/open" --listen 127.0.0.1:0
printf 'short 0123456789abcde read\n' >"$WORK/short"; chmod 600 "$WORK/short"
refuse "a 15-character token" "has 15 characters" --tokens "$WORK/short" --listen 127.0.0.1:0
printf 'x 0123456789abcdef0 root\n' >"$WORK/scope"; chmod 600 "$WORK/scope"
refuse "an unknown scope" "unknown scope 'root'" --tokens "$WORK/scope" --listen 127.0.0.1:0
printf 'a 0123456789abcdef0 read\nb 0123456789abcdef0 write\n' >"$WORK/dup"; chmod 600 "$WORK/dup"
refuse "a token given twice" "given twice" --tokens "$WORK/dup" --listen 127.0.0.1:0
printf '# only a comment\n' >"$WORK/empty"; chmod 600 "$WORK/empty"
refuse "no token at all" "no token" --tokens "$WORK/empty" --listen 127.0.0.1:0
refuse "no --tokens" "--tokens FILE is required" --listen 127.0.0.1:0
refuse "an unknown option" "unknown option '--port'" --tokens "$WORK/good" --port 1
refuse "a port past 65535" "--listen wants" --tokens "$WORK/good" --listen 127.0.0.1:65536
refuse "a port without an address" "--listen wants" --tokens "$WORK/good" --listen 8420
refuse "a host name" "--listen wants" --tokens "$WORK/good" --listen localhost:8420
refuse "--drain-ms near INT64_MAX" "--drain-ms must be" --tokens "$WORK/good" \
  --drain-ms 9223372036854775807
refuse "--drain-ms past INT64_MAX" "--drain-ms must be" --tokens "$WORK/good" \
  --drain-ms 9223372036854775808
refuse "--rate not a number" "--rate must be" --tokens "$WORK/good" --rate fast
refuse "--threads 0" "--threads must be" --tokens "$WORK/good" --threads 0

# The good file starts (mode 0600), and answers.
start_doctxd "$WORK/d.log" --store "sqlite:$WORK/ok.db" --tokens "$WORK/good" &&
  ok || bad "a 0600 token file did not start doctxd"
req GET /v1/accounts "$T_READ"
[ "$CODE" = 200 ] && ok || bad "the good token: $CODE $(rbody)"
stop_bg "$DPID" 15 "$WORK/d.log" && ok || bad "SIGTERM did not stop doctxd with 0"
finish
