/*
 * File names of the file sink. A name is all that survives of a transaction that crashed before
 * its handle reached a checkpoint, so in-progress names carry everything cleanup needs to decide
 * whether a file is this sink's and whether any checkpoint can still commit it: prefix, subtask,
 * the lowest checkpoint the transaction could be pre-committed in, the owner epoch of the run that
 * wrote it (only under owners, as "e<epoch>"), and a random token that tells transactions of
 * different runs apart. Names are parsed from the right, so a prefix may itself contain dashes and
 * digits without one sink mistaking another's files for its own: the epoch field is told from a
 * checkpoint field by its letter, and names without it (no owners, or written before names had
 * it) read as epoch 0.
 */
#include "file_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const char inprogress_ext[] = ".inprogress";

bool tpc__file_inprogress_name(char *buf, const char *prefix, const tpc__file_txn_t *t,
                               uint32_t part)
{
    char epoch[24] = "";
    if (t->epoch)
        snprintf(epoch, sizeof epoch, "-e%" PRIu64, t->epoch);
    int n =
        snprintf(buf, TPC__FILE_NAME_MAX, ".%s-%d-%010" PRIu64 "%s-%016" PRIx64 "-%04" PRIu32 "%s",
                 prefix, t->subtask, t->begin_ckpt, epoch, t->token, part, inprogress_ext);
    return n > 0 && n < TPC__FILE_NAME_MAX;
}

bool tpc__file_final_name(char *buf, const tpc__file_conf_t *conf, const tpc__file_txn_t *t,
                          uint32_t part)
{
    int n;
    if (t->token_in_name)
        n = snprintf(buf, TPC__FILE_NAME_MAX, "%s-%d-%010" PRIu64 "-%016" PRIx64 "-%04" PRIu32 "%s",
                     conf->prefix, t->subtask, t->ckpt, t->token, part, conf->suffix);
    else
        n = snprintf(buf, TPC__FILE_NAME_MAX, "%s-%d-%010" PRIu64 "-%04" PRIu32 "%s", conf->prefix,
                     t->subtask, t->ckpt, part, conf->suffix);
    return n > 0 && n < TPC__FILE_NAME_MAX;
}

/* The number in name[b, e): digits (or hex digits), at least one. */
static bool number(const char *name, size_t b, size_t e, bool hex, uint64_t *value)
{
    if (b == e || e - b > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = b; i < e; i++) {
        char ch = name[i];
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned)(ch - '0');
        else if (hex && ch >= 'a' && ch <= 'f')
            d = (unsigned)(ch - 'a' + 10);
        else
            return false;
        uint64_t next = v * (hex ? 16 : 10) + d;
        if (next / (hex ? 16 : 10) != v)
            return false;
        v = next;
    }
    *value = v;
    return true;
}

/* Where the last "-<field>" of name[0, end) starts (after its dash); 0 if there is no dash. */
static size_t field_start(const char *name, size_t end)
{
    size_t b = end;
    while (b > 0 && name[b - 1] != '-')
        b--;
    return b;
}

/* Split off the last "-<field>" of name[0, *end): digits (or hex digits), at least one. */
static bool last_field(const char *name, size_t *end, bool hex, uint64_t *value)
{
    size_t b = field_start(name, *end);
    if (b == 0 || !number(name, b, *end, hex, value))
        return false;
    *end = b - 1; /* before the dash */
    return true;
}

/* Split off an owner epoch field "-e<digits>" at the end of name[0, *end) if there is one (@epoch
 * is then set; 0 otherwise). A checkpoint field, the only other that can stand there, never
 * starts with a letter. @returns false for an "e" field that is not an epoch. */
static bool epoch_field(const char *name, size_t *end, uint64_t *epoch)
{
    size_t b = field_start(name, *end);
    *epoch = 0;
    if (b == 0 || name[b] != 'e')
        return true;
    if (!number(name, b + 1, *end, false, epoch) || *epoch == 0)
        return false;
    *end = b - 1;
    return true;
}

bool tpc__file_parse_inprogress(const char *name, const char *prefix, tpc__file_inprogress_t *out)
{
    size_t len = strlen(name), ext = sizeof inprogress_ext - 1;
    if (len < ext + 2 || name[0] != '.' || strcmp(name + len - ext, inprogress_ext) != 0)
        return false;
    size_t end = len - ext;
    uint64_t p, tok, ckpt, sub, epoch;
    if (!last_field(name, &end, false, &p) || !last_field(name, &end, true, &tok) ||
        !epoch_field(name, &end, &epoch) || !last_field(name, &end, false, &ckpt) ||
        !last_field(name, &end, false, &sub))
        return false;
    /* What is left, between the dot and the dash before the subtask, must be the prefix. */
    size_t plen = strlen(prefix);
    if (end != plen + 1 || memcmp(name + 1, prefix, plen) != 0)
        return false;
    if (sub > INT32_MAX || p > UINT32_MAX)
        return false;
    *out = (tpc__file_inprogress_t){
        .subtask = (int)sub, .begin_ckpt = ckpt, .epoch = epoch, .token = tok, .part = (uint32_t)p};
    return true;
}

bool tpc__file_parse_final(const char *name, const tpc__file_conf_t *conf, int *subtask,
                           uint64_t *ckpt)
{
    size_t len = strlen(name), slen = strlen(conf->suffix), plen = strlen(conf->prefix);
    if (len <= slen + plen + 1 || strcmp(name + len - slen, conf->suffix) != 0)
        return false;
    size_t end = len - slen;
    uint64_t part, c, sub;
    if (!last_field(name, &end, false, &part) || !last_field(name, &end, false, &c) ||
        !last_field(name, &end, false, &sub))
        return false;
    if (end != plen || memcmp(name, conf->prefix, plen) != 0 || sub > INT32_MAX)
        return false;
    *subtask = (int)sub;
    *ckpt = c;
    return true;
}

uint64_t tpc__file_token(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v && v)
        return v;
    /* No entropy yet (early boot): time, pid and address bits are enough to tell runs apart. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40) ^
        (uint64_t)(uintptr_t)&v;
    return v ? v : 1;
}

tpc_error_t *tpc__file_errno(int errnum, const char *what, const char *name)
{
    /* Errors a retry may get past: the folder is briefly out of space, quota or I/O. */
    bool transient = errnum == ENOSPC || errnum == EDQUOT || errnum == EIO || errnum == EAGAIN ||
                     errnum == EINTR || errnum == EBUSY;
    char msg[128];
    const char *text = msg;
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    text = strerror_r(errnum, msg, sizeof msg);
#else
    if (strerror_r(errnum, msg, sizeof msg) != 0)
        snprintf(msg, sizeof msg, "error %d", errnum);
#endif
    return tpc_error_new(TPC_ERR_IO, transient ? TPC_ERROR_RETRIABLE : TPC_ERROR_FATAL,
                         "could not %s \"%s\": %s", what, name, text);
}
