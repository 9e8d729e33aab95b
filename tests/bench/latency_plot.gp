# Latency distributions of `make bench-latency` (tests/bench/bench_latency.c with TWOPC_BENCH_OUT):
# for each checkpoint interval, the share of records visible within a given time after their
# append, per output and load. Called with
#   gnuplot -e "dir='...'" latency_plot.gp
set terminal pngcairo size 1000,440 font ",10" noenhanced
set output dir."/latency.png"
set datafile separator "\t"
set multiplot layout 1,2 title "Visibility latency: append to the input topic -> visible to a reader (read_committed consumer, SQL session)"
set key bottom right
set grid
set ylabel "records visible (%)"
set xlabel "milliseconds after append"
set yrange [0:100]

set title "checkpoints every 100 ms (goal: p99 <= 200 ms at 50 %, grey line)"
set arrow 1 from 200, graph 0 to 200, graph 1 nohead lc rgb "#888888" dt 3
plot dir."/latency_i100ms_load50.tsv" using 2:1 with lines lw 2 lc rgb "#1f77b4" title "Kafka, 50 % load", \
     '' using 3:1 with lines lw 2 dt 2 lc rgb "#1f77b4" title "PostgreSQL, 50 % load", \
     dir."/latency_i100ms_load90.tsv" using 2:1 with lines lw 2 lc rgb "#ff7f0e" title "Kafka, 90 % load", \
     '' using 3:1 with lines lw 2 dt 2 lc rgb "#ff7f0e" title "PostgreSQL, 90 % load"

set title "checkpoints every 1 s (goal: p99 <= 1550 ms at 50 %, grey line)"
set arrow 1 from 1550, graph 0 to 1550, graph 1 nohead lc rgb "#888888" dt 3
plot dir."/latency_i1000ms_load50.tsv" using 2:1 with lines lw 2 lc rgb "#1f77b4" title "Kafka, 50 % load", \
     '' using 3:1 with lines lw 2 dt 2 lc rgb "#1f77b4" title "PostgreSQL, 50 % load", \
     dir."/latency_i1000ms_load90.tsv" using 2:1 with lines lw 2 lc rgb "#ff7f0e" title "Kafka, 90 % load", \
     '' using 3:1 with lines lw 2 dt 2 lc rgb "#ff7f0e" title "PostgreSQL, 90 % load"
unset multiplot
