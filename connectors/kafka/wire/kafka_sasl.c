/*
 * SASL login of a wire connection (kafka_wire.c), after ApiVersions: SaslHandshake v1 names the
 * mechanism, then SaslAuthenticate (v0 to v2) carries the mechanism's messages. PLAIN sends the
 * user name and password in one message, so outside tests it belongs on a TLS listener.
 * SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) prove that the client knows the password
 * without sending it, and the client checks the broker's signature in turn, so that a server that
 * does not know the password cannot pose as the broker; kafka_scram.c builds and checks those
 * messages, with bounds on everything the broker sends. Settings are librdkafka's:
 * sasl.mechanism (or sasl.mechanisms; librdkafka's default, GSSAPI, is refused like OAUTHBEARER),
 * sasl.username and sasl.password. The password appears in no message, and buffers that held it
 * or keys derived from it are wiped before they are freed.
 */
#include "kafka_wire.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MSG_MAX 2048

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
    if (strlen(user) > TPC__KAFKA_SCRAM_USER_MAX || strlen(pw) > 255)
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

static tpc_error_t *login_scram(tpc__kafka_conn_t *c, const tpc__kafka_wire_conf_t *conf,
                                mech_t mech, int64_t deadline_ms)
{
    const char *name = tpc__kafka_conn_name(c);
    char msg[MSG_MAX], server_first[MSG_MAX], server_final[MSG_MAX];
    unsigned char raw[24];
    size_t n = 0;
    tpc__kafka_scram_t scram;
    if (RAND_bytes(raw, sizeof raw) != 1)
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL, "no random bytes for a nonce");
    tpc_error_t *err = tpc__kafka_scram_first(&scram, mech == MECH_SCRAM_512,
                                              tpc__kafka_wire_prop(conf, "sasl.username"), raw, msg,
                                              sizeof msg, &n);
    if (!err)
        err = authenticate(c, conf, mech, msg, n, deadline_ms, server_first, sizeof server_first);
    if (!err)
        err = tpc__kafka_scram_final(&scram, name, tpc__kafka_wire_prop(conf, "sasl.password"),
                                     server_first, msg, sizeof msg, &n);
    if (!err)
        err = authenticate(c, conf, mech, msg, n, deadline_ms, server_final, sizeof server_final);
    OPENSSL_cleanse(msg, sizeof msg);
    if (!err)
        err = tpc__kafka_scram_check(&scram, name, server_final);
    tpc__kafka_scram_wipe(&scram);
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
