# scenarios/redis.sh -- the Redis backend's own fault points (the unique
# claims in src/store/redis/write.c).  No transfer reaches them and they
# need a unique index on a Redis store, so tests/redis/unique_crash.sh
# covers them (crash, pause and error); the crash suites skip them.
scenario_skip() { echo "covered by tests/redis/unique_crash.sh"; }
