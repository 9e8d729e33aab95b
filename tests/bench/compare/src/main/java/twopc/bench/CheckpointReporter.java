/*
 * Checkpoint duration and size of a Flink job in this process, from the job's own checkpoint
 * metrics (numberOfCompletedCheckpoints, lastCheckpointDuration, lastCheckpointSize: what the
 * checkpoint wrote, only the new files with incremental RocksDB checkpoints), read every 50 ms by
 * a metric reporter that the MiniCluster loads (configure() names it; META-INF/services lists its
 * factory). Each time the count of completed checkpoints grows, the last checkpoint's figures are
 * added, and once more when the job's metrics are removed at its end, so that the final checkpoint
 * is counted as well.
 */
package twopc.bench;

import java.util.Properties;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.Metric;
import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.reporter.MetricReporter;
import org.apache.flink.metrics.reporter.MetricReporterFactory;
import org.apache.flink.metrics.reporter.Scheduled;

public final class CheckpointReporter implements MetricReporter, Scheduled {
    private static Gauge<?> completed, duration, size;
    private static long seen, counted, durationSum, sizeSum;

    /** Load this reporter into the MiniCluster that @p conf starts. */
    static void configure(Configuration conf) {
        conf.setString("metrics.reporter.ckpt.factory.class", Factory.class.getName());
        conf.setString("metrics.reporter.ckpt.interval", "50 ms");
    }

    /** "checkpoints C avg_ms D avg_bytes B" over the completed checkpoints counted. */
    static synchronized String summary() {
        return String.format("checkpoints %d avg_ms %.1f avg_bytes %.0f", seen,
                counted > 0 ? (double) durationSum / counted : 0.0,
                counted > 0 ? (double) sizeSum / counted : 0.0);
    }

    private static long value(Gauge<?> g) {
        Object v = g == null ? null : g.getValue();
        return v instanceof Number ? ((Number) v).longValue() : -1;
    }

    @Override
    public void report() {
        synchronized (CheckpointReporter.class) {
            long now = value(completed);
            if (now <= seen)
                return;
            long d = value(duration), s = value(size);
            seen = now;
            if (d >= 0 && s >= 0) {
                counted++;
                durationSum += d;
                sizeSum += s;
            }
        }
    }

    @Override
    public void notifyOfAddedMetric(Metric metric, String name, MetricGroup group) {
        if (!(metric instanceof Gauge))
            return;
        synchronized (CheckpointReporter.class) {
            switch (name) {
            case "numberOfCompletedCheckpoints" -> completed = (Gauge<?>) metric;
            case "lastCheckpointDuration" -> duration = (Gauge<?>) metric;
            case "lastCheckpointSize" -> size = (Gauge<?>) metric;
            default -> { }
            }
        }
    }

    @Override
    public void notifyOfRemovedMetric(Metric metric, String name, MetricGroup group) {
        if (name.equals("numberOfCompletedCheckpoints"))
            report();
    }

    @Override
    public void open(MetricConfig config) {}

    @Override
    public void close() {
        report();
    }

    public static final class Factory implements MetricReporterFactory {
        @Override
        public MetricReporter createMetricReporter(Properties properties) {
            return new CheckpointReporter();
        }
    }
}
