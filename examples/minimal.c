/*
 * The smallest useful twopc program: a source that counts to 1000 and an exactly-once file sink.
 * Every line "record <n>" lands in the output folder exactly once, in files that appear only when
 * the checkpoint that covers them is complete, even if the program is killed and run again.
 *
 *   minimal OUTPUT_DIR CHECKPOINT_DIR
 */
#include <tpc_file.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t next;
} counter_t;

static tpc_error_t *counter_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = calloc(1, sizeof(counter_t));
    return NULL;
}

/* Restore where the last completed checkpoint left off. */
static tpc_error_t *counter_restore(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *state)
{
    (void)ctx;
    counter_t *c = self;
    for (size_t i = 0; i < tpc_state_count(state, TPC_STATE_LIST); i++) {
        const void *bytes;
        size_t len;
        tpc_state_get(state, TPC_STATE_LIST, i, &bytes, &len);
        if (len == sizeof c->next)
            memcpy(&c->next, bytes, len); /* state bytes carry no alignment */
    }
    return NULL;
}

static tpc_error_t *counter_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    counter_t *c = self;
    char line[32];
    int n = snprintf(line, sizeof line, "record %llu", (unsigned long long)c->next);
    tpc_record_t rec = {.value = line, .value_len = (size_t)n};
    if (tpc_emit(ctx, &rec) == TPC_OK)
        c->next++;
    *result = c->next < 1000 ? TPC_POLL_MORE : TPC_POLL_END;
    return NULL;
}

static tpc_error_t *counter_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)ctx, (void)id;
    return tpc_state_add(w, TPC_STATE_LIST, &((counter_t *)self)->next, sizeof(uint64_t));
}

static void counter_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx, free(self);
}

static const tpc_operator_ops_t counter_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = counter_open,
    .initialize_state = counter_restore,
    .poll = counter_poll,
    .snapshot_state = counter_snapshot,
    .close = counter_close,
};

int main(int argc, char **argv)
{
    if (argc != 3)
        return fprintf(stderr, "usage: %s OUTPUT_DIR CHECKPOINT_DIR\n", argv[0]), 2;
    tpc_job_t *job = tpc_job_new("minimal");
    tpc_txn_sink_t *sink = NULL;
    int source, out;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", argv[2]);
    if (!err)
        err = tpc_job_add_vertex(job, "counter", 1, &counter_ops, NULL, &source);
    if (!err)
        err = tpc_file_sink_new(argv[1], &sink);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "files", 1, &out);
    if (!err)
        err = tpc_job_connect(job, source, out, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_run(job, NULL);
    if (err)
        fprintf(stderr, "minimal: %s (%s)\n", tpc_error_message(err), tpc_error_hint_text(err));
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_error_destroy(err);
    return err ? 1 : 0;
}
