/*
 * The Apache Flink side of the PostgreSQL part of `make bench-compare`: the same bounded job as
 * tests/bench/compare/twopc_pg_job.c, Kafka (read_committed, earliest to the end offsets at start)
 * -> upper-case the value -> PostgreSQL with JdbcSink exactly once (XA transactions: PREPARE
 * TRANSACTION at a checkpoint, COMMIT PREPARED once it completed; one transaction per connection,
 * as PostgreSQL requires), checkpoints every second, in a local MiniCluster.
 *
 *   FlinkPgJob BOOTSTRAP INPUT_TOPIC JDBC_URL USER TABLE PARALLELISM
 *
 * Rows: id bigint (the record's 8-byte key), v bytea (the value).
 */
package twopc.bench;

import java.nio.ByteBuffer;
import java.util.Optional;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.jdbc.JdbcExactlyOnceOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.connector.jdbc.core.datastream.sink.JdbcSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.postgresql.xa.PGXADataSource;

public final class FlinkPgJob {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: FlinkPgJob BOOTSTRAP INPUT JDBC_URL USER TABLE PARALLELISM");
            System.exit(2);
        }
        String bootstrap = args[0], input = args[1], url = args[2], user = args[3], table = args[4];
        int parallelism = Integer.parseInt(args[5]);

        StreamExecutionEnvironment env = FlinkKafkaJob.environment(parallelism, new Configuration());
        KafkaSource<Tuple2<byte[], byte[]>> source = FlinkKafkaJob.source(bootstrap, input, true);

        JdbcSink<Tuple2<byte[], byte[]>> sink = JdbcSink.<Tuple2<byte[], byte[]>>builder()
                .withQueryStatement("INSERT INTO " + table + " (id, v) VALUES (?, ?)", (ps, e) -> {
                    ps.setLong(1, ByteBuffer.wrap(e.f0).getLong());
                    ps.setBytes(2, e.f1);
                })
                // Exactly once needs no retries of a batch: a retry could write it twice.
                .withExecutionOptions(
                        JdbcExecutionOptions.builder().withBatchSize(1000).withMaxRetries(0).build())
                .buildExactlyOnce(
                        JdbcExactlyOnceOptions.builder()
                                .withTransactionPerConnection(true)
                                .withTimeoutSec(Optional.empty())
                                .build(),
                        () -> {
                            PGXADataSource ds = new PGXADataSource();
                            ds.setUrl(url);
                            ds.setUser(user);
                            return ds;
                        });

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-in")
                .map(FlinkKafkaJob::upper)
                .returns(FlinkKafkaJob.TYPE)
                .sinkTo(sink);
        env.execute("twopc-compare-pg");
    }
}
