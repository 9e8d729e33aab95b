/*
 * The Kafka sink's transaction handles as a checkpoint gives them back: a handle the sink wrote
 * comes back whole, byte for byte, with the coordinator's start time that names its transaction;
 * one of version 1 (no start time) is read as unnamed and written back as version 2; one whose
 * transactional id holds a NUL byte (found by fuzz_txn_handle) is refused as corrupt, since the id
 * would be read cut short: a recovery would end the transaction of another id, or of none when the
 * id starts with NUL (it would look like an empty transaction). A start time below -1, an unknown
 * version or a wrong length is refused too. The transactional ids: `<prefix>-<subtask>-<n>` without
 * owners, `<prefix>-e<epoch>-<subtask>-<n>` under an owner epoch, and the epoch read back from
 * both.
 */
#include "kafka_sink_internal.h"
#include "tpc_test_check.h"
#include "txn_internal.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HANDLE_FIXED 29 /* version, producer id, epoch, two checkpoints, id length */

static size_t make_handle_v(unsigned char *b, int version, const char *id, size_t idlen,
                            int64_t start_ms)
{
    unsigned char *p = b;
    tpc_txn_put_be(&p, (uint64_t)version, 1);
    tpc_txn_put_be(&p, 4711, 8);
    tpc_txn_put_be(&p, 3, 2);
    tpc_txn_put_be(&p, 7, 8);
    tpc_txn_put_be(&p, 6, 8);
    tpc_txn_put_be(&p, idlen, 2);
    memcpy(p, id, idlen);
    p += idlen;
    if (version >= 2)
        tpc_txn_put_be(&p, (uint64_t)start_ms, 8);
    return (size_t)(p - b);
}

static size_t make_handle(unsigned char *b, const char *id, size_t idlen)
{
    return make_handle_v(b, 1, id, idlen, -1);
}

/* Deserialize @b, check its description, serialize it into @out. */
static void read_back(const unsigned char *b, size_t len, const char *name, tpc_txn_buf_t *out)
{
    void *txn = NULL;
    TPC_TEST_OK(tpc__kafka_ops.deserialize(NULL, b, len, &txn));
    char got[256];
    tpc__kafka_ops.describe(NULL, txn, got, sizeof got);
    ck_assert_str_eq(got, name);
    TPC_TEST_OK(tpc__kafka_ops.serialize(NULL, txn, out));
    tpc__kafka_ops.free_txn(NULL, txn);
}

START_TEST(test_handle_round_trip)
{
    unsigned char b[128];
    /* 2026-12-04T10:00:00.123Z */
    size_t len = make_handle_v(b, 2, "orders-tx-0-3", 13, 1796378400123);
    tpc_txn_buf_t out = {0};
    read_back(b, len, "orders-tx-0-3 (producer id 4711, epoch 3, begun 2026-12-04T10:00:00.123Z)",
              &out);
    ck_assert_uint_eq(out.len, len);
    ck_assert_int_eq(memcmp(out.data, b, len), 0);
    tpc__txn_buf_free(&out);
}
END_TEST

START_TEST(test_version_1_read_as_unnamed)
{
    unsigned char b[128], v2[128];
    size_t len = make_handle(b, "orders-tx-0-3", 13);
    tpc_txn_buf_t out = {0};
    read_back(b, len, "orders-tx-0-3 (producer id 4711, epoch 3)", &out);
    size_t len2 = make_handle_v(v2, 2, "orders-tx-0-3", 13, -1);
    ck_assert_uint_eq(out.len, len2);
    ck_assert_int_eq(memcmp(out.data, v2, len2), 0);
    tpc__txn_buf_free(&out);
}
END_TEST

START_TEST(test_bad_version_start_or_length_refused)
{
    size_t lens[4];
    unsigned char handles[4][128];
    lens[0] = make_handle_v(handles[0], 2, "orders-tx-0-3", 13, -2);
    lens[1] = make_handle_v(handles[1], 3, "orders-tx-0-3", 13, 5);
    lens[2] = make_handle_v(handles[2], 2, "orders-tx-0-3", 13, 5) - 1;
    lens[3] = make_handle(handles[3], "orders-tx-0-3", 13) + 8; /* v1 with trailing bytes */
    for (int i = 0; i < 4; i++) {
        void *txn = NULL;
        tpc_error_t *err = tpc__kafka_ops.deserialize(NULL, handles[i], lens[i], &txn);
        ck_assert_msg(err != NULL, "handle %d was accepted", i);
        ck_assert_ptr_null(txn);
        ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
        tpc_error_destroy(err);
    }
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

/* A job without owners keeps its ids; an owner's carry its epoch, and each form reads back. */
START_TEST(test_ids_of_owner_epochs)
{
    tpc__kafka_conf_t conf = {.id_prefix = "app-x.1"};
    tpc_txn_subtask_t st = {.subtask = 2, .owner_epoch = 0};
    tpc__kafka_sub_t c = {.conf = &conf, .st = &st};
    char id[TPC__KAFKA_ID_MAX];
    uint64_t e = 99;
    tpc__kafka_slot_id(&c, 5, id, sizeof id);
    ck_assert_str_eq(id, "app-x.1-2-5");
    ck_assert(tpc__kafka_id_epoch(&c, id, &e));
    ck_assert_uint_eq(e, 0);
    st.owner_epoch = 17;
    tpc__kafka_slot_id(&c, 5, id, sizeof id);
    ck_assert_str_eq(id, "app-x.1-e17-2-5");
    ck_assert(tpc__kafka_id_epoch(&c, id, &e));
    ck_assert_uint_eq(e, 17);
    tpc__kafka_id_of(&c, 16, 0, 1, id, sizeof id);
    ck_assert_str_eq(id, "app-x.1-e16-0-1");
    ck_assert(!tpc__kafka_id_epoch(&c, "other-e1-0-0", &e));
    ck_assert(!tpc__kafka_id_epoch(&c, "app-x.1-ex-0-0", &e));
    ck_assert(!tpc__kafka_id_epoch(&c, "app-x.1-e99999999999999999999999-0-0", &e));
    ck_assert(!tpc__kafka_id_epoch(&c, "app-x.10-0-0", &e));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_handle");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_handle_round_trip);
    tcase_add_test(tc, test_version_1_read_as_unnamed);
    tcase_add_test(tc, test_bad_version_start_or_length_refused);
    tcase_add_test(tc, test_id_with_nul_refused);
    tcase_add_test(tc, test_ids_of_owner_epochs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
