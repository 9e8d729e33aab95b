/*
 * The hand-driven sink subtask of tpc_test_txn_drive.h.
 */
#include "tpc_test_txn_drive.h"
#include "tpc_test_txn_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void keep_log(void *opaque, tpc_log_level_t level, const char *message)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    tpc_test_txn_sub_t *s = opaque;
    int n = snprintf(s->log + s->log_len, sizeof s->log - s->log_len, "%s: %s\n", names[level],
                     message);
    if (n > 0 && (size_t)n < sizeof s->log - s->log_len)
        s->log_len += (size_t)n;
    if (getenv("TWOPC_TEST_VERBOSE"))
        fprintf(stderr, "%s: %s\n", names[level], message);
}

tpc_error_t *tpc_test_txn_sub_open_from(tpc_test_txn_sub_t *s, tpc_txn_sink_t *sink, int subtask,
                                        int parallelism, const tpc_test_txn_origin_t *from)
{
    static const tpc_test_txn_origin_t first = {0, 0, 0, 0, 0};
    if (!from)
        from = &first;
    memset(s, 0, sizeof *s);
    s->env = (tpc__txn_env_t){
        .job_name = "test-job",
        .sink_name = "sink",
        .subtask = subtask,
        .parallelism = parallelism,
        .restored_checkpoint = from->restored,
        .restored_parallelism = from->restored_parallelism,
        .highest_parallelism = from->highest_parallelism,
        .first_checkpoint = from->first_checkpoint,
        .owner_epoch = from->owner_epoch,
        .log = keep_log,
        .opaque = s,
    };
    return tpc__txn_task_open(sink, &s->env, &s->task);
}

tpc_error_t *tpc_test_txn_sub_open(tpc_test_txn_sub_t *s, tpc_txn_sink_t *sink, int subtask,
                                   int parallelism, uint64_t restored)
{
    tpc_test_txn_origin_t from = {.restored = restored};
    return tpc_test_txn_sub_open_from(s, sink, subtask, parallelism, &from);
}

tpc_error_t *tpc_test_txn_sub_write(tpc_test_txn_sub_t *s, uint64_t first, size_t n)
{
    tpc_record_t recs[64];
    unsigned char keys[64][8];
    if (n > 64)
        n = 64;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = first + i;
        for (int b = 7; b >= 0; b--, k >>= 8)
            keys[i][b] = (unsigned char)k;
        recs[i] = (tpc_record_t){.key = keys[i], .key_len = 8, .value = keys[i], .value_len = 8};
    }
    return tpc__txn_task_write(s->task, recs, n);
}

static tpc_error_t *copy_entry(void *w, const void *bytes, size_t len)
{
    tpc_test_txn_state_t *st = w;
    if (st->count == TPC_TEST_TXN_MAX_ENTRIES)
        return tpc_error_new(TPC_ERR_STATE, 0, "test state is full");
    void *copy = malloc(len);
    memcpy(copy, bytes, len);
    st->entries[st->count++] = (tpc__txn_bytes_t){copy, len};
    return NULL;
}

tpc_error_t *tpc_test_txn_sub_snapshot(tpc_test_txn_sub_t *s, uint64_t id,
                                       tpc_test_txn_state_t *state)
{
    tpc_test_txn_state_t scratch = {.count = 0};
    tpc_test_txn_state_t *st = state ? state : &scratch;
    tpc_test_txn_state_free(st);
    tpc_error_t *err = tpc__txn_task_snapshot(s->task, id, copy_entry, st);
    tpc_test_txn_state_free(&scratch);
    return err;
}

tpc_error_t *tpc_test_txn_sub_start(tpc_test_txn_sub_t *s, tpc_txn_sink_t *sink, uint64_t restored,
                                    const tpc_test_txn_state_t *state)
{
    tpc_error_t *err = tpc_test_txn_sub_open(s, sink, 0, 1, restored);
    if (err)
        return err;
    err =
        tpc__txn_task_initialize(s->task, state ? state->entries : NULL, state ? state->count : 0);
    if (err)
        tpc_test_txn_sub_close(s);
    return err;
}

void tpc_test_txn_sub_close(tpc_test_txn_sub_t *s)
{
    tpc__txn_task_close(s->task);
    s->task = NULL;
}

void tpc_test_txn_state_free(tpc_test_txn_state_t *state)
{
    for (size_t i = 0; i < state->count; i++)
        free((void *)state->entries[i].bytes);
    state->count = 0;
}

tpc_txn_sink_t *tpc_test_txn_sink(void *recorder)
{
    tpc_txn_sink_t *sink = NULL;
    tpc_error_t *err = tpc_txn_sink_new(&tpc_test_txn_ops, recorder, &sink);
    if (!err)
        err = tpc_txn_sink_set(sink, "commit.retry.backoff.ms", "1");
    if (!err)
        err = tpc_txn_sink_set(sink, "commit.retry.backoff-max.ms", "4");
    if (err) {
        fprintf(stderr, "%s\n", tpc_error_message(err));
        tpc_error_destroy(err);
        tpc_txn_sink_destroy(sink);
        return NULL;
    }
    return sink;
}

tpc_txn_sink_t *tpc_test_txn_rec_sink_new(tpc_test_txn_rec_t *rec, uint64_t max_seq)
{
    tpc_test_txn_rec_init(rec, max_seq);
    tpc_txn_sink_t *sink = tpc_test_txn_sink(rec);
    if (!sink)
        tpc_test_txn_rec_free(rec);
    return sink;
}

void tpc_test_txn_rec_sink_free(tpc_test_txn_rec_t *rec, tpc_txn_sink_t *sink)
{
    tpc_txn_sink_destroy(sink);
    tpc_test_txn_rec_free(rec);
}
