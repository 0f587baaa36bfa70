# server.sh -- what the doctxd suites (tests/server/*.sh) share, on top of
# tests/lib/harness.sh and store.sh (sourced here unless a suite did):
#   DOCTXD             the doctxd binary (default: beside $DOCTX)
#   make_tokens FILE   a token file (mode 0600) with the tokens below:
#                      T_ADMIN, T_WRITE, T_READ, T_METRICS, T_FLOOD (write)
#   start_doctxd LOG ARGS...
#                      starts doctxd on 127.0.0.1 and a free port (the
#                      kernel's pick, read from its "listening on" line);
#                      sets DPID and URL; 1 when it did not come up in 10 s
#   serve_store LOG ARGS...
#                      make_tokens $WORK/tokens, then start_doctxd LOG on
#                      the store $S with those tokens and ARGS; a start
#                      that fails ends the suite
#   req METHOD PATH TOKEN [BODY]
#                      one curl request (at most 30 s); CODE is the status,
#                      $WORK/rb the body, $WORK/rh the headers
#   rbody              the body of the last req
#   check LABEL WANT_CODE [GREP...]
#                      the last req answered WANT_CODE and its body holds
#                      every GREP (fixed strings)
#   hdr LABEL LINE     the last response carries header LINE
#                      (case-insensitive name, exact value)
#   refused LABEL CODE ERRNAME METHOD PATH TOKEN [BODY]
#                      answered CODE with problem+json naming ERRNAME, and
#                      the store unchanged (`d dump` before and after)
#   jget EXPR          a value of the last body (python3: EXPR on it as j)
#   nitems LABEL KEY N the last body's array KEY has N items (a page holds
#                      no more than its limit)
#   hold_lock SECS / release_lock
#                      a sqlite3 holding the write lock of the SQLite store
#                      $DB until release_lock, or SECS at most
[ -n "${HARNESS_MAIN:-}" ] ||
  source "$(dirname "${BASH_SOURCE[0]}")/../../lib/harness.sh"
declare -F new_store >/dev/null ||
  source "$(dirname "${BASH_SOURCE[0]}")/../../lib/store.sh"
DOCTXD=${DOCTXD:-$(dirname "$DOCTX")/doctxd}
T_ADMIN=adm-0123456789abcdef
T_WRITE=wrt-0123456789abcdef
T_READ=rdr-0123456789abcdef
T_METRICS=met-0123456789abcdef
T_FLOOD=fld-0123456789abcdef

make_tokens() { # FILE
  umask 077
  cat >"$1" <<TOK
# name token scopes
admin   $T_ADMIN   admin
writer  $T_WRITE   write
reader  $T_READ    read
scraper $T_METRICS metrics
flood   $T_FLOOD   write
TOK
  chmod 600 "$1"
}

start_doctxd() { # LOG ARGS...
  local log=$1 end line
  shift
  start_bg "$log" "$DOCTXD" --listen 127.0.0.1:0 "$@"
  DPID=$BG_PID
  end=$((SECONDS + 10))
  while [ $SECONDS -lt $end ] && alive "$DPID"; do
    line=$(grep -m1 'listening on' "$log" 2>/dev/null)
    if [ -n "$line" ]; then
      URL="http://${line##* on }"
      return 0
    fi
    nap 0.05
  done
  echo "doctxd did not start:" >&2
  log_tail "$log" >&2
  return 1
}

# req marks the store as maybe written (DIRTY), so that refused dumps it
# again; a refusal's dump after is the next one's dump before.
DIRTY=1
req() { DIRTY=1; server_req "$@"; }
server_req() { # METHOD PATH TOKEN [BODY]
  local args=(-s -o "$WORK/rb" -D "$WORK/rh" -w '%{http_code}' --max-time 30
              -X "$1")
  [ -n "$3" ] && args+=(-H "Authorization: Bearer $3")
  [ $# -ge 4 ] && args+=(-H 'Content-Type: application/json'
                         --data-binary "$4")
  CODE=$(curl "${args[@]}" "$URL$2" 2>/dev/null) || :
}

rbody() { cat "$WORK/rb"; }

serve_store() { # LOG ARGS...
  local log=$1
  shift
  make_tokens "$WORK/tokens"
  start_doctxd "$log" --store "$S" --tokens "$WORK/tokens" "$@" ||
    { bad "doctxd start"; finish; exit 1; }
}

check() { # LABEL WANT_CODE [GREP...]
  local label=$1 want=$2 g
  shift 2
  if [ "$CODE" != "$want" ]; then
    bad "$label: status $CODE, want $want: $(head -c 400 "$WORK/rb")"
    return
  fi
  for g in "$@"; do
    if ! grep -qF -- "$g" "$WORK/rb"; then
      bad "$label: body lacks '$g': $(head -c 400 "$WORK/rb")"
      return
    fi
  done
  ok
}

hdr() { # LABEL LINE
  if tr -d '\r' <"$WORK/rh" | grep -qiF -- "$2"; then ok; else
    bad "$1: no header '$2': $(tr -d '\r' <"$WORK/rh" | tr '\n' '|')"
  fi
}

refused() { # LABEL CODE ERRNAME METHOD PATH TOKEN [BODY]
  local label=$1 want=$2 name=$3
  shift 3
  [ "$DIRTY" = 1 ] && d dump >"$WORK/before" 2>&1
  req "$@"
  check "$label" "$want" "\"code\":\"$name\"" '"type":' '"title":' '"detail":'
  d dump >"$WORK/after" 2>&1
  if cmp -s "$WORK/before" "$WORK/after"; then ok; else
    bad "$label: the refused request changed the store:
$(diff "$WORK/before" "$WORK/after" | head -5)"
  fi
  mv "$WORK/after" "$WORK/before"
  DIRTY=0
}

jget() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($1)" "$WORK/rb"; }

nitems() { # LABEL KEY N
  local n
  n=$(jq ".$2 | length" "$WORK/rb" 2>/dev/null)
  [ "$n" = "$3" ] && ok || bad "$1: $2 has ${n:-no} items, want $3: $(head -c 400 "$WORK/rb")"
}

hold_lock() { # SECS
  rm -f "$WORK/locked" "$WORK/release"
  start_bg "$WORK/lock.log" bash -c "{ echo 'BEGIN IMMEDIATE;'; echo \".shell touch $WORK/locked\";
    for _ in \$(seq \$(($1 * 20))); do [ -e '$WORK/release' ] && break; sleep 0.05; done;
    echo 'COMMIT;'; } | sqlite3 '$DB'"
  LOCK_PID=$BG_PID
  local end=$((SECONDS + 10))
  while [ ! -e "$WORK/locked" ] && [ $SECONDS -lt $end ]; do nap 0.02; done
  [ -e "$WORK/locked" ]
}
release_lock() {
  touch "$WORK/release"
  bounded_wait "$LOCK_PID" 15 "$WORK/lock.log"
}
