/*
 * The Kafka source's checkpoint entries and its ownership rule, both part of the checkpoint
 * format: an entry of format 1 (written before partition discovery) still reads as the same
 * position; what format 2 writes reads back whole, also the offset "first offset, nothing read
 * yet" and the floor entries; the rule gives each partition one subtask, the documented one.
 */
#include "kafka_source_internal.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static size_t put_le(unsigned char *at, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        at[i] = (unsigned char)(v >> (8 * i));
    return (size_t)bytes;
}

/* An entry as version 1 of the source wrote it: version, flags, topic, partition, next, end. */
static size_t v1_entry(unsigned char *b, const char *topic, int32_t p, int64_t next, int64_t end)
{
    size_t n = 0, len = strlen(topic);
    b[n++] = 1;
    b[n++] = end >= 0 ? 1 : 0;
    n += put_le(b + n, len, 2);
    memcpy(b + n, topic, len);
    n += len;
    n += put_le(b + n, (uint32_t)p, 4);
    n += put_le(b + n, (uint64_t)next, 8);
    n += put_le(b + n, (uint64_t)end, 8);
    return n;
}

START_TEST(test_format_1_entries_still_read)
{
    unsigned char b[TPC__KAFKA_SOURCE_ENTRY_MAX];
    tpc__kafka_source_entry_t e;
    size_t n = v1_entry(b, "orders", 3, 1234, -1);
    ck_assert_ptr_null(tpc__kafka_source_decode(b, n, &e));
    ck_assert_int_eq(e.version, 1);
    ck_assert_int_eq((int)e.topic_len, 6);
    ck_assert(memcmp(e.topic, "orders", 6) == 0);
    ck_assert_int_eq(e.partition, 3);
    ck_assert_int_eq(e.next, 1234);
    ck_assert_int_eq(e.end, -1);
    ck_assert(!e.floor);
    n = v1_entry(b, "refunds", 0, 10, 20);
    ck_assert_ptr_null(tpc__kafka_source_decode(b, n, &e));
    ck_assert_int_eq(e.end, 20);
    /* Format 1 had no "first offset" and no floor. */
    n = v1_entry(b, "orders", 0, TPC__KAFKA_FROM_BEGINNING, -1);
    tpc_error_t *err = tpc__kafka_source_decode(b, n, &e);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
    tpc_error_destroy(err);
    b[1] = 2;
    err = tpc__kafka_source_decode(b, n, &e);
    ck_assert_ptr_nonnull(err);
    tpc_error_destroy(err);
}
END_TEST

START_TEST(test_format_2_round_trip)
{
    const tpc__kafka_source_entry_t cases[] = {
        {.topic = "orders-eu", .topic_len = 9, .partition = 7, .next = 99, .end = -1},
        {.topic = "orders-eu", .topic_len = 9, .partition = 8, .next = -2, .end = -1},
        {.topic = "refunds", .topic_len = 7, .partition = 1, .next = 5, .end = 50},
        {.topic = "orders", .topic_len = 6, .partition = 4, .next = 0, .end = -1, .floor = true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char b[TPC__KAFKA_SOURCE_ENTRY_MAX];
        size_t n = tpc__kafka_source_encode(&cases[i], b);
        tpc__kafka_source_entry_t e;
        ck_assert_ptr_null(tpc__kafka_source_decode(b, n, &e));
        ck_assert_int_eq(e.version, 2);
        ck_assert_int_eq((int)e.topic_len, (int)cases[i].topic_len);
        ck_assert(memcmp(e.topic, cases[i].topic, e.topic_len) == 0);
        ck_assert_int_eq(e.partition, cases[i].partition);
        ck_assert_int_eq(e.next, cases[i].next);
        ck_assert_int_eq(e.end, cases[i].end);
        ck_assert_int_eq(e.floor, cases[i].floor);
        /* Cut short, it is corrupt. */
        tpc_error_t *err = tpc__kafka_source_decode(b, n - 1, &e);
        ck_assert_ptr_nonnull(err);
        tpc_error_destroy(err);
    }
}
END_TEST

START_TEST(test_owner_rule)
{
    /* (FNV-1a-32(topic) + partition) mod parallelism: FNV-1a-32("orders") = 845059820. */
    ck_assert_int_eq(tpc__kafka_source_owner("orders", 6, 0, 3), 2);
    ck_assert_int_eq(tpc__kafka_source_owner("orders", 6, 1, 3), 0);
    ck_assert_int_eq(tpc__kafka_source_owner("orders", 6, 2, 3), 1);
    ck_assert_int_eq(tpc__kafka_source_owner("refunds", 7, 0, 3), 0);
    for (int p = 1; p <= 8; p++) {
        int count[8] = {0};
        for (int32_t part = 0; part < 8 * p; part++) {
            int o = tpc__kafka_source_owner("orders", 6, part, p);
            ck_assert(o >= 0 && o < p);
            count[o]++;
        }
        /* Consecutive partitions go to consecutive subtasks: an even spread. */
        for (int o = 0; o < p; o++)
            ck_assert_int_eq(count[o], 8);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_source_state");
    TCase *tc = tcase_create("state");
    tcase_add_test(tc, test_format_1_entries_still_read);
    tcase_add_test(tc, test_format_2_round_trip);
    tcase_add_test(tc, test_owner_rule);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
