/*
 * Checkpoint storage on S3-compatible object storage (tpc_s3.h), with libcurl.
 *
 * Every operation is one HTTP request, path-style (<endpoint>/<bucket>/<prefix><name>), signed by
 * libcurl (CURLOPT_AWS_SIGV4) with the payload's SHA-256 in x-amz-content-sha256. A PUT is atomic
 * in S3: an object is visible whole or not at all, whatever happens to the writer, so put_new is
 * a PUT with "If-None-Match: *" and swap a PUT with "If-Match: <etag>" (or with "If-None-Match: *"
 * for an absent object, or without a condition); 412 means the condition failed (and so do 404 to
 * If-Match, the object is gone, and AWS's 409 for two conditional writes at once). The version of
 * an object is its ETag.
 *
 * A request that got no answer, or a 5xx, is tried again (tpc_s3_config_t.attempts) after a
 * backoff. A conditional PUT tried again may meet its own first attempt, which landed although
 * its answer was lost: a 412 after a retry reads the object back, and the same bytes mean that the
 * write is ours.
 */
#include "tpc_kit.h"
#include "tpc_s3.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    tpc_storage_t base;
    char *endpoint, *bucket, *prefix, *region, *key_id, *secret, *token, *sigv4;
    char *where; /* "s3://bucket/prefix", for messages */
    int timeout_ms, attempts;
} s3_t;

typedef struct {
    uint8_t *data;
    size_t len, cap;
    bool nomem;
} buf_t;

typedef struct {
    long status;
    buf_t body;
    char etag[256];
} reply_t;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static const char *env_or(const char *v, const char *name)
{
    if (v)
        return v;
    const char *e = getenv(name);
    return e && *e ? e : NULL;
}

static bool buf_put(buf_t *b, const void *p, size_t n)
{
    if (!tpc_array_grow(&b->data, &b->cap, b->len + n + 1, 1)) {
        b->nomem = true;
        return false;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    return buf_put(arg, p, size * n) ? size * n : 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    reply_t *r = arg;
    size_t len = size * n;
    if (len > 5 && strncasecmp(p, "etag:", 5) == 0) {
        const char *v = p + 5;
        size_t vl = len - 5;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        if (vl < sizeof r->etag) {
            memcpy(r->etag, v, vl);
            r->etag[vl] = 0;
        }
    }
    return len;
}

/* Append @s to @b percent-encoded (RFC 3986 unreserved and, unless @query, '/' kept). */
static void put_encoded(buf_t *b, const char *s, bool query)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !query)) {
            buf_put(b, s, 1);
        } else {
            char e[4];
            snprintf(e, sizeof e, "%%%02X", c);
            buf_put(b, e, 3);
        }
    }
}

static void sha256_hex(const uint8_t *p, size_t n, char out[65])
{
    uint8_t d[32];
    unsigned int dl = sizeof d;
    EVP_Digest(p ? p : (const uint8_t *)"", n, d, &dl, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The S3 error code in an error reply's XML (<Code>...</Code>), or "". */
static void error_code(const reply_t *r, char *out, size_t cap)
{
    out[0] = 0;
    const char *b = r->body.data ? (const char *)r->body.data : "";
    const char *s = strstr(b, "<Code>"), *e = s ? strstr(s, "</Code>") : NULL;
    if (s && e && (size_t)(e - s - 6) < cap) {
        memcpy(out, s + 6, (size_t)(e - s - 6));
        out[e - s - 6] = 0;
    }
}

static tpc_error_t *http_error(const s3_t *s, const char *what, const char *name, const reply_t *r)
{
    char code[128];
    error_code(r, code, sizeof code);
    if (r->status == 403 || strcmp(code, "InvalidAccessKeyId") == 0 ||
        strcmp(code, "SignatureDoesNotMatch") == 0)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                          "S3 refused to %s \"%s\" in bucket \"%s\" at \"%s\": HTTP %ld %s", what,
                          name, s->bucket, s->endpoint, r->status, code),
            "check the access key (AWS_ACCESS_KEY_ID), the secret (AWS_SECRET_ACCESS_KEY), the "
            "region (AWS_REGION) and the bucket's permissions for this key");
    if (strcmp(code, "NoSuchBucket") == 0)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "the S3 bucket \"%s\" does not exist at \"%s\"",
                                            s->bucket, s->endpoint),
                              "create the bucket, or point the checkpoint storage at one");
    return tpc_error_new(TPC_ERR_IO, r->status >= 500 ? TPC_ERROR_RETRIABLE : 0,
                         "S3 could not %s \"%s\" in bucket \"%s\" at \"%s\": HTTP %ld %s", what,
                         name, s->bucket, s->endpoint, r->status, code[0] ? code : "");
}

/* One request, tried again while it gets no answer or a 5xx. *retried: an earlier attempt may
 * have reached the store. */
static tpc_error_t *request(const s3_t *s, const char *method, const char *key, const char *query,
                            const uint8_t *body, size_t n, const char *condition, reply_t *r,
                            bool *retried)
{
    pthread_once(&curl_once, curl_init);
    buf_t url = {0};
    buf_put(&url, s->endpoint, strlen(s->endpoint));
    buf_put(&url, "/", 1);
    put_encoded(&url, s->bucket, true);
    if (key) {
        buf_put(&url, "/", 1);
        put_encoded(&url, key, false);
    }
    if (query)
        buf_put(&url, query, strlen(query));
    if (url.nomem)
        return tpc_error_nomem();
    char hash[65], hdr[128];
    sha256_hex(body, n, hash);
    tpc_backoff_t bo;
    tpc_backoff_init(&bo, tpc_clock_ms() + (int64_t)s->attempts * s->timeout_ms, 100, 2000);
    tpc_error_t *err = NULL;
    *retried = false;
    for (int attempt = 1;; attempt++) {
        free(r->body.data);
        *r = (reply_t){0};
        CURL *c = curl_easy_init();
        if (!c) {
            err = tpc_error_nomem();
            break;
        }
        struct curl_slist *h = NULL;
        snprintf(hdr, sizeof hdr, "x-amz-content-sha256: %s", hash);
        h = curl_slist_append(h, hdr);
        h = curl_slist_append(h, "Expect:");
        if (body)
            h = curl_slist_append(h, "Content-Type: application/octet-stream");
        if (condition)
            h = curl_slist_append(h, condition);
        char *tok = NULL;
        if (s->token) {
            size_t tl = strlen(s->token) + 32;
            tok = malloc(tl);
            if (tok) {
                snprintf(tok, tl, "x-amz-security-token: %s", s->token);
                h = curl_slist_append(h, tok);
            }
        }
        curl_easy_setopt(c, CURLOPT_URL, (const char *)url.data);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        if (strcmp(method, "PUT") == 0) {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? (const char *)body : "");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
        } else if (strcmp(method, "GET") == 0) {
            curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
        curl_easy_setopt(c, CURLOPT_USERNAME, s->key_id);
        curl_easy_setopt(c, CURLOPT_PASSWORD, s->secret);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
        char cerr[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
        CURLcode rc = curl_easy_perform(c);
        if (rc == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        free(tok);
        if (r->body.nomem) {
            err = tpc_error_nomem();
            break;
        }
        bool again = rc != CURLE_OK || r->status >= 500;
        if (!again)
            break;
        if (attempt >= s->attempts || !tpc_backoff_wait(&bo, NULL, NULL)) {
            err = rc != CURLE_OK
                      ? tpc_error_hint(
                            tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE,
                                          "S3 at \"%s\" did not answer %s of \"%s%s\" in "
                                          "bucket \"%s\" (%d attempts of at most %d ms each): %s",
                                          s->endpoint, key ? method : "LIST", key ? key : s->prefix,
                                          key ? "" : "*", s->bucket, attempt, s->timeout_ms,
                                          cerr[0] ? cerr : curl_easy_strerror(rc)),
                            "check that the endpoint is right and the store runs; a store that "
                            "answers slowly needs a longer timeout (checkpoint.s3.timeout.ms)")
                      : http_error(s, method, key ? key : "", r);
            break;
        }
        *retried = true;
    }
    free(url.data);
    return err;
}

static char *key_of(const s3_t *s, const char *name)
{
    size_t n = strlen(s->prefix) + strlen(name) + 1;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%s%s", s->prefix, name);
    return k;
}

/* After a retried conditional PUT answered 412: is the object there now exactly @p/@n (our own
 * first attempt)? */
static bool landed(tpc_storage_t *st, const char *name, const uint8_t *p, size_t n, char **version)
{
    uint8_t *q = NULL;
    size_t qn = 0;
    bool found = false;
    char *v = NULL;
    tpc_error_t *err = st->ops->get(st, name, &q, &qn, &v, &found);
    bool same = !err && found && qn == n && (n == 0 || memcmp(p, q, n) == 0);
    tpc_error_destroy(err);
    free(q);
    if (same && version)
        *version = v;
    else
        free(v);
    return same;
}

static tpc_error_t *put(tpc_storage_t *st, const char *name, const char *condition,
                        const uint8_t *p, size_t n, bool *refused, char **version)
{
    s3_t *s = (s3_t *)st;
    *refused = false;
    if (version)
        *version = NULL;
    char *key = key_of(s, name);
    if (!key)
        return tpc_error_nomem();
    reply_t r = {0};
    bool retried;
    tpc_error_t *err = request(s, "PUT", key, NULL, p, n, condition, &r, &retried);
    /* 412: the condition failed; 404 to If-Match: the object is gone; 409: a concurrent
     * conditional write of the same name (AWS), which one of the two wins */
    bool failed = r.status == 412 || r.status == 409 ||
                  (r.status == 404 && condition && strncmp(condition, "If-Match", 8) == 0);
    if (!err && failed)
        *refused = !(retried && landed(st, name, p, n, version));
    else if (!err && r.status == 200 && version)
        *version = strdup(r.etag);
    else if (!err && r.status != 200)
        err = http_error(s, "write", key, &r);
    free(r.body.data);
    free(key);
    return err;
}

static tpc_error_t *s3_put_new(tpc_storage_t *st, const char *name, const uint8_t *p, size_t n,
                               bool *exists)
{
    return put(st, name, "If-None-Match: *", p, n, exists, NULL);
}

static tpc_error_t *s3_swap(tpc_storage_t *st, const char *name, const char *expected,
                            const uint8_t *p, size_t n, bool *stale, char **version)
{
    char cond[300];
    if (expected == TPC_STORAGE_ABSENT)
        snprintf(cond, sizeof cond, "If-None-Match: *");
    else if (expected == TPC_STORAGE_ANY)
        cond[0] = 0;
    else if (snprintf(cond, sizeof cond, "If-Match: %s", expected) >= (int)sizeof cond)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "an S3 version longer than an ETag");
    return put(st, name, cond[0] ? cond : NULL, p, n, stale, version);
}

static tpc_error_t *s3_get(tpc_storage_t *st, const char *name, uint8_t **p, size_t *n,
                           char **version, bool *found)
{
    s3_t *s = (s3_t *)st;
    *p = NULL;
    *n = 0;
    *found = false;
    if (version)
        *version = NULL;
    char *key = key_of(s, name);
    if (!key)
        return tpc_error_nomem();
    reply_t r = {0};
    bool retried;
    tpc_error_t *err = request(s, "GET", key, NULL, NULL, 0, NULL, &r, &retried);
    char code[64] = "";
    if (!err && r.status == 404)
        error_code(&r, code, sizeof code);
    if (!err && r.status == 200) {
        *found = true;
        *n = r.body.len;
        *p = r.body.data ? r.body.data : malloc(1);
        r.body.data = NULL;
        if (version)
            *version = strdup(r.etag);
    } else if (!err && !(r.status == 404 && strcmp(code, "NoSuchBucket") != 0)) {
        err = http_error(s, "read", key, &r);
    }
    free(r.body.data);
    free(key);
    return err;
}

static tpc_error_t *s3_remove(tpc_storage_t *st, const char *name)
{
    s3_t *s = (s3_t *)st;
    char *key = key_of(s, name);
    if (!key)
        return tpc_error_nomem();
    reply_t r = {0};
    bool retried;
    tpc_error_t *err = request(s, "DELETE", key, NULL, NULL, 0, NULL, &r, &retried);
    if (!err && r.status != 204 && r.status != 200 && r.status != 404)
        err = http_error(s, "remove", key, &r);
    free(r.body.data);
    free(key);
    return err;
}

/* The text between <tag> and </tag> from *at on, XML entities decoded; NULL at the end. */
static char *next_tag(const char **at, const char *tag)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *s = strstr(*at, open), *e = s ? strstr(s, close) : NULL;
    if (!s || !e)
        return NULL;
    s += strlen(open);
    *at = e + strlen(close);
    char *out = malloc((size_t)(e - s) + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    while (s < e) {
        bool done = false;
        for (size_t i = 0; i < sizeof ents / sizeof ents[0] && !done; i++) {
            size_t l = strlen(ents[i].ent);
            if ((size_t)(e - s) >= l && strncmp(s, ents[i].ent, l) == 0) {
                out[o++] = ents[i].c;
                s += l;
                done = true;
            }
        }
        if (!done)
            out[o++] = *s++;
    }
    out[o] = 0;
    return out;
}

static tpc_error_t *s3_list(tpc_storage_t *st, const char *prefix, char ***names, size_t *n)
{
    s3_t *s = (s3_t *)st;
    *names = NULL;
    *n = 0;
    size_t cap = 0;
    char *full = key_of(s, prefix), *token = NULL;
    if (!full)
        return tpc_error_nomem();
    size_t plen = strlen(s->prefix);
    tpc_error_t *err = NULL;
    for (;;) {
        buf_t q = {0};
        buf_put(&q, "?list-type=2&prefix=", 20);
        put_encoded(&q, full, true);
        if (token) {
            buf_put(&q, "&continuation-token=", 20);
            put_encoded(&q, token, true);
        }
        reply_t r = {0};
        bool retried;
        err = q.nomem ? tpc_error_nomem()
                      : request(s, "GET", NULL, (const char *)q.data, NULL, 0, NULL, &r, &retried);
        free(q.data);
        if (!err && r.status != 200)
            err = http_error(s, "list", full, &r);
        if (err) {
            free(r.body.data);
            break;
        }
        const char *at = r.body.data ? (const char *)r.body.data : "";
        for (char *k; (k = next_tag(&at, "Key"));) {
            if (strlen(k) >= plen && tpc_array_grow(names, &cap, *n + 1, sizeof **names))
                (*names)[(*n)++] = strdup(k + plen);
            free(k);
        }
        at = r.body.data ? (const char *)r.body.data : "";
        char *trunc = next_tag(&at, "IsTruncated");
        bool more = trunc && strcmp(trunc, "true") == 0;
        free(trunc);
        free(token);
        at = r.body.data ? (const char *)r.body.data : "";
        token = more ? next_tag(&at, "NextContinuationToken") : NULL;
        free(r.body.data);
        if (!token)
            break;
    }
    free(token);
    free(full);
    if (err) {
        tpc_storage_names_free(*names, *n);
        *names = NULL;
        *n = 0;
    }
    return err;
}

static void s3_destroy(tpc_storage_t *st)
{
    s3_t *s = (s3_t *)st;
    free(s->endpoint);
    free(s->bucket);
    free(s->prefix);
    free(s->region);
    free(s->key_id);
    if (s->secret)
        memset(s->secret, 0, strlen(s->secret));
    free(s->secret);
    free(s->token);
    free(s->sigv4);
    free(s->where);
    free(s);
}

static const char *s3_where(tpc_storage_t *st)
{
    return ((s3_t *)st)->where;
}

static const tpc_storage_ops_t s3_ops = {
    .kind = "s3",
    .put_new = s3_put_new,
    .get = s3_get,
    .list = s3_list,
    .remove = s3_remove,
    .swap = s3_swap,
    .destroy = s3_destroy,
    .where = s3_where,
};

tpc_error_t *tpc_s3_storage_new(const tpc_s3_config_t *c, tpc_storage_t **out)
{
    *out = NULL;
    if (!c || !c->bucket || !*c->bucket)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "S3 checkpoint storage needs a bucket"),
            "name the bucket that holds the job's checkpoints");
    const char *key_id = env_or(c->access_key_id, "AWS_ACCESS_KEY_ID");
    const char *secret = env_or(c->secret_access_key, "AWS_SECRET_ACCESS_KEY");
    if (!key_id || !secret)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                          "S3 checkpoint storage for bucket \"%s\" has no credentials", c->bucket),
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or give them in the configuration)");
    const char *region = env_or(c->region, "AWS_REGION");
    region = region ? region : env_or(NULL, "AWS_DEFAULT_REGION");
    region = region ? region : "us-east-1";
    s3_t *s = calloc(1, sizeof *s);
    if (!s)
        return tpc_error_nomem();
    s->base.ops = &s3_ops;
    const char *ep = env_or(c->endpoint, "AWS_ENDPOINT_URL");
    char def[160];
    if (!ep) {
        snprintf(def, sizeof def, "https://s3.%s.amazonaws.com", region);
        ep = def;
    }
    s->endpoint = strdup(ep);
    if (s->endpoint) {
        size_t l = strlen(s->endpoint);
        while (l && s->endpoint[l - 1] == '/')
            s->endpoint[--l] = 0;
    }
    s->bucket = strdup(c->bucket);
    s->prefix = strdup(c->prefix ? c->prefix : "");
    s->region = strdup(region);
    s->key_id = strdup(key_id);
    s->secret = strdup(secret);
    s->token = dup_or_null(env_or(c->session_token, "AWS_SESSION_TOKEN"));
    size_t sl = strlen(region) + 32;
    s->sigv4 = malloc(sl);
    if (s->sigv4)
        snprintf(s->sigv4, sl, "aws:amz:%s:s3", region);
    size_t wl = strlen(c->bucket) + strlen(c->prefix ? c->prefix : "") + 8;
    s->where = malloc(wl);
    if (s->where)
        snprintf(s->where, wl, "s3://%s/%s", c->bucket, c->prefix ? c->prefix : "");
    s->timeout_ms = c->timeout_ms > 0 ? c->timeout_ms : 30000;
    s->attempts = c->attempts > 0 ? c->attempts : 4;
    if (!s->endpoint || !s->bucket || !s->prefix || !s->region || !s->key_id || !s->secret ||
        !s->sigv4 || !s->where) {
        s3_destroy(&s->base);
        return tpc_error_nomem();
    }
    *out = &s->base;
    return NULL;
}

/* ---- the job's checkpoint.s3.* keys (tpc_s3_storage_backend()) ------------------------------ */

typedef struct {
    char *endpoint, *bucket, *prefix, *region;
    int timeout_ms, attempts;
} s3_keys_t;

#define S3_FIELD(member) TPC_PROP_FIELD(s3_keys_t, member)

static const tpc_prop_t s3_props[] = {
    {.name = "checkpoint.s3.bucket",
     .type = TPC_PROP_STRING,
     .field = S3_FIELD(bucket),
     .accepts = "a bucket name",
     .doc = "The bucket that holds the checkpoints and the completion record (required)."},
    {.name = "checkpoint.s3.prefix",
     .type = TPC_PROP_STRING,
     .field = S3_FIELD(prefix),
     .accepts = "a key prefix, normally ending in \"/\" (\"jobs/totals/unit-3/\")",
     .doc = "Put before every object's name: one job (one unit of a job) per prefix. Unset: "
            "none."},
    {.name = "checkpoint.s3.endpoint",
     .type = TPC_PROP_STRING,
     .field = S3_FIELD(endpoint),
     .accepts = "a URL (\"http://127.0.0.1:9000\", \"https://s3.eu-west-1.amazonaws.com\")",
     .doc = "The S3 endpoint, addressed path-style (<endpoint>/<bucket>/<key>). Unset: "
            "AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com."},
    {.name = "checkpoint.s3.region",
     .type = TPC_PROP_STRING,
     .field = S3_FIELD(region),
     .accepts = "a region name",
     .doc = "The region requests are signed for (SigV4). Unset: AWS_REGION, AWS_DEFAULT_REGION, "
            "else us-east-1. The credentials always come from the environment: "
            "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (never shown in a "
            "message)."},
    {.name = "checkpoint.s3.timeout.ms",
     .type = TPC_PROP_INT,
     .field = S3_FIELD(timeout_ms),
     .min = 100,
     .max = 3600000,
     .def = "30000",
     .unit = "ms",
     .doc = "One request, connection included."},
    {.name = "checkpoint.s3.attempts",
     .type = TPC_PROP_INT,
     .field = S3_FIELD(attempts),
     .min = 1,
     .max = 100,
     .def = "4",
     .doc = "Tries of a request that got no answer or a 5xx, with backoff between them."},
};

static const tpc_props_t s3_table = {"S3 checkpoint storage", "tpc_job_set()", s3_props,
                                     sizeof s3_props / sizeof *s3_props};

const tpc_props_t *tpc_s3_properties(void)
{
    return &s3_table;
}

static tpc_error_t *backend_open(const void *conf, tpc_storage_t **out)
{
    const s3_keys_t *k = conf;
    if (!k->bucket)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "\"checkpoint.s3.bucket\" is not set"),
            "name the bucket that holds the job's checkpoints");
    tpc_s3_config_t c = {.endpoint = k->endpoint,
                         .bucket = k->bucket,
                         .prefix = k->prefix,
                         .region = k->region,
                         .timeout_ms = k->timeout_ms,
                         .attempts = k->attempts};
    return tpc_s3_storage_new(&c, out);
}

static const tpc_storage_backend_t s3_backend = {
    .kind = "s3",
    .props = &s3_table,
    .conf_size = sizeof(s3_keys_t),
    .open = backend_open,
};

const tpc_storage_backend_t *tpc_s3_storage_backend(void)
{
    return &s3_backend;
}
