/*
 * Output that names cannot forge. The command prints names it did not choose: transactional ids,
 * gids, topics, jobs and vertices, out of checkpoint files and servers that anyone with access may
 * have written. A control byte in one (an escape sequence) would act on the operator's terminal,
 * and invalid UTF-8 would break a JSON reader. So every byte the command writes to stdout and
 * stderr goes through a filter that shows control bytes (but newline and tab, the command's own
 * layout) and bytes that are not part of valid UTF-8 as \xNN; JSON strings (twopc_json_str())
 * escape the same bytes the same way, as the six characters `\\xNN`, so that the document stays
 * valid.
 */
#include "twopc_cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define INCOMPLETE ((size_t)-1)

size_t twopc_utf8_len(const unsigned char *p, size_t n)
{
    if (!n)
        return INCOMPLETE;
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* no overlong form */
        hi = c == 0xed ? 0x9f : 0xbf; /* no surrogate */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf; /* nothing past U+10FFFF */
    } else {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if (i >= n)
            return INCOMPLETE;
        unsigned char want_lo = i == 1 ? lo : 0x80, want_hi = i == 1 ? hi : 0xbf;
        if (p[i] < want_lo || p[i] > want_hi)
            return 0;
    }
    return len;
}

/* The filter of one stream: bytes of a character cut by a write wait in pend for the next. */
typedef struct {
    FILE *to;
    unsigned char pend[4];
    size_t npend;
} filter_t;

static void put_escaped(FILE *to, const unsigned char *p, size_t n, bool at_end, size_t *used)
{
    size_t i = 0;
    while (i < n) {
        size_t len = twopc_utf8_len(p + i, n - i);
        if (len == INCOMPLETE && !at_end)
            break;
        bool shown = (len > 1 && len != INCOMPLETE) ||
                     (len == 1 && (p[i] >= 0x20 || p[i] == '\n' || p[i] == '\t') && p[i] != 0x7f);
        if (shown) {
            fwrite(p + i, 1, len, to);
        } else {
            fprintf(to, "\\x%02x", p[i]);
            len = 1;
        }
        i += len;
    }
    *used = i;
}

static ssize_t filter_write(void *cookie, const char *buf, size_t size)
{
    filter_t *f = cookie;
    unsigned char joined[4 + 4096];
    size_t done = 0;
    while (done < size) {
        size_t take = size - done < 4096 ? size - done : 4096;
        memcpy(joined, f->pend, f->npend);
        memcpy(joined + f->npend, buf + done, take);
        size_t n = f->npend + take, used;
        put_escaped(f->to, joined, n, false, &used);
        f->npend = n - used; /* at most 3: an incomplete character */
        memcpy(f->pend, joined + used, f->npend);
        done += take;
    }
    fflush(f->to);
    return (ssize_t)size;
}

static int filter_close(void *cookie)
{
    filter_t *f = cookie;
    size_t used;
    put_escaped(f->to, f->pend, f->npend, true, &used);
    f->npend = 0;
    return fflush(f->to);
}

static FILE *filtered(FILE *to, int mode)
{
    static filter_t filters[2];
    static int used;
    if (used == 2)
        return to;
    filter_t *f = &filters[used++];
    f->to = to;
    cookie_io_functions_t io = {.write = filter_write, .close = filter_close};
    FILE *s = fopencookie(f, "w", io);
    if (!s)
        return to;
    setvbuf(s, NULL, mode, mode == _IONBF ? 0 : 8192);
    return s;
}

void twopc_filter_output(void)
{
    /* Through duplicates of the descriptors, so that the filtered streams own what they close. */
    FILE *out = fdopen(dup(fileno(stdout)), "w"), *err = fdopen(dup(fileno(stderr)), "w");
    if (!out || !err) {
        if (out)
            fclose(out);
        if (err)
            fclose(err);
        return;
    }
    stdout = filtered(out, _IOLBF); /* as a terminal's: each line as it is done */
    stderr = filtered(err, _IONBF);
}

void twopc_json_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        size_t len = twopc_utf8_len(p + i, n - i);
        if (len == 1 && (p[i] == '"' || p[i] == '\\'))
            fprintf(f, "\\%c", p[i]);
        else if (len == 1 && (p[i] < 0x20 || p[i] == 0x7f))
            fprintf(f, "\\u%04x", p[i]);
        else if (len == 0 || len == INCOMPLETE)
            fprintf(f, "\\\\x%02x", p[i]); /* not UTF-8: the text \xNN, as on a terminal */
        else
            fwrite(p + i, 1, len, f);
        i += len == 0 || len == INCOMPLETE ? 1 : len;
    }
    fputc('"', f);
}
