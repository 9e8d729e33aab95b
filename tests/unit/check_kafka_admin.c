/*
 * `twopc kafka transactions` stays within its time limit and its memory on answers of any size
 * (connectors/kafka/wire/kafka_admin.c, through the real connection, request and decoding code).
 * A broker played here on 127.0.0.1 answers as a cluster would, but with its Metadata listing the
 * one broker 10,000 times and 100,000 transactional ids to list and describe, the descriptions in
 * the reverse order of the request. The listing must ask that broker once (not once per copy, each
 * keeping a copy of every id), match every description to its id (by bisection, not every answer
 * against every id), and end well within --timeout-ms; an answer that takes longer than the time
 * limit to arrive ends the listing at the deadline with TPC_ERR_TIMEOUT. Ids over 255 bytes are
 * listed marked as cut, two of them never as one, and never described.
 */
#include "kafka_wire.h"
#include "tpc_kit.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define IDS    100000
#define COPIES 10000

typedef struct {
    int listen_fd, port;
    int stall_ms; /* before answering DescribeTransactions */
    bool cut;     /* list two ids of 300 bytes that share their first 255, and one short one */
    int asked[128];
    int described; /* ids the last DescribeTransactions asked for */
    pthread_t thread;
} broker_t;

static char long_id[2][301];

/* The ids a DescribeTransactions request (header version 2) asks for. */
static int ids_asked(const unsigned char *req, size_t n)
{
    tpc__kafka_rbuf_t r = {.p = req, .len = n};
    char id[512];
    tpc__kafka_r_i16(&r);
    tpc__kafka_r_i16(&r);
    tpc__kafka_r_i32(&r);
    tpc__kafka_r_str(&r, false, id, sizeof id); /* client id */
    tpc__kafka_r_skip_tags(&r);
    uint64_t count = tpc__kafka_r_uvarint(&r);
    for (uint64_t i = 1; i < count; i++)
        tpc__kafka_r_str(&r, true, id, sizeof id);
    ck_assert(!r.bad);
    return count ? (int)count - 1 : 0;
}

/* The cut case: what is listed, and the description of the short id alone. */
static void answer_cut(int api, tpc__kafka_wbuf_t *w, int port)
{
    switch (api) {
    case TPC__KAFKA_API_METADATA:
        tpc__kafka_w_i32(w, 0);
        tpc__kafka_w_i32(w, 1);
        tpc__kafka_w_i32(w, 1);
        tpc__kafka_w_str(w, "127.0.0.1", false);
        tpc__kafka_w_i32(w, port);
        tpc__kafka_w_i16(w, -1);
        tpc__kafka_w_i16(w, -1);
        tpc__kafka_w_i32(w, 1);
        tpc__kafka_w_i32(w, 0);
        break;
    case TPC__KAFKA_API_LIST_TRANSACTIONS:
        tpc__kafka_w_no_tags(w);
        tpc__kafka_w_i32(w, 0);
        tpc__kafka_w_i16(w, 0);
        tpc__kafka_w_uvarint(w, 1);
        tpc__kafka_w_uvarint(w, 4);
        for (int i = 0; i < 3; i++) {
            tpc__kafka_w_str(w, i < 2 ? long_id[i] : "short-1", true);
            tpc__kafka_w_i64(w, 7000 + i);
            tpc__kafka_w_str(w, "Ongoing", true);
            tpc__kafka_w_no_tags(w);
        }
        tpc__kafka_w_no_tags(w);
        break;
    case TPC__KAFKA_API_DESCRIBE_TRANSACTIONS:
        tpc__kafka_w_no_tags(w);
        tpc__kafka_w_i32(w, 0);
        tpc__kafka_w_uvarint(w, 2);
        tpc__kafka_w_i16(w, 0);
        tpc__kafka_w_str(w, "short-1", true);
        tpc__kafka_w_str(w, "Ongoing", true);
        tpc__kafka_w_i32(w, 60000);
        tpc__kafka_w_i64(w, 1700000000000);
        tpc__kafka_w_i64(w, 7002);
        tpc__kafka_w_i16(w, 5);
        tpc__kafka_w_uvarint(w, 1);
        tpc__kafka_w_no_tags(w);
        tpc__kafka_w_no_tags(w);
        break;
    default:
        break;
    }
}

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

static bool write_full(int fd, const void *buf, size_t n)
{
    for (size_t put = 0; put < n;) {
        ssize_t r = send(fd, (const char *)buf + put, n - put, MSG_NOSIGNAL);
        if (r <= 0)
            return false;
        put += (size_t)r;
    }
    return true;
}

static void id_of(char *buf, size_t cap, int i)
{
    snprintf(buf, cap, "twopc-app-sink-%d-%d", i % 97, i);
}

/* The body of the answer to @api, after its correlation id. */
static void answer(broker_t *b, int api, tpc__kafka_wbuf_t *w)
{
    char id[64];
    switch (api) {
    case TPC__KAFKA_API_VERSIONS:
        tpc__kafka_w_i16(w, 0);
        tpc__kafka_w_i32(w, 4);
        const int16_t apis[4][3] = {{TPC__KAFKA_API_VERSIONS, 0, 3},
                                    {TPC__KAFKA_API_METADATA, 4, 8},
                                    {TPC__KAFKA_API_DESCRIBE_TRANSACTIONS, 0, 0},
                                    {TPC__KAFKA_API_LIST_TRANSACTIONS, 0, 0}};
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 3; k++)
                tpc__kafka_w_i16(w, apis[i][k]);
        break;
    case TPC__KAFKA_API_METADATA: /* version 4 (the request's is checked by the caller) */
        tpc__kafka_w_i32(w, 0);
        tpc__kafka_w_i32(w, COPIES);
        for (int i = 0; i < COPIES; i++) {
            tpc__kafka_w_i32(w, 1);
            tpc__kafka_w_str(w, "127.0.0.1", false);
            tpc__kafka_w_i32(w, b->port);
            tpc__kafka_w_i16(w, -1); /* no rack */
        }
        tpc__kafka_w_i16(w, -1); /* no cluster id */
        tpc__kafka_w_i32(w, 1);  /* controller */
        tpc__kafka_w_i32(w, 0);  /* no topics */
        break;
    case TPC__KAFKA_API_LIST_TRANSACTIONS:
        tpc__kafka_w_no_tags(w); /* response header */
        tpc__kafka_w_i32(w, 0);
        tpc__kafka_w_i16(w, 0);
        tpc__kafka_w_uvarint(w, 1);
        tpc__kafka_w_uvarint(w, IDS + 1);
        for (int i = 0; i < IDS; i++) {
            id_of(id, sizeof id, i);
            tpc__kafka_w_str(w, id, true);
            tpc__kafka_w_i64(w, 5000 + i);
            tpc__kafka_w_str(w, "Ongoing", true);
            tpc__kafka_w_no_tags(w);
        }
        tpc__kafka_w_no_tags(w);
        break;
    case TPC__KAFKA_API_DESCRIBE_TRANSACTIONS:
        if (b->stall_ms)
            usleep((useconds_t)b->stall_ms * 1000);
        tpc__kafka_w_no_tags(w);
        tpc__kafka_w_i32(w, 0);
        tpc__kafka_w_uvarint(w, IDS + 1);
        for (int i = IDS - 1; i >= 0; i--) {
            id_of(id, sizeof id, i);
            tpc__kafka_w_i16(w, 0);
            tpc__kafka_w_str(w, id, true);
            tpc__kafka_w_str(w, "Ongoing", true);
            tpc__kafka_w_i32(w, 60000);
            tpc__kafka_w_i64(w, 1700000000000 + i);
            tpc__kafka_w_i64(w, 5000 + i);
            tpc__kafka_w_i16(w, (int16_t)(i % 1000));
            tpc__kafka_w_uvarint(w, 2); /* one topic */
            tpc__kafka_w_str(w, "out", true);
            tpc__kafka_w_uvarint(w, 2);
            tpc__kafka_w_i32(w, i % 8);
            tpc__kafka_w_no_tags(w);
            tpc__kafka_w_no_tags(w);
        }
        tpc__kafka_w_no_tags(w);
        break;
    default:
        break;
    }
}

static void *serve(void *arg)
{
    broker_t *b = arg;
    int c;
    while ((c = accept(b->listen_fd, NULL, NULL)) >= 0) {
        for (;;) {
            unsigned char head[4];
            if (!read_full(c, head, 4))
                break;
            uint32_t n = (uint32_t)tpc_load_be(head, 4);
            unsigned char *req = malloc(n);
            if (n < 8 || !req || !read_full(c, req, n)) {
                free(req);
                break;
            }
            int api = (int)tpc_load_be(req, 2);
            if (api >= 0 && api < 128)
                b->asked[api]++;
            if (api == TPC__KAFKA_API_DESCRIBE_TRANSACTIONS)
                b->described = ids_asked(req, n);
            tpc__kafka_wbuf_t w = {0};
            tpc__kafka_w_i32(&w, 0);                                /* the size, below */
            tpc__kafka_w_i32(&w, (int32_t)tpc_load_be(req + 4, 4)); /* the correlation id */
            free(req);
            if (b->cut && api != TPC__KAFKA_API_VERSIONS)
                answer_cut(api, &w, b->port);
            else
                answer(b, api, &w);
            tpc_store_be(w.data, w.len - 4, 4);
            bool ok = !w.oom && write_full(c, w.data, w.len);
            tpc__kafka_wbuf_free(&w);
            if (!ok)
                break;
        }
        close(c);
    }
    return NULL;
}

static void broker_start(broker_t *b, int stall_ms, bool cut)
{
    *b = (broker_t){.stall_ms = stall_ms, .cut = cut};
    b->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    ck_assert_int_ge(b->listen_fd, 0);
    ck_assert_int_eq(bind(b->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(b->listen_fd, 16), 0);
    ck_assert_int_eq(getsockname(b->listen_fd, (struct sockaddr *)&a, &alen), 0);
    b->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&b->thread, NULL, serve, b), 0);
}

static void broker_stop(broker_t *b)
{
    shutdown(b->listen_fd, SHUT_RDWR);
    close(b->listen_fd);
    pthread_join(b->thread, NULL);
}

static int by_id(const void *a, const void *b)
{
    return strcmp(((const tpc__kafka_txn_info_t *)a)->id, ((const tpc__kafka_txn_info_t *)b)->id);
}

START_TEST(test_many_ids_and_repeated_brokers)
{
    broker_t b;
    broker_start(&b, 0, false);
    char bootstrap[32];
    snprintf(bootstrap, sizeof bootstrap, "127.0.0.1:%d", b.port);
    tpc__kafka_wire_conf_t conf = {.bootstrap = bootstrap, .client_id = "check"};
    tpc__kafka_txn_info_t *txns = NULL;
    size_t n = 0;
    const int timeout_ms = 30000;
    int64_t t0 = tpc_clock_ms();
    tpc_error_t *err = tpc__kafka_list_transactions(&conf, "twopc-", true, timeout_ms, &txns, &n);
    int64_t took = tpc_clock_ms() - t0;
    broker_stop(&b);
    ck_assert_msg(err == NULL, "%s", err ? tpc_error_message(err) : "");
    printf("%d ids, Metadata listing one broker %d times: listed and described in %lld ms\n", IDS,
           COPIES, (long long)took);
    ck_assert_int_lt(took, timeout_ms);
    /* The broker was asked once, however often Metadata listed it. */
    ck_assert_int_eq(b.asked[TPC__KAFKA_API_METADATA], 1);
    ck_assert_int_eq(b.asked[TPC__KAFKA_API_LIST_TRANSACTIONS], 1);
    ck_assert_int_eq(b.asked[TPC__KAFKA_API_DESCRIBE_TRANSACTIONS], 1);
    /* Each id once, with its own description. */
    ck_assert_uint_eq(n, IDS);
    for (size_t i = 0; i + 1 < n; i++)
        ck_assert_int_lt(strcmp(txns[i].id, txns[i + 1].id), 0);
    for (int i = 0; i < IDS; i++) {
        tpc__kafka_txn_info_t key;
        id_of(key.id, sizeof key.id, i);
        const tpc__kafka_txn_info_t *t = bsearch(&key, txns, n, sizeof *txns, by_id);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->producer_id, 5000 + i);
        ck_assert_int_eq(t->producer_epoch, i % 1000);
        ck_assert_int_eq(t->start_ms, 1700000000000 + i);
        ck_assert_str_eq(t->state, "Ongoing");
        char topics[32];
        snprintf(topics, sizeof topics, "out[%d]", i % 8);
        ck_assert_str_eq(t->topics, topics);
    }
    free(txns);
}
END_TEST

START_TEST(test_late_answer_ends_at_the_deadline)
{
    broker_t b;
    broker_start(&b, 3000, false); /* DescribeTransactions answers after 3 s */
    char bootstrap[32];
    snprintf(bootstrap, sizeof bootstrap, "127.0.0.1:%d", b.port);
    tpc__kafka_wire_conf_t conf = {.bootstrap = bootstrap, .client_id = "check"};
    tpc__kafka_txn_info_t *txns = NULL;
    size_t n = 0;
    int64_t t0 = tpc_clock_ms();
    tpc_error_t *err = tpc__kafka_list_transactions(&conf, NULL, false, 1500, &txns, &n);
    int64_t took = tpc_clock_ms() - t0;
    broker_stop(&b);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_TIMEOUT);
    ck_assert_ptr_null(txns);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_ge(took, 1400);
    ck_assert_int_lt(took, 2900); /* at the deadline, not when the answer came */
    tpc_error_destroy(err);
}
END_TEST

/* Ids over 255 bytes are kept cut and marked so, two that share their first 255 bytes stay two,
 * and neither is described (asking for the cut one would describe another id, or none). */
START_TEST(test_long_ids_marked_cut)
{
    for (int i = 0; i < 2; i++) {
        memset(long_id[i], 'x', 300);
        long_id[i][299] = (char)('1' + i);
        long_id[i][300] = '\0';
    }
    broker_t b;
    broker_start(&b, 0, true);
    char bootstrap[32];
    snprintf(bootstrap, sizeof bootstrap, "127.0.0.1:%d", b.port);
    tpc__kafka_wire_conf_t conf = {.bootstrap = bootstrap, .client_id = "check"};
    tpc__kafka_txn_info_t *txns = NULL;
    size_t n = 0;
    tpc_error_t *err = tpc__kafka_list_transactions(&conf, NULL, false, 10000, &txns, &n);
    broker_stop(&b);
    ck_assert_msg(err == NULL, "%s", err ? tpc_error_message(err) : "");
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(b.described, 1); /* the short id alone */
    /* Sorted by id, cut ones last. */
    ck_assert_str_eq(txns[0].id, "short-1");
    ck_assert(!txns[0].id_cut);
    ck_assert_int_eq(txns[0].producer_epoch, 5);
    for (int i = 1; i < 3; i++) {
        ck_assert(txns[i].id_cut);
        ck_assert_uint_eq(strlen(txns[i].id), 255);
        ck_assert_int_eq(strncmp(txns[i].id, long_id[0], 255), 0);
        ck_assert_int_eq(txns[i].producer_epoch, -1); /* not described */
        ck_assert_str_eq(txns[i].state, "Ongoing");
    }
    ck_assert_int_ne(txns[1].producer_id, txns[2].producer_id); /* two, not one */
    free(txns);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_admin");
    TCase *tc = tcase_create("bounded");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_many_ids_and_repeated_brokers);
    tcase_add_test(tc, test_late_answer_ends_at_the_deadline);
    tcase_add_test(tc, test_long_ids_marked_cut);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
