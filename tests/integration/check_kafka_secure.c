/*
 * Ending the transaction of a crashed producer (FindCoordinator + EndTxn over the Kafka protocol)
 * through TLS and SASL listeners of a real broker. The shared test broker listens in plaintext
 * only, so this binary starts a second one of its own with tests/services/kafka_secure.sh (SSL
 * with client certificates, SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and
 * SCRAM-SHA-512), in a folder build/services/run.XXXXXX that with-services.sh cleans up if this
 * binary is killed. With TWOPC_TEST_SECURE_TLS_DIR and the other variables of that script's env
 * file already set, it uses that broker instead. Without the openssl command or Java it skips,
 * saying so.
 *
 * For each kind of listener a child process (this binary run again with "--child") opens a
 * transaction with librdkafka configured with the same properties, produces and flushes, reports
 * its producer id and epoch, and is killed with SIGKILL before it commits; then EndTxn(commit)
 * over that listener, with those properties, makes the records visible to a read_committed
 * consumer exactly once. (The SCRAM cases are the exception on the producer side: librdkafka
 * 2.0.2's SCRAM is rejected by Kafka 4, so their producer logs in with PLAIN on the same
 * listener, and only the commit uses SCRAM.) A wrong password, a wrong CA, a missing client
 * certificate and an unsupported mechanism give clear errors at once, and no error shows a secret;
 * a certificate that does not name the host is refused unless ssl.endpoint.identification.algorithm
 * is none.
 *
 * Before the commit, the transaction is listed over the same listener as `twopc kafka
 * transactions` lists it (ListTransactions, DescribeTransactions).
 *
 * The properties go to the wire client directly (kafka_wire.h), so that the test can see which
 * answer the coordinator gave; the sink and tpc_kafka_end_transaction() hand it theirs the same
 * way.
 */
#include "check_kafka_common.h"
#include "kafka_wire.h"
#include "tpc_kafka.h"
#include "tpc_test_capture.h"
#include "tpc_test_check.h"
#include "tpc_test_ops.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORDS 50

static const char *skip_reason;
static const char *start_failure;

/* ---- listeners and their client properties ----------------------------------------------- */

typedef struct {
    char bootstrap[64];
    char ca[600], cert[600], key[600];
    const char *props[40];
    size_t n; /* pairs */
} profile_t;

/* No Check calls in these: the crashing child uses them too, outside any test. */
static void add(profile_t *p, const char *name, const char *value)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->props[2 * i], name) == 0) {
            p->props[2 * i + 1] = value;
            return;
        }
    p->props[2 * p->n] = name;
    p->props[2 * p->n + 1] = value;
    p->n++;
}

static const char *env(const char *name)
{
    const char *v = tpc_test_env(name);
    if (!v)
        fprintf(stderr, "%s is not set\n", name);
    return v ? v : "";
}

/* "ssl": TLS with a client certificate whose key is encrypted, the CA as a file, the bootstrap
 * server by name (the coordinator comes back as 127.0.0.1: both checks of the host happen);
 * "plain", "scram256": SASL_PLAINTEXT; "scram512": SASL_SSL with the CA as a folder. */
static void profile_make(profile_t *p, const char *which)
{
    memset(p, 0, sizeof *p);
    const char *tls = env("TWOPC_TEST_SECURE_TLS_DIR");
    snprintf(p->ca, sizeof p->ca, "%s/ca.pem", tls);
    snprintf(p->cert, sizeof p->cert, "%s/client.pem", tls);
    snprintf(p->key, sizeof p->key, "%s/client.key", tls);
    if (strcmp(which, "ssl") == 0) {
        snprintf(p->bootstrap, sizeof p->bootstrap, "localhost:%s",
                 env("TWOPC_TEST_SECURE_SSL_PORT"));
        add(p, "security.protocol", "ssl");
        add(p, "ssl.ca.location", p->ca);
        add(p, "ssl.certificate.location", p->cert);
        add(p, "ssl.key.location", p->key);
        add(p, "ssl.key.password", env("TWOPC_TEST_SECURE_KEY_PASSWORD"));
        return;
    }
    bool over_tls = strcmp(which, "scram512") == 0;
    snprintf(p->bootstrap, sizeof p->bootstrap, "127.0.0.1:%s",
             env(over_tls ? "TWOPC_TEST_SECURE_SASL_SSL_PORT"
                          : "TWOPC_TEST_SECURE_SASL_PLAINTEXT_PORT"));
    add(p, "security.protocol", over_tls ? "sasl_ssl" : "sasl_plaintext");
    add(p, "sasl.mechanism",
        strcmp(which, "plain") == 0      ? "PLAIN"
        : strcmp(which, "scram256") == 0 ? "SCRAM-SHA-256"
                                         : "SCRAM-SHA-512");
    add(p, "sasl.username", env("TWOPC_TEST_SECURE_USER"));
    add(p, "sasl.password", env("TWOPC_TEST_SECURE_PASSWORD"));
    if (over_tls) {
        snprintf(p->ca, sizeof p->ca, "%s/cadir", tls);
        add(p, "ssl.ca.location", p->ca);
    }
}

static const char *plaintext_bootstrap(void)
{
    static char bs[64];
    snprintf(bs, sizeof bs, "127.0.0.1:%s", env("TWOPC_TEST_SECURE_PLAINTEXT_PORT"));
    return bs;
}

static tpc_error_t *end_txn(const profile_t *p, const char *id, int64_t pid, int16_t epoch,
                            int timeout_ms, tpc__kafka_end_result_t *result)
{
    tpc__kafka_wire_conf_t wire = {.bootstrap = p->bootstrap, .props = p->props, .nprops = p->n};
    int code = 0;
    return tpc__kafka_end_txn(&wire, id, pid, epoch, true, timeout_ms, result, &code);
}

/* ---- the producer that crashes ----------------------------------------------------------- */

/* Begin, produce, flush, report the producer id and epoch, wait to be killed. */
static int child_main(const char *which, const char *topic, const char *id)
{
    char errstr[512];
    profile_t p;
    profile_make(&p, which);
    /* librdkafka before 2.6.1 repeats the client nonce in the SCRAM client-final message, which
     * Kafka 3.8.1 and later reject: its producers log in with PLAIN on the same listener. */
    if (strncmp(which, "scram", 5) == 0)
        add(&p, "sasl.mechanism", "PLAIN");
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < p.n; i++)
        if (rd_kafka_conf_set(conf, p.props[2 * i], p.props[2 * i + 1], errstr, sizeof errstr)) {
            fprintf(stderr, "child: %s\n", errstr);
            return 2;
        }
    rd_kafka_conf_set(conf, "bootstrap.servers", p.bootstrap, errstr, sizeof errstr);
    return kt_crash_child(conf, topic, id, "60000", which, RECORDS);
}

static void crash_producer(const char *which, const char *topic, const char *id, int64_t *pid,
                           int16_t *epoch)
{
    const char *const args[] = {"--child", which, topic, id, NULL};
    char what[64];
    snprintf(what, sizeof what, "%s producer", which);
    kt_crash_producer(args, what, pid, epoch);
}

/* ---- tests ------------------------------------------------------------------------------- */

static void setup(void)
{
    ck_assert_msg(start_failure == NULL, "%s", start_failure);
}

/* The whole story over one kind of listener. */
static void commit_after_crash(const char *which)
{
    if (skip_reason)
        return;
    char topic[128], id[128];
    tpc_test_unique_name(topic, sizeof topic, "twopc-secure", '-');
    tpc_test_unique_name(id, sizeof id, "twopc-secure-id", '-');
    const char *plain = plaintext_bootstrap();
    kt_create_topic(plain, topic, 1);
    int64_t pid;
    int16_t epoch;
    crash_producer(which, topic, id, &pid, &epoch);
    ck_assert_int_eq(kt_read_topic(plain, topic, "read_committed", NULL, NULL), 0);

    profile_t p;
    profile_make(&p, which);
    /* What `twopc kafka transactions` asks, over the same listener: the open transaction with the
     * producer id and epoch the producer reported. */
    tpc__kafka_wire_conf_t wire = {.bootstrap = p.bootstrap, .props = p.props, .nprops = p.n};
    tpc__kafka_txn_info_t *open = NULL;
    size_t nopen = 0;
    tpc_error_t *err = tpc__kafka_list_transactions(&wire, id, true, 20000, &open, &nopen);
    ck_assert_msg(err == NULL, "%s list: %s", which, tpc_error_message(err));
    ck_assert_msg(nopen == 1 && strcmp(open[0].id, id) == 0 && open[0].producer_id == pid &&
                      open[0].producer_epoch == epoch && strcmp(open[0].state, "Ongoing") == 0,
                  "%s list: %zu open transactions", which, nopen);
    free(open);
    tpc__kafka_end_result_t result = TPC__KAFKA_END_UNKNOWN_ID;
    err = end_txn(&p, id, pid, epoch, 20000, &result);
    ck_assert_msg(err == NULL, "%s commit: %s", which, tpc_error_message(err));
    ck_assert_int_eq(result, TPC__KAFKA_END_DONE);
    ck_assert_int_eq(kt_read_topic(plain, topic, "read_committed", NULL, NULL), RECORDS);

    err = end_txn(&p, id, pid, epoch, 20000, &result);
    ck_assert_msg(err == NULL, "%s second commit: %s", which, tpc_error_message(err));
    ck_assert_int_eq(result, TPC__KAFKA_END_DONE);
    ck_assert_int_eq(kt_read_topic(plain, topic, "read_committed", NULL, NULL), RECORDS);
}

START_TEST(test_ssl_with_client_certificate_commits_after_crash)
{
    commit_after_crash("ssl");
}
END_TEST

START_TEST(test_sasl_plain_commits_after_crash)
{
    commit_after_crash("plain");
}
END_TEST

START_TEST(test_sasl_scram_sha_256_commits_after_crash)
{
    commit_after_crash("scram256");
}
END_TEST

START_TEST(test_sasl_ssl_scram_sha_512_commits_after_crash)
{
    commit_after_crash("scram512");
}
END_TEST

/* A connection that must fail at once (no retries until the timeout) with @code and a message
 * holding @want and no secret. */
static void expect_failure(const profile_t *p, tpc_err_t code, const char *want)
{
    time_t t0 = time(NULL);
    tpc__kafka_end_result_t result;
    tpc_error_t *err = end_txn(p, "twopc-secure-none", 1, 0, 20000, &result);
    ck_assert_msg(err != NULL, "expected an error containing \"%s\"", want);
    const char *msg = tpc_error_message(err);
    const char *hint = tpc_error_hint_text(err) ? tpc_error_hint_text(err) : "";
    fprintf(stderr, "expected error: %s (hint: %s)\n", msg, hint);
    ck_assert_msg(tpc_error_code(err) == code, "wrong code %s: %s",
                  tpc_err_name(tpc_error_code(err)), msg);
    ck_assert_msg(strstr(msg, want) != NULL, "message lacks \"%s\": %s", want, msg);
    for (const char *secret = env("TWOPC_TEST_SECURE_PASSWORD"); secret; secret = NULL)
        ck_assert_msg(!strstr(msg, secret) && !strstr(hint, secret), "a secret in: %s", msg);
    ck_assert_msg(!strstr(msg, "wrong-password"), "a secret in: %s", msg);
    ck_assert_msg(time(NULL) - t0 <= 5, "took %ld s: retried what cannot get better",
                  (long)(time(NULL) - t0));
    tpc_error_destroy(err);
}

START_TEST(test_wrong_password_is_an_authentication_error)
{
    if (skip_reason)
        return;
    static const char *const which[] = {"plain", "scram256", "scram512"};
    for (int i = 0; i < 3; i++) {
        profile_t p;
        profile_make(&p, which[i]);
        add(&p, "sasl.password", "wrong-password");
        expect_failure(&p, TPC_ERR_CONNECT, "SASL_AUTHENTICATION_FAILED");
    }
}
END_TEST

/* A sink and the recovery client with a wrong SASL password and librdkafka's debug logging on:
 * the refusal is reported, and no error, log line or stderr line holds the password. */
START_TEST(test_wrong_password_is_in_no_message)
{
    if (skip_reason)
        return;
    static const char secret[] = "Pw14-wrong-sasl";
    char topic[128], prefix[128], key[96];
    tpc_test_unique_name(topic, sizeof topic, "twopc-secure", '-');
    tpc_test_unique_name(prefix, sizeof prefix, "twopc-secure-id", '-');
    kt_create_topic(plaintext_bootstrap(), topic, 1);
    profile_t p;
    profile_make(&p, "plain");
    add(&p, "sasl.password", secret);
    add(&p, "debug", "all");
    char *dir = tpc_test_tmpdir("secure-secret");
    ck_assert(tpc_test_capture_start());

    tpc_job_t *job = tpc_job_new("secure-secret");
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", dir));
    TPC_TEST_OK(tpc_job_set(job, "restart.attempts", "0"));
    ck_assert_int_eq(tpc_job_set_logger(job, tpc_test_capture_log, NULL, TPC_LOG_DEBUG), TPC_OK);
    tpc_txn_sink_t *sink = NULL;
    TPC_TEST_OK(tpc_kafka_sink_new(p.bootstrap, topic, &sink));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "transactional.id.prefix", prefix));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "open.timeout.ms", "3000"));
    for (size_t i = 0; i < p.n; i++) {
        snprintf(key, sizeof key, "kafka.%s", p.props[2 * i]);
        TPC_TEST_OK(tpc_txn_sink_set(sink, key, p.props[2 * i + 1]));
    }
    tpc_test_seq_conf_t src = {.count_default = 10, .per_poll = 10};
    int s, k;
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(sink, job, "kafka", 1, &k));
    TPC_TEST_OK(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err != NULL, "a wrong password got through");
    tpc_test_capture_error(err);
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);

    const char *props[2 * 40 + 1] = {0};
    for (size_t i = 0; i < 2 * p.n; i++)
        props[i] = p.props[i];
    err = tpc_kafka_end_transaction(p.bootstrap, props, "twopc-secure-none", 1, 0, true, 20000);
    ck_assert_msg(err != NULL, "a wrong password got through the recovery client");
    tpc_test_capture_error(err);
    tpc_error_destroy(err);

    size_t lines = 0;
    const char *said = tpc_test_capture_stop(&lines);
    tpc_test_rmdir(dir);
    free(dir);
    TPC_TEST_ASSERT_ABSENT(said, secret, "kafka with a wrong SASL password");
    ck_assert_msg(strstr(said, "SASL_AUTHENTICATION_FAILED") && strstr(said, "uthentication"),
                  "the refusal is not reported:\n%s", said);
    fprintf(stderr, "kafka with a wrong SASL password: %zu lines, no secret\n", lines);
}
END_TEST

START_TEST(test_wrong_ca_is_a_certificate_verify_error)
{
    if (skip_reason)
        return;
    char other[600];
    snprintf(other, sizeof other, "%s/other-ca.pem", env("TWOPC_TEST_SECURE_TLS_DIR"));
    profile_t p;
    profile_make(&p, "ssl");
    add(&p, "ssl.ca.location", other);
    expect_failure(&p, TPC_ERR_CONNECT, "certificate verify failed");
    profile_make(&p, "scram512");
    add(&p, "ssl.ca.location", other);
    expect_failure(&p, TPC_ERR_CONNECT, "certificate verify failed");
}
END_TEST

/* "127.000.000.001" reaches 127.0.0.1 (the resolver reads it as an address) but is not an IP
 * address to the name check, and the certificate names no such host. */
START_TEST(test_certificate_for_another_host_is_a_verify_error)
{
    if (skip_reason)
        return;
    profile_t p;
    profile_make(&p, "ssl");
    snprintf(p.bootstrap, sizeof p.bootstrap, "127.000.000.001:%s",
             env("TWOPC_TEST_SECURE_SSL_PORT"));
    expect_failure(&p, TPC_ERR_CONNECT, "certificate verify failed");
    expect_failure(&p, TPC_ERR_CONNECT, "hostname mismatch");
    add(&p, "ssl.endpoint.identification.algorithm", "none");
    tpc__kafka_end_result_t result;
    tpc_error_t *err = end_txn(&p, "twopc-secure-none", 1, 0, 20000, &result);
    ck_assert_msg(err == NULL, "without the name check: %s", tpc_error_message(err));
    ck_assert_int_eq(result, TPC__KAFKA_END_UNKNOWN_ID);
}
END_TEST

START_TEST(test_missing_client_certificate_is_refused)
{
    if (skip_reason)
        return;
    profile_t p;
    profile_make(&p, "ssl");
    p.n = 2; /* security.protocol and ssl.ca.location only */
    expect_failure(&p, TPC_ERR_CONNECT, "TLS");
}
END_TEST

START_TEST(test_unsupported_mechanism_is_refused)
{
    if (skip_reason)
        return;
    profile_t p;
    profile_make(&p, "plain");
    add(&p, "sasl.mechanism", "GSSAPI");
    expect_failure(&p, TPC_ERR_UNSUPPORTED, "\"GSSAPI\" is not supported");
    add(&p, "sasl.mechanism", "OAUTHBEARER");
    expect_failure(&p, TPC_ERR_UNSUPPORTED, "\"OAUTHBEARER\" is not supported");
}
END_TEST

/* ---- the broker -------------------------------------------------------------------------- */

static bool have_command(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

static bool have_java(void)
{
    const char *home = tpc_test_env("JAVA_HOME");
    char path[1024];
    if (home && snprintf(path, sizeof path, "%s/bin/java", home) < (int)sizeof path &&
        access(path, X_OK) == 0)
        return true;
    return have_command("java");
}

/* Export the "export NAME='value'" lines of the broker's env file. */
static bool load_env(const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return false;
    char line[1200];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "export ", 7) != 0)
            continue;
        char *name = line + 7, *eq = strchr(name, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *value = eq + 1;
        size_t n = strlen(value);
        if (n >= 2 && value[0] == '\'' && value[n - 1] == '\'') {
            value[n - 1] = '\0';
            value++;
        }
        setenv(name, value, 1);
    }
    fclose(f);
    return true;
}

/* Start the broker in build/services/run.XXXXXX/kafka; @returns the run folder or NULL. */
static char *start_broker(void)
{
    static char run[256], cmd[1024];
    struct stat st;
    if (stat("tests/services/kafka_secure.sh", &st) != 0) {
        start_failure = "tests/services/kafka_secure.sh not found: run from the top of the "
                        "checkout (make test-integration does)";
        return NULL;
    }
    mkdir("build", 0755);
    mkdir("build/services", 0755);
    snprintf(run, sizeof run, "build/services/run.XXXXXX");
    if (!mkdtemp(run)) {
        start_failure = "could not make a folder under build/services";
        return NULL;
    }
    snprintf(cmd, sizeof cmd, "%s/owner.pid", run);
    FILE *f = fopen(cmd, "w");
    if (f) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "tests/services/kafka_secure.sh start %s/kafka", run);
    if (system(cmd) != 0) {
        start_failure = "the broker with TLS and SASL listeners did not start (see above)";
        return run;
    }
    snprintf(cmd, sizeof cmd, "%s/kafka/env", run);
    if (!load_env(cmd))
        start_failure = "the broker with TLS and SASL listeners wrote no env file";
    return run;
}

static void stop_broker(const char *run, bool keep)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "tests/services/kafka_secure.sh %s %s/kafka >&2",
             keep ? "stop" : "destroy", run);
    if (system(cmd) != 0)
        fprintf(stderr, "could not stop the broker of %s\n", run);
    if (keep) {
        fprintf(stderr, "the secure broker's files and logs are kept in %s\n", run);
        return;
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", run);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", run);
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3], argv[4]);
    char *run = NULL;
    if (tpc_test_env("TWOPC_TEST_SECURE_TLS_DIR"))
        run = NULL; /* a broker of the caller's */
    else if (!have_command("openssl"))
        skip_reason = "the openssl command is not installed";
    else if (!have_java())
        skip_reason = "Java is not installed (JAVA_HOME or java on PATH)";
    else
        run = start_broker();
    if (skip_reason)
        fprintf(stderr, "check_kafka_secure: all tests skipped: %s\n", skip_reason);

    Suite *s = suite_create("kafka_secure");
    TCase *tc = tcase_create("end_txn");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ssl_with_client_certificate_commits_after_crash);
    tcase_add_test(tc, test_sasl_plain_commits_after_crash);
    tcase_add_test(tc, test_sasl_scram_sha_256_commits_after_crash);
    tcase_add_test(tc, test_sasl_ssl_scram_sha_512_commits_after_crash);
    tcase_add_test(tc, test_wrong_password_is_an_authentication_error);
    tcase_add_test(tc, test_wrong_password_is_in_no_message);
    tcase_add_test(tc, test_wrong_ca_is_a_certificate_verify_error);
    tcase_add_test(tc, test_certificate_for_another_host_is_a_verify_error);
    tcase_add_test(tc, test_missing_client_certificate_is_refused);
    tcase_add_test(tc, test_unsupported_mechanism_is_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (run)
        stop_broker(run, failed != 0);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
