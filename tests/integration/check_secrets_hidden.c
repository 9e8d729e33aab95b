/*
 * No password reaches a message: every error (message and hint), every log line at debug level and
 * everything written to stderr while jobs run with wrong credentials and wrong URIs is searched
 * for the secrets they were given.
 *
 * - pg.conninfo strings that libpq cannot parse (a bad percent-encoding, an unterminated quote, a
 *   broken IPv6 host), whose libpq messages quote the password;
 * - wrong credentials: a server on 127.0.0.1 that this test plays, which asks for the password in
 *   clear text and refuses it, reached with keyword and URI conninfo strings;
 * - the real test server with a role that does not exist, and with a password it does not need
 *   (trust authentication), where the job runs to its end with debug logging on;
 * - Kafka: a sink and a source with SASL credentials against the test broker's plaintext listener,
 *   with librdkafka's debug logging on.
 * Kafka's SASL listeners with a wrong password are in check_kafka_secure.c.
 */
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_test_capture.h"
#include "tpc_test_check.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Stop capturing and assert that none of @secrets appears in anything said. */
static const char *said;

static void check_said(const char *const *secrets, const char *what)
{
    size_t lines = 0;
    said = tpc_test_capture_stop(&lines);
    ck_assert_msg(lines > 0, "%s: nothing was said at all", what);
    for (size_t i = 0; secrets[i]; i++)
        TPC_TEST_ASSERT_ABSENT(said, secrets[i], what);
    fprintf(stderr, "%s: %zu lines (errors, hints, log lines, stderr), no secret\n", what, lines);
}

/* ---- a PostgreSQL server that wants a password and refuses it ---------------------------------
 */

static int fake_fd = -1, fake_port;
static pthread_t fake_thread;

static bool read_full(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One client: SSL and GSS requests are declined, then the startup message is answered with
 * AuthenticationCleartextPassword, and the password message with a FATAL 28P01. */
static void fake_session(int c)
{
    unsigned char hdr[8], buf[4096];
    for (;;) {
        if (!read_full(c, hdr, 4))
            return;
        uint32_t len = be32(hdr);
        if (len < 8 || len > sizeof buf || !read_full(c, buf, len - 4))
            return;
        uint32_t code = be32(buf);
        if (code == 80877103 || code == 80877104) { /* SSLRequest, GSSENCRequest */
            if (write(c, "N", 1) != 1)
                return;
            continue;
        }
        break;
    }
    static const unsigned char ask[] = {'R', 0, 0, 0, 8, 0, 0, 0, 3};
    if (write(c, ask, sizeof ask) != (ssize_t)sizeof ask)
        return;
    if (!read_full(c, hdr, 5) || hdr[0] != 'p')
        return;
    uint32_t len = be32(hdr + 1);
    if (len < 4 || len > sizeof buf || !read_full(c, buf, len - 4))
        return;
    static const char fields[] = "SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed for "
                                 "user \"app\"\0";
    unsigned char out[128];
    size_t n = sizeof fields; /* the fields, each NUL-terminated, and the closing NUL */
    out[0] = 'E';
    uint32_t l = (uint32_t)(4 + n);
    out[1] = (unsigned char)(l >> 24), out[2] = (unsigned char)(l >> 16);
    out[3] = (unsigned char)(l >> 8), out[4] = (unsigned char)l;
    memcpy(out + 5, fields, n);
    if (write(c, out, 5 + n) != (ssize_t)(5 + n))
        return;
}

static void *fake_main(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(fake_fd, NULL, NULL);
        if (c < 0)
            return NULL;
        fake_session(c);
        close(c);
    }
}

static void fake_start(void)
{
    fake_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fake_fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    ck_assert_int_eq(bind(fake_fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fake_fd, 16), 0);
    ck_assert_int_eq(getsockname(fake_fd, (struct sockaddr *)&a, &alen), 0);
    fake_port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&fake_thread, NULL, fake_main, NULL), 0);
}

/* ---- jobs ---------------------------------------------------------------------------------- */

static tpc_job_t *new_job(const char *dir)
{
    tpc_job_t *job = tpc_job_new("secrets");
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", dir));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.interval.ms", "50"));
    TPC_TEST_OK(tpc_job_set(job, "restart.attempts", "1"));
    TPC_TEST_OK(tpc_job_set(job, "restart.delay.ms", "10"));
    ck_assert_int_eq(tpc_job_set_logger(job, tpc_test_capture_log, NULL, TPC_LOG_DEBUG), TPC_OK);
    return job;
}

/* A source of @records into a PostgreSQL sink with @conninfo; says every error. @returns
 * whether the job finished. */
static bool run_pg_job(const char *conninfo, const char *table, uint64_t records)
{
    char *dir = tpc_test_tmpdir("secrets");
    tpc_test_seq_conf_t src = {.count_default = records, .per_poll = 50};
    tpc_job_t *job = new_job(dir);
    tpc_txn_sink_t *sink = NULL;
    TPC_TEST_OK(tpc_pg_sink_new(&sink));
    tpc_error_t *err = tpc_txn_sink_set(sink, "pg.conninfo", conninfo);
    if (!err)
        err = tpc_txn_sink_set(sink, "pg.table", table);
    if (!err)
        err = tpc_txn_sink_set(sink, "pg.connect.deadline.ms", "1500");
    char prefix[96];
    tpc_test_unique_name(prefix, sizeof prefix, "secrets", '-');
    if (!err)
        err = tpc_txn_sink_set(sink, "pg.gid-prefix", prefix);
    int s, k;
    if (!err)
        err = tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s);
    if (!err)
        err = tpc_txn_sink_add_to_job(sink, job, "rows", 1, &k);
    if (!err)
        err = tpc_job_connect(job, s, k, TPC_EDGE_FORWARD);
    if (!err)
        err = tpc_job_run(job, NULL);
    tpc_test_capture_error(err);
    bool ok = err == NULL;
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);
    tpc_test_rmdir(dir);
    free(dir);
    return ok;
}

START_TEST(test_unparsable_conninfo_hides_password)
{
    static const char *const conninfos[] = {
        "postgresql://app:Pw1-percent%zz@127.0.0.1:5432/db",
        "postgresql://app:Pw2-ipv6@[::1:5432/db",
        "postgresql://app:Pw3-port@127.0.0.1:notaport/db",
        "postgres://app:Pw4-query@127.0.0.1/db?sslmode=require=x",
        "host=127.0.0.1 user=app password='Pw5-unterminated",
        "host=127.0.0.1 password=Pw6-kw stray",
        "dbname=postgresql://app:Pw7-nested%zz@127.0.0.1/db",
        NULL};
    static const char *const secrets[] = {"Pw1-percent",      "Pw2-ipv6", "Pw3-port",   "Pw4-query",
                                          "Pw5-unterminated", "Pw6-kw",   "Pw7-nested", NULL};
    ck_assert(tpc_test_capture_start());
    for (size_t i = 0; conninfos[i]; i++) {
        tpc_txn_sink_t *sink = NULL;
        TPC_TEST_OK(tpc_pg_sink_new(&sink));
        tpc_error_t *err = tpc_txn_sink_set(sink, "pg.conninfo", conninfos[i]);
        if (!err) {
            /* Parsed after all: then it must fail at the job's open, named without password. */
            tpc_txn_sink_destroy(sink);
            ck_assert_msg(!run_pg_job(conninfos[i], "t", 10), "\"%s\" worked", conninfos[i]);
            continue;
        }
        ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
        tpc_test_capture_error(err);
        tpc_error_destroy(err);
        tpc_txn_sink_destroy(sink);
    }
    check_said(secrets, "pg.conninfo that libpq cannot parse");
}
END_TEST

START_TEST(test_wrong_password_hidden)
{
    fake_start();
    char kw[256], uri[256], uri_enc[256];
    snprintf(kw, sizeof kw,
             "host=127.0.0.1 port=%d dbname=db user=app password='Pw8 keyword' "
             "sslmode=disable",
             fake_port);
    snprintf(uri, sizeof uri, "postgresql://app:Pw9-uri@127.0.0.1:%d/db?sslmode=disable",
             fake_port);
    snprintf(uri_enc, sizeof uri_enc,
             "postgresql://app:Pw10%%2Fenc%%40x@127.0.0.1:%d/db?sslmode=disable", fake_port);
    static const char *const secrets[] = {"Pw8 keyword", "Pw9-uri",  "Pw10%2Fenc%40x",
                                          "Pw10/enc@x",  "Pw10/enc", NULL};
    ck_assert(tpc_test_capture_start());
    ck_assert(!run_pg_job(kw, "t", 10));
    ck_assert(!run_pg_job(uri, "t", 10));
    ck_assert(!run_pg_job(uri_enc, "t", 10));
    check_said(secrets, "a server that refuses the password");
    ck_assert_msg(strstr(said, "password authentication failed"),
                  "the server's refusal is not reported:\n%s", said);
}
END_TEST

START_TEST(test_real_server_with_password_hidden)
{
    const char *base = tpc_test_env_require("TWOPC_TEST_PG_CONNINFO");
    PGconn *pg = PQconnectdb(base);
    ck_assert_msg(PQstatus(pg) == CONNECTION_OK, "%s", PQerrorMessage(pg));
    char table[96], sql[256], conninfo[1024];
    tpc_test_unique_name(table, sizeof table, "secrets", '_');
    snprintf(sql, sizeof sql, "CREATE TABLE %s (k bytea, v bytea)", table);
    PQclear(PQexec(pg, sql));
    static const char *const secrets[] = {"Pw11-trusted", "Pw12-nosuchrole", NULL};
    ck_assert(tpc_test_capture_start());
    /* The server trusts 127.0.0.1: the password is sent nowhere, the job runs to its end. */
    snprintf(conninfo, sizeof conninfo, "%s password=Pw11-trusted", base);
    if (!run_pg_job(conninfo, table, 500))
        ck_abort_msg("the job failed:\n%s", tpc_test_capture_stop(NULL));
    const char *host = PQhost(pg), *port = PQport(pg), *db = PQdb(pg);
    snprintf(conninfo, sizeof conninfo, "postgresql://nosuchrole:Pw12-nosuchrole@%s:%s/%s", host,
             port, db);
    ck_assert(!run_pg_job(conninfo, table, 10));
    check_said(secrets, "the real server");
    ck_assert_msg(strstr(said, "nosuchrole"), "the role is not named:\n%s", said);
    snprintf(sql, sizeof sql, "DROP TABLE %s", table);
    PQclear(PQexec(pg, sql));
    PQfinish(pg);
}
END_TEST

/* ---- Kafka --------------------------------------------------------------------------------- */

static const char *const sasl_props[][2] = {{"security.protocol", "sasl_plaintext"},
                                            {"sasl.mechanism", "PLAIN"},
                                            {"sasl.username", "app"},
                                            {"sasl.password", "Pw13-sasl"},
                                            {"debug", "all"}};

START_TEST(test_kafka_sasl_credentials_hidden)
{
    const char *bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    static const char *const secrets[] = {"Pw13-sasl", NULL};
    ck_assert(tpc_test_capture_start());

    char *dir = tpc_test_tmpdir("secrets-kafka");
    tpc_test_seq_conf_t src = {.count_default = 10, .per_poll = 10};
    tpc_job_t *job = new_job(dir);
    tpc_txn_sink_t *sink = NULL;
    TPC_TEST_OK(tpc_kafka_sink_new(bootstrap, "twopc-secrets", &sink));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "transactional.id.prefix", "twopc-secrets"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "open.timeout.ms", "1500"));
    TPC_TEST_OK(tpc_txn_sink_set(sink, "recovery.timeout.ms", "1500"));
    char key[96];
    for (size_t i = 0; i < sizeof sasl_props / sizeof *sasl_props; i++) {
        snprintf(key, sizeof key, "kafka.%s", sasl_props[i][0]);
        TPC_TEST_OK(tpc_txn_sink_set(sink, key, sasl_props[i][1]));
    }
    int s, k;
    TPC_TEST_OK(tpc_job_add_vertex(job, "source", 1, &tpc_test_seq_source_ops, &src, &s));
    TPC_TEST_OK(tpc_txn_sink_add_to_job(sink, job, "kafka", 1, &k));
    TPC_TEST_OK(tpc_job_connect(job, s, k, TPC_EDGE_FORWARD));
    tpc_error_t *err = tpc_job_run(job, NULL);
    ck_assert_msg(err != NULL, "a SASL client got through a plaintext listener");
    tpc_test_capture_error(err);
    tpc_error_destroy(err);
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(sink);

    tpc_job_t *job2 = new_job(dir);
    tpc_kafka_source_t *ks = NULL;
    TPC_TEST_OK(tpc_kafka_source_new(bootstrap, "twopc-secrets-in", &ks));
    TPC_TEST_OK(tpc_kafka_source_set(ks, "open.timeout.ms", "1500"));
    for (size_t i = 0; i < sizeof sasl_props / sizeof *sasl_props; i++) {
        snprintf(key, sizeof key, "kafka.%s", sasl_props[i][0]);
        TPC_TEST_OK(tpc_kafka_source_set(ks, key, sasl_props[i][1]));
    }
    int v;
    TPC_TEST_OK(tpc_kafka_source_add_to_job(ks, job2, "in", 1, &v));
    err = tpc_job_run(job2, NULL);
    ck_assert_msg(err != NULL, "a SASL consumer got through a plaintext listener");
    tpc_test_capture_error(err);
    tpc_error_destroy(err);
    tpc_job_destroy(job2);
    tpc_kafka_source_destroy(ks);
    tpc_test_rmdir(dir);
    free(dir);
    check_said(secrets, "kafka with SASL credentials");
    /* librdkafka's lines, of the sink's producers too, went to the job's logger, not stderr. */
    ck_assert_msg(strstr(said, ": kafka producer: "),
                  "no librdkafka line of the sink reached the job's logger");
    TPC_TEST_ASSERT_ABSENT(said, "stderr: %7|", "librdkafka debug lines on stderr");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("secrets_hidden");
    TCase *tc = tcase_create("secrets");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_unparsable_conninfo_hides_password);
    tcase_add_test(tc, test_wrong_password_hidden);
    tcase_add_test(tc, test_real_server_with_password_hidden);
    tcase_add_test(tc, test_kafka_sasl_credentials_hidden);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
