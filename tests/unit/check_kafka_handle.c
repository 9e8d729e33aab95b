/*
 * The Kafka sink's transaction handles as a checkpoint gives them back: a handle the sink wrote
 * comes back whole, byte for byte; one whose transactional id holds a NUL byte (found by
 * fuzz_txn_handle) is refused as corrupt, since the id would be read cut short: a recovery would
 * end the transaction of another id, or of none when the id starts with NUL (it would look like an
 * empty transaction).
 */
#include "kafka_sink_internal.h"
#include "tpc_test_check.h"
#include "txn_internal.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define HANDLE_FIXED 29 /* version, producer id, epoch, two checkpoints, id length */

static size_t make_handle(unsigned char *b, const char *id, size_t idlen)
{
    unsigned char *p = b;
    tpc_txn_put_be(&p, 1, 1);
    tpc_txn_put_be(&p, 4711, 8);
    tpc_txn_put_be(&p, 3, 2);
    tpc_txn_put_be(&p, 7, 8);
    tpc_txn_put_be(&p, 6, 8);
    tpc_txn_put_be(&p, idlen, 2);
    memcpy(p, id, idlen);
    return HANDLE_FIXED + idlen;
}

START_TEST(test_handle_round_trip)
{
    unsigned char b[128];
    size_t len = make_handle(b, "orders-tx-0-3", 13);
    void *txn = NULL;
    TPC_TEST_OK(tpc__kafka_ops.deserialize(NULL, b, len, &txn));
    char name[128];
    tpc__kafka_ops.describe(NULL, txn, name, sizeof name);
    ck_assert_str_eq(name, "orders-tx-0-3 (producer id 4711, epoch 3)");
    tpc_txn_buf_t out = {0};
    TPC_TEST_OK(tpc__kafka_ops.serialize(NULL, txn, &out));
    ck_assert_uint_eq(out.len, len);
    ck_assert_int_eq(memcmp(out.data, b, len), 0);
    tpc__txn_buf_free(&out);
    tpc__kafka_ops.free_txn(NULL, txn);
}
END_TEST

START_TEST(test_id_with_nul_refused)
{
    static const struct {
        const char *id;
        size_t len;
    } ids[] = {{"orders-tx-0-3\0x", 15}, {"\0rders-tx-0-3", 13}, {"\0", 1}};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        unsigned char b[128];
        size_t len = make_handle(b, ids[i].id, ids[i].len);
        void *txn = NULL;
        tpc_error_t *err = tpc__kafka_ops.deserialize(NULL, b, len, &txn);
        ck_assert_msg(err != NULL, "an id of %zu bytes with a NUL was accepted", ids[i].len);
        ck_assert_ptr_null(txn);
        ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
        tpc_error_destroy(err);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_handle");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_handle_round_trip);
    tcase_add_test(tc, test_id_with_nul_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
