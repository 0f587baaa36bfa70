# fresh.sh DBFILE COMMAND...: removes an SQLite file and its WAL companions,
# then runs the command, so every ctest run starts from an empty store.
db=$1; shift
rm -f "$db" "$db-wal" "$db-shm"
exec "$@"
