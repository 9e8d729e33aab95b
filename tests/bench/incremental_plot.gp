# docs/img/incremental_vs_rocksdb.png: twopc's incremental keyed checkpoints beside Apache Flink's
# RocksDB incremental checkpoints at 10 M keys, from the figures in docs/performance.md
# ("Incremental checkpoints of keyed state" and "Keyed totals, side by side"). Called with
#   gnuplot -e "out='docs/img/incremental_vs_rocksdb.png'" tests/bench/incremental_plot.gp
# The figures are written below, as the page gives them: each comes from a benchmark run, not from
# this script.
$figures << EOD
"twopc, 1 %/s\nchained\ntable"	380	4.7	47
"twopc, 1 %/s\nopen\naddressing 1"	140.5	4.7	47
"twopc, 1 %/s\nopen\naddressing 2"	337.3	5.3	53
"twopc\nkeyed totals"	2799	32.4	78
"Flink RocksDB\nkeyed totals"	630	8.0	322
EOD
set datafile separator "\t"
set terminal pngcairo size 1600,480 font ",10"
set output out
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.8
set grid ytics
set yrange [0:*]
unset key
set bmargin 6
set xtics font ",8"
set multiplot layout 1,3 title "Incremental keyed checkpoints at 10 M keys (loaded two-core machine, 1 s interval)"
array what[3] = ["checkpoint duration (ms)", "MB written per checkpoint", \
                 "bytes of checkpoint per key changed"]
do for [i = 1:3] {
    set title what[i]
    plot $figures using (column(i + 1)):xtic(1) lc rgb "#1f77b4"
}
unset multiplot
