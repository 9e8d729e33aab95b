/*
 * The twopc side of `make bench-compare`: the same bounded job as FlinkKafkaJob.java, Kafka
 * (read_committed, from the first offsets to the end offsets taken at start) -> upper-case the
 * value -> Kafka with the exactly-once sink, checkpoints every second, every vertex at the given
 * parallelism with forward edges (Flink chains the same way).
 *
 *   twopc_job BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC PARALLELISM TRANSACTIONAL_ID_PREFIX CKPT_DIR
 *             [unbounded]
 *
 * With "unbounded" the source keeps reading new records until the process is killed (the
 * visibility latency part of the benchmark). An OUTPUT_TOPIC of the form "pg:TABLE" writes to
 * PostgreSQL instead (the server of $TWOPC_TEST_PG_CONNINFO, the exactly-once sink in COPY mode):
 * rows id bigint (the record's 8-byte key) and v bytea (the value), as FlinkPgJob.java does.
 * Producer settings are those of the Flink side: linger.ms 5, batch.size 1000000, no compression,
 * transaction timeout 60 s. Exit status 0 when the job finished, 1 with the error otherwise.
 */
#include "tpc_kafka.h"
#include "tpc_pg.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_MAX 4096

static tpc_error_t *upper_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    unsigned char value[VALUE_MAX];
    for (size_t n = 0; n < tpc_batch_count(batch); n++) {
        tpc_record_t rec;
        tpc_batch_get(batch, n, &rec);
        if (rec.value_len > sizeof value)
            return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                                 "a value of %zu bytes is longer than this benchmark takes",
                                 rec.value_len);
        const unsigned char *in = rec.value;
        for (size_t i = 0; i < rec.value_len; i++)
            value[i] = in[i] >= 'a' && in[i] <= 'z' ? (unsigned char)(in[i] - 32) : in[i];
        rec.value = value;
        if (tpc_emit(ctx, &rec) != TPC_OK)
            break; /* canceled */
    }
    return NULL;
}

static tpc_error_t *upper_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = NULL;
    return NULL;
}

static const tpc_operator_ops_t upper_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = upper_open,
    .process = upper_process,
};

static tpc_error_t *encode_row(void *opaque, const tpc_record_t *rec, tpc_pg_row_t *row)
{
    (void)opaque;
    uint64_t id = 0;
    const unsigned char *key = rec->key;
    for (size_t b = 0; b < 8 && b < rec->key_len; b++)
        id = id << 8 | key[b];
    tpc_pg_row_int8(row, (int64_t)id);
    tpc_pg_row_bytea(row, rec->value, rec->value_len);
    return NULL;
}

/* The PostgreSQL sink into @table. */
static tpc_error_t *pg_sink(const char *table, tpc_txn_sink_t **sink)
{
    const char *conninfo = getenv("TWOPC_TEST_PG_CONNINFO");
    if (!conninfo)
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "TWOPC_TEST_PG_CONNINFO is not set");
    tpc_error_t *err = tpc_pg_sink_new(sink);
    const char *kv[][2] = {{"pg.conninfo", conninfo},
                           {"pg.table", table},
                           {"pg.columns", "id,v"},
                           {"pg.gid-prefix", table},
                           {"pg.mode", "copy"}};
    for (size_t i = 0; !err && i < sizeof kv / sizeof *kv; i++)
        err = tpc_txn_sink_set(*sink, kv[i][0], kv[i][1]);
    if (!err)
        err = tpc_pg_sink_set_encoder(*sink, encode_row, NULL);
    return err;
}

static tpc_error_t *build(tpc_job_t *job, char **argv, int par, tpc_kafka_source_t **src,
                          tpc_txn_sink_t **sink)
{
    const char *bootstrap = argv[1], *input = argv[2], *output = argv[3], *prefix = argv[5];
    const char *job_kv[][2] = {
        {"checkpoint.dir", argv[6]}, {"checkpoint.interval.ms", "1000"}, {"restart.attempts", "0"}};
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < sizeof job_kv / sizeof *job_kv; i++)
        err = tpc_job_set(job, job_kv[i][0], job_kv[i][1]);
    int s = 0, m = 0, k = 0;
    if (!err)
        err = tpc_kafka_source_new(bootstrap, input, src);
    if (!err)
        err = tpc_kafka_source_set(*src, "bounded", argv[7] ? "false" : "true");
    if (!err)
        err = tpc_kafka_source_add_to_job(*src, job, "kafka-in", par, &s);
    if (!err)
        err = tpc_job_add_vertex(job, "upper", par, &upper_ops, NULL, &m);
    bool pg = strncmp(output, "pg:", 3) == 0;
    if (!err && pg)
        err = pg_sink(output + 3, sink);
    else if (!err)
        err = tpc_kafka_sink_new(bootstrap, output, sink);
    const char *sink_kv[][2] = {
        {"transactional.id.prefix", prefix}, {"kafka.transaction.timeout.ms", "60000"},
        {"transaction.timeout.ms", "60000"}, {"kafka.linger.ms", "5"},
        {"kafka.batch.size", "1000000"},     {"kafka.compression.type", "none"}};
    for (size_t i = 0; !err && !pg && i < sizeof sink_kv / sizeof *sink_kv; i++)
        err = tpc_txn_sink_set(*sink, sink_kv[i][0], sink_kv[i][1]);
    if (!err)
        err = tpc_txn_sink_add_to_job(*sink, job, "kafka-out", par, &k);
    if (!err)
        err = tpc_job_connect(job, s, m, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(job, m, k, TPC_EDGE_FORWARD);
    return err;
}

int main(int argc, char **argv)
{
    if (argc != 7 && (argc != 8 || strcmp(argv[7], "unbounded") != 0)) {
        fprintf(stderr, "usage: twopc_job BOOTSTRAP INPUT OUTPUT PARALLELISM PREFIX CKPT_DIR "
                        "[unbounded]\n");
        return 2;
    }
    int par = atoi(argv[4]);
    tpc_job_t *job = tpc_job_new("twopc-compare");
    tpc_kafka_source_t *src = NULL;
    tpc_txn_sink_t *sink = NULL;
    tpc_error_t *err = job ? build(job, argv, par, &src, &sink) : tpc_error_nomem();
    if (!err)
        err = tpc_job_run(job, NULL);
    int rc = 0;
    if (err) {
        fprintf(stderr, "twopc_job: %s\n", tpc_error_message(err));
        rc = 1;
    }
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_kafka_source_destroy(src);
    return rc;
}
