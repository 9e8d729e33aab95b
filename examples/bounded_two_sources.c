/*
 * The FLINK-2491 scenario as a program: two sources of very different lengths feed one
 * exactly-once file sink. The short source finishes almost at once; checkpoints must go on after
 * that (the long source's data has to be committed), and when the long source ends the final
 * checkpoint is taken at once, so the job ends right after its last record with everything
 * committed. The program prints every checkpoint it took, then reads the committed files back and
 * checks that each record is there exactly once.
 *
 *   bounded_two_sources [--config FILE] OUTPUT_DIR CHECKPOINT_DIR [SHORT_COUNT [LONG_COUNT
 *                       [INTERVAL_MS]]]
 *
 * Defaults: 10 and 200000 records, a checkpoint every 100 ms. The job's keys and those of the
 * sink "files" may come from FILE and TWOPC_ variables (docs/configuration.md); the command line
 * wins over them. Exit status 0 when every record was
 * committed exactly once.
 */
#include <tpc_file.h>
#include <tpc_props.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name;
    uint64_t count;
} source_conf_t;

typedef struct {
    const source_conf_t *conf;
    uint64_t next;
} source_t;

static tpc_error_t *source_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx;
    source_t *s = calloc(1, sizeof(*s));
    s->conf = arg;
    *self = s;
    return NULL;
}

static tpc_error_t *source_restore(void *self, tpc_ctx_t *ctx, const tpc_state_reader_t *state)
{
    (void)ctx;
    source_t *s = self;
    for (size_t i = 0; i < tpc_state_count(state, TPC_STATE_LIST); i++) {
        const void *bytes;
        size_t len;
        tpc_state_get(state, TPC_STATE_LIST, i, &bytes, &len);
        if (len != sizeof s->next)
            return tpc_error_new(TPC_ERR_CORRUPT, 0, "source state of %zu bytes", len);
        memcpy(&s->next, bytes, len);
    }
    return NULL;
}

static tpc_error_t *source_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    source_t *s = self;
    for (int i = 0; i < 100 && s->next < s->conf->count; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "%s %llu", s->conf->name, (unsigned long long)s->next);
        tpc_record_t rec = {.value = line, .value_len = (size_t)n};
        if (tpc_emit(ctx, &rec) != TPC_OK)
            break;
        s->next++;
    }
    *result = s->next < s->conf->count ? TPC_POLL_MORE : TPC_POLL_END;
    return NULL;
}

static tpc_error_t *source_snapshot(void *self, tpc_ctx_t *ctx, uint64_t id, tpc_state_writer_t *w)
{
    (void)ctx;
    (void)id;
    source_t *s = self;
    return tpc_state_add(w, TPC_STATE_LIST, &s->next, sizeof s->next);
}

static void source_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx;
    free(self);
}

static const tpc_operator_ops_t source_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = source_open,
    .initialize_state = source_restore,
    .poll = source_poll,
    .snapshot_state = source_snapshot,
    .close = source_close,
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double started;

static void on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t duration_us,
                          const char *reason)
{
    (void)opaque;
    printf("checkpoint %3llu %-9s at %8.1f ms, took %6.2f ms%s%s\n", (unsigned long long)id,
           completed ? "completed" : "aborted", now_ms() - started, (double)duration_us / 1000.0,
           reason ? ": " : "", reason ? reason : "");
}

/* Count the committed lines of each source; files whose names start with '.' are in progress. */
static int verify(const char *dir, const source_conf_t *src, int nsrc)
{
    uint64_t lines[2] = {0, 0}, sums[2] = {0, 0};
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        char name[32];
        unsigned long long n;
        while (f && fscanf(f, "%31s %llu", name, &n) == 2)
            for (int k = 0; k < nsrc; k++)
                if (strcmp(name, src[k].name) == 0) {
                    lines[k]++;
                    sums[k] += n;
                }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    int bad = 0;
    for (int k = 0; k < nsrc; k++) {
        uint64_t want = src[k].count, want_sum = want ? want * (want - 1) / 2 : 0;
        bool ok = lines[k] == want && sums[k] == want_sum;
        printf("%-6s records %llu, committed %llu: %s\n", src[k].name, (unsigned long long)want,
               (unsigned long long)lines[k], ok ? "exactly once" : "MISMATCH");
        bad += !ok;
    }
    return bad;
}

int main(int argc, char **argv)
{
    const char *config_path = NULL;
    if (argc > 2 && strcmp(argv[1], "--config") == 0) {
        config_path = argv[2];
        argv[2] = argv[0];
        argc -= 2, argv += 2;
    }
    if (argc < 3) {
        fprintf(
            stderr,
            "usage: %s [--config FILE] OUTPUT_DIR CHECKPOINT_DIR [SHORT [LONG [INTERVAL_MS]]]\n",
            argv[0]);
        return 2;
    }
    source_conf_t src[2] = {{"short", argc > 3 ? strtoull(argv[3], NULL, 10) : 10},
                            {"long", argc > 4 ? strtoull(argv[4], NULL, 10) : 200000}};
    tpc_job_t *job = tpc_job_new("bounded_two_sources");
    tpc_txn_sink_t *sink = NULL;
    tpc_config_t *cfg = tpc_config_new();
    int a, b, out;
    /* The program's default, then the file and the environment, then the command line. */
    tpc_error_t *err = cfg ? tpc_job_set(job, "checkpoint.interval.ms", "100") : tpc_error_nomem();
    if (!err && config_path)
        err = tpc_config_read_file(cfg, config_path);
    if (!err)
        err = tpc_config_read_env(cfg, NULL);
    if (!err)
        err = tpc_job_configure(job, cfg);
    if (!err)
        err = tpc_job_set(job, "checkpoint.dir", argv[2]);
    if (!err && argc > 5)
        err = tpc_job_set(job, "checkpoint.interval.ms", argv[5]);
    if (!err)
        err = tpc_job_add_vertex(job, "short", 1, &source_ops, &src[0], &a);
    if (!err)
        err = tpc_job_add_vertex(job, "long", 1, &source_ops, &src[1], &b);
    if (!err)
        err = tpc_file_sink_new(argv[1], &sink);
    if (!err)
        err = tpc_txn_sink_configure(sink, cfg, "files");
    if (!err)
        err = tpc_config_check_used(cfg);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "files", 1, &out);
    if (!err)
        err = tpc_job_connect(job, a, out, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_connect(job, b, out, TPC_EDGE_FORWARD);
    tpc_job_set_checkpoint_callback(job, on_checkpoint, NULL);
    started = now_ms();
    if (!err)
        err = tpc_job_run(job, NULL);
    int status = 0;
    if (err) {
        fprintf(stderr, "bounded_two_sources: %s\n", tpc_error_message(err));
        if (tpc_error_hint_text(err))
            fprintf(stderr, "hint: %s\n", tpc_error_hint_text(err));
        status = 1;
    } else {
        printf("job finished after %.1f ms\n", now_ms() - started);
        status = verify(argv[1], src, 2) ? 1 : 0;
    }
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_config_destroy(cfg);
    return status;
}
