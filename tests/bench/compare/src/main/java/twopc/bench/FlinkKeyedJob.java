/*
 * The Apache Flink side of the keyed part of `make bench-compare`: the same bounded job as
 * tests/bench/compare/twopc_keyed_job.c. Kafka (read_committed, earliest to the end offsets at
 * start; key: the user, 8 bytes big-endian; value: the amount, 8 bytes big-endian) -> key by user ->
 * running count and total per user in keyed ValueState -> Kafka with KafkaSink EXACTLY_ONCE (key:
 * the user; value: count and total, 8 bytes big-endian each), checkpoints every second, in a local
 * MiniCluster at the given parallelism, with the state backend named on the command line:
 *
 *   FlinkKeyedJob BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC PARALLELISM TRANSACTIONAL_ID_PREFIX
 *                 hashmap|rocksdb CHECKPOINT_DIR
 *
 * "hashmap" keeps the state on the Java heap and writes it whole at each checkpoint; "rocksdb"
 * keeps it in RocksDB and checkpoints incrementally (new SST files only). Checkpoints go to files
 * under CHECKPOINT_DIR. At the end it prints, from the job's checkpoint metrics (CheckpointStats),
 *   checkpoints C avg_ms D avg_bytes B
 * with the mean duration and mean checkpointed size (what that checkpoint wrote) of the completed
 * checkpoints.
 */
package twopc.bench;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Properties;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;

public final class FlinkKeyedJob {
    static final TypeInformation<Tuple2<Long, Long>> PURCHASE = Types.TUPLE(Types.LONG, Types.LONG);
    static final TypeInformation<Tuple3<Long, Long, Long>> TOTAL =
            Types.TUPLE(Types.LONG, Types.LONG, Types.LONG);

    /** User and amount from the 8-byte key and value. */
    static final class Purchases implements KafkaRecordDeserializationSchema<Tuple2<Long, Long>> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> r, Collector<Tuple2<Long, Long>> out) {
            out.collect(Tuple2.of(ByteBuffer.wrap(r.key()).getLong(), ByteBuffer.wrap(r.value()).getLong()));
        }

        @Override
        public TypeInformation<Tuple2<Long, Long>> getProducedType() {
            return PURCHASE;
        }
    }

    static final class ToTopic implements KafkaRecordSerializationSchema<Tuple3<Long, Long, Long>> {
        private final String topic;

        ToTopic(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(
                Tuple3<Long, Long, Long> t, KafkaSinkContext ctx, Long timestamp) {
            byte[] key = ByteBuffer.allocate(8).putLong(t.f0).array();
            byte[] value = ByteBuffer.allocate(16).putLong(t.f1).putLong(t.f2).array();
            return new ProducerRecord<>(topic, key, value);
        }
    }

    /** Per user {count, total} in keyed state; emits (user, count, total) after each purchase. */
    static final class Totals
            extends KeyedProcessFunction<Long, Tuple2<Long, Long>, Tuple3<Long, Long, Long>> {
        private transient ValueState<long[]> total;

        @Override
        public void open(OpenContext context) {
            total = getRuntimeContext().getState(new ValueStateDescriptor<>(
                    "total", PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO));
        }

        @Override
        public void processElement(Tuple2<Long, Long> p, Context ctx, Collector<Tuple3<Long, Long, Long>> out)
                throws Exception {
            long[] t = total.value();
            if (t == null)
                t = new long[2];
            t[0]++;
            t[1] += p.f1;
            total.update(t);
            out.collect(Tuple3.of(p.f0, t[0], t[1]));
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 7 || !(args[5].equals("hashmap") || args[5].equals("rocksdb"))) {
            System.err.println("usage: FlinkKeyedJob BOOTSTRAP INPUT OUTPUT PARALLELISM PREFIX "
                    + "hashmap|rocksdb CHECKPOINT_DIR");
            System.exit(2);
        }
        String bootstrap = args[0], input = args[1], output = args[2], prefix = args[4];
        int parallelism = Integer.parseInt(args[3]);

        Configuration conf = new Configuration();
        conf.setString("state.backend.type", args[5]);
        conf.setString("execution.checkpointing.incremental", String.valueOf(args[5].equals("rocksdb")));
        conf.setString("execution.checkpointing.storage", "filesystem");
        conf.setString("execution.checkpointing.dir", Path.of(args[6]).toAbsolutePath().toUri().toString());
        CheckpointReporter.configure(conf);
        StreamExecutionEnvironment env = FlinkKafkaJob.environment(parallelism, conf);

        KafkaSource<Tuple2<Long, Long>> source = KafkaSource.<Tuple2<Long, Long>>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(input)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setBounded(OffsetsInitializer.latest())
                .setProperty("isolation.level", "read_committed")
                .setDeserializer(new Purchases())
                .build();
        KafkaSink<Tuple3<Long, Long, Long>> sink = KafkaSink.<Tuple3<Long, Long, Long>>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(new ToTopic(output))
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(prefix)
                .setKafkaProducerConfig(FlinkKafkaJob.producerConfig())
                .build();

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-in")
                .keyBy(p -> p.f0, Types.LONG)
                .process(new Totals())
                .returns(TOTAL)
                .sinkTo(sink);
        env.execute("twopc-compare-keyed");
        System.out.println(CheckpointReporter.summary());
    }
}
