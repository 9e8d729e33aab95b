/*
 * Graceful hand-off of units between the members of an application, against the real broker:
 * member A runs all four units, B joins and takes some over, C joins, A leaves, B leaves, and C
 * ends every unit's input. Each unit must never be open on two members at once, a revoked unit
 * must be released after a savepoint that its next owner restores, and the committed output of
 * every unit must hold each of its records exactly once.
 *
 * Run with the classic protocol (cooperative-sticky, static membership) and, with librdkafka 2.12
 * or later, with KIP-848's (group.protocol=consumer); an older librdkafka must refuse the latter.
 */
#include "check_cluster_common.h"

#include <librdkafka/rdkafka.h>
#include <sys/stat.h>

#define UNITS 4

static void handoff(bool consumer_protocol)
{
    ct_world_t *w = calloc(1, sizeof *w);
    w->per_poll = 10;
    w->sleep_us = 10000;
    char *dir = tpc_test_tmpdir("cluster");
    char app[128];
    tpc_test_unique_name(app, sizeof app, "handoff", '-');
    snprintf(w->out_dir, sizeof w->out_dir, "%s/out", dir);
    ck_assert_int_eq(mkdir(w->out_dir, 0755), 0);
    char chk[512];
    snprintf(chk, sizeof chk, "%s/chk", dir);

    ct_member_t *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *c = calloc(1, sizeof *c);
    ct_member_start(a, w, "a", app, chk, UNITS, consumer_protocol);
    CT_WAIT_FOR(atomic_load(&a->running) == UNITS);
    usleep(1000 * 1000); /* a few checkpoints on A */

    ct_member_start(b, w, "b", app, chk, UNITS, consumer_protocol);
    CT_WAIT_FOR(atomic_load(&b->running) > 0 &&
                atomic_load(&a->running) + atomic_load(&b->running) == UNITS);
    ck_assert_int_gt(atomic_load(&a->released), 0);
    usleep(1000 * 1000);

    ct_member_start(c, w, "c", app, chk, UNITS, consumer_protocol);
    CT_WAIT_FOR(atomic_load(&c->running) > 0 &&
                atomic_load(&a->running) + atomic_load(&b->running) + atomic_load(&c->running) ==
                    UNITS);
    usleep(1000 * 1000);

    ct_member_end(a);
    CT_WAIT_FOR(atomic_load(&b->running) + atomic_load(&c->running) == UNITS);
    usleep(1000 * 1000);
    ct_member_end(b);
    CT_WAIT_FOR(atomic_load(&c->running) == UNITS);

    /* C runs every unit now: end the input and let each unit's job finish. */
    int opens[UNITS];
    for (int u = 0; u < UNITS; u++)
        opens[u] = atomic_load(&w->opens[u]);
    atomic_store(&w->finish, true);
    CT_WAIT_FOR(atomic_load(&c->finished) >= UNITS);
    ct_member_end(c);

    for (int u = 0; u < UNITS; u++) {
        ck_assert_msg(atomic_load(&w->most_live[u]) == 1, "unit %d was open on %d members at once",
                      u, atomic_load(&w->most_live[u]));
        ct_verify_unit(w, app, u);
    }
    int releases = atomic_load(&a->released) + atomic_load(&b->released);
    ck_assert_msg(releases >= UNITS, "only %d releases by the members that left", releases);
    ck_assert_int_eq(atomic_load(&a->released_without_savepoint) +
                         atomic_load(&b->released_without_savepoint),
                     0);
    ck_assert_int_eq(atomic_load(&a->lost) + atomic_load(&b->lost) + atomic_load(&c->lost), 0);
    ck_assert_int_eq(atomic_load(&a->failed) + atomic_load(&b->failed) + atomic_load(&c->failed),
                     0);
    ck_assert_int_eq(atomic_load(&a->fenced) + atomic_load(&b->fenced) + atomic_load(&c->fenced),
                     0);
    /* Every hand-off resumed from the savepoint its releaser took. */
    ck_assert_int_eq(atomic_load(&w->savepoint_misses), 0);
    ck_assert_int_ge(atomic_load(&w->savepoint_restores), UNITS);
    fprintf(
        stderr,
        "handoff (%s): releases %d, savepoints restored %d, opens %d %d %d %d, ends %llu "
        "%llu %llu %llu\n",
        consumer_protocol ? "consumer" : "classic", releases, atomic_load(&w->savepoint_restores),
        opens[0], opens[1], opens[2], opens[3], (unsigned long long)atomic_load(&w->end[0]),
        (unsigned long long)atomic_load(&w->end[1]), (unsigned long long)atomic_load(&w->end[2]),
        (unsigned long long)atomic_load(&w->end[3]));
    free(a);
    free(b);
    free(c);
    tpc_test_rmdir(dir);
    free(dir);
    free(w);
}

START_TEST(test_handoff_classic)
{
    handoff(false);
}
END_TEST

START_TEST(test_handoff_consumer_protocol)
{
    if (rd_kafka_version() >= 0x020c0000) {
        handoff(true);
        return;
    }
    /* An older librdkafka has no KIP-848 consumer: refused, by name. */
    tpc_cluster_t *c = NULL;
    TPC_TEST_OK(tpc_cluster_new(tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP"), "old", 2, &c));
    TPC_TEST_OK(tpc_cluster_set(c, "checkpoint.dir", "unused"));
    TPC_TEST_OK(tpc_cluster_set(c, "group.protocol", "consumer"));
    ct_world_t w = {0};
    TPC_TEST_OK(tpc_cluster_set_builder(c, ct_build, ct_release, &w));
    tpc_error_t *err = tpc_cluster_run(c);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tpc_error_message(err), "librdkafka 2.12"));
    fprintf(stderr, "librdkafka %s: %s\n", rd_kafka_version_str(), tpc_error_message(err));
    tpc_error_destroy(err);
    tpc_cluster_destroy(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_handoff");
    TCase *tc = tcase_create("handoff");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_handoff_classic);
    tcase_add_test(tc, test_handoff_consumer_protocol);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
