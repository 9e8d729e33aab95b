/*
 * The file sink in real jobs: the sequence source into the file sink, read back from the folder.
 * The committed files, in name order, hold the input exactly once and in order; nothing in
 * progress is left after the job ends; parallel sinks, rolled part files and the FLINK-2491 shape
 * (Source(2) -> file sink(1), one source ending early) lose nothing at the end.
 */
#include "tpc_file.h"
#include "tpc_test_file.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tpc_test_seq_conf_t src;
    int src_parallelism, sink_parallelism;
    const char *interval;
    const char *sink_settings[8]; /* key, value, ..., NULL */
    char *out;
    tpc_txn_sink_stats_t stats;
    uint64_t checkpoints;
} file_run_t;

static void run_file_job(file_run_t *r)
{
    char *ckpt = tpc_test_tmpdir("file-job-ckpt");
    r->out = tpc_test_tmpdir("file-job-out");
    tpc_job_t *job = tpc_job_new("file-job");
    ck_assert_ptr_null(tpc_job_set(job, "checkpoint.dir", ckpt));
    ck_assert_ptr_null(
        tpc_job_set(job, "checkpoint.interval.ms", r->interval ? r->interval : "10"));
    tpc_txn_sink_t *sink = NULL;
    ck_assert_ptr_null(tpc_file_sink_new(r->out, &sink));
    for (int i = 0; r->sink_settings[i]; i += 2)
        ck_assert_ptr_null(tpc_txn_sink_set(sink, r->sink_settings[i], r->sink_settings[i + 1]));
    int s, k;
    ck_assert_ptr_null(tpc_job_add_vertex(job, "source",
                                          r->src_parallelism ? r->src_parallelism : 1,
                                          &tpc_test_seq_source_ops, &r->src, &s));
    ck_assert_ptr_null(tpc_txn_sink_add_to_job(sink, job, "files",
                                               r->sink_parallelism ? r->sink_parallelism : 1, &k));
    ck_assert_ptr_null(tpc_job_connect(job, s, k, TPC_EDGE_REBALANCE));
    tpc_job_result_t result;
    tpc_error_t *err = tpc_job_run(job, &result);
    ck_assert_msg(err == NULL, "job failed: %s", tpc_error_message(err));
    ck_assert_int_eq(result, TPC_JOB_FINISHED);
    tpc_job_stats_t js;
    tpc_job_get_stats(job, &js);
    r->checkpoints = js.checkpoints_completed;
    tpc_txn_sink_get_stats(sink, &r->stats);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}

static void done(file_run_t *r)
{
    tpc_test_rmdir(r->out);
    free(r->out);
}

static tpc_test_file_out_t check_output(file_run_t *r, const char *prefix, int nsub,
                                        const uint64_t *count)
{
    tpc_test_file_out_t out;
    char why[256];
    ck_assert_msg(tpc_test_file_read(r->out, prefix, &out, why, sizeof why), "%s", why);
    ck_assert_msg(tpc_test_file_check(&out, r->src.value_pad, nsub, count, true, why, sizeof why),
                  "%s", why);
    ck_assert_int_eq(out.inprogress, 0);
    ck_assert_int_eq(out.others, 0);
    return out;
}

START_TEST(test_input_exactly_once_in_order)
{
    file_run_t r = {
        .src = {.count_default = 20000, .per_poll = 100, .sleep_us = 300, .value_pad = 20}};
    run_file_job(&r);
    uint64_t count = 20000;
    tpc_test_file_out_t out = check_output(&r, "part", 1, &count);
    ck_assert_int_ge(r.checkpoints, 3);
    ck_assert_int_ge(out.files, 3); /* one per checkpoint that had data */
    ck_assert_uint_eq(r.stats.commits, (uint64_t)out.files);
    ck_assert_uint_eq(r.stats.pending, 0);
    tpc_test_file_out_free(&out);
    done(&r);
}
END_TEST

START_TEST(test_parallel_sinks_rolled_parts)
{
    file_run_t r = {.src = {.count_default = 10000, .per_poll = 100, .sleep_us = 200},
                    .src_parallelism = 2,
                    .sink_parallelism = 2,
                    .sink_settings = {"file.part-size", "4096", "file.prefix", "events",
                                      "file.suffix", ".bin", NULL}};
    run_file_job(&r);
    uint64_t count[2] = {10000, 10000};
    tpc_test_file_out_t out;
    char why[256];
    ck_assert_msg(tpc_test_file_read(r.out, "events", &out, why, sizeof why), "%s", why);
    /* Two sinks interleave the sources: exactly once, order only per file. */
    ck_assert_msg(tpc_test_file_check(&out, 0, 2, count, false, why, sizeof why), "%s", why);
    ck_assert_int_eq(out.inprogress, 0);
    ck_assert_uint_le(out.largest, 4096);
    ck_assert_int_ge(out.files, 20000 * 9 / 4096);
    tpc_test_file_out_free(&out);
    done(&r);
}
END_TEST

/* FLINK-2491: Source(2) -> sink(1); one source ends after 10 records, the other after 10,000.
 * Checkpoints keep completing after the first ends, and the final one commits the rest. */
START_TEST(test_one_source_ends_early)
{
    file_run_t r = {
        .src = {.per_poll = 10, .sleep_us = 300}, .src_parallelism = 2, .interval = "20"};
    r.src.count[0] = 10;
    r.src.count[1] = 10000;
    run_file_job(&r);
    uint64_t count[2] = {10, 10000};
    tpc_test_file_out_t out = check_output(&r, "part", 2, count);
    ck_assert_uint_eq(out.len, 10010 * 9);
    ck_assert_int_ge(r.checkpoints, 5);
    ck_assert_uint_eq(r.stats.records, 10010);
    tpc_test_file_out_free(&out);
    done(&r);
}
END_TEST

/* With a long interval, the only checkpoint is the final one: it alone commits everything. */
START_TEST(test_final_checkpoint_commits_everything)
{
    file_run_t r = {.src = {.count_default = 5000}, .interval = "60000"};
    run_file_job(&r);
    uint64_t count = 5000;
    tpc_test_file_out_t out = check_output(&r, "part", 1, &count);
    ck_assert_int_eq(out.files, 1);
    ck_assert_uint_eq(r.checkpoints, 1);
    tpc_test_file_out_free(&out);
    done(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("file_job");
    TCase *tc = tcase_create("job");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_input_exactly_once_in_order);
    tcase_add_test(tc, test_parallel_sinks_rolled_parts);
    tcase_add_test(tc, test_one_source_ends_early);
    tcase_add_test(tc, test_final_checkpoint_commits_everything);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
