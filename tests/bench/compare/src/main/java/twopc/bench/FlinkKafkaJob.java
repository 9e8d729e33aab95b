/*
 * The Apache Flink side of `make bench-compare`: the same bounded job as tests/bench/compare/twopc_job.c,
 * Kafka (read_committed, earliest to the end offsets at start) -> upper-case the value -> Kafka with
 * KafkaSink EXACTLY_ONCE, checkpoints every second, in a local MiniCluster at the given parallelism.
 *
 *   FlinkKafkaJob BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC PARALLELISM TRANSACTIONAL_ID_PREFIX [unbounded]
 *
 * With "unbounded" the source keeps reading new records until the process is killed (the
 * visibility latency part of the benchmark).
 */
package twopc.bench;

import java.util.Properties;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeHint;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;

public final class FlinkKafkaJob {
    static final TypeInformation<Tuple2<byte[], byte[]>> TYPE =
            TypeInformation.of(new TypeHint<Tuple2<byte[], byte[]>>() {});

    /** Key and value as they are. */
    static final class Bytes implements KafkaRecordDeserializationSchema<Tuple2<byte[], byte[]>> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> r, Collector<Tuple2<byte[], byte[]>> out) {
            out.collect(Tuple2.of(r.key(), r.value()));
        }

        @Override
        public TypeInformation<Tuple2<byte[], byte[]>> getProducedType() {
            return TYPE;
        }
    }

    static final class ToTopic implements KafkaRecordSerializationSchema<Tuple2<byte[], byte[]>> {
        private final String topic;

        ToTopic(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(
                Tuple2<byte[], byte[]> e, KafkaSinkContext ctx, Long timestamp) {
            return new ProducerRecord<>(topic, e.f0, e.f1);
        }
    }

    /** The transform of both sides: ASCII letters of the value to upper case. */
    static Tuple2<byte[], byte[]> upper(Tuple2<byte[], byte[]> e) {
        byte[] v = e.f1.clone();
        for (int i = 0; i < v.length; i++)
            if (v[i] >= 'a' && v[i] <= 'z')
                v[i] -= 32;
        return Tuple2.of(e.f0, v);
    }

    /** A local MiniCluster at @p parallelism with 1 s checkpoints and the settings of @p conf; a
     * failure ends the run (its exception on stderr) instead of restarting without end. Its
     * endpoints listen on the loopback address only. */
    static StreamExecutionEnvironment environment(int parallelism, Configuration conf) {
        conf.setString("restart-strategy.type", "none");
        conf.setString("rest.bind-address", "127.0.0.1");
        conf.setString("rest.address", "127.0.0.1");
        conf.setString("rest.bind-port", "0");
        conf.setString("jobmanager.bind-host", "127.0.0.1");
        conf.setString("taskmanager.bind-host", "127.0.0.1");
        conf.setString("taskmanager.host", "127.0.0.1");
        StreamExecutionEnvironment env =
                StreamExecutionEnvironment.createLocalEnvironment(parallelism, conf);
        env.enableCheckpointing(1000);
        return env;
    }

    /** Topic @p input read_committed from its first offsets; when @p bounded, to the end offsets
     * at start. */
    static KafkaSource<Tuple2<byte[], byte[]>> source(String bootstrap, String input, boolean bounded) {
        var builder = KafkaSource.<Tuple2<byte[], byte[]>>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(input)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setProperty("isolation.level", "read_committed")
                .setDeserializer(new Bytes());
        if (bounded)
            builder.setBounded(OffsetsInitializer.latest());
        return builder.build();
    }

    /** The producer settings of both sides. */
    static Properties producerConfig() {
        Properties producer = new Properties();
        producer.setProperty("transaction.timeout.ms", "60000");
        producer.setProperty("linger.ms", "5");
        producer.setProperty("batch.size", "1000000");
        producer.setProperty("compression.type", "none");
        return producer;
    }

    public static void main(String[] args) throws Exception {
        boolean unbounded = args.length == 6 && args[5].equals("unbounded");
        if (args.length != 5 && !unbounded) {
            System.err.println("usage: FlinkKafkaJob BOOTSTRAP INPUT OUTPUT PARALLELISM PREFIX [unbounded]");
            System.exit(2);
        }
        String bootstrap = args[0], input = args[1], output = args[2], prefix = args[4];
        int parallelism = Integer.parseInt(args[3]);

        StreamExecutionEnvironment env = environment(parallelism, new Configuration());

        KafkaSource<Tuple2<byte[], byte[]>> source = source(bootstrap, input, !unbounded);

        KafkaSink<Tuple2<byte[], byte[]>> sink = KafkaSink.<Tuple2<byte[], byte[]>>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(new ToTopic(output))
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(prefix)
                .setKafkaProducerConfig(producerConfig())
                .build();

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-in")
                .map(FlinkKafkaJob::upper)
                .returns(TYPE)
                .sinkTo(sink);
        env.execute("twopc-compare");
    }
}
