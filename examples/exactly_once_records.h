/*
 * The records of the exactly-once examples, shared by exactly_once_pipeline (which makes them) and
 * verify_output (which checks them). Everything is derived from the record's number i, so a reader
 * of the outputs can tell for each record it finds whether it belongs there, and which ones are
 * missing or repeated, without keeping a copy of the input.
 *
 *   input record i:   key "key-<i mod keys>"   value "<i>"
 *   output record i:  key "key-<i mod keys>"   value "<i>:<16 hex digits of mix(i)>"
 *   PostgreSQL row i: (id = i, k = the output key, v = the output value)
 *
 * With the changelog layout the table keeps one row per key instead: record i upserts its key's
 * row, or deletes it when eo_is_delete(i); the table must end as that changelog applied once.
 * The transform is the step from input to output value: a function of i alone, so that replaying a
 * record after a crash produces the same bytes again.
 */
#ifndef EXACTLY_ONCE_RECORDS_H
#define EXACTLY_ONCE_RECORDS_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Keys by default: enough for the input to spread over the partitions, few enough that a run of a
 * few thousand records has several per key, whose order the verifier checks. */
#define EO_DEFAULT_KEYS 840u

/* Room for the longest key and value, NUL included. */
#define EO_KEY_MAX   32
#define EO_VALUE_MAX 48

/* A 64-bit mixing function (the finaliser of a well-known hash): any fixed bijection would do. */
static inline uint64_t eo_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb3f9e7bbd1cdull;
    x ^= x >> 33;
    return x;
}

static inline int eo_key(uint64_t i, uint32_t keys, char *buf)
{
    return snprintf(buf, EO_KEY_MAX, "key-%" PRIu64, i % keys);
}

static inline int eo_input_value(uint64_t i, char *buf)
{
    return snprintf(buf, EO_VALUE_MAX, "%" PRIu64, i);
}

static inline int eo_output_value(uint64_t i, char *buf)
{
    return snprintf(buf, EO_VALUE_MAX, "%" PRIu64 ":%016" PRIx64, i, eo_mix(i));
}

/* The changelog layout: record i deletes its key's row instead of upserting it. */
static inline int eo_is_delete(uint64_t i)
{
    return i % 7 == 3;
}

/* Parse the leading decimal number of @p bytes (an input or output value). @returns false when
 * there is none or it does not fit. */
static inline int eo_parse_number(const void *bytes, size_t len, uint64_t *out)
{
    const char *p = bytes;
    uint64_t v = 0;
    size_t n = 0;
    while (n < len && p[n] >= '0' && p[n] <= '9') {
        if (v > (UINT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (uint64_t)(p[n] - '0');
        n++;
    }
    *out = v;
    return n > 0;
}

#endif
