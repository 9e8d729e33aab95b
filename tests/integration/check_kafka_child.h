/*
 * Kafka sink jobs in child processes, for the tests that kill, pause, fence or outlive them. The
 * child is the test binary itself run again as
 *   BINARY --child BOOTSTRAP TOPIC PREFIX CHECKPOINT_DIR [OPTION...]
 * (kc_is_child() / kc_child_main() in main): sequence source -> exactly-once Kafka sink, one
 * subtask each, logging to the scenario's log file. Options: records=N, per_poll=N, sleep_us=N
 * (the source), kill_at=N (SIGKILL itself when checkpoint N completes, before its commit),
 * job.KEY=VALUE and sink.KEY=VALUE (passed to tpc_job_set() / tpc_txn_sink_set()). The child
 * exits 0 when the job finishes, 1 when it fails, printing the error.
 */
#ifndef CHECK_KAFKA_CHILD_H
#define CHECK_KAFKA_CHILD_H

#include "check_kafka_common.h"
#include "tpc_kafka.h"
#include "tpc_test_crash.h"
#include "tpc_test_ops.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    char topic[128];
    char prefix[128];
    char *ckpt;
    char log[4200];
    char self[4096];
    const char *bootstrap;
} kc_scenario_t;

static inline void kc_on_checkpoint(void *opaque, uint64_t id, bool completed, uint64_t us,
                                    const char *why)
{
    (void)us, (void)why;
    if (completed && id == *(uint64_t *)opaque)
        kill(getpid(), SIGKILL);
}

static inline void kc_log_line(void *opaque, tpc_log_level_t level, const char *message)
{
    (void)opaque, (void)level;
    fprintf(stderr, "%s\n", message);
}

static inline bool kc_is_child(int argc, char **argv)
{
    return argc >= 6 && strcmp(argv[1], "--child") == 0;
}

static inline int kc_child_main(int argc, char **argv)
{
    alarm(120);
    tpc_test_seq_conf_t src = {.count_default = 3000, .per_poll = 8, .sleep_us = 4000};
    uint64_t kill_at = 0;
    tpc_job_t *job = tpc_job_new("kafka-child");
    tpc_txn_sink_t *sink = NULL;
    tpc_job_set_logger(job, kc_log_line, NULL, TPC_LOG_INFO);
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", argv[5]);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", "50");
    if (!err)
        err = tpc_kafka_sink_new(argv[2], argv[3], &sink);
    if (!err)
        err = tpc_txn_sink_set(sink, "transactional.id.prefix", argv[4]);
    if (!err)
        err = tpc_txn_sink_set(sink, "kafka.linger.ms", "2");
    for (int i = 6; i < argc && !err; i++) {
        char key[256];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof key) {
            fprintf(stderr, "kafka child: bad option \"%s\"\n", argv[i]);
            return 2;
        }
        snprintf(key, sizeof key, "%.*s", (int)(eq - argv[i]), argv[i]);
        const char *value = eq + 1;
        if (strcmp(key, "records") == 0)
            src.count_default = strtoull(value, NULL, 10);
        else if (strcmp(key, "per_poll") == 0)
            src.per_poll = (uint32_t)strtoul(value, NULL, 10);
        else if (strcmp(key, "sleep_us") == 0)
            src.sleep_us = (uint32_t)strtoul(value, NULL, 10);
        else if (strcmp(key, "kill_at") == 0)
            kill_at = strtoull(value, NULL, 10);
        else if (strncmp(key, "job.", 4) == 0)
            err = tpc_job_set(job, key + 4, value);
        else if (strncmp(key, "sink.", 5) == 0)
            err = tpc_txn_sink_set(sink, key + 5, value);
        else
            err = tpc_error_new(TPC_ERR_INVALID_ARG, 0, "unknown child option \"%s\"", key);
    }
    if (kill_at)
        tpc_job_set_checkpoint_callback(job, kc_on_checkpoint, &kill_at);
    int s, k;
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "kafka", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    tpc_job_result_t result = TPC_JOB_CANCELED;
    if (!err)
        err = tpc_job_run(job, &result);
    int rc = 0;
    if (err || result != TPC_JOB_FINISHED) {
        fprintf(stderr, "kafka child: %s\n", err ? tpc_error_message(err) : "did not finish");
        if (err)
            fprintf(stderr, "kafka child code: %s\n", tpc_err_name(tpc_error_code(err)));
        if (err && tpc_error_hint_text(err))
            fprintf(stderr, "kafka child hint: %s\n", tpc_error_hint_text(err));
        rc = 1;
    }
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    return rc;
}

/* A fresh topic (one partition), transactional id prefix and checkpoint folder. */
static inline void kc_scenario_init(kc_scenario_t *sc, const char *tag)
{
    sc->bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(sc->bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
    tpc_test_unique_name(sc->topic, sizeof sc->topic, tag, '-');
    tpc_test_unique_name(sc->prefix, sizeof sc->prefix, tag, '-');
    kt_create_topic(sc->bootstrap, sc->topic, 1);
    sc->ckpt = tpc_test_tmpdir(tag);
    snprintf(sc->log, sizeof sc->log, "%s.log", sc->ckpt);
    ck_assert(tpc_test_self_path(sc->self, sizeof sc->self));
}

/* Start a child on the scenario with up to 8 options (NULL-terminated). */
static inline pid_t kc_spawn(const kc_scenario_t *sc, const char *const *options)
{
    const char *argv[16] = {sc->self, "--child", sc->bootstrap, sc->topic, sc->prefix, sc->ckpt};
    int argc = 6;
    for (int i = 0; options && options[i] && argc < 15; i++)
        argv[argc++] = options[i];
    argv[argc] = NULL;
    pid_t pid = tpc_test_spawn(argv, sc->log, -1);
    ck_assert_int_gt(pid, 0);
    return pid;
}

static inline bool kc_log_has(const kc_scenario_t *sc, const char *needle)
{
    FILE *f = fopen(sc->log, "r");
    char line[2048];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return found;
}

/* Run a child to its end (within @ms); fail the test, showing the log, if it does not finish. */
static inline void kc_run_to_end(const kc_scenario_t *sc, const char *const *options, int ms)
{
    int status = 0;
    pid_t pid = kc_spawn(sc, options);
    bool ended = tpc_test_wait(pid, ms, &status);
    if (!ended)
        tpc_test_kill(pid);
    if (!ended || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        tpc_test_dump_log(sc->log);
        ck_abort_msg("the last run %s", ended ? "failed" : "did not end");
    }
}

typedef struct {
    uint64_t records;
    unsigned char *seen;
    long foreign;
} kc_tally_t;

static inline void kc_tally(void *opaque, const rd_kafka_message_t *msg)
{
    kc_tally_t *t = opaque;
    int st = 0;
    uint64_t seq = 0;
    if (tpc_test_seq_decode(msg->key, msg->key_len, &st, &seq) && st == 0 && seq < t->records)
        t->seen[seq] = t->seen[seq] < 255 ? t->seen[seq] + 1 : 255;
    else
        t->foreign++;
}

/* The topic, read with read_committed, holds records 0 .. @records - 1 of the sequence exactly
 * once each and nothing else. */
static inline void kc_check_exactly_once(const kc_scenario_t *sc, uint64_t records,
                                         const char *what)
{
    kc_tally_t t = {.records = records, .seen = calloc(records + 1, 1)};
    long total = kt_read_topic(sc->bootstrap, sc->topic, "read_committed", kc_tally, &t);
    long dups = 0, missing = 0;
    for (uint64_t i = 0; i < records; i++) {
        missing += t.seen[i] == 0;
        dups += t.seen[i] > 1 ? t.seen[i] - 1 : 0;
    }
    free(t.seen);
    if (dups || missing || t.foreign)
        tpc_test_dump_log(sc->log);
    ck_assert_msg(!dups && !missing && !t.foreign && total == (long)records,
                  "%s: %ld records, %ld duplicates, %ld missing, %ld foreign", what, total, dups,
                  missing, t.foreign);
    printf("%s: %ld records read_committed, 0 duplicates, 0 missing\n", what, total);
    fflush(stdout);
}

static inline void kc_scenario_clean(kc_scenario_t *sc)
{
    unlink(sc->log);
    tpc_test_rmdir(sc->ckpt);
    free(sc->ckpt);
    sc->ckpt = NULL;
}

#endif
