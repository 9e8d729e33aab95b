/*
 * The client side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as messages only, with
 * no I/O: kafka_sasl.c carries them in SaslAuthenticate requests. The client-first message names
 * the user and a nonce; the broker's server-first message adds its part of the nonce, the salt and
 * the iteration count; the client-final message proves that the client knows the password; the
 * server-final message proves that the broker does too. Everything the broker sends is bounded
 * before it is used: a message, nonce or salt longer than a real broker sends is refused as
 * malformed, and every message this file builds is checked to fit its buffer, so that no byte
 * beyond a message can reach the broker.
 */
#include "kafka_wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCRAM_MIN_ITERS 4096 /* RFC 7677's floor, and Kafka's */

static const char *mech_name(const tpc__kafka_scram_t *s)
{
    return s->sha512 ? "SCRAM-SHA-512" : "SCRAM-SHA-256";
}

static const EVP_MD *digest(const tpc__kafka_scram_t *s)
{
    return s->sha512 ? EVP_sha512() : EVP_sha256();
}

static tpc_error_t *malformed(const char *broker, const char *what)
{
    return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL, "broker \"%s\" sent a malformed %s",
                         broker, what);
}

static size_t b64_encode(const unsigned char *in, size_t n, char *out)
{
    return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* @returns the decoded length, or -1 for text that is not base64 or does not fit @cap. */
static int b64_decode(const char *in, size_t n, unsigned char *out, size_t cap)
{
    if (n == 0 || n % 4 || n / 4 * 3 > cap)
        return -1;
    int len = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
    if (len < 0)
        return -1;
    for (size_t i = n; i > n - 2 && in[i - 1] == '='; i--)
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

/* User name with '=' and ',' escaped as RFC 5802 wants; false if it does not fit. */
static bool scram_name(const char *user, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = user; *p; p++) {
        const char *esc = *p == '=' ? "=3D" : *p == ',' ? "=2C" : NULL;
        size_t n = esc ? 3 : 1;
        if (o + n >= cap)
            return false;
        memcpy(out + o, esc ? esc : p, n);
        o += n;
    }
    out[o] = '\0';
    return true;
}

/* snprintf into @buf, false if the text did not fit. */
static bool fits(int n, size_t cap)
{
    return n >= 0 && (size_t)n < cap;
}

tpc_error_t *tpc__kafka_scram_first(tpc__kafka_scram_t *s, bool sha512, const char *user,
                                    const unsigned char nonce[24], char *msg, size_t cap,
                                    size_t *len)
{
    *s = (tpc__kafka_scram_t){.sha512 = sha512};
    char name[TPC__KAFKA_SCRAM_USER_MAX * 3 + 1];
    b64_encode(nonce, 24, s->nonce); /* 32 characters, no padding, no ',' */
    int n = -1;
    if (scram_name(user, name, sizeof name) &&
        fits(snprintf(s->first_bare, sizeof s->first_bare, "n=%s,r=%s", name, s->nonce),
             sizeof s->first_bare))
        n = snprintf(msg, cap, "n,,%s", s->first_bare);
    if (!fits(n, cap))
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                             "sasl.username is too long for a SCRAM message");
    *len = (size_t)n;
    return NULL;
}

/* Derive the proof and the expected server signature (RFC 5802 section 3). */
typedef struct {
    unsigned char salted[EVP_MAX_MD_SIZE];
    unsigned char client_key[EVP_MAX_MD_SIZE];
    unsigned char stored_key[EVP_MAX_MD_SIZE];
    unsigned char client_sig[EVP_MAX_MD_SIZE];
    unsigned char server_key[EVP_MAX_MD_SIZE];
    unsigned char proof[EVP_MAX_MD_SIZE];
} scram_keys_t;

static bool derive(const tpc__kafka_scram_t *s, const char *pw, const unsigned char *salt,
                   size_t salt_len, int iters, const char *auth_msg, scram_keys_t *k,
                   unsigned char *server_sig)
{
    const EVP_MD *md = digest(s);
    int hl = s->hash_len;
    unsigned int len = 0;
    const unsigned char *am = (const unsigned char *)auth_msg;
    size_t aml = strlen(auth_msg);
    if (PKCS5_PBKDF2_HMAC(pw, (int)strlen(pw), salt, (int)salt_len, iters, md, hl, k->salted) != 1)
        return false;
    if (!HMAC(md, k->salted, hl, (const unsigned char *)"Client Key", 10, k->client_key, &len) ||
        EVP_Digest(k->client_key, (size_t)hl, k->stored_key, NULL, md, NULL) != 1 ||
        !HMAC(md, k->stored_key, hl, am, aml, k->client_sig, &len) ||
        !HMAC(md, k->salted, hl, (const unsigned char *)"Server Key", 10, k->server_key, &len) ||
        !HMAC(md, k->server_key, hl, am, aml, server_sig, &len))
        return false;
    for (int i = 0; i < hl; i++)
        k->proof[i] = k->client_key[i] ^ k->client_sig[i];
    return true;
}

tpc_error_t *tpc__kafka_scram_parse_first(const tpc__kafka_scram_t *s, const char *broker,
                                          const char *server_first, tpc__kafka_scram_server_t *out)
{
    const char *r, *salt, *i;
    size_t rl, sl, il, nl = strlen(s->nonce);
    size_t fl = strlen(server_first);
    if (fl > TPC__KAFKA_SCRAM_MSG_MAX)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "broker \"%s\" sent a SCRAM server-first message of %zu bytes; at "
                             "most %d are accepted",
                             broker, fl, TPC__KAFKA_SCRAM_MSG_MAX);
    if (strncmp(server_first, "m=", 2) == 0 || !scram_attr(server_first, 'r', &r, &rl) ||
        !scram_attr(server_first, 's', &salt, &sl) || !scram_attr(server_first, 'i', &i, &il) ||
        rl <= nl || strncmp(r, s->nonce, nl) != 0 || il == 0 || il > 9)
        return malformed(broker, "SCRAM server-first message");
    if (rl > TPC__KAFKA_SCRAM_NONCE_MAX)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "broker \"%s\" sent a SCRAM nonce of %zu bytes; at most %d are "
                             "accepted",
                             broker, rl, TPC__KAFKA_SCRAM_NONCE_MAX);
    for (size_t k = 0; k < rl; k++)
        if (r[k] < 0x21 || r[k] > 0x7e) /* printable, no space; ',' cannot occur */
            return malformed(broker, "SCRAM nonce");
    int salt_len = b64_decode(salt, sl, out->salt, sizeof out->salt);
    if (salt_len <= 0)
        return malformed(broker, "SCRAM salt");
    long iters = 0;
    for (size_t k = 0; k < il; k++) {
        if (i[k] < '0' || i[k] > '9')
            return malformed(broker, "SCRAM iteration count");
        iters = iters * 10 + (i[k] - '0');
    }
    if (iters < SCRAM_MIN_ITERS || iters > TPC__KAFKA_SCRAM_MAX_ITERS)
        return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                             "broker \"%s\" asked for %ld SCRAM iterations; %d to %d are accepted",
                             broker, iters, SCRAM_MIN_ITERS, TPC__KAFKA_SCRAM_MAX_ITERS);
    out->nonce = r;
    out->nonce_len = rl;
    out->salt_len = (size_t)salt_len;
    out->iters = (int)iters;
    return NULL;
}

tpc_error_t *tpc__kafka_scram_final(tpc__kafka_scram_t *s, const char *broker, const char *password,
                                    const char *server_first, char *msg, size_t cap, size_t *len)
{
    tpc__kafka_scram_server_t sf;
    tpc_error_t *err = tpc__kafka_scram_parse_first(s, broker, server_first, &sf);
    if (err)
        return err;
    s->hash_len = EVP_MD_get_size(digest(s));
    /* c=biws is base64("n,,"): no channel binding, no authorization id. */
    char final_bare[TPC__KAFKA_SCRAM_NONCE_MAX + 16];
    char auth_msg[sizeof s->first_bare + TPC__KAFKA_SCRAM_MSG_MAX + sizeof final_bare + 2];
    char proof[2 * EVP_MAX_MD_SIZE];
    scram_keys_t keys;
    int n = -1;
    if (!fits(snprintf(final_bare, sizeof final_bare, "c=biws,r=%.*s", (int)sf.nonce_len, sf.nonce),
              sizeof final_bare) ||
        !fits(snprintf(auth_msg, sizeof auth_msg, "%s,%s,%s", s->first_bare, server_first,
                       final_bare),
              sizeof auth_msg))
        err = malformed(broker, "SCRAM server-first message");
    else if (!derive(s, password, sf.salt, sf.salt_len, sf.iters, auth_msg, &keys, s->server_sig))
        err = tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL, "could not compute a SCRAM proof");
    if (!err) {
        b64_encode(keys.proof, (size_t)s->hash_len, proof);
        n = snprintf(msg, cap, "%s,p=%s", final_bare, proof);
        if (!fits(n, cap))
            err = malformed(broker, "SCRAM server-first message");
    }
    OPENSSL_cleanse(&keys, sizeof keys);
    OPENSSL_cleanse(proof, sizeof proof);
    if (err) {
        OPENSSL_cleanse(msg, cap);
        return err;
    }
    *len = (size_t)n;
    return NULL;
}

tpc_error_t *tpc__kafka_scram_check(const tpc__kafka_scram_t *s, const char *broker,
                                    const char *server_final)
{
    const char *v = NULL;
    size_t vl = 0;
    unsigned char sig[EVP_MAX_MD_SIZE + 3];
    if (scram_attr(server_final, 'e', &v, &vl))
        return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                             "authentication with SASL %s failed at broker \"%s\": %.*s",
                             mech_name(s), broker, vl > 200 ? 200 : (int)vl, v);
    if (!scram_attr(server_final, 'v', &v, &vl) ||
        b64_decode(v, vl, sig, sizeof sig) != s->hash_len)
        return malformed(broker, "SCRAM server-final message");
    if (CRYPTO_memcmp(sig, s->server_sig, (size_t)s->hash_len) != 0)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_FATAL,
                                            "broker \"%s\" sent a wrong SCRAM server signature: "
                                            "it does not know the password",
                                            broker),
                              "check that bootstrap.servers names the cluster you mean");
    return NULL;
}

void tpc__kafka_scram_wipe(tpc__kafka_scram_t *s)
{
    OPENSSL_cleanse(s, sizeof *s);
}
