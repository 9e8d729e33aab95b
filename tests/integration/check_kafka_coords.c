/*
 * The connections to transaction coordinators that the Kafka sink keeps between the descriptions
 * of pre-commit and of the commit's proof (connectors/kafka/wire/kafka_coords.c), against the real
 * broker. With a transaction open on a librdkafka producer, describing it through the kept
 * connection answers exactly as a call that connects afresh, and five descriptions open one
 * connection, not five. When the kept connection is cut (as a broker that closed it or restarted),
 * the next description still answers, on a new connection, and the one after that again uses the
 * kept one; after the commit, it sees the transaction committed. A kept connection whose peer went
 * silent holds a call for a share of its time only, and the call still answers, afresh.
 */
#include "check_kafka_common.h"
#include "kafka_wire.h"
#include "tpc_test_env.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FD 1024

static const char *bootstrap;

static void setup(void)
{
    bootstrap = tpc_test_env_require("TWOPC_TEST_KAFKA_BOOTSTRAP");
    ck_assert_msg(bootstrap != NULL, "TWOPC_TEST_KAFKA_BOOTSTRAP is not set");
}

static tpc__kafka_txn_info_t describe(tpc__kafka_coords_t *coords, const char *id)
{
    tpc__kafka_wire_conf_t wire = {.bootstrap = bootstrap, .coords = coords};
    tpc__kafka_txn_info_t now;
    tpc_error_t *err = tpc__kafka_describe_transaction(&wire, id, 20000, &now);
    ck_assert_msg(err == NULL, "describe %s: %s", id, tpc_error_message(err));
    ck_assert_int_eq(now.error, 0);
    return now;
}

static void assert_same(const tpc__kafka_txn_info_t *a, const tpc__kafka_txn_info_t *b)
{
    ck_assert_str_eq(a->state, b->state);
    ck_assert_int_eq(a->producer_id, b->producer_id);
    ck_assert_int_eq(a->producer_epoch, b->producer_epoch);
    ck_assert_int_eq(a->start_ms, b->start_ms);
}

/* Which descriptors of this process are TCP connections (to the broker or anywhere). */
static void tcp_fds(bool *out)
{
    for (int fd = 0; fd < MAX_FD; fd++) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof peer;
        out[fd] = getpeername(fd, (struct sockaddr *)&peer, &len) == 0 &&
                  (peer.ss_family == AF_INET || peer.ss_family == AF_INET6);
    }
}

START_TEST(test_kept_connection_answers_as_a_fresh_one)
{
    char topic[128], id[128], errstr[512];
    tpc_test_unique_name(topic, sizeof topic, "twopc-coords", '-');
    tpc_test_unique_name(id, sizeof id, "twopc-coords-id", '-');
    kt_create_topic(bootstrap, topic, 1);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    kt_set(conf, "bootstrap.servers", bootstrap);
    kt_set(conf, "transactional.id", id);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ck_assert_msg(rk != NULL, "%s", errstr);
    ck_assert_ptr_null(rd_kafka_init_transactions(rk, KT_TIMEOUT_MS));
    ck_assert_ptr_null(rd_kafka_begin_transaction(rk));
    ck_assert_int_eq(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE("x", 1),
                                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                     0);
    ck_assert_int_eq(rd_kafka_flush(rk, KT_TIMEOUT_MS), 0);
    tpc__kafka_txn_info_t fresh = describe(NULL, id);
    ck_assert_str_eq(fresh.state, "Ongoing");

    static bool before[MAX_FD], after[MAX_FD];
    tcp_fds(before);
    tpc__kafka_coords_t *coords = tpc__kafka_coords_new();
    ck_assert_ptr_nonnull(coords);
    for (int i = 0; i < 5; i++) {
        tpc__kafka_txn_info_t kept = describe(coords, id);
        assert_same(&kept, &fresh);
    }
    ck_assert_uint_eq(tpc__kafka_coords_opened(coords), 1);

    /* Cut the kept connection: every TCP connection opened since (librdkafka's, if any, come back
     * by themselves). */
    tcp_fds(after);
    int cut = 0;
    for (int fd = 0; fd < MAX_FD; fd++)
        if (after[fd] && !before[fd])
            cut += shutdown(fd, SHUT_RDWR) == 0;
    ck_assert_int_ge(cut, 1);
    tpc__kafka_txn_info_t again = describe(coords, id);
    assert_same(&again, &fresh);
    ck_assert_uint_eq(tpc__kafka_coords_opened(coords), 2);
    again = describe(coords, id);
    assert_same(&again, &fresh);
    ck_assert_uint_eq(tpc__kafka_coords_opened(coords), 2);

    ck_assert_ptr_null(rd_kafka_commit_transaction(rk, KT_TIMEOUT_MS));
    tpc__kafka_txn_info_t done = describe(coords, id);
    ck_assert_msg(strcmp(done.state, "CompleteCommit") == 0 ||
                      strcmp(done.state, "PrepareCommit") == 0,
                  "state after the commit: %s", done.state);
    ck_assert_int_eq(done.producer_id, fresh.producer_id);
    ck_assert_uint_eq(tpc__kafka_coords_opened(coords), 2);
    tpc__kafka_coords_free(coords);
    rd_kafka_destroy(rk);
}
END_TEST

/* A kept connection whose peer went silent (a host gone without a reset): the call waits on it
 * for a share of its time only, and then answers over a fresh connection. The kept connection's
 * descriptor is turned into one to a listener of this test that never answers. */
START_TEST(test_silent_kept_connection_leaves_time_for_a_fresh_one)
{
    char id[128];
    tpc_test_unique_name(id, sizeof id, "twopc-coords-silent", '-');
    static bool before[MAX_FD], after[MAX_FD];
    tcp_fds(before);
    tpc__kafka_coords_t *coords = tpc__kafka_coords_new();
    ck_assert_ptr_nonnull(coords);
    tpc__kafka_wire_conf_t wire = {.bootstrap = bootstrap, .coords = coords};
    tpc__kafka_txn_info_t first, second;
    tpc_error_t *err = tpc__kafka_describe_transaction(&wire, id, 20000, &first);
    ck_assert_msg(err == NULL, "describe %s: %s", id, tpc_error_message(err));
    ck_assert_int_eq(first.error, TPC__KAFKA_E_TRANSACTIONAL_ID_NOT_FOUND);
    ck_assert_uint_eq(tpc__kafka_coords_opened(coords), 1);

    /* The test opens no other connection: the one new descriptor is the kept connection. */
    tcp_fds(after);
    int kept = -1, fresh = 0;
    for (int fd = 0; fd < MAX_FD; fd++)
        if (after[fd] && !before[fd]) {
            kept = fd;
            fresh++;
        }
    ck_assert_int_eq(fresh, 1);
    int lis = socket(AF_INET, SOCK_STREAM, 0), mute = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(lis, 0);
    ck_assert_int_ge(mute, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    ck_assert_int_eq(bind(lis, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lis, 1), 0);
    ck_assert_int_eq(getsockname(lis, (struct sockaddr *)&a, &alen), 0);
    ck_assert_int_eq(connect(mute, (struct sockaddr *)&a, sizeof a), 0);
    /* Non-blocking, as the library's own sockets. */
    ck_assert_int_eq(fcntl(mute, F_SETFL, fcntl(mute, F_GETFL) | O_NONBLOCK), 0);
    ck_assert_int_eq(dup2(mute, kept), kept);
    close(mute);

    /* Without the share the silent connection took the whole 8 s, and the fresh call none. */
    err = tpc__kafka_describe_transaction(&wire, id, 8000, &second);
    ck_assert_msg(err == NULL, "describe %s after its kept connection went silent: %s", id,
                  tpc_error_message(err));
    ck_assert_int_eq(second.error, TPC__KAFKA_E_TRANSACTIONAL_ID_NOT_FOUND);
    ck_assert_uint_eq(tpc__kafka_coords_opened(coords), 2);
    tpc__kafka_coords_free(coords);
    close(lis);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_coords");
    TCase *tc = tcase_create("kept");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_kept_connection_answers_as_a_fresh_one);
    tcase_add_test(tc, test_silent_kept_connection_leaves_time_for_a_fresh_one);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
