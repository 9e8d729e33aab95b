/*
 * The Kafka wire protocol at its smallest: big-endian integers, classic and compact strings,
 * tagged fields, and one blocking TCP connection that frames requests (size, header v1 or v2,
 * body) and reads the matching responses, in the clear or through TLS (kafka_tls.c). At connect
 * it sends ApiVersions v0 (understood by every broker, and allowed before SASL authentication) so
 * that callers can pick request versions the broker supports, then logs in with SASL when the
 * security protocol asks for it (kafka_sasl.c). Every wait is bounded by a deadline. Used only to
 * end transactions of crashed producers (kafka_end_txn.c).
 */
#include "kafka_wire.h"
#include "tpc_kit.h"

#include <librdkafka/rdkafka.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_RESPONSE (64u << 20)
#define MAX_APIS     128

struct tpc__kafka_conn {
    int fd;
    tpc__kafka_tls_t *tls; /* NULL: plaintext */
    int32_t correlation;
    char client_id[64];
    char name[300];
    int16_t min_version[MAX_APIS];
    int16_t max_version[MAX_APIS];
    unsigned char *resp;
};

const char *tpc__kafka_code_name(int code)
{
    return rd_kafka_err2name((rd_kafka_resp_err_t)code);
}

/* ---- encoding ---------------------------------------------------------------------------- */

/* Requests can hold a SASL password: buffers are wiped before they are freed, and grown by copy
 * rather than realloc, which could leave a copy behind. */
static void wipe_free(unsigned char *p, size_t n)
{
    if (p)
        explicit_bzero(p, n);
    free(p);
}

static void put(tpc__kafka_wbuf_t *w, const void *bytes, size_t n)
{
    if (w->oom)
        return;
    if (w->len + n > w->cap) {
        size_t cap = tpc_array_next_cap(w->cap, w->len + n, 1);
        unsigned char *p = cap ? malloc(cap) : NULL;
        if (!p) {
            w->oom = true;
            return;
        }
        if (w->len)
            memcpy(p, w->data, w->len);
        wipe_free(w->data, w->cap);
        w->data = p;
        w->cap = cap;
    }
    memcpy(w->data + w->len, bytes, n);
    w->len += n;
}

static void put_be(tpc__kafka_wbuf_t *w, uint64_t v, int bytes)
{
    unsigned char b[8];
    tpc_store_be(b, v, bytes);
    put(w, b, (size_t)bytes);
}

void tpc__kafka_w_i8(tpc__kafka_wbuf_t *w, int8_t v)
{
    put_be(w, (uint8_t)v, 1);
}

void tpc__kafka_w_i16(tpc__kafka_wbuf_t *w, int16_t v)
{
    put_be(w, (uint16_t)v, 2);
}

void tpc__kafka_w_i32(tpc__kafka_wbuf_t *w, int32_t v)
{
    put_be(w, (uint32_t)v, 4);
}

void tpc__kafka_w_i64(tpc__kafka_wbuf_t *w, int64_t v)
{
    put_be(w, (uint64_t)v, 8);
}

void tpc__kafka_w_uvarint(tpc__kafka_wbuf_t *w, uint64_t v)
{
    while (v >= 0x80) {
        unsigned char b = (unsigned char)(v | 0x80);
        put(w, &b, 1);
        v >>= 7;
    }
    unsigned char b = (unsigned char)v;
    put(w, &b, 1);
}

void tpc__kafka_w_str(tpc__kafka_wbuf_t *w, const char *s, bool compact)
{
    size_t n = s ? strlen(s) : 0;
    if (n > 32767)
        n = 32767;
    if (!s && compact)
        tpc__kafka_w_uvarint(w, 0);
    else if (!s)
        tpc__kafka_w_i16(w, -1);
    else if (compact)
        tpc__kafka_w_uvarint(w, n + 1);
    else
        tpc__kafka_w_i16(w, (int16_t)n);
    if (s)
        put(w, s, n);
}

void tpc__kafka_w_bytes(tpc__kafka_wbuf_t *w, const void *p, size_t n, bool compact)
{
    if (compact)
        tpc__kafka_w_uvarint(w, (uint64_t)n + 1);
    else
        tpc__kafka_w_i32(w, (int32_t)n);
    if (n)
        put(w, p, n);
}

void tpc__kafka_w_no_tags(tpc__kafka_wbuf_t *w)
{
    tpc__kafka_w_uvarint(w, 0);
}

void tpc__kafka_wbuf_free(tpc__kafka_wbuf_t *w)
{
    wipe_free(w->data, w->cap);
    memset(w, 0, sizeof *w);
}

/* ---- decoding ---------------------------------------------------------------------------- */

static const unsigned char *take(tpc__kafka_rbuf_t *r, size_t n)
{
    if (r->bad || r->len - r->pos < n) {
        r->bad = true;
        return NULL;
    }
    const unsigned char *p = r->p + r->pos;
    r->pos += n;
    return p;
}

static uint64_t get_be(tpc__kafka_rbuf_t *r, int bytes)
{
    const unsigned char *p = take(r, (size_t)bytes);
    return p ? tpc_load_be(p, bytes) : 0;
}

int8_t tpc__kafka_r_i8(tpc__kafka_rbuf_t *r)
{
    return (int8_t)(uint8_t)get_be(r, 1);
}

int16_t tpc__kafka_r_i16(tpc__kafka_rbuf_t *r)
{
    return (int16_t)(uint16_t)get_be(r, 2);
}

int32_t tpc__kafka_r_i32(tpc__kafka_rbuf_t *r)
{
    return (int32_t)(uint32_t)get_be(r, 4);
}

int64_t tpc__kafka_r_i64(tpc__kafka_rbuf_t *r)
{
    return (int64_t)get_be(r, 8);
}

uint64_t tpc__kafka_r_uvarint(tpc__kafka_rbuf_t *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        const unsigned char *p = take(r, 1);
        if (!p)
            return 0;
        v |= (uint64_t)(*p & 0x7f) << shift;
        if (!(*p & 0x80))
            return v;
    }
    r->bad = true;
    return 0;
}

int64_t tpc__kafka_r_str(tpc__kafka_rbuf_t *r, bool compact, char *buf, size_t cap)
{
    int64_t n = compact ? (int64_t)tpc__kafka_r_uvarint(r) - 1 : tpc__kafka_r_i16(r);
    buf[0] = '\0';
    if (n < 0)
        return -1;
    const unsigned char *p = take(r, (size_t)n);
    if (!p)
        return -1;
    size_t copy = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
    memcpy(buf, p, copy);
    buf[copy] = '\0';
    return n;
}

void tpc__kafka_r_bytes(tpc__kafka_rbuf_t *r, bool compact, const unsigned char **p, size_t *n)
{
    int64_t len = compact ? (int64_t)tpc__kafka_r_uvarint(r) - 1 : tpc__kafka_r_i32(r);
    *p = NULL;
    *n = 0;
    if (len <= 0)
        return;
    *p = take(r, (size_t)len);
    *n = *p ? (size_t)len : 0;
}

void tpc__kafka_r_skip_tags(tpc__kafka_rbuf_t *r)
{
    uint64_t count = tpc__kafka_r_uvarint(r);
    for (uint64_t i = 0; i < count && !r->bad; i++) {
        tpc__kafka_r_uvarint(r);
        take(r, (size_t)tpc__kafka_r_uvarint(r));
    }
}

/* ---- configuration ----------------------------------------------------------------------- */

const char *tpc__kafka_wire_prop(const tpc__kafka_wire_conf_t *conf, const char *name)
{
    return tpc__kafka_props_get(conf->props, conf->nprops, name);
}

/* Which layers security.protocol asks for. */
static tpc_error_t *parse_protocol(const tpc__kafka_wire_conf_t *conf, bool *tls, bool *sasl)
{
    const char *p = conf->security_protocol;
    if (!p)
        p = tpc__kafka_wire_prop(conf, "security.protocol");
    if (!p)
        p = "plaintext";
    *tls = strcasecmp(p, "ssl") == 0 || strcasecmp(p, "sasl_ssl") == 0;
    *sasl = strcasecmp(p, "sasl_plaintext") == 0 || strcasecmp(p, "sasl_ssl") == 0;
    if (*tls || *sasl || strcasecmp(p, "plaintext") == 0)
        return NULL;
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "unknown security.protocol \"%s\"", p),
        "use plaintext, ssl, sasl_plaintext or sasl_ssl");
}

/* ---- connection -------------------------------------------------------------------------- */

static tpc_error_t *io_error_named(const char *name, const char *what, int errnum)
{
    return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE, "could not %s broker \"%s\": %s",
                         what, name, errnum ? strerror(errnum) : "connection closed");
}

static tpc_error_t *io_error(const tpc__kafka_conn_t *c, const char *what, int errnum)
{
    return io_error_named(c->name, what, errnum);
}

tpc_error_t *tpc__kafka_wait_fd(int fd, short events, int64_t deadline_ms, const char *name,
                                const char *what)
{
    for (;;) {
        int64_t left = deadline_ms - tpc_clock_ms();
        if (left <= 0)
            return tpc_error_new(TPC_ERR_TIMEOUT, TPC_ERROR_RETRIABLE,
                                 "timed out trying to %s broker \"%s\"", what, name);
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, left > 1000 ? 1000 : (int)left);
        if (n > 0)
            return NULL;
        if (n < 0 && errno != EINTR)
            return io_error_named(name, what, errno);
    }
}

static tpc_error_t *wait_fd(const tpc__kafka_conn_t *c, short events, int64_t deadline_ms,
                            const char *what)
{
    return tpc__kafka_wait_fd(c->fd, events, deadline_ms, c->name, what);
}

static tpc_error_t *send_all(tpc__kafka_conn_t *c, const unsigned char *p, size_t n,
                             int64_t deadline_ms)
{
    if (c->tls)
        return tpc__kafka_tls_send(c->tls, p, n, deadline_ms);
    while (n) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            tpc_error_t *err = wait_fd(c, POLLOUT, deadline_ms, "send to");
            if (err)
                return err;
            continue;
        }
        if (w < 0)
            return io_error(c, "send to", errno);
        p += w;
        n -= (size_t)w;
    }
    return NULL;
}

static tpc_error_t *recv_all(tpc__kafka_conn_t *c, unsigned char *p, size_t n, int64_t deadline_ms)
{
    if (c->tls)
        return tpc__kafka_tls_recv(c->tls, p, n, deadline_ms);
    while (n) {
        ssize_t got = recv(c->fd, p, n, 0);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            tpc_error_t *err = wait_fd(c, POLLIN, deadline_ms, "receive from");
            if (err)
                return err;
            continue;
        }
        if (got <= 0)
            return io_error(c, "receive from", got < 0 ? errno : 0);
        p += got;
        n -= (size_t)got;
    }
    return NULL;
}

tpc_error_t *tpc__kafka_conn_call(tpc__kafka_conn_t *c, int api, int version, bool flexible,
                                  const tpc__kafka_wbuf_t *body, int64_t deadline_ms,
                                  tpc__kafka_rbuf_t *resp)
{
    tpc__kafka_wbuf_t w = {0};
    int32_t corr = ++c->correlation;
    tpc__kafka_w_i32(&w, 0); /* size, patched below */
    tpc__kafka_w_i16(&w, (int16_t)api);
    tpc__kafka_w_i16(&w, (int16_t)version);
    tpc__kafka_w_i32(&w, corr);
    tpc__kafka_w_str(&w, c->client_id, false); /* the client id stays a classic string */
    if (flexible)
        tpc__kafka_w_no_tags(&w);
    if (body)
        put(&w, body->data, body->len);
    if (w.oom || (body && body->oom)) {
        tpc__kafka_wbuf_free(&w);
        return tpc_error_nomem();
    }
    uint32_t size = (uint32_t)(w.len - 4);
    tpc_store_be(w.data, size, 4);
    tpc_error_t *err = send_all(c, w.data, w.len, deadline_ms);
    tpc__kafka_wbuf_free(&w);

    unsigned char head[4];
    if (!err)
        err = recv_all(c, head, 4, deadline_ms);
    if (err)
        return err;
    uint32_t len = (uint32_t)tpc_load_be(head, 4);
    if (len < 4 || len > MAX_RESPONSE)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_RETRIABLE,
                             "broker \"%s\" sent a response of %u bytes", c->name, len);
    free(c->resp);
    c->resp = malloc(len);
    if (!c->resp)
        return tpc_error_nomem();
    err = recv_all(c, c->resp, len, deadline_ms);
    if (err)
        return err;
    *resp = (tpc__kafka_rbuf_t){.p = c->resp, .len = len};
    int32_t got = tpc__kafka_r_i32(resp);
    /* ApiVersions answers with response header v0 whatever the request version. */
    if (flexible && api != TPC__KAFKA_API_VERSIONS)
        tpc__kafka_r_skip_tags(resp);
    if (got != corr || resp->bad)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_RETRIABLE,
                             "broker \"%s\" answered request %d with correlation id %d", c->name,
                             (int)corr, (int)got);
    return NULL;
}

static tpc_error_t *read_api_versions(tpc__kafka_conn_t *c, int64_t deadline_ms)
{
    tpc__kafka_rbuf_t r;
    tpc_error_t *err =
        tpc__kafka_conn_call(c, TPC__KAFKA_API_VERSIONS, 0, false, NULL, deadline_ms, &r);
    if (err)
        return err;
    int16_t code = tpc__kafka_r_i16(&r);
    int32_t n = tpc__kafka_r_i32(&r);
    for (int32_t i = 0; i < n && !r.bad; i++) {
        int16_t key = tpc__kafka_r_i16(&r);
        int16_t lo = tpc__kafka_r_i16(&r);
        int16_t hi = tpc__kafka_r_i16(&r);
        if (key >= 0 && key < MAX_APIS) {
            c->min_version[key] = lo;
            c->max_version[key] = hi;
        }
    }
    if (code || r.bad)
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                             "broker \"%s\" did not list its API versions: %s", c->name,
                             r.bad ? "malformed response" : tpc__kafka_code_name(code));
    return NULL;
}

int tpc__kafka_conn_version(const tpc__kafka_conn_t *c, int api, int lo, int hi)
{
    if (api < 0 || api >= MAX_APIS || c->max_version[api] < 0)
        return -1;
    int v = hi < c->max_version[api] ? hi : c->max_version[api];
    return v >= lo && v >= c->min_version[api] ? v : -1;
}

const char *tpc__kafka_conn_name(const tpc__kafka_conn_t *c)
{
    return c->name;
}

void tpc__kafka_conn_close(tpc__kafka_conn_t *c)
{
    if (!c)
        return;
    tpc__kafka_tls_free(c->tls);
    if (c->fd >= 0)
        close(c->fd);
    free(c->resp);
    free(c);
}

static tpc_error_t *connect_addr(tpc__kafka_conn_t *c, const struct addrinfo *ai,
                                 int64_t deadline_ms)
{
    c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (c->fd < 0)
        return io_error(c, "connect to", errno);
    if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS)
            return io_error(c, "connect to", errno);
        tpc_error_t *err = wait_fd(c, POLLOUT, deadline_ms, "connect to");
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (!err && getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr)
            err = io_error(c, "connect to", soerr);
        if (err)
            return err;
    }
    return NULL;
}

tpc_error_t *tpc__kafka_wire_check_prop(const char *name, const char *value)
{
    const char *pair[] = {name, value};
    const tpc__kafka_wire_conf_t one = {.props = pair, .nprops = 1};
    bool tls, sasl;
    if (strcmp(name, "security.protocol") == 0)
        return parse_protocol(&one, &tls, &sasl);
    if ((strcmp(name, "sasl.username") == 0 && strlen(value) > TPC__KAFKA_SCRAM_USER_MAX) ||
        (strcmp(name, "sasl.password") == 0 && strlen(value) > 255))
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "\"%s\" is longer than 255 bytes",
                             name);
    return tpc__kafka_tls_check_prop(name, value);
}

tpc_error_t *tpc__kafka_conn_open(const tpc__kafka_wire_conf_t *conf, const char *host, int port,
                                  int64_t deadline_ms, tpc__kafka_conn_t **out)
{
    *out = NULL;
    bool tls = false, sasl = false;
    tpc_error_t *err = parse_protocol(conf, &tls, &sasl);
    if (!err && sasl)
        err = tpc__kafka_sasl_check(conf);
    if (err)
        return err;
    tpc__kafka_conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return tpc_error_nomem();
    c->fd = -1;
    for (int i = 0; i < MAX_APIS; i++)
        c->max_version[i] = -1;
    snprintf(c->client_id, sizeof c->client_id, "%s", conf->client_id ? conf->client_id : "twopc");
    snprintf(c->name, sizeof c->name, "%s:%d", host, port);

    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0)
        err = tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE,
                            "could not resolve broker \"%s\": %s", c->name, gai_strerror(rc));
    for (struct addrinfo *ai = res; ai && rc == 0; ai = ai->ai_next) {
        tpc_error_destroy(err);
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        err = connect_addr(c, ai, deadline_ms);
        if (!err)
            break;
    }
    if (res)
        freeaddrinfo(res);
    if (!err && tls)
        err = tpc__kafka_tls_start(conf, c->fd, host, c->name, deadline_ms, &c->tls);
    if (!err)
        err = read_api_versions(c, deadline_ms);
    if (!err && sasl)
        err = tpc__kafka_sasl_login(c, conf, deadline_ms);
    if (err) {
        tpc__kafka_conn_close(c);
        return err;
    }
    *out = c;
    return NULL;
}

/* Split "host:port" (or "[v6]:port"); false if it is not one. */
static bool split_hostport(const char *s, size_t n, char *host, size_t cap, int *port)
{
    const char *colon = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ':')
            colon = s + i;
    if (!colon || colon == s)
        return false;
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    const char *scheme = memchr(h, '/', hl); /* "PLAINTEXT://host:port" */
    if (scheme && scheme + 1 < h + hl && scheme[1] == '/') {
        hl -= (size_t)(scheme + 2 - h);
        h = scheme + 2;
    }
    if (hl == 0 || hl >= cap)
        return false;
    memcpy(host, h, hl);
    host[hl] = '\0';
    char digits[8] = {0};
    size_t dl = (size_t)(s + n - colon - 1);
    if (dl == 0 || dl >= sizeof digits)
        return false;
    memcpy(digits, colon + 1, dl);
    int64_t p;
    if (!tpc_parse_int(digits, 1, 65535, &p))
        return false;
    *port = (int)p;
    return true;
}

tpc_error_t *tpc__kafka_conn_open_bootstrap(const tpc__kafka_wire_conf_t *conf, int64_t deadline_ms,
                                            tpc__kafka_conn_t **out)
{
    *out = NULL;
    const char *s = conf->bootstrap ? conf->bootstrap : "";
    tpc_error_t *err = NULL;
    while (*s) {
        size_t n = strcspn(s, ", ");
        char host[256];
        int port = 0;
        if (n && !split_hostport(s, n, host, sizeof host, &port)) {
            tpc_error_destroy(err);
            return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                                "invalid bootstrap server \"%.*s\"", (int)n, s),
                                  "give host:port pairs separated by commas");
        }
        if (n) {
            tpc_error_destroy(err);
            err = tpc__kafka_conn_open(conf, host, port, deadline_ms, out);
            /* Another server cannot mend a configuration, certificate or login error. */
            if (!err || !tpc_error_is_retriable(err))
                return err;
        }
        s += n;
        s += strspn(s, ", ");
    }
    if (!err)
        err = tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "no bootstrap servers given"),
            "set \"kafka.bootstrap.servers\" to host:port pairs");
    return err;
}
