/*
 * The property tables (tpc_props.h) are the one source of every key: each row is well formed, each
 * default is accepted by its own row, every bad value is refused in the one message shape, and
 * docs/configuration.md is exactly what `twopc config` (tools/cmd_config.c) makes of the tables.
 */
#include "tpc_cluster.h"
#include "tpc_file.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const tpc_props_t *table(int i)
{
    switch (i) {
    case 0:
        return tpc_job_properties();
    case 1:
        return tpc_txn_sink_properties();
    case 2:
        return tpc_file_sink_properties();
    case 3:
        return tpc_pg_sink_properties();
    case 4:
        return tpc_kafka_sink_properties();
    case 5:
        return tpc_kafka_source_properties();
    default:
        return tpc_cluster_properties();
    }
}
#define NTABLES 7

START_TEST(test_rows_well_formed)
{
    for (int t = 0; t < NTABLES; t++) {
        const tpc_props_t *tb = table(t);
        ck_assert_ptr_nonnull(tb);
        ck_assert_msg(tb->count > 0 && tb->component && tb->setter, "table %d", t);
        for (size_t i = 0; i < tb->count; i++) {
            const tpc_prop_t *p = &tb->props[i];
            ck_assert_msg(p->name && *p->name && p->doc && *p->doc, "%s row %zu", tb->component, i);
            ck_assert_msg(tpc_props_find(tb, p->name) == p, "%s: \"%s\" twice", tb->component,
                          p->name);
            if (p->type == TPC_PROP_INT)
                ck_assert_msg(p->min <= p->max && p->field.size >= 4, "%s", p->name);
            if (p->type == TPC_PROP_ENUM)
                ck_assert_msg(p->choices && p->choices[0] && p->choices[1], "%s", p->name);
            if (p->type == TPC_PROP_CUSTOM)
                ck_assert_msg(p->set && p->accepts, "%s", p->name);
        }
    }
}
END_TEST

/* Every default is a value its own key accepts: set through the public setters. */
START_TEST(test_defaults_accepted)
{
    tpc_job_t *job = tpc_job_new("defaults");
    ck_assert_ptr_nonnull(job);
    for (size_t i = 0; i < tpc_job_properties()->count; i++) {
        const tpc_prop_t *p = &tpc_job_properties()->props[i];
        if (p->def) {
            tpc_error_t *err = tpc_job_set(job, p->name, p->def);
            ck_assert_msg(!err, "%s=%s: %s", p->name, p->def, err ? tpc_error_message(err) : "");
        }
    }
    tpc_job_destroy(job);
    tpc_kafka_source_t *src = NULL;
    ck_assert_ptr_null(tpc_kafka_source_new("127.0.0.1:9", "t", &src));
    for (size_t i = 0; i < tpc_kafka_source_properties()->count; i++) {
        const tpc_prop_t *p = &tpc_kafka_source_properties()->props[i];
        if (p->def)
            ck_assert_ptr_null(tpc_kafka_source_set(src, p->name, p->def));
    }
    tpc_kafka_source_destroy(src);
    tpc_cluster_t *member = NULL;
    ck_assert_ptr_null(tpc_cluster_new("127.0.0.1:9", "app", 4, &member));
    for (size_t i = 0; i < tpc_cluster_properties()->count; i++) {
        const tpc_prop_t *p = &tpc_cluster_properties()->props[i];
        if (p->def)
            ck_assert_ptr_null(tpc_cluster_set(member, p->name, p->def));
    }
    tpc_cluster_destroy(member);
    tpc_txn_sink_t *sinks[3] = {NULL};
    ck_assert_ptr_null(tpc_pg_sink_new(&sinks[0]));
    ck_assert_ptr_null(tpc_kafka_sink_new("127.0.0.1:9", "t", &sinks[1]));
    ck_assert_ptr_null(tpc_file_sink_new(".", &sinks[2]));
    const tpc_props_t *own[3] = {tpc_pg_sink_properties(), tpc_kafka_sink_properties(),
                                 tpc_file_sink_properties()};
    for (int s = 0; s < 3; s++) {
        const tpc_props_t *tabs[2] = {tpc_txn_sink_properties(), own[s]};
        for (int t = 0; t < 2; t++)
            for (size_t i = 0; i < tabs[t]->count; i++) {
                const tpc_prop_t *p = &tabs[t]->props[i];
                if (!p->def)
                    continue;
                tpc_error_t *err = tpc_txn_sink_set(sinks[s], p->name, p->def);
                ck_assert_msg(!err, "%s=%s: %s", p->name, p->def,
                              err ? tpc_error_message(err) : "");
            }
        tpc_txn_sink_destroy(sinks[s]);
    }
}
END_TEST

/* A value out of range gets the one shape: the key and the value in the message, and a hint
 * that says what the key takes, made from the row. */
START_TEST(test_message_shape)
{
    tpc_job_t *job = tpc_job_new("shape");
    tpc_error_t *err = tpc_job_set(job, "checkpoint.max-concurrent", "65");
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    ck_assert_str_eq(tpc_error_message(err),
                     "invalid value \"65\" for \"checkpoint.max-concurrent\"");
    ck_assert_str_eq(tpc_error_hint_text(err),
                     "\"checkpoint.max-concurrent\" takes a whole number from 1 to 64");
    tpc_error_destroy(err);
    err = tpc_job_set(job, "restore.mode", "latest");
    ck_assert_str_eq(tpc_error_hint_text(err), "\"restore.mode\" takes auto, fresh or required");
    tpc_error_destroy(err);
    err = tpc_job_set(job, "checkpoint.timeout.ms", "0");
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "(ms)"));
    tpc_error_destroy(err);
    err = tpc_job_set(job, "checkpoint.intervall.ms", "1");
    ck_assert_str_eq(tpc_error_message(err),
                     "unknown configuration key \"checkpoint.intervall.ms\" for a job");
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "checkpoint.interval.ms"));
    tpc_error_destroy(err);
    tpc_job_destroy(job);

    /* A secret's value never appears. */
    tpc_txn_sink_t *pg = NULL;
    ck_assert_ptr_null(tpc_pg_sink_new(&pg));
    err = tpc_txn_sink_set(pg, "pg.conninfo", "password=hunter2 host='unterminated");
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_null(strstr(tpc_error_message(err), "hunter2"));
    tpc_error_destroy(err);
    /* A table name the server could never resolve is refused when set, not at open. */
    static const char *const bad_names[] = {"a.b.c", ".t", "s.", ""};
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        err = tpc_txn_sink_set(pg, "pg.table", bad_names[i]);
        ck_assert_msg(err && tpc_error_code(err) == TPC_ERR_CONFIG, "pg.table=\"%s\"",
                      bad_names[i]);
        ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "schema.table"));
        tpc_error_destroy(err);
    }
    ck_assert_ptr_null(tpc_txn_sink_set(pg, "pg.table", "app.events"));
    /* A key of another connector is unknown here, and the hint lists this sink's keys. */
    err = tpc_txn_sink_set(pg, "file.prefix", "x");
    ck_assert_str_eq(tpc_error_message(err),
                     "unknown configuration key \"file.prefix\" for a postgres sink");
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "pg.conninfo"));
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "guarantee"));
    tpc_error_destroy(err);
    tpc_txn_sink_destroy(pg);
}
END_TEST

/* docs/configuration.md is the generated page, byte for byte. */
START_TEST(test_docs_match_tables)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert(n > 0);
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    ck_assert_ptr_nonnull(slash);
    *slash = '\0';
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd, "'%s/../bin/twopc' config --check docs/configuration.md", self);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "%s: exit status %d", cmd, rc);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_doc");
    TCase *tc = tcase_create("tables");
    tcase_add_test(tc, test_rows_well_formed);
    tcase_add_test(tc, test_defaults_accepted);
    tcase_add_test(tc, test_message_shape);
    tcase_add_test(tc, test_docs_match_tables);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
