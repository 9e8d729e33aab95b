/*
 * `twopc kafka producers` against the real broker, on what a producer killed with kill -9 in the
 * middle of a transaction leaves behind: the partition's leader describes the dead producer with
 * the first offset of its open transaction (which holds the partition's last stable offset), under
 * the producer id that `twopc kafka transactions` shows for its transactional id, and calls it
 * unknown to a checkpoint that promised nothing; `twopc kafka hanging` finds the partition held
 * by a lingering transaction of its transactional id. Once `twopc kafka abort --topic --partition`
 * wrote the abort marker for it (judged lingering by the same checkpoint folder), the partition
 * is held no more.
 */
#include "check_kafka_common.h"
#include "tpc_test_ops.h"

#include <inttypes.h>
#include <libgen.h>
#include <stdarg.h>

static char twopc_bin[4096];

/* Run `twopc ARGS`; its stdout into @out. @returns its exit status, -1 when it did not exit. */
static int twopc(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int twopc(char *out, size_t cap, const char *fmt, ...)
{
    char args[4096], line[sizeof args + sizeof twopc_bin + 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "'%s' %s", twopc_bin, args);
    FILE *p = popen(line, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int status = pclose(p);
    printf("$ twopc %s\n%s", args, out);
    fflush(stdout);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* In a child: begin a transaction on @id, write 5 records into @topic, flush, and die by SIGKILL
 * with the transaction open. */
static void produce_and_die(const char *bootstrap, const char *topic, const char *id)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char errstr[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        kt_set(conf, "bootstrap.servers", bootstrap);
        kt_set(conf, "transactional.id", id);
        kt_set(conf, "transaction.timeout.ms", "120000");
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
        if (!rk || rd_kafka_init_transactions(rk, 30000) || rd_kafka_begin_transaction(rk))
            _exit(1);
        for (int i = 0; i < 5; i++)
            if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
                                  RD_KAFKA_V_VALUE("x", 1), RD_KAFKA_V_END))
                _exit(1);
        if (rd_kafka_flush(rk, 30000))
            _exit(1);
        kill(getpid(), SIGKILL);
        _exit(1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "the producer did not get as far as its kill");
}

/* The number after "@key": in @json at or after @from, or -1. */
static int64_t json_number(const char *from, const char *key)
{
    const char *at = from ? strstr(from, key) : NULL;
    return at ? strtoll(at + strlen(key), NULL, 10) : -1;
}

static char out[65536];

START_TEST(test_killed_producer_holds_its_partition_until_aborted)
{
    const char *bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_ptr_nonnull(bootstrap);
    char topic[128], id[128];
    tpc_test_unique_name(topic, sizeof topic, "producers", '-');
    tpc_test_unique_name(id, sizeof id, "producers-txn", '-');
    kt_create_topic(bootstrap, topic, 1);
    char *ckpt = tpc_test_tmpdir("producers"); /* a job's folder with no checkpoint yet */
    produce_and_die(bootstrap, topic, id);

    ck_assert_int_eq(twopc(out, sizeof out, "kafka transactions --bootstrap %s --prefix %s --json",
                           bootstrap, id),
                     0);
    int64_t pid = json_number(out, "\"producer_id\":");
    ck_assert_msg(pid >= 0, "the killed producer's transaction is not listed");

    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka producers --bootstrap %s --topic %s --partition 0 --json "
                           "--checkpoint-dir '%s'",
                           bootstrap, topic, ckpt),
                     0);
    char key[64];
    snprintf(key, sizeof key, "{\"producer_id\":%" PRId64 ",", pid);
    const char *mine = strstr(out, key);
    ck_assert_msg(mine, "producer %" PRId64 " is not among the partition's producers", pid);
    ck_assert_int_eq(json_number(mine, "\"current_txn_start_offset\":"), 0);
    const char *end = strchr(mine, '}');
    const char *cls = strstr(mine, "\"class\":\"unknown-to-checkpoint\"");
    ck_assert_msg(cls && cls < end, "the open transaction is not called unknown to the checkpoint");

    /* kafka hanging: the partition is held by a transaction no checkpoint promised. */
    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka hanging --bootstrap %s --topic %s --json --check "
                           "--checkpoint-dir '%s'",
                           bootstrap, topic, ckpt),
                     3);
    char held[300];
    snprintf(held, sizeof held,
             "{\"partition\":0,\"producer_id\":%" PRId64 ",\"producer_epoch\":0,", pid);
    ck_assert_ptr_nonnull(strstr(out, held));
    snprintf(held, sizeof held, "\"transactional_id\":\"%s\",\"class\":\"lingering\"", id);
    ck_assert_ptr_nonnull(strstr(out, held));

    /* Lingering for the folder: the abort is not refused, and the partition is free again. */
    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka abort --bootstrap %s --topic %s --partition 0 --producer-id "
                           "%" PRId64 " --epoch 0 --checkpoint-dir '%s'",
                           bootstrap, topic, pid, ckpt),
                     0);
    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka producers --bootstrap %s --topic %s --partition 0 --json",
                           bootstrap, topic),
                     0);
    mine = strstr(out, key);
    ck_assert_msg(!mine || json_number(mine, "\"current_txn_start_offset\":") == -1,
                  "producer %" PRId64 " still holds the partition after the abort", pid);
    ck_assert_int_eq(
        twopc(out, sizeof out, "kafka hanging --bootstrap %s --topic %s --check", bootstrap, topic),
        0);
    ck_assert_ptr_nonnull(strstr(out, "no open transaction holds a partition"));

    /* Options of other subcommands are refused, not ignored. */
    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka producers --bootstrap %s --topic %s --partition 0 --prefix x "
                           "2>/dev/null",
                           bootstrap, topic),
                     2);
    ck_assert_int_eq(twopc(out, sizeof out,
                           "kafka producers --bootstrap %s --topic no-such-topic-%s --partition 0 "
                           "2>/dev/null",
                           bootstrap, id),
                     1);
    tpc_test_rmdir(ckpt);
    free(ckpt);
}
END_TEST

int main(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return EXIT_FAILURE;
    self[n] = 0;
    snprintf(twopc_bin, sizeof twopc_bin, "%s/../bin/twopc", dirname(self));
    Suite *s = suite_create("twopc_producers");
    TCase *tc = tcase_create("killed producer");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_killed_producer_holds_its_partition_until_aborted);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
