/*
 * The records of keyed_totals, shared by the pipeline (which makes and reads them) and
 * verify_totals (which checks what came out). Input record i is a purchase of user i mod users; its
 * amount is a function of i alone, so a reader can compute every user's running totals without a
 * copy of the input:
 *
 *   input record i:        key "user-<i mod users>"   value "user-<i mod users>,<amount(i)>"
 *   output record (Kafka): key "user-<u>"             value "<n>,<total>": the user's n-th
 *                          purchase brought the user's total to <total>
 *   PostgreSQL row:        (user_id = "user-<u>", n, total), one per user, upserted
 *
 * The records of one user share a key, so they lie in one input partition in the order of i: the
 * n-th purchase of user u is record u + (n - 1) * users.
 */
#ifndef KEYED_TOTALS_RECORDS_H
#define KEYED_TOTALS_RECORDS_H

#include "exactly_once_records.h"

#define KT_DEFAULT_USERS 300u
#define KT_USER_MAX      32
#define KT_VALUE_MAX     64

static inline uint64_t kt_amount(uint64_t i)
{
    return 1 + eo_mix(i) % 1000;
}

static inline int kt_user(uint64_t i, uint32_t users, char *buf)
{
    return snprintf(buf, KT_USER_MAX, "user-%" PRIu64, i % users);
}

static inline int kt_input_value(uint64_t i, uint32_t users, char *buf)
{
    return snprintf(buf, KT_VALUE_MAX, "user-%" PRIu64 ",%" PRIu64, i % users, kt_amount(i));
}

static inline int kt_output_value(uint64_t n, uint64_t total, char *buf)
{
    return snprintf(buf, KT_VALUE_MAX, "%" PRIu64 ",%" PRIu64, n, total);
}

/* Parse "<a>,<b>" (two decimal numbers) from @p bytes. @returns false unless that is all there is.
 */
static inline int kt_parse_pair(const void *bytes, size_t len, uint64_t *a, uint64_t *b)
{
    const char *p = bytes;
    size_t comma = 0;
    while (comma < len && p[comma] != ',')
        comma++;
    if (comma == 0 || comma + 1 >= len)
        return 0;
    for (size_t k = 0; k < len; k++)
        if (k != comma && (p[k] < '0' || p[k] > '9'))
            return 0;
    return eo_parse_number(p, comma, a) && eo_parse_number(p + comma + 1, len - comma - 1, b);
}

#endif
