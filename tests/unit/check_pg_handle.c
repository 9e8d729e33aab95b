/*
 * The PostgreSQL sink's transaction handles as a checkpoint gives them back: a handle the sink
 * wrote comes back whole, and one whose lengths or numbers no sink could have written (a gid
 * longer than a gid can be, a length that disagrees with the bytes, a subtask outside its
 * parallelism) is refused as corrupt instead of being copied into the transaction.
 */
#include "pg_internal.h"
#include "tpc_test_check.h"
#include "txn_internal.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define HANDLE_FIXED 26 /* version, subtask, parallelism, two checkpoints, gid length */

/* A handle as the sink writes it, for @gid of @glen bytes ('g' repeated). */
static size_t make_handle(unsigned char *b, size_t glen, uint32_t subtask, uint32_t parallelism)
{
    unsigned char *p = b;
    tpc_txn_put_be(&p, 1, 1);
    tpc_txn_put_be(&p, subtask, 4);
    tpc_txn_put_be(&p, parallelism, 4);
    tpc_txn_put_be(&p, 7, 8);
    tpc_txn_put_be(&p, 8, 8);
    tpc_txn_put_be(&p, glen, 1);
    memset(p, 'g', glen);
    return HANDLE_FIXED + glen;
}

static void expect_corrupt(const unsigned char *b, size_t len, const char *says)
{
    void *txn = NULL;
    tpc_error_t *err = tpc__pg_ops.deserialize(NULL, b, len, &txn);
    ck_assert_msg(err != NULL, "a corrupt handle of %zu bytes was accepted", len);
    ck_assert_ptr_null(txn);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
    ck_assert_msg(strstr(tpc_error_message(err), says), "message: %s", tpc_error_message(err));
    tpc_error_destroy(err);
}

START_TEST(test_written_handle_comes_back)
{
    tpc__pg_txn_t t = {.subtask = 2, .parallelism = 3, .begin_ckpt = 41, .ckpt = 42};
    strcpy(t.gid, "orders:2:3:41");
    tpc_txn_buf_t buf = {0};
    TPC_TEST_OK(tpc__pg_ops.serialize(NULL, &t, &buf));
    void *txn = NULL;
    TPC_TEST_OK(tpc__pg_ops.deserialize(NULL, buf.data, buf.len, &txn));
    const tpc__pg_txn_t *back = txn;
    ck_assert_str_eq(back->gid, "orders:2:3:41");
    ck_assert_int_eq(back->subtask, 2);
    ck_assert_int_eq(back->parallelism, 3);
    ck_assert_uint_eq(back->begin_ckpt, 41);
    ck_assert_uint_eq(back->ckpt, 42);
    tpc__pg_ops.free_txn(NULL, txn);
    tpc__txn_buf_free(&buf);
}
END_TEST

START_TEST(test_staged_handle_comes_back)
{
    tpc__pg_txn_t t = {.subtask = 1,
                       .parallelism = 2,
                       .begin_ckpt = 9,
                       .ckpt = 10,
                       .kind = TPC__PG_TXN_STAGED,
                       .parts = 3,
                       .staged_rows = 70000,
                       .has_layout = true,
                       .layout_mode = 3,
                       .layout = 0x0123456789abcdefull};
    strcpy(t.gid, "orders:1:2:9");
    tpc_txn_buf_t buf = {0};
    TPC_TEST_OK(tpc__pg_ops.serialize(NULL, &t, &buf));
    void *txn = NULL;
    TPC_TEST_OK(tpc__pg_ops.deserialize(NULL, buf.data, buf.len, &txn));
    const tpc__pg_txn_t *back = txn;
    ck_assert_str_eq(back->gid, "orders:1:2:9");
    ck_assert_int_eq(back->kind, TPC__PG_TXN_STAGED);
    ck_assert_uint_eq(back->parts, 3);
    ck_assert_uint_eq(back->staged_rows, 70000);
    ck_assert(back->has_layout);
    ck_assert_int_eq(back->layout_mode, 3);
    ck_assert_uint_eq(back->layout, 0x0123456789abcdefull);
    ck_assert_uint_eq(back->ckpt, 10);
    tpc__pg_ops.free_txn(NULL, txn);
    /* Cut short by a byte, it is refused. */
    expect_corrupt(buf.data, buf.len - 1, "length");
    tpc_txn_handle_view_t v = {0};
    tpc_txn_describe_handle(tpc_pg_sink_ops(), buf.data, buf.len, &v);
    ck_assert_str_eq(v.line, "orders:1:2:9 (write-ahead)");
    tpc__txn_buf_free(&buf);
}
END_TEST

START_TEST(test_longest_gid_comes_back)
{
    unsigned char b[HANDLE_FIXED + 255];
    size_t len = make_handle(b, TPC_PG_GID_MAX, 0, 1);
    void *txn = NULL;
    TPC_TEST_OK(tpc__pg_ops.deserialize(NULL, b, len, &txn));
    ck_assert_uint_eq(strlen(((const tpc__pg_txn_t *)txn)->gid), TPC_PG_GID_MAX);
    tpc__pg_ops.free_txn(NULL, txn);
}
END_TEST

/* A gid length byte above 199 once overflowed the 200-byte gid of the restored transaction. */
START_TEST(test_gid_longer_than_a_gid_refused)
{
    unsigned char b[HANDLE_FIXED + 255];
    for (size_t glen = TPC_PG_GID_MAX + 1; glen <= 255; glen++)
        expect_corrupt(b, make_handle(b, glen, 0, 1), "gid length");
}
END_TEST

START_TEST(test_inconsistent_handles_refused)
{
    unsigned char b[HANDLE_FIXED + 255];
    size_t len = make_handle(b, 10, 0, 1);
    expect_corrupt(b, len - 1, "does not match");
    expect_corrupt(b, make_handle(b, 0, 0, 1), "gid length 0");
    len = make_handle(b, 10, 0, 1);
    b[HANDLE_FIXED + 3] = '\0';
    expect_corrupt(b, len, "does not match");
    expect_corrupt(b, make_handle(b, 10, 3, 3), "subtask");
    expect_corrupt(b, make_handle(b, 10, 0, 0), "subtask");
    expect_corrupt(b, make_handle(b, 10, 0, 0x80000000u), "subtask");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pg_handle");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_written_handle_comes_back);
    tcase_add_test(tc, test_staged_handle_comes_back);
    tcase_add_test(tc, test_longest_gid_comes_back);
    tcase_add_test(tc, test_gid_longer_than_a_gid_refused);
    tcase_add_test(tc, test_inconsistent_handles_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
