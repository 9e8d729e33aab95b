# Plots of `make bench-compare` (tests/bench/compare/run.sh): twopc beside Apache Flink for each
# size and parallelism, from the medians run.sh writes. Called with
#   gnuplot -e "outdir='...'; medians='.../medians.tsv'; keyed='.../keyed_medians.tsv'" plot.gp
# where medians (the Kafka -> Kafka part) and keyed (the keyed part) are each optional.
set datafile separator "\t"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key below
set grid ytics
set yrange [0:*]

if (exists("medians")) {
    set terminal pngcairo size 900,480 font ",10"
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
}

# keyed_medians.tsv: case, then twopc / twopc incremental / Flink HashMap / Flink RocksDB for
# steady rate, CPU per million records, peak RSS, checkpoint duration and bytes per checkpoint (0
# for a side that did not run).
if (exists("keyed")) {
    set terminal pngcairo size 1200,1000 font ",10"
    set output outdir."/compare_keyed.png"
    set multiplot layout 3,2 title "Keyed totals (Kafka -> key by user -> running total in keyed state -> Kafka, exactly once)"
    array what[5] = ["steady-state rate (records/s)", "CPU seconds per million records", \
                     "peak resident memory (MB)", "checkpoint duration (ms)", "MB written per checkpoint"]
    do for [i = 1:5] {
        set title what[i]
        set ylabel ""
        c = 4 * i - 2
        plot keyed using c:xtic(1) title "twopc" lc rgb "#1f77b4", \
             '' using c + 1 title "twopc incremental" lc rgb "#17becf", \
             '' using c + 2 title "Flink HashMap" lc rgb "#ff7f0e", \
             '' using c + 3 title "Flink RocksDB incremental" lc rgb "#2ca02c"
    }
    unset multiplot
}
