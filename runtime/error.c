/*
 * The library's one error type. An error carries a code from TPC_ERRNO_MAP, flags (fatal,
 * retriable), a message in PostgreSQL style (lower case, names in double quotes, no trailing
 * period) and an optional hint that says how to fix it. Allocation failure returns a static error
 * so that reporting an error never fails.
 */
#include "runtime_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tpc_error_s {
    tpc_err_t code;
    int flags;
    bool is_static;
    char *message;
    char *hint;
};

static tpc_error_t oom_error = {TPC_ERR_NOMEM, TPC_ERROR_FATAL, true, "out of memory", NULL};

static char *vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

tpc_error_t *tpc_error_nomem(void)
{
    return &oom_error;
}

tpc_error_t *tpc_error_new(tpc_err_t code, int flags, const char *fmt, ...)
{
    tpc_error_t *e = calloc(1, sizeof(*e));
    if (!e)
        return &oom_error;
    va_list ap;
    va_start(ap, fmt);
    e->message = vformat(fmt, ap);
    va_end(ap);
    if (!e->message) {
        free(e);
        return &oom_error;
    }
    e->code = code;
    e->flags = flags;
    return e;
}

tpc_error_t *tpc_error_prefix(tpc_error_t *err, const char *fmt, ...)
{
    if (!err || err->is_static)
        return err;
    va_list ap;
    va_start(ap, fmt);
    char *prefix = vformat(fmt, ap);
    va_end(ap);
    if (!prefix)
        return err;
    size_t n = strlen(prefix) + strlen(err->message) + 3;
    char *m = malloc(n);
    if (m) {
        snprintf(m, n, "%s: %s", prefix, err->message);
        free(err->message);
        err->message = m;
    }
    free(prefix);
    return err;
}

tpc_error_t *tpc_error_hint(tpc_error_t *err, const char *fmt, ...)
{
    if (!err || err->is_static)
        return err;
    va_list ap;
    va_start(ap, fmt);
    char *h = vformat(fmt, ap);
    va_end(ap);
    if (h) {
        free(err->hint);
        err->hint = h;
    }
    return err;
}

tpc_err_t tpc_error_code(const tpc_error_t *err)
{
    return err ? err->code : TPC_OK;
}

const char *tpc_error_message(const tpc_error_t *err)
{
    return err ? err->message : "success";
}

const char *tpc_error_hint_text(const tpc_error_t *err)
{
    return err ? err->hint : NULL;
}

/* Codes that say what no restart changes: the configuration, the program, the stored state or
 * the external system's verdict. An error of such a code is fatal unless its maker flagged it
 * retriable (a malformed reply of a broker that is restarting, say). */
static bool code_is_permanent(tpc_err_t code)
{
    switch (code) {
    case TPC_ERR_CONFIG:
    case TPC_ERR_INVALID_ARG:
    case TPC_ERR_NOT_FOUND:
    case TPC_ERR_CORRUPT:
    case TPC_ERR_DATA_LOSS:
    case TPC_ERR_UNSUPPORTED:
    case TPC_ERR_FENCED:
        return true;
    default:
        return false;
    }
}

bool tpc_error_is_fatal(const tpc_error_t *err)
{
    if (!err)
        return false;
    if (err->flags & TPC_ERROR_FATAL)
        return true;
    return !(err->flags & TPC_ERROR_RETRIABLE) && code_is_permanent(err->code);
}

bool tpc_error_is_retriable(const tpc_error_t *err)
{
    return err && (err->flags & TPC_ERROR_RETRIABLE);
}

void tpc_error_destroy(tpc_error_t *err)
{
    if (!err || err->is_static)
        return;
    free(err->message);
    free(err->hint);
    free(err);
}

const char *tpc_err_name(tpc_err_t code)
{
    switch (code) {
    case TPC_OK:
        return "TPC_OK";
#define TPC__ERR_NAME(name, val, desc)                                                             \
    case TPC_ERR_##name:                                                                           \
        return "TPC_ERR_" #name;
        TPC_ERRNO_MAP(TPC__ERR_NAME)
#undef TPC__ERR_NAME
    }
    return "TPC_ERR_UNKNOWN";
}

const char *tpc_strerror(tpc_err_t code)
{
    switch (code) {
    case TPC_OK:
        return "success";
#define TPC__ERR_DESC(name, val, desc)                                                             \
    case TPC_ERR_##name:                                                                           \
        return desc;
        TPC_ERRNO_MAP(TPC__ERR_DESC)
#undef TPC__ERR_DESC
    }
    return "unknown error";
}

int tpc_version(void)
{
    return TPC_VERSION_HEX;
}

const char *tpc_version_string(void)
{
    return TPC_VERSION_STRING;
}
