#!/usr/bin/env bash
# bench_plot.sh -- draws make bench's charts from its JSON results
# (bench/bench_common.h describes the files) with gnuplot (bench/plot.gp):
#   DIR/chart-<backend>[-<sync>].png  per backend and sync mode: every
#       measured row, doctx beside its native baseline (ops/s, log scale),
#       the ratio in the label;
#   DIR/ratios.png  every row's ratio doctx / native, coloured by backend
#       and sync mode, with the line at 1 (native speed);
#   DIR/summary.tsv the table the charts are drawn from.
# usage: scripts/bench_plot.sh [DIR]     (default bench/results)
# Needs python3 and gnuplot (scripts/setup.sh installs both).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/bench/results}
for tool in python3 gnuplot; do
  command -v $tool >/dev/null || {
    echo "bench_plot: $tool not found (scripts/setup.sh installs it)" >&2
    exit 2
  }
done
ls "$DIR"/bench_*.json >/dev/null 2>&1 || {
  echo "bench_plot: no bench_*.json in $DIR (run make bench)" >&2
  exit 2
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The JSON rows, grouped by backend and sync mode, as tab-separated data
# files (one per group, and all.dat for the ratios), and a list of the
# groups: file<TAB>title.
python3 - "$DIR" "$TMP" <<'EOF'
import glob, json, os, sys
src, out = sys.argv[1], sys.argv[2]
groups, rows = {}, []
for path in sorted(glob.glob(os.path.join(src, 'bench_*.json'))):
    with open(path) as f:
        doc = json.load(f)
    for r in doc.get('rows', []):
        if r.get('ratio') is None:
            continue
        sync = r.get('sync') or ''
        key = r['backend'] + ('' if sync in ('', 'none') else '-' + sync)
        w = r.get('workers') or 1
        label = '%s %s%s' % (r['metric'], r.get('workload', ''),
                             ' W%d' % w if w > 1 else '')
        groups.setdefault(key, []).append((label, r))
        rows.append((key, label, r))
def clean(s):
    return s.replace('\t', ' ').replace('"', "'")
# SQLite first, then the Redis targets; the durability variants last.
order = ['sqlite-normal', 'sqlite-full', 'redis-standalone', 'redis-cluster']
keys = sorted(groups, key=lambda k: (order.index(k) if k in order else 9, k))
rows.sort(key=lambda x: keys.index(x[0]))  # stable: a group's rows together
with open(os.path.join(out, 'groups'), 'w') as g:
    for k in keys:
        name = ''.join(c if c.isalnum() or c in '-_.' else '_' for c in k)
        with open(os.path.join(out, name + '.dat'), 'w') as f:
            for label, r in groups[k]:
                f.write('"%s  %.3gx"\t%g\t%g\t%g\n' % (
                    clean(label), r['ratio'], r['doctx']['ops_s'],
                    r['native']['ops_s'], r['ratio']))
        g.write('%s\t%s\n' % (name, k))
with open(os.path.join(out, 'all.dat'), 'w') as f:
    for k, label, r in rows:
        f.write('"%s: %s"\t%g\t%d\n' % (clean(k), clean(label), r['ratio'],
                                        keys.index(k) + 1))
with open(os.path.join(src, 'summary.tsv'), 'w') as f:
    f.write('group\tmetric\tworkload\tworkers\tunit\tdoctx_ops_s\t'
            'doctx_p50_us\tdoctx_p99_us\tnative_ops_s\tnative_p50_us\t'
            'native_p99_us\tratio\tnative\n')
    for k, label, r in rows:
        d, n = r['doctx'], r['native']
        fmt = lambda v: '' if v is None else '%.0f' % v
        f.write('\t'.join([k, r['metric'], r.get('workload', ''),
                           str(r.get('workers', '')), r.get('unit', ''),
                           fmt(d['ops_s']), fmt(d['p50_us']),
                           fmt(d['p99_us']), fmt(n['ops_s']),
                           fmt(n['p50_us']), fmt(n['p99_us']),
                           '%.4f' % r['ratio'], n.get('what', '')]) + '\n')
EOF

fail=0
while IFS=$'\t' read -r name title; do
  gnuplot -e "data='$TMP/$name.dat'; out='$DIR/chart-$name.png'; \
title='doctx vs native: $title (same run)'; mode='pair'" \
    "$ROOT/bench/plot.gp" || fail=1
done <"$TMP/groups"
gnuplot -e "data='$TMP/all.dat'; out='$DIR/ratios.png'; \
title='doctx / native baseline, per backend and sync mode (1 = native speed)'; \
mode='ratio'" "$ROOT/bench/plot.gp" || fail=1
[ $fail = 0 ] || { echo "bench_plot: gnuplot failed" >&2; exit 1; }
echo "bench_plot: $(ls "$DIR"/*.png | wc -l) charts in $DIR (summary.tsv beside them)"
