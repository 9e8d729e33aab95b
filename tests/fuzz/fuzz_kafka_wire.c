/*
 * libFuzzer harness: the recovery client's Kafka protocol (connectors/kafka/wire/kafka_wire.c,
 * kafka_end_txn.c, kafka_sasl.c, kafka_admin.c, kafka_producers.c) against a broker that this
 * harness plays on 127.0.0.1. The client ends a transaction as a restore does: ApiVersions, SASL
 * when asked (SaslHandshake and SaslAuthenticate, PLAIN or SCRAM-SHA-256), FindCoordinator, EndTxn,
 * with its retries; or, with bit 2 of byte 0, lists the transactions of the cluster as `twopc kafka
 * transactions` does: Metadata, then ListTransactions and DescribeTransactions at each broker; or,
 * with bit 5, describes the active producers of a partition (bit 6: partition 7, else 0) as `twopc
 * kafka producers` does: Metadata for the topic, then DescribeProducers at its leader.
 *
 * Input: byte 0 picks the security (bit 0: SASL; bit 1: SCRAM-SHA-256 rather than PLAIN); then
 * responses, each a 2-byte big-endian length and the response body that follows the correlation id
 * (which the broker copies from the request). The broker answers requests in order, on whichever
 * connection they come (each served by a thread of its own), and closes a connection when the input
 * has no response left. A body may name the broker itself as the coordinator or leader: the 4 bytes
 * "PORT" are replaced by its port.
 *
 * The client may only reach this broker: getaddrinfo() is replaced here by one that resolves
 * 127.0.0.1 with the broker's port and nothing else, so no fuzzed host name is looked up and no
 * other address is connected to. Each input gets a 30 ms deadline.
 */

#include "kafka_wire.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int listen_fd = -1, broker_port;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const uint8_t *input; /* the responses not yet sent */
static size_t input_left;

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    if (!real)
        real = (int (*)(const char *, const char *, const struct addrinfo *,
                        struct addrinfo **))dlsym(RTLD_NEXT, "getaddrinfo");
    char port[16];
    snprintf(port, sizeof port, "%d", broker_port);
    if (!real || !node || !service || strcmp(node, "127.0.0.1") != 0 || strcmp(service, port) != 0)
        return EAI_NONAME;
    struct addrinfo h = hints ? *hints : (struct addrinfo){0};
    h.ai_family = AF_INET;
    h.ai_flags |= AI_NUMERICHOST | AI_NUMERICSERV;
    return real(node, service, &h, res);
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

/* The next response body of the input, copied into @out; false when there is none. */
static bool next_response(uint8_t *out, size_t cap, size_t *len)
{
    pthread_mutex_lock(&mu);
    bool ok = input_left >= 2;
    if (ok) {
        size_t n = (size_t)input[0] << 8 | input[1];
        if (n > input_left - 2)
            n = input_left - 2;
        if (n > cap)
            n = cap;
        memcpy(out, input + 2, n);
        input += 2 + n;
        input_left -= 2 + n;
        *len = n;
    }
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; ok && i + 4 <= *len; i++)
        if (memcmp(out + i, "PORT", 4) == 0) {
            uint32_t p = htonl((uint32_t)broker_port);
            memcpy(out + i, &p, 4);
        }
    return ok;
}

/* One connection, on a thread of its own: the client may hold its bootstrap connection open while
 * it opens another to a leader or coordinator. */
static void *serve(void *arg)
{
    int c = (int)(intptr_t)arg;
    /* On the thread's stack, not the heap: a thread may still be reading when an input ends,
     * and its buffers are no leak. */
    uint8_t req[1 << 16], body[1 << 16], out[4 + 4 + (1 << 16)];
    for (;;) {
        uint8_t head[4];
        if (!read_full(c, head, 4))
            break;
        uint32_t n =
            (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
        if (n < 8 || n > sizeof req || !read_full(c, req, n))
            break;
        size_t len = 0;
        if (!next_response(body, sizeof body, &len))
            break;
        uint32_t size = htonl((uint32_t)(4 + len));
        memcpy(out, &size, 4);
        memcpy(out + 4, req + 4, 4); /* the correlation id */
        memcpy(out + 8, body, len);
        if (write(c, out, 8 + len) != (ssize_t)(8 + len))
            break;
    }
    close(c);
    return NULL;
}

static void *broker_main(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(listen_fd, NULL, NULL);
        if (c < 0)
            continue;
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void *)(intptr_t)c) != 0) {
            close(c);
            continue;
        }
        pthread_detach(t);
    }
    return NULL;
}

static void start_broker(void)
{
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(listen_fd, 64) != 0 || getsockname(listen_fd, (struct sockaddr *)&a, &alen) != 0)
        abort();
    broker_port = ntohs(a.sin_port);
    pthread_t t;
    if (pthread_create(&t, NULL, broker_main, NULL) != 0)
        abort();
    pthread_detach(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (listen_fd < 0)
        start_broker();
    pthread_mutex_lock(&mu);
    input = data + 1;
    input_left = size - 1;
    pthread_mutex_unlock(&mu);

    char bootstrap[32];
    snprintf(bootstrap, sizeof bootstrap, "127.0.0.1:%d", broker_port);
    const char *sasl[] = {"security.protocol", "sasl_plaintext",
                          "sasl.mechanism",    data[0] & 2 ? "SCRAM-SHA-256" : "PLAIN",
                          "sasl.username",     "app",
                          "sasl.password",     "secret"};
    tpc__kafka_wire_conf_t conf = {
        .bootstrap = bootstrap, .props = sasl, .nprops = data[0] & 1 ? 4 : 0};
    tpc_error_t *err;
    if (data[0] & 32) {
        tpc__kafka_producer_info_t *producers = NULL;
        size_t n = 0;
        err = tpc__kafka_describe_producers(&conf, "twopc-fuzz", data[0] & 64 ? 7 : 0, 30,
                                            &producers, &n);
        if (n && !producers)
            abort(); /* entries counted that are not there */
        free(producers);
    } else if (data[0] & 4) {
        tpc__kafka_txn_info_t *txns = NULL;
        size_t n = 0;
        err = tpc__kafka_list_transactions(&conf, data[0] & 8 ? "twopc" : NULL, data[0] & 16, 30,
                                           &txns, &n);
        for (size_t i = 0; i < n; i++) /* what was decoded is a C string within its buffer */
            if (strlen(txns[i].id) >= sizeof txns[i].id ||
                strlen(txns[i].topics) >= sizeof txns[i].topics)
                abort();
        free(txns);
    } else {
        tpc__kafka_end_result_t result;
        int code = 0;
        err = tpc__kafka_end_txn(&conf, "twopc-fuzz-0-0", 4711, 3, true, 30, &result, &code);
    }
    tpc_error_destroy(err);

    pthread_mutex_lock(&mu);
    input = NULL;
    input_left = 0;
    pthread_mutex_unlock(&mu);
    return 0;
}
