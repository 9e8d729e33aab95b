/*
 * The operators of keyed_totals, shared by its one-process form (keyed_totals.c) and the form
 * that runs as units over several processes (cluster_totals.c): parse "user,amount" into a record
 * keyed by the user, keep each user's count and total in keyed state and emit "<n>,<total>" after
 * each purchase, the PostgreSQL row of a total, and --fill's writing of the input.
 */
#ifndef KEYED_TOTALS_OPS_H
#define KEYED_TOTALS_OPS_H

#include "example_common.h"
#include "example_kafka.h"
#include "keyed_totals_records.h"

/* ---- parse: "user,amount" -> key user, value amount (8 bytes), paced ----------------------- */

static inline tpc_error_t *kt_parse_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    const double *rate = arg; /* purchases a second, all subtasks together; 0: unlimited */
    return ex_pace_new(ctx, *rate, self);
}

static inline tpc_error_t *kt_parse_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    for (size_t n = 0; n < tpc_batch_count(batch); n++) {
        tpc_record_t in;
        tpc_batch_get(batch, n, &in);
        const char *v = in.value, *comma = memchr(v, ',', in.value_len);
        uint64_t amount;
        if (!comma || comma == v ||
            !eo_parse_number(comma + 1, in.value_len - (size_t)(comma + 1 - v), &amount))
            return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                 "input value \"%.*s\" is not \"user,amount\"", (int)in.value_len,
                                 v);
        tpc_record_t out = {.key = v,
                            .key_len = (size_t)(comma - v),
                            .value = &amount,
                            .value_len = sizeof amount,
                            .timestamp = in.timestamp};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return NULL; /* canceled */
    }
    ex_pace(self, ctx, tpc_batch_count(batch));
    return NULL;
}

static inline void kt_parse_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx, free(self);
}

static const tpc_operator_ops_t kt_parse_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = kt_parse_open,
    .process = kt_parse_process,
    .close = kt_parse_close,
};

/* ---- totals: keyed state "total" = {purchases, sum} per user -------------------------------- */

typedef struct {
    uint64_t n, total;
} total_t;

static inline tpc_error_t *kt_totals_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = NULL;
    return NULL;
}

static inline tpc_error_t *kt_totals_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t in;
        tpc_batch_get(batch, i, &in);
        uint64_t amount;
        memcpy(&amount, in.value, sizeof amount);
        total_t t = {0, 0};
        const void *v;
        size_t len;
        tpc_error_t *err = tpc_keyed_get(ctx, "total", in.key, in.key_len, &v, &len);
        if (err)
            return err;
        if (v && len == sizeof t) /* absent until the user's first purchase */
            memcpy(&t, v, sizeof t);
        t.n++;
        t.total += amount;
        if ((err = tpc_keyed_put(ctx, "total", in.key, in.key_len, &t, sizeof t)))
            return err;
        char value[KT_VALUE_MAX];
        tpc_record_t out = {.key = in.key,
                            .key_len = in.key_len,
                            .value = value,
                            .value_len = (size_t)kt_output_value(t.n, t.total, value),
                            .timestamp = in.timestamp};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return NULL; /* canceled */
    }
    return NULL;
}

static const tpc_operator_ops_t kt_totals_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = kt_totals_open,
    .process = kt_totals_process,
};

/* ---- PostgreSQL rows: (user_id text primary key, n bigint, total bigint) -------------------- */

static inline tpc_error_t *kt_encode_row(void *opaque, const tpc_record_t *rec, tpc_pg_row_t *row)
{
    (void)opaque;
    uint64_t n, total;
    if (!kt_parse_pair(rec->value, rec->value_len, &n, &total))
        return tpc_error_new(TPC_ERR_CORRUPT, 0, "output value is not \"n,total\"");
    tpc_pg_row_text(row, rec->key, rec->key_len);
    tpc_pg_row_int8(row, (int64_t)n);
    tpc_pg_row_int8(row, (int64_t)total);
    return NULL;
}

/* ---- --fill: purchases 0 .. N-1, keyed by user, in order per partition --------------------- */

static inline int kt_fill_input(const char *program, const ex_options_t *o, const char *input,
                                uint32_t users)
{
    char errstr[512];
    rd_kafka_t *rk = ex_fill_producer_new(program, o->bootstrap, NULL, NULL);
    if (!rk)
        return 1;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    for (uint64_t i = 0; i < o->records && !err; i++) {
        char user[KT_USER_MAX], value[KT_VALUE_MAX];
        int ul = kt_user(i, users, user), vl = kt_input_value(i, users, value);
        err = ex_produce(rk, input, RD_KAFKA_PARTITION_UA, user, ul, value, vl);
        rd_kafka_poll(rk, 0);
    }
    if (!err)
        err = rd_kafka_flush(rk, 60000);
    /* A message that failed after its retries makes the idempotent producer fatal. */
    if (!err)
        err = rd_kafka_fatal_error(rk, errstr, sizeof errstr);
    rd_kafka_destroy(rk);
    if (err) {
        fprintf(stderr, "%s: filling \"%s\" failed: %s\n", program, input, rd_kafka_err2str(err));
        return 1;
    }
    fprintf(stderr, "%s: wrote purchases 0 .. %llu of %u users into \"%s\"\n", program,
            (unsigned long long)o->records - 1, users, input);
    return 0;
}

#endif
