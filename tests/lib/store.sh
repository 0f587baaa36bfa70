# store.sh -- the store a shell suite runs on (sourced).  SQLite files in
# $WORK by default; under tests/redis/run-redis.sh, DTX_TEST_STORE_CMD
# (tests/redis/fresh-store.sh) hands out an emptied Redis store instead, so
# the same suite proves the same contract on every backend.
#
# The SQLite files run at sync=normal (WAL, no fsync per commit).  What
# these suites kill is a process, never the machine, and a committed
# transaction survives a process's death at every sync level: the pages are
# the kernel's once write() returned.  fsync guards only against a power
# loss, which no shell suite can stage; the conformance suite runs on a
# file at sync=full.  At full, the crash suites spent most of their wall
# time waiting for fsync (transfer's fault points: 24 s at full, 11 s at
# normal, the same CPU).

# new_store NAME -> sets $S to a fresh store URI.
new_store() {
  if [ -n "${DTX_TEST_STORE_CMD:-}" ]; then
    S=$($DTX_TEST_STORE_CMD "$1")
  else
    S="sqlite:$WORK/$1.db?sync=normal"
  fi
}
