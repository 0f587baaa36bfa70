# plot.gp -- draws one benchmark chart from a tab-separated data file that
# scripts/bench_plot.sh writes from bench/results/*.json.
#
# usage: gnuplot -e "data='F.dat'; out='F.png'; title='T'; mode='pair'" plot.gp
#   mode 'pair'   columns: label, doctx ops/s, native ops/s, ratio
#                 clustered bars, doctx beside native, log scale (the
#                 ratio is part of each label: the absolute rates differ by
#                 orders of magnitude, the ratio is what compares)
#   mode 'ratio'  columns: label, ratio, group index (colour)
#                 one bar per row: doctx / native, log scale, a line at 1
if (!exists("mode")) mode = 'pair'
if (!exists("title")) title = ''
stats data using 0 nooutput
n = STATS_records
if (mode eq 'pair') {
  set terminal pngcairo size (n < 8 ? 900 : 360 + 60 * n), 640 font 'DejaVu Sans,10'
} else {
  set terminal pngcairo size (n < 20 ? 900 : 300 + 26 * n), 860 font 'DejaVu Sans,9'
}
# ten distinct colours for the groups (lc variable picks by group index)
colours = "#9467bd #2ca02c #1f77b4 #ff7f0e #8c564b #e377c2 #7f7f7f #bcbd22 #17becf #d62728"
do for [i = 1:10] { set linetype i lc rgb word(colours, i) }
set output out
set title title
set logscale y
set grid ytics
set xtics rotate by 55 right nomirror noenhanced
set key top right noenhanced
set style fill solid 0.85 border -1
set bmargin (mode eq 'pair' ? 14 : 24)
set lmargin 22
if (mode eq 'pair') {
  set style data histograms
  set style histogram clustered gap 1
  set ylabel 'operations per second (log)'
  plot data using 2:xtic(1) title 'doctx' lc rgb '#1f77b4', \
       '' using 3 title 'native baseline (same run)' lc rgb '#aaaaaa'
} else {
  set ylabel 'doctx / native (log)'
  set boxwidth 0.7
  set xrange [-0.6:n - 0.4]
  set yrange [0.0005:20]
  set arrow from -0.6, 1 to n - 0.4, 1 nohead lw 2 dt 2 lc rgb '#d62728' front
  plot data using 0:2:3:xtic(1) with boxes lc variable notitle, \
       '' using 0:2:(sprintf('%.3g', $2)) with labels offset 0, 0.7 font ',8' notitle
}
