/*
 * verify_output, the independent reader behind `make demo` and `make torture`, is only evidence if
 * it fails when it should. Each test writes an output by hand, as exactly_once_pipeline would
 * (records of exactly_once_records.h into a topic with a transactional producer, rows into a
 * table), breaks it on purpose or not, and runs the real program: a correct output passes (records
 * of an aborted transaction do not count), and a duplicate, a missing record, a foreign record or a
 * key out of order each make it say so and exit non-zero, and so does a transaction left open,
 * which hides everything after it from read_committed readers.
 *
 * verify_output --totals, for keyed_totals: per user every running total once and in order in
 * Kafka and the final total in PostgreSQL pass; a repeated, a skipped and a wrong running total,
 * and a final row left at an older total, each make it say so and exit non-zero.
 */
#include "../../examples/keyed_totals_records.h"
#include "check_kafka_common.h"
#include "tpc_test_pg.h"

#include <libgen.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORDS 2000u /* more than the 840 keys: several records per key */

static char verify_bin[4096];

typedef struct {
    char topic[128], table[128];
    rd_kafka_t *producer;
    PGconn *pg;
} output_t;

static void output_open_table(output_t *o, const char *columns)
{
    char errstr[512], txid[160];
    const char *bs = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_ptr_nonnull(bs);
    tpc_test_unique_name(o->topic, sizeof o->topic, "e2e-verify", '-');
    tpc_test_unique_name(o->table, sizeof o->table, "e2e_verify", '_');
    kt_create_topic(bs, o->topic, 2);

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bs);
    kt_set(conf, "transactional.id", tpc_test_unique_name(txid, sizeof txid, "e2e-verify", '-'));
    o->producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(o->producer != NULL, "%s", errstr);
    ck_assert_ptr_null(rd_kafka_init_transactions(o->producer, KT_TIMEOUT_MS));
    ck_assert_ptr_null(rd_kafka_begin_transaction(o->producer));

    o->pg = tpc_test_pg_connect();
    ck_assert_ptr_nonnull(o->pg);
    ck_assert(tpc_test_pg_exec(o->pg, "CREATE TABLE %s (%s)", o->table, columns));
    ck_assert(tpc_test_pg_exec(o->pg, "BEGIN"));
}

static void output_open(output_t *o)
{
    output_open_table(o, "id bigint, k text, v text");
}

/* Record i into the topic when @p message (partition 0, so that the order of a key is the order
 * written) and into the table when @p row. */
static void output_put(output_t *o, uint64_t i, bool message, bool row)
{
    char key[EO_KEY_MAX], value[EO_VALUE_MAX];
    int kl = eo_key(i, EO_DEFAULT_KEYS, key), vl = eo_output_value(i, value);
    if (message)
        ck_assert_int_eq(
            rd_kafka_producev(o->producer, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_PARTITION(0),
                              RD_KAFKA_V_KEY(key, (size_t)kl), RD_KAFKA_V_VALUE(value, (size_t)vl),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
            0);
    if (row)
        ck_assert(tpc_test_pg_exec(o->pg, "INSERT INTO %s VALUES (%llu, '%s', '%s')", o->table,
                                   (unsigned long long)i, key, value));
}

static void output_add(output_t *o, uint64_t i, bool row)
{
    output_put(o, i, true, row);
}

/* Records 0 .. RECORDS-1 into both outputs, leaving out @p skip_kafka and @p skip_pg (RECORDS:
 * none). */
static void output_add_all(output_t *o, uint64_t skip_kafka, uint64_t skip_pg)
{
    for (uint64_t i = 0; i < RECORDS; i++)
        output_put(o, i, i != skip_kafka, i != skip_pg);
}

/* Commit everything written; then run verify_output on it. @returns its exit status, and its
 * standard output in @p out. */
static int output_verify_with(output_t *o, const char *options, char *out, size_t cap)
{
    ck_assert_ptr_null(rd_kafka_commit_transaction(o->producer, KT_TIMEOUT_MS));
    ck_assert(tpc_test_pg_exec(o->pg, "COMMIT"));
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' --records %u --topic %s --table %s --bootstrap '%s' --pg '%s' %s", verify_bin,
             RECORDS, o->topic, o->table, tpc_test_env("TWOPC_TEST_KAFKA_BOOTSTRAP"),
             tpc_test_env("TWOPC_TEST_PG_CONNINFO"), options);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int status = pclose(p);
    ck_assert_msg(WIFEXITED(status), "verify_output did not exit normally:\n%s", out);
    return WEXITSTATUS(status);
}

static int output_verify(output_t *o, char *out, size_t cap)
{
    return output_verify_with(o, "", out, cap);
}

static void output_close(output_t *o)
{
    rd_kafka_destroy(o->producer);
    tpc_test_pg_exec(o->pg, "DROP TABLE IF EXISTS %s", o->table);
    PQfinish(o->pg);
}

/* @returns whether @p out has a line starting with @p label whose two numbers are @p a and @p b. */
static bool has_counts(const char *out, const char *label, unsigned a, unsigned b)
{
    const char *line = strstr(out, label);
    unsigned x, y;
    return line && sscanf(line + strlen(label), " %u %u", &x, &y) == 2 && x == a && y == b;
}

START_TEST(test_correct_output_passes)
{
    output_t o;
    char out[8192];
    output_open(&o);
    output_add_all(&o, RECORDS, RECORDS);
    /* An aborted transaction repeating records is invisible to read_committed readers. */
    ck_assert_ptr_null(rd_kafka_commit_transaction(o.producer, KT_TIMEOUT_MS));
    ck_assert_ptr_null(rd_kafka_begin_transaction(o.producer));
    for (uint64_t i = 0; i < 10; i++)
        output_add(&o, i, false);
    /* Delivered first: an abort racing its own produce requests is refused by the broker now and
     * then (INVALID_TXN_STATE). */
    ck_assert_int_eq(rd_kafka_flush(o.producer, KT_TIMEOUT_MS), 0);
    rd_kafka_error_t *error = rd_kafka_abort_transaction(o.producer, KT_TIMEOUT_MS);
    ck_assert_msg(error == NULL, "abort: %s", rd_kafka_error_string(error));
    ck_assert_ptr_null(rd_kafka_begin_transaction(o.producer));

    int rc = output_verify(&o, out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(has_counts(out, "duplicates", 0, 0) && has_counts(out, "missing", 0, 0), "%s",
                  out);
    ck_assert_ptr_nonnull(strstr(out, "result: every record exactly once"));
    char line[256];
    snprintf(line, sizeof line, "topic: %s\n", o.topic);
    ck_assert_ptr_nonnull(strstr(out, line));
    snprintf(line, sizeof line, "table: %s\n", o.table);
    ck_assert_ptr_nonnull(strstr(out, line));
    output_close(&o);
}
END_TEST

START_TEST(test_duplicate_in_kafka_fails)
{
    output_t o;
    char out[8192];
    output_open(&o);
    output_add_all(&o, RECORDS, RECORDS);
    output_add(&o, RECORDS - 1, false); /* the last record of its key once more: still in order */
    int rc = output_verify(&o, out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(has_counts(out, "duplicates", 0, 1) && has_counts(out, "missing", 0, 0), "%s",
                  out);
    ck_assert_ptr_nonnull(strstr(out, "first duplicates in Kafka: 1999"));
    ck_assert_ptr_nonnull(strstr(out, "result: MISMATCH"));
    output_close(&o);
}
END_TEST

START_TEST(test_duplicate_row_fails)
{
    output_t o;
    char out[8192];
    output_open(&o);
    output_add_all(&o, RECORDS, RECORDS);
    ck_assert(
        tpc_test_pg_exec(o.pg, "INSERT INTO %s SELECT * FROM %s WHERE id = 42", o.table, o.table));
    int rc = output_verify(&o, out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(has_counts(out, "duplicates", 1, 0), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "first duplicates in PostgreSQL: 42"));
    output_close(&o);
}
END_TEST

START_TEST(test_missing_record_fails)
{
    output_t o;
    char out[8192];
    output_open(&o);
    output_add_all(&o, 17, 123); /* 17 missing in Kafka, 123 missing in PostgreSQL */
    int rc = output_verify(&o, out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(has_counts(out, "missing", 1, 1) && has_counts(out, "duplicates", 0, 0), "%s",
                  out);
    ck_assert_ptr_nonnull(strstr(out, "first missing in PostgreSQL: 123"));
    ck_assert_ptr_nonnull(strstr(out, "first missing in Kafka: 17"));
    output_close(&o);
}
END_TEST

START_TEST(test_foreign_and_changed_records_fail)
{
    output_t o;
    char out[8192];
    output_open(&o);
    output_add_all(&o, RECORDS, RECORDS);
    output_add(&o, RECORDS + 5, false); /* beyond the input */
    ck_assert(tpc_test_pg_exec(o.pg, "UPDATE %s SET v = v || 'x' WHERE id = 7", o.table));
    int rc = output_verify(&o, out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(has_counts(out, "not from the input", 0, 1), "%s", out);
    ck_assert_msg(has_counts(out, "wrong key or value", 1, 0), "%s", out);
    output_close(&o);
}
END_TEST

START_TEST(test_open_transaction_fails)
{
    output_t o;
    char out[8192];
    output_open(&o);
    output_add_all(&o, RECORDS, RECORDS);
    ck_assert_ptr_null(rd_kafka_commit_transaction(o.producer, KT_TIMEOUT_MS));
    /* A second producer leaves a transaction open in partition 0, then a record is committed
     * after it: read_committed readers stop at the open one. */
    char errstr[512], txid[160];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", tpc_test_env("TWOPC_TEST_KAFKA_BOOTSTRAP"));
    kt_set(conf, "transactional.id", tpc_test_unique_name(txid, sizeof txid, "e2e-open", '-'));
    rd_kafka_t *open_txn = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(open_txn != NULL, "%s", errstr);
    ck_assert_ptr_null(rd_kafka_init_transactions(open_txn, KT_TIMEOUT_MS));
    ck_assert_ptr_null(rd_kafka_begin_transaction(open_txn));
    ck_assert_int_eq(rd_kafka_producev(open_txn, RD_KAFKA_V_TOPIC(o.topic), RD_KAFKA_V_PARTITION(0),
                                       RD_KAFKA_V_VALUE("x", 1), RD_KAFKA_V_END),
                     0);
    ck_assert_int_eq(rd_kafka_flush(open_txn, KT_TIMEOUT_MS), 0);
    ck_assert_ptr_null(rd_kafka_begin_transaction(o.producer));
    output_add(&o, RECORDS + 1, false);

    int rc = output_verify(&o, out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(
        strstr(out, "Kafka partitions stuck behind a transaction that never ended: 0"));
    rd_kafka_destroy(open_txn);
    output_close(&o);
}
END_TEST

START_TEST(test_key_out_of_order_fails)
{
    output_t o;
    char out[8192];
    output_open(&o);
    /* Two records of key-3 in the wrong order, everything else in order. */
    for (uint64_t i = 0; i < RECORDS; i++)
        if (i != 3)
            output_add(&o, i, true);
    output_add(&o, 3, true);
    int rc = output_verify(&o, out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(has_counts(out, "duplicates", 0, 0) && has_counts(out, "missing", 0, 0), "%s",
                  out);
    const char *line = strstr(out, "out of order within a key");
    unsigned n = 0;
    ck_assert_msg(line && sscanf(line + 25, " - %u", &n) == 1 && n == 1, "%s", out);
    output_close(&o);
}
END_TEST

/* ---- --totals ------------------------------------------------------------------------------ */

#define USERS 30u /* RECORDS / USERS purchases each */

/* The running total of user i % USERS after purchase i, and its purchase count. */
static uint64_t total_after(uint64_t i, uint64_t *n)
{
    uint64_t total = 0;
    *n = 0;
    for (uint64_t j = i % USERS; j <= i; j += USERS)
        total += kt_amount(j), (*n)++;
    return total;
}

/* The Kafka record of purchase i, its total changed by @p delta. */
static void totals_message(output_t *o, uint64_t i, int delta)
{
    char user[KT_USER_MAX], value[KT_VALUE_MAX];
    uint64_t n, total = total_after(i, &n);
    int ul = kt_user(i, USERS, user), vl = kt_output_value(n, total + (uint64_t)delta, value);
    ck_assert_int_eq(rd_kafka_producev(o->producer, RD_KAFKA_V_TOPIC(o->topic),
                                       RD_KAFKA_V_PARTITION(0), RD_KAFKA_V_KEY(user, (size_t)ul),
                                       RD_KAFKA_V_VALUE(value, (size_t)vl),
                                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                     0);
}

/* The final row of every user, as of purchase i for user @p stale_user (USERS: none). */
static void totals_rows(output_t *o, uint32_t stale_user, uint64_t stale_i)
{
    for (uint64_t i = RECORDS - USERS; i < RECORDS; i++) {
        uint64_t at = i % USERS == stale_user ? stale_i : i, n, total = total_after(at, &n);
        char user[KT_USER_MAX];
        kt_user(i, USERS, user);
        ck_assert(tpc_test_pg_exec(o->pg, "INSERT INTO %s VALUES ('%s', %llu, %llu)", o->table,
                                   user, (unsigned long long)n, (unsigned long long)total));
    }
}

START_TEST(test_totals_pass)
{
    output_t o;
    char out[8192];
    output_open_table(&o, "user_id text PRIMARY KEY, n bigint, total bigint");
    for (uint64_t i = 0; i < RECORDS; i++)
        totals_message(&o, i, 0);
    totals_rows(&o, USERS, 0);
    int rc = output_verify_with(&o, "--totals --keys 30", out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(has_counts(out, "duplicates", 0, 0) && has_counts(out, "missing", 0, 0), "%s",
                  out);
    ck_assert_ptr_nonnull(strstr(out, "result: every running total exactly once and in order"));
    output_close(&o);
}
END_TEST

START_TEST(test_totals_repeat_gap_wrong_and_stale_fail)
{
    output_t o;
    char out[8192];
    output_open_table(&o, "user_id text PRIMARY KEY, n bigint, total bigint");
    for (uint64_t i = 0; i < RECORDS; i++) {
        if (i == 200) /* a gap: user 20's 7th total never came */
            continue;
        totals_message(&o, i, i == 300 ? 1 : 0); /* user 0's 11th total is off by one */
        if (i == 100)                            /* user 10's 4th total twice */
            totals_message(&o, i, 0);
    }
    totals_rows(&o, 5, 1955); /* user 5 left at its last-but-one total (its last purchase: 1985) */
    int rc = output_verify_with(&o, "--totals --keys 30", out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(has_counts(out, "duplicates", 0, 1), "%s", out);
    ck_assert_msg(has_counts(out, "missing", 1, 2), "%s", out); /* Kafka: the gap, the wrong one */
    ck_assert_msg(has_counts(out, "wrong key or value", 1, 1), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "first missing in PostgreSQL: 1985"));
    ck_assert_ptr_nonnull(strstr(out, "first missing in Kafka: 200 300"));
    ck_assert_ptr_nonnull(strstr(out, "result: MISMATCH"));
    output_close(&o);
}
END_TEST

int main(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return EXIT_FAILURE;
    self[n] = 0;
    snprintf(verify_bin, sizeof verify_bin, "%s/../examples/verify_output", dirname(self));
    Suite *s = suite_create("e2e_verify");
    TCase *tc = tcase_create("verify_output");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_correct_output_passes);
    tcase_add_test(tc, test_duplicate_in_kafka_fails);
    tcase_add_test(tc, test_duplicate_row_fails);
    tcase_add_test(tc, test_missing_record_fails);
    tcase_add_test(tc, test_foreign_and_changed_records_fail);
    tcase_add_test(tc, test_key_out_of_order_fails);
    tcase_add_test(tc, test_open_transaction_fails);
    tcase_add_test(tc, test_totals_pass);
    tcase_add_test(tc, test_totals_repeat_gap_wrong_and_stale_fail);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
