# store.sh -- the store a shell suite runs on (sourced).  SQLite files in
# $WORK by default; under tests/redis/run-redis.sh, DTX_TEST_STORE_CMD
# (tests/redis/fresh-store.sh) hands out an emptied Redis store instead, so
# the same suite proves the same contract on every backend.

# new_store NAME -> sets $S to a fresh store URI.
new_store() {
  if [ -n "${DTX_TEST_STORE_CMD:-}" ]; then
    S=$($DTX_TEST_STORE_CMD "$1")
  else
    S="sqlite:$WORK/$1.db"
  fi
}
