/*
 * Where a cluster member's units keep their checkpoints: each unit's job gets a store of its own,
 * derived by the runner, so that two units never share a completion record.
 *
 * - folder: <checkpoint.dir>/unit-<u>;
 * - s3: the key prefix <checkpoint.s3.prefix>/unit-<u>/ (<app>/unit-<u>/ without one), on the
 *   S3 backend the runner gives each unit's job with the member's checkpoint.s3.* keys; two
 *   units' jobs run against a local S3 server (moto on 127.0.0.1 from tests/services/s3.sh;
 *   without one that case says so and passes nothing off as run) and each completion record is
 *   under its own unit's prefix;
 * - the keys: a bad checkpoint.s3.* value or an unknown one is refused when set, and a member on
 *   S3 without a bucket refuses to run before it reaches Kafka.
 *
 * No broker is needed: the units' jobs are made and run as the unit's thread does
 * (tpc__unit_build).
 */
#include "cluster_internal.h"
#include "tpc_s3.h"
#include "tpc_test_check.h"
#include "tpc_test_ops.h"
#include "tpc_test_s3.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tpc_test_s3_t local_s3; /* the local S3 server: endpoint NULL, none */
#define S3_BUCKET "twopc-test"

/* A unit's job: a bounded sequence source into a discarding sink, checkpointed. */
static tpc_error_t *build(void *opaque, const tpc_cluster_unit_t *unit, tpc_job_t *job,
                          void **resources)
{
    (void)unit;
    *resources = NULL;
    int src, snk;
    tpc_error_t *err = tpc_job_set(job, "checkpoint.interval.ms", "20");
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, opaque, &src);
    if (!err)
        err = tpc_job_add_vertex(job, "sink", 1, &tpc_test_discard_ops, NULL, &snk);
    if (!err)
        err = tpc_job_connect(job, src, snk, TPC_EDGE_FORWARD);
    return err;
}

/* A program that gives its units a storage itself, which the runner does with s3. */
static tpc_error_t *build_own_storage(void *opaque, const tpc_cluster_unit_t *unit, tpc_job_t *job,
                                      void **resources)
{
    tpc_error_t *err = tpc_job_use_storage(job, tpc_s3_storage_backend());
    return err ? err : build(opaque, unit, job, resources);
}

static tpc_cluster_t *member(const char *app, int units)
{
    tpc_cluster_t *c;
    TPC_TEST_OK(tpc_cluster_new("127.0.0.1:1", app, units, &c));
    return c;
}

START_TEST(test_folder)
{
    tpc_cluster_t *c = member("orders", 4);
    TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.dir", "/shared/orders"));
    tpc__unit_t u;
    TPC_TEST_OK(tpc__unit_init(c, 3, &u));
    ck_assert_str_eq(u.info.checkpoint_dir, "/shared/orders/unit-3");
    ck_assert_ptr_null(u.info.checkpoint_s3_prefix);
    ck_assert_str_eq(u.info.job_name, "orders-unit-3");
    ck_assert_str_eq(u.info.gid_prefix, "orders-u3");
    tpc__unit_free(&u);
    tpc_cluster_destroy(c);
}
END_TEST

/* The unit's prefix under the application's, in the folder's shape, whichever way it is given. */
START_TEST(test_s3_prefix)
{
    static const char *const given[][2] = {
        {"apps/orders/", "apps/orders/unit-3/"},
        {"apps/orders", "apps/orders/unit-3/"},
        {"apps/orders//", "apps/orders/unit-3/"},
        {"/", "unit-3/"},
        {NULL, "orders/unit-3/"},
    };
    for (size_t i = 0; i < sizeof given / sizeof *given; i++) {
        tpc_cluster_t *c = member("orders", 4);
        TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.storage", "s3"));
        TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.s3.bucket", "b"));
        if (given[i][0])
            TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.s3.prefix", given[i][0]));
        tpc__unit_t u;
        TPC_TEST_OK(tpc__unit_init(c, 3, &u));
        ck_assert_str_eq(u.info.checkpoint_s3_prefix, given[i][1]);
        ck_assert_ptr_null(u.info.checkpoint_dir);
        tpc__unit_free(&u);
        tpc_cluster_destroy(c);
    }
}
END_TEST

START_TEST(test_s3_keys)
{
    tpc_cluster_t *c = member("orders", 2);
    tpc_error_t *err = tpc_cluster_set(c, "checkpoint.s3.timeout.ms", "5");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "checkpoint.s3.timeout.ms"));
    tpc_error_destroy(err);
    err = tpc_cluster_set(c, "checkpoint.s3.bukket", "b");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "checkpoint.s3.bukket"));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "checkpoint.s3.bucket"));
    tpc_error_destroy(err);
    err = tpc_cluster_set(c, "checkpoint.storage", "nfs");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    tpc_error_destroy(err);

    /* s3 without a bucket: refused before the member reaches Kafka (127.0.0.1:1 answers nothing) */
    TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.storage", "s3"));
    TPC_TEST_OK(tpc_cluster_set_builder(c, build, NULL, NULL));
    err = tpc_cluster_run(c);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "checkpoint.s3.bucket"));
    tpc_error_destroy(err);
    /* the folder needs its checkpoint.dir, s3 does not */
    TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.storage", "folder"));
    err = tpc_cluster_run(c);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "checkpoint.dir"));
    tpc_error_destroy(err);
    tpc_cluster_destroy(c);
}
END_TEST

/* Two units' jobs on one bucket: each completion record under its own unit's prefix. */
START_TEST(test_s3_units_apart)
{
    if (!local_s3.endpoint) {
        fprintf(stderr,
                "check_cluster_storage: S3 case units_apart NOT RUN: no local S3 server "
                "(%s)\n",
                local_s3.missing);
        return;
    }
    char app[64], base[96];
    snprintf(app, sizeof app, "apart-%d", (int)getpid());
    snprintf(base, sizeof base, "apps/%s", app);
    tpc_cluster_t *c = member(app, 2);
    TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.storage", "s3"));
    TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.s3.bucket", S3_BUCKET));
    TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.s3.endpoint", local_s3.endpoint));
    TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.s3.region", "us-east-1"));
    TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.s3.prefix", base));
    tpc_test_seq_conf_t seq = {.count_default = 200, .per_poll = 10, .sleep_us = 5000};
    TPC_TEST_OK(tpc_cluster_set_builder(c, build, NULL, &seq));
    for (int i = 0; i < 2; i++) {
        tpc__unit_t u;
        TPC_TEST_OK(tpc__unit_init(c, i, &u));
        tpc_job_t *job;
        void *resources;
        TPC_TEST_OK(tpc__unit_build(&u, &job, &resources));
        tpc_job_result_t result;
        TPC_TEST_OK(tpc_job_run(job, &result));
        ck_assert_int_eq(result, TPC_JOB_FINISHED);
        tpc_job_destroy(job);
        tpc__unit_free(&u);
    }
    for (int i = 0; i < 2; i++) {
        char prefix[160];
        snprintf(prefix, sizeof prefix, "%s/unit-%d/", base, i);
        tpc_s3_config_t conf = {.endpoint = local_s3.endpoint,
                                .bucket = S3_BUCKET,
                                .prefix = prefix,
                                .region = "us-east-1"};
        tpc_storage_t *st;
        TPC_TEST_OK(tpc_s3_storage_new(&conf, &st));
        uint8_t *p;
        size_t n;
        char *version;
        bool found;
        TPC_TEST_OK(st->ops->get(st, "completed", &p, &n, &version, &found));
        ck_assert_msg(found, "no completion record under \"%s\"", prefix);
        /* the record names the unit's own job */
        char job_name[96];
        snprintf(job_name, sizeof job_name, "%s-unit-%d", app, i);
        ck_assert_ptr_nonnull(memmem(p, n, job_name, strlen(job_name)));
        free(p);
        free(version);
        char **names;
        size_t count;
        TPC_TEST_OK(st->ops->list(st, "chk-", &names, &count));
        ck_assert_uint_gt(count, 0);
        tpc_storage_names_free(names, count);
        tpc_storage_destroy(st);
    }
    /* under the application's prefix, nothing but the units' own */
    char under[128];
    snprintf(under, sizeof under, "%s/", base);
    tpc_s3_config_t conf = {
        .endpoint = local_s3.endpoint, .bucket = S3_BUCKET, .prefix = under, .region = "us-east-1"};
    tpc_storage_t *st;
    TPC_TEST_OK(tpc_s3_storage_new(&conf, &st));
    char **names;
    size_t count;
    TPC_TEST_OK(st->ops->list(st, "", &names, &count));
    ck_assert_uint_gt(count, 2);
    for (size_t i = 0; i < count; i++)
        ck_assert_msg(strncmp(names[i], "unit-0/", 7) == 0 || strncmp(names[i], "unit-1/", 7) == 0,
                      "\"%s%s\" is no unit's", under, names[i]);
    tpc_storage_names_free(names, count);
    tpc_storage_destroy(st);

    /* a build that gives the job a storage of its own is told that the runner does */
    TPC_TEST_OK(tpc_cluster_set_builder(c, build_own_storage, NULL, &seq));
    tpc__unit_t u;
    TPC_TEST_OK(tpc__unit_init(c, 0, &u));
    tpc_job_t *job;
    void *resources;
    tpc_error_t *err = tpc__unit_build(&u, &job, &resources);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_STATE);
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc__unit_free(&u);
    tpc_cluster_destroy(c);
}
END_TEST

int main(void)
{
    /* moto takes any credentials; the job reads them from the environment */
    setenv("AWS_ACCESS_KEY_ID", "twopc-test", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "twopc-test-secret", 1);
    tpc_test_s3_start(&local_s3, "check_cluster_storage", S3_BUCKET);
    Suite *s = suite_create("cluster_storage");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_folder);
    tcase_add_test(tc, test_s3_prefix);
    tcase_add_test(tc, test_s3_keys);
    tcase_add_test(tc, test_s3_units_apart);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tpc_test_s3_stop(&local_s3, "check_cluster_storage");
    return failed ? 1 : 0;
}
