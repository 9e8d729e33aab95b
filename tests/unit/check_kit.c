/*
 * The connector kit (tpc_kit.h): backoff pauses double up to their cap and never pass the
 * deadline, a cancel cuts a long sleep short within a slice, and the clocks move as they should.
 */
#include "tpc_kit.h"
#include "tpc_txn.h"

#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_backoff_doubles_to_cap_and_stops_at_deadline)
{
    tpc_backoff_t b;
    int64_t t0 = tpc_clock_ms();
    tpc_backoff_init(&b, t0 + 200, 10, 40);
    int64_t pauses[16];
    int n = 0;
    while (n < 16) {
        pauses[n] = tpc_backoff_next_ms(&b);
        if (!tpc_backoff_wait(&b, NULL, NULL))
            break;
        n++;
    }
    ck_assert_msg(n >= 4, "only %d pauses", n);
    ck_assert_int_eq(pauses[0], 10);
    ck_assert_int_eq(pauses[1], 20);
    ck_assert_int_eq(pauses[2], 40);
    ck_assert_int_eq(pauses[3], 40); /* capped */
    ck_assert_int_eq(b.retries, n);
    ck_assert(!b.canceled);
    int64_t took = tpc_clock_ms() - t0;
    ck_assert_msg(took <= 200 + 25, "slept %lld ms past a 200 ms deadline", (long long)took);
    ck_assert_msg(took >= 10 + 20 + 40, "slept only %lld ms", (long long)took);
}
END_TEST

static atomic_int asked;

static bool cancel_after_three(void *arg)
{
    (void)arg;
    return atomic_fetch_add(&asked, 1) >= 3;
}

START_TEST(test_cancel_cuts_sleep_short)
{
    atomic_store(&asked, 0);
    int64_t t0 = tpc_clock_ms();
    ck_assert(!tpc_sleep_ms(10000, cancel_after_three, NULL));
    ck_assert_msg(tpc_clock_ms() - t0 < 1000, "a cancel waited %lld ms",
                  (long long)(tpc_clock_ms() - t0));
    tpc_backoff_t b;
    atomic_store(&asked, 0);
    tpc_backoff_init(&b, tpc_clock_ms() + 60000, 5000, 5000);
    ck_assert(!tpc_backoff_wait(&b, cancel_after_three, NULL));
    ck_assert(b.canceled);
    ck_assert_int_eq(b.retries, 0);
    ck_assert(tpc_sleep_ms(30, NULL, NULL));
    ck_assert(tpc_sleep_ms(0, NULL, NULL));
}
END_TEST

START_TEST(test_clocks)
{
    int64_t wall = tpc_wall_ms();
    ck_assert_msg(wall > 1600000000000LL, "wall clock %lld", (long long)wall);
    int64_t a = tpc_clock_ms();
    tpc_sleep_ms(15, NULL, NULL);
    ck_assert_int_ge(tpc_clock_ms() - a, 15);
    ck_assert(!tpc_txn_subtask_canceled(NULL));
}
END_TEST

START_TEST(test_byte_order)
{
    /* Known layouts: network order puts the high byte first, the checkpoint files the low one. */
    unsigned char p[8];
    tpc_store_be(p, 0x0102030405060708u, 8);
    static const unsigned char be[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ck_assert_mem_eq(p, be, 8);
    ck_assert_uint_eq(tpc_load_be(p, 8), 0x0102030405060708u);
    ck_assert_uint_eq(tpc_load_be(p, 2), 0x0102u);
    tpc_store_le(p, 0x0102030405060708u, 8);
    static const unsigned char le[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    ck_assert_mem_eq(p, le, 8);
    ck_assert_uint_eq(tpc_load_le(p, 4), 0x05060708u);
    /* Every width keeps exactly its low bytes, and writes no byte past them. */
    for (int n = 1; n <= 8; n++) {
        unsigned char q[9];
        memset(q, 0xee, sizeof q);
        uint64_t v = 0xf1e2d3c4b5a69788u, mask = n == 8 ? UINT64_MAX : (1ull << (8 * n)) - 1;
        tpc_store_be(q, v, n);
        ck_assert_uint_eq(tpc_load_be(q, n), v & mask);
        ck_assert_uint_eq(q[n], 0xee);
        tpc_store_le(q, v, n);
        ck_assert_uint_eq(tpc_load_le(q, n), v & mask);
        ck_assert_uint_eq(q[n], 0xee);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kit");
    TCase *tc = tcase_create("kit");
    tcase_add_test(tc, test_backoff_doubles_to_cap_and_stops_at_deadline);
    tcase_add_test(tc, test_cancel_cuts_sleep_short);
    tcase_add_test(tc, test_clocks);
    tcase_add_test(tc, test_byte_order);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
