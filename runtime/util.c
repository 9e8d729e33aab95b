/*
 * Small pieces every runtime file uses: clocks, allocation that aborts on exhaustion (the runtime
 * cannot make progress without memory, and a half-built structure is worse than a clear stop),
 * growable byte buffers with little-endian encoding, a bounds-checked reader, and logging.
 */
#include "runtime_internal.h"
#include "tpc_kit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool tpc_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !out)
        return false;
    const char *digits = s[0] == '-' ? s + 1 : s;
    if (*digits < '0' || *digits > '9') /* strtoll would skip spaces and take a '+' */
        return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

void tpc__sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void out_of_memory(size_t n)
{
    fprintf(stderr, "twopc: out of memory allocating %zu bytes\n", n);
    abort();
}

void *tpc__xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        out_of_memory(n);
    return p;
}

void *tpc__xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        out_of_memory(n * size);
    return p;
}

void *tpc__xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        out_of_memory(n);
    return q;
}

void tpc__out_of_memory(size_t n)
{
    out_of_memory(n);
}

void tpc__xgrow(void *items, size_t *cap, size_t need, size_t size)
{
    if (!tpc_array_grow(items, cap, need, size))
        out_of_memory(need > SIZE_MAX / (size ? size : 1) ? SIZE_MAX : need * size);
}

char *tpc__xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = tpc__xmalloc(n);
    memcpy(d, s, n);
    return d;
}

void tpc__buf_reserve(tpc__buf_t *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return;
    tpc__xgrow(&b->data, &b->cap, b->len + extra, 1);
}

void tpc__buf_put(tpc__buf_t *b, const void *p, size_t n)
{
    if (!n)
        return;
    tpc__buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void tpc__buf_put_u8(tpc__buf_t *b, uint8_t v)
{
    tpc__buf_put(b, &v, 1);
}

void tpc__buf_put_u32(tpc__buf_t *b, uint32_t v)
{
    uint8_t x[4];
    tpc_store_le(x, v, 4);
    tpc__buf_put(b, x, 4);
}

void tpc__buf_put_u64(tpc__buf_t *b, uint64_t v)
{
    tpc__buf_put_u32(b, (uint32_t)v);
    tpc__buf_put_u32(b, (uint32_t)(v >> 32));
}

void tpc__buf_put_bytes(tpc__buf_t *b, const void *p, size_t n)
{
    tpc__buf_put_u32(b, (uint32_t)n);
    tpc__buf_put(b, p, n);
}

void tpc__buf_free(tpc__buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static const uint8_t *rd_take(tpc__rd_t *r, size_t n)
{
    if (r->bad || r->len - r->off < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

uint8_t tpc__rd_u8(tpc__rd_t *r)
{
    const uint8_t *p = rd_take(r, 1);
    return p ? p[0] : 0;
}

uint32_t tpc__rd_u32(tpc__rd_t *r)
{
    const uint8_t *p = rd_take(r, 4);
    if (!p)
        return 0;
    return (uint32_t)tpc_load_le(p, 4);
}

uint64_t tpc__rd_u64(tpc__rd_t *r)
{
    uint64_t lo = tpc__rd_u32(r);
    uint64_t hi = tpc__rd_u32(r);
    return lo | hi << 32;
}

const uint8_t *tpc__rd_bytes(tpc__rd_t *r, size_t *len)
{
    uint32_t n = tpc__rd_u32(r);
    const uint8_t *p = rd_take(r, n);
    *len = p ? n : 0;
    return p;
}

/* The default logger: one line per event on stderr,
 *   2026-12-03T10:40:00.123Z WARN  vertex=kafka subtask=1 message
 * with vertex and subtask "-" for lines of the job as a whole. A task's lines carry its vertex and
 * subtask as a "name"[n]: prefix (tpc_log()), which becomes the two fields here; line breaks in a
 * message (a server's multi-line notice, say) become spaces, so that one event is one line. */
static void log_stderr(void *opaque, tpc_log_level_t level, const char *message)
{
    (void)opaque;
    static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    char vertex[128] = "-", subtask[16] = "-";
    const char *text = message;
    const char *close = message[0] == '"' ? strchr(message + 1, '"') : NULL;
    int sub;
    char tail[3];
    if (close && close[1] == '[' && sscanf(close + 2, "%d%2[]:]", &sub, tail) == 2 &&
        strcmp(tail, "]:") == 0 && (size_t)(close - message) < sizeof vertex) {
        snprintf(vertex, sizeof vertex, "%.*s", (int)(close - message - 1), message + 1);
        snprintf(subtask, sizeof subtask, "%d", sub);
        text = strstr(close, "]:") + 2;
        text += *text == ' ';
    }
    char line[1200];
    snprintf(line, sizeof line, "%s", text);
    for (char *c = line; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    bool quote = strpbrk(vertex, " =\"") != NULL;
    fprintf(stderr, "%s.%03ldZ %-5s vertex=%s%s%s subtask=%s %s\n", when, ts.tv_nsec / 1000000L,
            names[level], quote ? "\"" : "", vertex, quote ? "\"" : "", subtask, line);
}

void tpc__logf(const tpc__logger_t *lg, tpc_log_level_t level, const char *fmt, ...)
{
    if (level > lg->max_level)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    (lg->cb ? lg->cb : log_stderr)(lg->opaque, level, msg);
}
