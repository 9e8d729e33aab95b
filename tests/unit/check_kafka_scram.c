/*
 * SCRAM login of the recovery client against a broker that answers on 127.0.0.1 but is not one:
 * this test plays the broker (ApiVersions, SaslHandshake, SaslAuthenticate) and records every
 * SaslAuthenticate request it gets. A server-first message of normal size gets a client-final
 * message that holds exactly "c=biws,r=<nonce>,p=<proof>"; a server nonce far longer than a
 * broker sends is refused with a clear error and the client sends nothing more, so no byte of its
 * memory beyond a message can reach the peer.
 */
#include "tpc_kafka.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int listen_fd;
    int port;
    size_t nonce_extra; /* bytes the server appends to the client's nonce */
    pthread_t thread;
    /* what the client sent */
    int auth_requests;
    char client_final[4096];
    size_t client_final_len;
} fake_broker_t;

static bool read_full(int fd, void *p, size_t n)
{
    unsigned char *b = p;
    while (n) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 10000) <= 0)
            return false;
        ssize_t got = read(fd, b, n);
        if (got <= 0)
            return false;
        b += got;
        n -= (size_t)got;
    }
    return true;
}

static void put_be(unsigned char **p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        (*p)[bytes - 1 - i] = (unsigned char)(v >> (8 * i));
    *p += bytes;
}

static uint64_t get_be(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

static void put_str(unsigned char **p, const char *s)
{
    size_t n = strlen(s);
    put_be(p, n, 2);
    memcpy(*p, s, n);
    *p += n;
}

static void respond(int fd, int32_t corr, const unsigned char *body, size_t n)
{
    unsigned char head[8], *p = head;
    put_be(&p, n + 4, 4);
    put_be(&p, (uint32_t)corr, 4);
    ck_assert_int_eq(write(fd, head, 8), 8);
    ck_assert_int_eq(write(fd, body, n), (ssize_t)n);
}

/* Serve one connection; false when the client closed it. */
static bool serve(fake_broker_t *b, int fd)
{
    static unsigned char req[1 << 16], body[1 << 14];
    for (;;) {
        unsigned char head[4];
        if (!read_full(fd, head, 4))
            return false;
        size_t len = (size_t)get_be(head, 4);
        ck_assert_uint_le(len, sizeof req);
        ck_assert(read_full(fd, req, len));
        int api = (int)get_be(req, 2);
        int32_t corr = (int32_t)get_be(req + 4, 4);
        size_t off = 8 + 2 + get_be(req + 8, 2); /* past the client id */
        unsigned char *p = body;
        if (api == 18) { /* ApiVersions v0: SaslHandshake v1, SaslAuthenticate v0 */
            put_be(&p, 0, 2);
            put_be(&p, 2, 4);
            put_be(&p, 17, 2), put_be(&p, 0, 2), put_be(&p, 1, 2);
            put_be(&p, 36, 2), put_be(&p, 0, 2), put_be(&p, 0, 2);
        } else if (api == 17) {
            put_be(&p, 0, 2);
            put_be(&p, 1, 4);
            put_str(&p, "SCRAM-SHA-512");
        } else if (api == 36) {
            size_t n = (size_t)get_be(req + off, 4);
            const char *msg = (const char *)req + off + 4;
            b->auth_requests++;
            put_be(&p, 0, 2);
            put_be(&p, 0xffff, 2); /* null error message */
            char reply[8192];
            if (b->auth_requests == 1) {
                const char *r = strstr(msg, ",r=");
                ck_assert_ptr_nonnull(r);
                int cl = (int)(msg + n - (r + 3));
                int k = snprintf(reply, sizeof reply, "r=%.*s", cl, r + 3);
                for (size_t i = 0; i < b->nonce_extra; i++)
                    reply[k++] = (char)('A' + i % 26);
                snprintf(reply + k, sizeof reply - (size_t)k, ",s=c2FsdA==,i=4096");
            } else {
                ck_assert_uint_lt(n, sizeof b->client_final);
                memcpy(b->client_final, msg, n);
                b->client_final_len = n;
                snprintf(reply, sizeof reply, "e=invalid-proof");
            }
            size_t rl = strlen(reply);
            put_be(&p, rl, 4);
            memcpy(p, reply, rl);
            p += rl;
        } else {
            return false;
        }
        respond(fd, corr, body, (size_t)(p - body));
    }
}

static void *broker_main(void *arg)
{
    fake_broker_t *b = arg;
    struct pollfd pfd = {.fd = b->listen_fd, .events = POLLIN};
    while (poll(&pfd, 1, 3000) > 0) {
        int fd = accept(b->listen_fd, NULL, NULL);
        if (fd < 0)
            break;
        serve(b, fd);
        close(fd);
    }
    return NULL;
}

static void broker_start(fake_broker_t *b, size_t nonce_extra)
{
    memset(b, 0, sizeof *b);
    b->nonce_extra = nonce_extra;
    b->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    ck_assert_int_eq(bind(b->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(b->listen_fd, 4), 0);
    ck_assert_int_eq(getsockname(b->listen_fd, (struct sockaddr *)&a, &alen), 0);
    b->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&b->thread, NULL, broker_main, b), 0);
}

static tpc_error_t *login(fake_broker_t *b)
{
    char bootstrap[64];
    snprintf(bootstrap, sizeof bootstrap, "127.0.0.1:%d", b->port);
    const char *props[] = {"security.protocol", "sasl_plaintext", "sasl.mechanism",
                           "SCRAM-SHA-512",     "sasl.username",  "app",
                           "sasl.password",     "secret",         NULL};
    tpc_error_t *err = tpc_kafka_end_transaction(bootstrap, props, "tx", 1, 0, true, 2000);
    shutdown(b->listen_fd, SHUT_RDWR);
    pthread_join(b->thread, NULL);
    close(b->listen_fd);
    return err;
}

START_TEST(test_normal_nonce_gets_exact_client_final)
{
    fake_broker_t b;
    broker_start(&b, 24);
    tpc_error_t *err = login(&b);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(tpc_error_message(err), "failed at broker") &&
                      strstr(tpc_error_message(err), "invalid-proof"),
                  "%s", tpc_error_message(err));
    tpc_error_destroy(err);
    ck_assert_int_eq(b.auth_requests, 2);
    /* c=biws,r=<32 + 24 characters>,p=<88 characters of base64 SHA-512> */
    ck_assert_uint_eq(b.client_final_len, 9 + 32 + 24 + 3 + 88);
    ck_assert_int_eq(memcmp(b.client_final, "c=biws,r=", 9), 0);
    ck_assert_int_eq(memcmp(b.client_final + 9 + 32 + 24, ",p=", 3), 0);
}
END_TEST

/* A server nonce of 1990 bytes once made a 2122-byte client-final message in a 2048-byte buffer,
 * all of it sent. */
START_TEST(test_huge_nonce_refused_and_nothing_sent)
{
    size_t extras[] = {1990, 600, 1400};
    for (size_t i = 0; i < sizeof extras / sizeof extras[0]; i++) {
        fake_broker_t b;
        broker_start(&b, extras[i]);
        tpc_error_t *err = login(&b);
        ck_assert_msg(b.auth_requests == 1,
                      "nonce of %zu extra bytes: the client sent a client-final message of %zu "
                      "bytes",
                      extras[i], b.client_final_len);
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CORRUPT);
        ck_assert_msg(strstr(tpc_error_message(err), "SCRAM") &&
                          strstr(tpc_error_message(err), "accepted"),
                      "%s", tpc_error_message(err));
        tpc_error_destroy(err);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_scram");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_normal_nonce_gets_exact_client_final);
    tcase_add_test(tc, test_huge_nonce_refused_and_nothing_sent);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
