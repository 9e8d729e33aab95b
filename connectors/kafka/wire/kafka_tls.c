/*
 * TLS for the wire client (kafka_wire.c) through OpenSSL, set up from librdkafka's property names
 * so that the sink's configuration serves both: ssl.ca.location (a PEM file, or a folder of
 * certificates named by their hashes as `openssl rehash` makes them; unset or "probe": OpenSSL's
 * default store), enable.ssl.certificate.verification, ssl.endpoint.identification.algorithm
 * ("https", the default: the certificate must name the host connected to, as a DNS name or as an
 * IP address; "none"), ssl.cipher.suites, and a client certificate from
 * ssl.certificate.location and ssl.key.location (ssl.key.password for an encrypted key).
 * librdkafka's other ways to give keys and certificates (in-memory PEM, PKCS#12 keystores,
 * engines) are refused by name rather than ignored. Every connection gets its own context: only a
 * handful are made, at recovery, so nothing is worth caching.
 */
#include "kafka_wire.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

struct tpc__kafka_tls {
    SSL_CTX *ctx;
    SSL *ssl;
    int fd;
    const char *name; /* the connection's, which outlives the session */
};

/* Properties of librdkafka that this client does not implement. */
static const char *const unsupported_props[] = {
    "ssl.ca.pem",       "ssl.certificate.pem", "ssl.key.pem",   "ssl.keystore.location",
    "ssl.crl.location", "ssl.engine.location", "ssl.providers",
};

static tpc_error_t *config_error(const char *name, const char *value, const char *hint)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                        "invalid value \"%s\" for \"%s\"", value, name),
                          "%s", hint);
}

/* The reason of the last OpenSSL error ("certificate verify failed"), emptying the queue. */
static const char *openssl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e ? ERR_reason_error_string(e) : NULL;
    if (reason)
        snprintf(buf, cap, "%s", reason);
    else if (e)
        snprintf(buf, cap, "OpenSSL error %lx", e);
    else
        snprintf(buf, cap, "unknown TLS error");
    ERR_clear_error();
    return buf;
}

static tpc_error_t *flag(const tpc__kafka_wire_conf_t *conf, const char *name, bool dflt, bool *out)
{
    const char *v = tpc__kafka_wire_prop(conf, name);
    *out = dflt;
    if (!v)
        return NULL;
    if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = true;
    else if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = false;
    else
        return config_error(name, v, "use true or false");
    return NULL;
}

tpc_error_t *tpc__kafka_tls_check_prop(const char *name, const char *value)
{
    const char *pair[] = {name, value};
    const tpc__kafka_wire_conf_t one = {.props = pair, .nprops = 1};
    bool b;
    if (strcmp(name, "enable.ssl.certificate.verification") == 0)
        return flag(&one, name, true, &b);
    if (strcmp(name, "ssl.endpoint.identification.algorithm") == 0 &&
        strcasecmp(value, "https") != 0 && strcasecmp(value, "none") != 0)
        return config_error(name, value, "use https or none");
    bool file = strcmp(name, "ssl.certificate.location") == 0 ||
                strcmp(name, "ssl.key.location") == 0 ||
                (strcmp(name, "ssl.ca.location") == 0 && strcmp(value, "probe") != 0);
    if (file && access(value, R_OK) != 0)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "could not read %s \"%s\": %s", name, value,
                                            strerror(errno)),
                              "give a PEM file%s this program may read",
                              name[4] == 'c' && name[5] == 'a' ? ", or a folder of them," : "");
    return NULL;
}

static int key_password(char *buf, int size, int rwflag, void *userdata)
{
    (void)rwflag;
    const char *pw = userdata;
    size_t n = strlen(pw);
    if (n > (size_t)size)
        return -1;
    memcpy(buf, pw, n);
    return (int)n;
}

static tpc_error_t *load_ca(SSL_CTX *ctx, const tpc__kafka_wire_conf_t *conf)
{
    char why[256];
    const char *ca = tpc__kafka_wire_prop(conf, "ssl.ca.location");
    if (!ca || strcmp(ca, "probe") == 0) {
        if (SSL_CTX_set_default_verify_paths(ctx) == 1)
            return NULL;
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "could not load the system's CA certificates: %s",
                                            openssl_reason(why, sizeof why)),
                              "set \"ssl.ca.location\" to the CA certificate of the cluster");
    }
    struct stat st;
    if (stat(ca, &st) != 0)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "could not read ssl.ca.location \"%s\": %s", ca,
                                            strerror(errno)),
                              "give a PEM file of CA certificates, or a folder of them");
    int ok =
        S_ISDIR(st.st_mode) ? SSL_CTX_load_verify_dir(ctx, ca) : SSL_CTX_load_verify_file(ctx, ca);
    if (ok == 1)
        return NULL;
    return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                        "could not load the CA certificates of ssl.ca.location "
                                        "\"%s\": %s",
                                        ca, openssl_reason(why, sizeof why)),
                          "give a PEM file of CA certificates, or a folder prepared with "
                          "openssl rehash");
}

static tpc_error_t *load_client_cert(SSL_CTX *ctx, const tpc__kafka_wire_conf_t *conf)
{
    char why[256];
    const char *cert = tpc__kafka_wire_prop(conf, "ssl.certificate.location");
    const char *key = tpc__kafka_wire_prop(conf, "ssl.key.location");
    const char *pw = tpc__kafka_wire_prop(conf, "ssl.key.password");
    if (!cert && !key)
        return NULL;
    if (!cert || !key)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "\"%s\" is set without \"%s\"",
                                            cert ? "ssl.certificate.location" : "ssl.key.location",
                                            cert ? "ssl.key.location" : "ssl.certificate.location"),
                              "a client certificate needs both its certificate and its key");
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                             "could not load the client certificate of ssl.certificate.location "
                             "\"%s\": %s",
                             cert, openssl_reason(why, sizeof why));
    SSL_CTX_set_default_passwd_cb(ctx, key_password);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)(pw ? pw : ""));
    int ok = SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    if (ok != 1)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "could not load the private key of ssl.key.location "
                                            "\"%s\": %s",
                                            key, openssl_reason(why, sizeof why)),
                              "give a PEM key, and ssl.key.password if it is encrypted");
    if (SSL_CTX_check_private_key(ctx) != 1)
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                             "the key of ssl.key.location \"%s\" does not belong to the "
                             "certificate of ssl.certificate.location \"%s\"",
                             key, cert);
    return NULL;
}

static tpc_error_t *make_context(const tpc__kafka_wire_conf_t *conf, bool *verify_host,
                                 SSL_CTX **out)
{
    for (size_t i = 0; i < sizeof unsupported_props / sizeof *unsupported_props; i++)
        if (tpc__kafka_wire_prop(conf, unsupported_props[i]))
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                              "\"%s\" is not supported for ending transactions of crashed "
                              "producers",
                              unsupported_props[i]),
                "give PEM files with ssl.ca.location, ssl.certificate.location and "
                "ssl.key.location instead");
    bool verify = true;
    tpc_error_t *err = flag(conf, "enable.ssl.certificate.verification", true, &verify);
    if (err)
        return err;
    const char *algo = tpc__kafka_wire_prop(conf, "ssl.endpoint.identification.algorithm");
    if (algo && strcasecmp(algo, "https") != 0 && strcasecmp(algo, "none") != 0)
        return config_error("ssl.endpoint.identification.algorithm", algo, "use https or none");
    *verify_host = verify && (!algo || strcasecmp(algo, "https") == 0);

    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "could not make a TLS context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    const char *ciphers = tpc__kafka_wire_prop(conf, "ssl.cipher.suites");
    if (ciphers && SSL_CTX_set_cipher_list(ctx, ciphers) != 1) {
        ERR_clear_error();
        err = config_error("ssl.cipher.suites", ciphers, "give an OpenSSL cipher list");
    }
    if (!err && verify)
        err = load_ca(ctx, conf);
    if (!err)
        err = load_client_cert(ctx, conf);
    if (err) {
        SSL_CTX_free(ctx);
        return err;
    }
    *out = ctx;
    return NULL;
}

/* The handshake failed: say why, and whether trying again could help. */
static tpc_error_t *handshake_error(tpc__kafka_tls_t *t, const char *host, int ssl_err)
{
    char why[256];
    long v = SSL_get_verify_result(t->ssl);
    if (v != X509_V_OK) {
        ERR_clear_error();
        tpc_error_t *err = tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                                         "TLS certificate verify failed for broker \"%s\": %s",
                                         t->name, X509_verify_cert_error_string(v));
        if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
            return tpc_error_hint(err,
                                  "the broker's certificate does not name \"%s\": connect by a "
                                  "name it lists, or set ssl.endpoint.identification.algorithm "
                                  "to none",
                                  host);
        return tpc_error_hint(err, "set ssl.ca.location to the certificate of the CA that signed "
                                   "the broker's certificate");
    }
    if (ssl_err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        int e = errno;
        return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE,
                             "TLS handshake with broker \"%s\" failed: %s", t->name,
                             e ? strerror(e) : "connection closed");
    }
    return tpc_error_hint(tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                                        "TLS handshake with broker \"%s\" failed: %s", t->name,
                                        openssl_reason(why, sizeof why)),
                          "check that the listener speaks TLS (security.protocol ssl or "
                          "sasl_ssl) and accepts this client's certificate");
}

/* Wait for what OpenSSL asked for; @returns NULL to try again, or an error. */
static tpc_error_t *want(tpc__kafka_tls_t *t, int ssl_err, int64_t deadline_ms, const char *what,
                         bool *again)
{
    *again = ssl_err == SSL_ERROR_WANT_READ || ssl_err == SSL_ERROR_WANT_WRITE;
    if (!*again)
        return NULL;
    return tpc__kafka_wait_fd(t->fd, ssl_err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_ms,
                              t->name, what);
}

tpc_error_t *tpc__kafka_tls_start(const tpc__kafka_wire_conf_t *conf, int fd, const char *host,
                                  const char *name, int64_t deadline_ms, tpc__kafka_tls_t **out)
{
    *out = NULL;
    tpc__kafka_tls_t *t = calloc(1, sizeof *t);
    if (!t)
        return tpc_error_nomem();
    t->fd = fd;
    t->name = name;
    bool verify_host = true;
    ERR_clear_error();
    tpc_error_t *err = make_context(conf, &verify_host, &t->ctx);
    if (!err && !(t->ssl = SSL_new(t->ctx)))
        err = tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "could not make a TLS session");
    if (!err) {
        unsigned char addr[16];
        bool is_ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
        X509_VERIFY_PARAM *param = SSL_get0_param(t->ssl);
        int ok = 1;
        if (verify_host && is_ip) {
            ok = X509_VERIFY_PARAM_set1_ip_asc(param, host);
        } else if (verify_host) {
            X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            ok = X509_VERIFY_PARAM_set1_host(param, host, 0);
        }
        if (ok == 1 && !is_ip)
            ok = (int)SSL_set_tlsext_host_name(t->ssl, host);
        if (ok != 1 || SSL_set_fd(t->ssl, fd) != 1)
            err = tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                                "could not set up TLS for broker \"%s\"", name);
    }
    while (!err) {
        ERR_clear_error();
        errno = 0;
        int rc = SSL_connect(t->ssl);
        if (rc == 1)
            break;
        int ssl_err = SSL_get_error(t->ssl, rc);
        bool again = false;
        err = want(t, ssl_err, deadline_ms, "finish the TLS handshake with", &again);
        if (!again)
            err = handshake_error(t, host, ssl_err);
    }
    if (err) {
        tpc__kafka_tls_free(t);
        return err;
    }
    *out = t;
    return NULL;
}

/* A read or write failed for good. */
static tpc_error_t *io_error(tpc__kafka_tls_t *t, int ssl_err, const char *what)
{
    char why[256];
    if (ssl_err == SSL_ERROR_SSL)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                                            "could not %s broker \"%s\": TLS error: %s", what,
                                            t->name, openssl_reason(why, sizeof why)),
                              "a listener that wants a client certificate ends the session "
                              "after the handshake: set ssl.certificate.location and "
                              "ssl.key.location to one it trusts");
    int e = ssl_err == SSL_ERROR_SYSCALL ? errno : 0;
    ERR_clear_error();
    return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE, "could not %s broker \"%s\": %s",
                         what, t->name, e ? strerror(e) : "connection closed");
}

tpc_error_t *tpc__kafka_tls_send(tpc__kafka_tls_t *t, const unsigned char *p, size_t n,
                                 int64_t deadline_ms)
{
    while (n) {
        size_t done = 0;
        ERR_clear_error();
        errno = 0;
        int rc = SSL_write_ex(t->ssl, p, n, &done);
        if (rc == 1) {
            p += done;
            n -= done;
            continue;
        }
        int ssl_err = SSL_get_error(t->ssl, rc);
        bool again = false;
        tpc_error_t *err = want(t, ssl_err, deadline_ms, "send to", &again);
        if (err || !again)
            return err ? err : io_error(t, ssl_err, "send to");
    }
    return NULL;
}

tpc_error_t *tpc__kafka_tls_recv(tpc__kafka_tls_t *t, unsigned char *p, size_t n,
                                 int64_t deadline_ms)
{
    while (n) {
        size_t got = 0;
        ERR_clear_error();
        errno = 0;
        int rc = SSL_read_ex(t->ssl, p, n, &got);
        if (rc == 1) {
            p += got;
            n -= got;
            continue;
        }
        int ssl_err = SSL_get_error(t->ssl, rc);
        bool again = false;
        tpc_error_t *err = want(t, ssl_err, deadline_ms, "receive from", &again);
        if (err || !again)
            return err ? err : io_error(t, ssl_err, "receive from");
    }
    return NULL;
}

void tpc__kafka_tls_free(tpc__kafka_tls_t *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    SSL_CTX_free(t->ctx);
    free(t);
}
