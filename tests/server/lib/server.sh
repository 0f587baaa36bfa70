# server.sh -- what the doctxd suites (tests/server/*.sh) share, on top of
# tests/lib/harness.sh (source that first):
#   DOCTXD             the doctxd binary (default: beside $DOCTX)
#   make_tokens FILE   a token file (mode 0600) with the tokens below:
#                      T_ADMIN, T_WRITE, T_READ, T_METRICS, T_FLOOD (write)
#   start_doctxd LOG ARGS...
#                      starts doctxd on 127.0.0.1 and a free port (the
#                      kernel's pick, read from its "listening on" line);
#                      sets DPID and URL; 1 when it did not come up in 10 s
#   req METHOD PATH TOKEN [BODY]
#                      one curl request (at most 30 s); CODE is the status,
#                      $WORK/rb the body, $WORK/rh the headers
#   rbody              the body of the last req
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

req() { server_req "$@"; }
server_req() { # METHOD PATH TOKEN [BODY]
  local args=(-s -o "$WORK/rb" -D "$WORK/rh" -w '%{http_code}' --max-time 30
              -X "$1")
  [ -n "$3" ] && args+=(-H "Authorization: Bearer $3")
  [ $# -ge 4 ] && args+=(-H 'Content-Type: application/json'
                         --data-binary "$4")
  CODE=$(curl "${args[@]}" "$URL$2" 2>/dev/null) || :
}

rbody() { cat "$WORK/rb"; }
