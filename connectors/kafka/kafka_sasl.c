/*
 * SASL login of a wire connection (kafka_wire.c), after ApiVersions: SaslHandshake v1 names the
 * mechanism, then SaslAuthenticate (v0 to v2) carries the mechanism's messages. PLAIN sends the
 * user name and password in one message, so outside tests it belongs on a TLS listener.
 * SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) prove that the client knows the password
 * without sending it, and the client checks the broker's signature in turn, so that a server that
 * does not know the password cannot pose as the broker. Settings are librdkafka's:
 * sasl.mechanism (or sasl.mechanisms; librdkafka's default, GSSAPI, is refused like OAUTHBEARER),
 * sasl.username and sasl.password. The password appears in no message, and buffers that held it
 * or keys derived from it are wiped before they are freed.
 */
#include "kafka_wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MSG_MAX         2048
#define SCRAM_MIN_ITERS 4096 /* RFC 7677's floor, and Kafka's */
#define SCRAM_MAX_ITERS 1000000

typedef enum { MECH_PLAIN, MECH_SCRAM_256, MECH_SCRAM_512 } mech_t;

static const char *const mech_names[] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"};

static const char *mechanism_prop(const tpc__kafka_wire_conf_t *conf)
{
    const char *m = tpc__kafka_wire_prop(conf, "sasl.mechanism");
    if (!m)
        m = tpc__kafka_wire_prop(conf, "sasl.mechanisms");
    return m ? m : "GSSAPI";
}

static tpc_error_t *parse_mechanism(const tpc__kafka_wire_conf_t *conf, mech_t *out)
{
    const char *m = mechanism_prop(conf);
    for (int i = 0; i < 3; i++)
        if (strcasecmp(m, mech_names[i]) == 0) {
            *out = (mech_t)i;
            return NULL;
        }
    return tpc_error_hint(tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                                        "SASL mechanism \"%s\" is not supported for ending "
                                        "transactions of crashed producers",
                                        m),
                          "set sasl.mechanism to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 "
                          "(librdkafka's default is GSSAPI)");
}

tpc_error_t *tpc__kafka_sasl_check(const tpc__kafka_wire_conf_t *conf)
{
    mech_t mech;
    tpc_error_t *err = parse_mechanism(conf, &mech);
    if (err)
        return err;
    const char *user = tpc__kafka_wire_prop(conf, "sasl.username");
    const char *pw = tpc__kafka_wire_prop(conf, "sasl.password");
    if (!user || !*user || !pw)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "SASL %s needs sasl.username and sasl.password",
                                            mech_names[mech]),
                              "set both, as for librdkafka");
    if (strlen(user) > 255 || strlen(pw) > 255)
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                             "sasl.username or sasl.password is longer than 255 bytes");
    return NULL;
}

static tpc_error_t *malformed(const tpc__kafka_conn_t *c, const char *what)
{
    return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL, "broker \"%s\" sent a malformed %s",
                         tpc__kafka_conn_name(c), what);
}

static tpc_error_t *handshake(tpc__kafka_conn_t *c, mech_t mech, int64_t deadline_ms)
{
    if (tpc__kafka_conn_version(c, TPC__KAFKA_API_SASL_HANDSHAKE, 1, 1) < 0)
        return tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                             "broker \"%s\" does not support SaslHandshake version 1",
                             tpc__kafka_conn_name(c));
    tpc__kafka_wbuf_t w = {0};
    tpc__kafka_w_str(&w, mech_names[mech], false);
    tpc__kafka_rbuf_t r;
    tpc_error_t *err =
        tpc__kafka_conn_call(c, TPC__KAFKA_API_SASL_HANDSHAKE, 1, false, &w, deadline_ms, &r);
    tpc__kafka_wbuf_free(&w);
    if (err)
        return err;
    int16_t code = tpc__kafka_r_i16(&r);
    int32_t n = tpc__kafka_r_i32(&r);
    char enabled[512] = "", one[64];
    for (int32_t i = 0; i < n && !r.bad; i++) {
        tpc__kafka_r_str(&r, false, one, sizeof one);
        size_t len = strlen(enabled);
        snprintf(enabled + len, sizeof enabled - len, "%s%s", i ? ", " : "", one);
    }
    if (r.bad)
        return malformed(c, "SaslHandshake response");
    if (code == TPC__KAFKA_E_UNSUPPORTED_SASL_MECHANISM)
        return tpc_error_hint(tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                                            "broker \"%s\" does not enable SASL mechanism \"%s\" "
                                            "(it enables: %s)",
                                            tpc__kafka_conn_name(c), mech_names[mech],
                                            n > 0 ? enabled : "none"),
                              "set sasl.mechanism to one the listener enables");
    if (code)
        return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                             "SaslHandshake with broker \"%s\" failed: %s", tpc__kafka_conn_name(c),
                             tpc__kafka_code_name(code));
    return NULL;
}

/* One SaslAuthenticate round trip: send @msg, put the broker's answer in @reply (NUL-terminated).
 * A rejection is an authentication failure carrying the broker's message. */
static tpc_error_t *authenticate(tpc__kafka_conn_t *c, const tpc__kafka_wire_conf_t *conf,
                                 mech_t mech, const char *msg, size_t len, int64_t deadline_ms,
                                 char *reply, size_t cap)
{
    int v = tpc__kafka_conn_version(c, TPC__KAFKA_API_SASL_AUTHENTICATE, 0, 2);
    if (v < 0)
        return tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                             "broker \"%s\" supports no SaslAuthenticate version from 0 to 2",
                             tpc__kafka_conn_name(c));
    bool flex = v >= 2;
    tpc__kafka_wbuf_t w = {0};
    tpc__kafka_w_bytes(&w, msg, len, flex);
    if (flex)
        tpc__kafka_w_no_tags(&w);
    tpc__kafka_rbuf_t r;
    tpc_error_t *err =
        tpc__kafka_conn_call(c, TPC__KAFKA_API_SASL_AUTHENTICATE, v, flex, &w, deadline_ms, &r);
    tpc__kafka_wbuf_free(&w);
    if (err)
        return err;
    char broker_msg[512];
    const unsigned char *bytes;
    size_t n;
    int16_t code = tpc__kafka_r_i16(&r);
    tpc__kafka_r_str(&r, flex, broker_msg, sizeof broker_msg);
    tpc__kafka_r_bytes(&r, flex, &bytes, &n);
    if (r.bad)
        return malformed(c, "SaslAuthenticate response");
    if (code)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                          "authentication as \"%s\" with SASL %s failed at broker \"%s\": %s%s%s",
                          tpc__kafka_wire_prop(conf, "sasl.username"), mech_names[mech],
                          tpc__kafka_conn_name(c), tpc__kafka_code_name(code),
                          broker_msg[0] ? ": " : "", broker_msg),
            "check sasl.username and sasl.password; SCRAM credentials exist per mechanism");
    if (n >= cap)
        return malformed(c, "SASL message");
    if (n)
        memcpy(reply, bytes, n);
    reply[n] = '\0';
    return NULL;
}

static tpc_error_t *login_plain(tpc__kafka_conn_t *c, const tpc__kafka_wire_conf_t *conf,
                                int64_t deadline_ms)
{
    const char *user = tpc__kafka_wire_prop(conf, "sasl.username");
    const char *pw = tpc__kafka_wire_prop(conf, "sasl.password");
    char msg[MSG_MAX], reply[MSG_MAX];
    /* authorization id (empty) NUL user NUL password */
    size_t ul = strlen(user), pl = strlen(pw);
    msg[0] = '\0';
    memcpy(msg + 1, user, ul);
    msg[1 + ul] = '\0';
    memcpy(msg + 2 + ul, pw, pl);
    tpc_error_t *err =
        authenticate(c, conf, MECH_PLAIN, msg, 2 + ul + pl, deadline_ms, reply, sizeof reply);
    OPENSSL_cleanse(msg, sizeof msg);
    return err;
}

/* ---- SCRAM ------------------------------------------------------------------------------- */

static size_t b64_encode(const unsigned char *in, size_t n, char *out)
{
    return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* @returns the decoded length, or -1 for text that is not base64. */
static int b64_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
    if (n % 4 || n / 4 * 3 > cap)
        return -1;
    int len = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
    if (len < 0)
        return -1;
    for (size_t i = n; i > 0 && in[i - 1] == '='; i--)
        len--;
    return len;
}

/* The value of attribute @key ("s") in a SCRAM message, as pointer and length. */
static bool scram_attr(const char *msg, char key, const char **val, size_t *len)
{
    for (const char *p = msg; *p;) {
        size_t n = strcspn(p, ",");
        if (n >= 2 && p[0] == key && p[1] == '=') {
            *val = p + 2;
            *len = n - 2;
            return true;
        }
        p += n;
        p += *p == ',';
    }
    return false;
}

/* User name with '=' and ',' escaped as RFC 5802 wants. */
static void scram_name(const char *user, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = user; *p && o + 4 < cap; p++) {
        if (*p == '=' || *p == ',') {
            memcpy(out + o, *p == '=' ? "=3D" : "=2C", 3);
            o += 3;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

typedef struct {
    unsigned char salted[EVP_MAX_MD_SIZE];
    unsigned char client_key[EVP_MAX_MD_SIZE];
    unsigned char stored_key[EVP_MAX_MD_SIZE];
    unsigned char client_sig[EVP_MAX_MD_SIZE];
    unsigned char server_key[EVP_MAX_MD_SIZE];
    unsigned char server_sig[EVP_MAX_MD_SIZE];
    unsigned char proof[EVP_MAX_MD_SIZE];
} scram_keys_t;

/* Derive the proof and the expected server signature (RFC 5802 section 3). */
static bool scram_derive(const EVP_MD *md, const char *pw, const unsigned char *salt,
                         size_t salt_len, int iters, const char *auth_msg, scram_keys_t *k)
{
    int hl = EVP_MD_get_size(md);
    unsigned int len = 0;
    const unsigned char *am = (const unsigned char *)auth_msg;
    size_t aml = strlen(auth_msg);
    if (PKCS5_PBKDF2_HMAC(pw, (int)strlen(pw), salt, (int)salt_len, iters, md, hl, k->salted) != 1)
        return false;
    if (!HMAC(md, k->salted, hl, (const unsigned char *)"Client Key", 10, k->client_key, &len) ||
        EVP_Digest(k->client_key, (size_t)hl, k->stored_key, NULL, md, NULL) != 1 ||
        !HMAC(md, k->stored_key, hl, am, aml, k->client_sig, &len) ||
        !HMAC(md, k->salted, hl, (const unsigned char *)"Server Key", 10, k->server_key, &len) ||
        !HMAC(md, k->server_key, hl, am, aml, k->server_sig, &len))
        return false;
    for (int i = 0; i < hl; i++)
        k->proof[i] = k->client_key[i] ^ k->client_sig[i];
    return true;
}

static tpc_error_t *login_scram(tpc__kafka_conn_t *c, const tpc__kafka_wire_conf_t *conf,
                                mech_t mech, int64_t deadline_ms)
{
    const EVP_MD *md = mech == MECH_SCRAM_256 ? EVP_sha256() : EVP_sha512();
    int hl = EVP_MD_get_size(md);
    const char *name = tpc__kafka_conn_name(c);
    char user[800], nonce[33], first_bare[900], msg[MSG_MAX], server_first[MSG_MAX];
    char final_bare[MSG_MAX], auth_msg[3 * MSG_MAX], server_final[MSG_MAX];
    unsigned char raw[24];
    if (RAND_bytes(raw, sizeof raw) != 1)
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL, "no random bytes for a nonce");
    b64_encode(raw, sizeof raw, nonce); /* 32 characters, no padding, no ',' */
    scram_name(tpc__kafka_wire_prop(conf, "sasl.username"), user, sizeof user);
    snprintf(first_bare, sizeof first_bare, "n=%s,r=%s", user, nonce);
    int n = snprintf(msg, sizeof msg, "n,,%s", first_bare);
    tpc_error_t *err =
        authenticate(c, conf, mech, msg, (size_t)n, deadline_ms, server_first, sizeof server_first);
    if (err)
        return err;

    const char *r, *s, *i;
    size_t rl, sl, il;
    if (strncmp(server_first, "m=", 2) == 0 || !scram_attr(server_first, 'r', &r, &rl) ||
        !scram_attr(server_first, 's', &s, &sl) || !scram_attr(server_first, 'i', &i, &il) ||
        rl <= strlen(nonce) || strncmp(r, nonce, strlen(nonce)) != 0 || il > 9)
        return malformed(c, "SCRAM server-first message");
    unsigned char salt[256];
    int salt_len = b64_decode(s, sl, salt, sizeof salt);
    char digits[10] = {0};
    memcpy(digits, i, il);
    long iters = strtol(digits, NULL, 10);
    if (salt_len <= 0)
        return malformed(c, "SCRAM salt");
    if (iters < SCRAM_MIN_ITERS || iters > SCRAM_MAX_ITERS)
        return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                             "broker \"%s\" asked for %ld SCRAM iterations; %d to %d are accepted",
                             name, iters, SCRAM_MIN_ITERS, SCRAM_MAX_ITERS);

    /* c=biws is base64("n,,"): no channel binding, no authorization id. */
    snprintf(final_bare, sizeof final_bare, "c=biws,r=%.*s", (int)rl, r);
    snprintf(auth_msg, sizeof auth_msg, "%s,%s,%s", first_bare, server_first, final_bare);
    scram_keys_t keys;
    if (!scram_derive(md, tpc__kafka_wire_prop(conf, "sasl.password"), salt, (size_t)salt_len,
                      (int)iters, auth_msg, &keys)) {
        OPENSSL_cleanse(&keys, sizeof keys);
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL, "could not compute a SCRAM proof");
    }
    char proof[2 * EVP_MAX_MD_SIZE];
    b64_encode(keys.proof, (size_t)hl, proof);
    n = snprintf(msg, sizeof msg, "%s,p=%s", final_bare, proof);
    err =
        authenticate(c, conf, mech, msg, (size_t)n, deadline_ms, server_final, sizeof server_final);
    OPENSSL_cleanse(msg, sizeof msg);
    OPENSSL_cleanse(proof, sizeof proof);

    const char *v = NULL;
    size_t vl = 0;
    unsigned char sig[EVP_MAX_MD_SIZE + 3];
    if (!err && scram_attr(server_final, 'e', &v, &vl))
        err = tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                            "authentication with SASL %s failed at broker \"%s\": %.*s",
                            mech_names[mech], name, (int)vl, v);
    else if (!err &&
             (!scram_attr(server_final, 'v', &v, &vl) || b64_decode(v, vl, sig, sizeof sig) != hl))
        err = malformed(c, "SCRAM server-final message");
    else if (!err && CRYPTO_memcmp(sig, keys.server_sig, (size_t)hl) != 0)
        err = tpc_error_hint(tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                                           "broker \"%s\" sent a wrong SCRAM server signature: "
                                           "it does not know the password",
                                           name),
                             "check that bootstrap.servers names the cluster you mean");
    OPENSSL_cleanse(&keys, sizeof keys);
    return err;
}

tpc_error_t *tpc__kafka_sasl_login(tpc__kafka_conn_t *c, const tpc__kafka_wire_conf_t *conf,
                                   int64_t deadline_ms)
{
    mech_t mech;
    tpc_error_t *err = tpc__kafka_sasl_check(conf);
    if (!err)
        err = parse_mechanism(conf, &mech);
    if (!err)
        err = handshake(c, mech, deadline_ms);
    if (err)
        return err;
    return mech == MECH_PLAIN ? login_plain(c, conf, deadline_ms)
                              : login_scram(c, conf, mech, deadline_ms);
}
