# Plots of `make bench-compare` (tests/bench/compare/run.sh): twopc beside Apache Flink for each
# size and parallelism, from the medians run.sh writes. Called with
#   gnuplot -e "medians='.../medians.tsv'; outdir='...'" plot.gp
set terminal pngcairo size 900,480 font ",10"
set datafile separator "\t"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key below
set grid ytics
set yrange [0:*]

set output outdir."/compare_steady.png"
set title "Kafka -> transform -> Kafka, exactly once: steady-state rate (first to last output record)"
set ylabel "records per second"
plot medians using 2:xtic(1) title "twopc" lc rgb "#1f77b4", '' using 3 title "Apache Flink" lc rgb "#ff7f0e"

set output outdir."/compare_cpu.png"
set title "CPU seconds per million records (user + system)"
set ylabel "seconds"
plot medians using 6:xtic(1) title "twopc" lc rgb "#1f77b4", '' using 7 title "Apache Flink" lc rgb "#ff7f0e"

set output outdir."/compare_rss.png"
set title "Peak resident memory"
set ylabel "MB"
plot medians using 8:xtic(1) title "twopc" lc rgb "#1f77b4", '' using 9 title "Apache Flink" lc rgb "#ff7f0e"
