# scenarios/redis.sh -- the Redis backend's own fault points: the unique
# claims (src/store/redis/write.c) and a write's lost reply and resend
# (exec.c).  They need a Redis store and, for the claims, a unique index,
# so tests/redis/unique_crash.sh and lost_reply.sh cover them (crash,
# pause, error and lost); the crash suites skip them.
scenario_skip() { echo "covered by tests/redis/unique_crash.sh and lost_reply.sh"; }
