/*
 * Passwords of pg.conninfo kept out of every message. The sink names servers by a copy of the
 * conninfo without its passwords (pg_sink.c), but libpq's own messages may quote what it was
 * given: "invalid percent-encoded token" repeats the password of a URI, an unexpected character
 * repeats the whole URI. Every message that holds text from libpq goes through
 * tpc_pg_hide_secrets() first, which masks each password the conninfo holds, or seems to hold
 * when libpq could not parse it: the value of every keyword with "password" in its name and the
 * part after the first ':' of a URI's user info.
 */
#include "pg_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MASK        "***"
#define MAX_SECRETS 16
#define MIN_SECRET  3 /* as long as the mask; shorter would mask ordinary text everywhere */

typedef struct {
    char *s[MAX_SECRETS];
    int n;
} secrets_t;

static void add(secrets_t *sec, const char *p, size_t len)
{
    if (len < MIN_SECRET || sec->n == MAX_SECRETS)
        return;
    char *copy = strndup(p, len);
    if (copy)
        sec->s[sec->n++] = copy;
}

static int hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The password as libpq may print it decoded, besides the form given. */
static void add_decoded(secrets_t *sec, const char *p, size_t len)
{
    add(sec, p, len);
    char *d = malloc(len + 1);
    if (!d)
        return;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '%' && i + 2 < len && hex(p[i + 1]) >= 0 && hex(p[i + 2]) >= 0) {
            d[n++] = (char)(hex(p[i + 1]) * 16 + hex(p[i + 2]));
            i += 2;
        } else {
            d[n++] = p[i];
        }
    }
    if (n != len || memcmp(d, p, len) != 0)
        add(sec, d, n);
    free(d);
}

/* URIs anywhere in @text (the conninfo, or a dbname that holds one): scheme://user:password@... */
static void from_uris(secrets_t *sec, const char *text)
{
    for (const char *at = strstr(text, "://"); at; at = strstr(at + 3, "://")) {
        const char *info = at + 3;
        /* The user info ends at the last '@' before the end of the authority; a password with
         * an unencoded '@' or '/' still counts whole. */
        const char *end = NULL;
        for (const char *p = info; *p && !isspace((unsigned char)*p); p++)
            if (*p == '@')
                end = p;
        if (!end)
            continue;
        const char *colon = memchr(info, ':', (size_t)(end - info));
        if (colon)
            add_decoded(sec, colon + 1, (size_t)(end - colon - 1));
    }
}

/* keyword=value pairs whose keyword names a password, as written (quoted or not), also when the
 * string as a whole does not parse. */
static void from_keywords(secrets_t *sec, const char *text)
{
    for (const char *at = strstr(text, "password"); at; at = strstr(at + 1, "password")) {
        const char *p = at + strlen("password");
        while (*p && *p != '=' && !isspace((unsigned char)*p))
            p++; /* sslpassword, password_file ... */
        while (isspace((unsigned char)*p))
            p++;
        if (*p != '=')
            continue;
        p++;
        while (isspace((unsigned char)*p))
            p++;
        const char *start = p;
        if (*p == '\'') {
            start = ++p;
            while (*p && *p != '\'')
                p += p[0] == '\\' && p[1] ? 2 : 1;
        } else {
            while (*p && !isspace((unsigned char)*p))
                p++;
        }
        add_decoded(sec, start, (size_t)(p - start));
    }
}

static void collect(secrets_t *sec, const char *conninfo)
{
    from_uris(sec, conninfo);
    from_keywords(sec, conninfo);
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &errmsg);
    PQfreemem(errmsg);
    for (PQconninfoOption *o = opts; o && o->keyword; o++) {
        if (!o->val)
            continue;
        if (strstr(o->keyword, "password"))
            add(sec, o->val, strlen(o->val));
        else if (strcmp(o->keyword, "dbname") == 0) /* expanded by libpq when it is a conninfo */
            from_uris(sec, o->val), from_keywords(sec, o->val);
    }
    PQconninfoFree(opts);
}

/* Replace every occurrence of @secret in @msg with the mask, which is never longer. */
static void mask(char *msg, const char *secret)
{
    size_t slen = strlen(secret), mlen = strlen(MASK);
    for (char *at = strstr(msg, secret); at; at = strstr(at + mlen, secret)) {
        memmove(at + mlen, at + slen, strlen(at + slen) + 1);
        memcpy(at, MASK, mlen);
    }
}

void tpc_pg_hide_secrets(const char *conninfo, char *msg)
{
    if (!conninfo || !msg)
        return;
    secrets_t sec = {0};
    collect(&sec, conninfo);
    /* Longest first, so that a password that contains another is masked whole. */
    for (int i = 0; i < sec.n; i++)
        for (int j = i + 1; j < sec.n; j++)
            if (strlen(sec.s[j]) > strlen(sec.s[i])) {
                char *t = sec.s[i];
                sec.s[i] = sec.s[j];
                sec.s[j] = t;
            }
    for (int i = 0; i < sec.n; i++) {
        mask(msg, sec.s[i]);
        free(sec.s[i]);
    }
}
