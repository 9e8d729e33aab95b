/*
 * The Kafka source's topic pattern (connectors/kafka/source/kafka_source.c, kafka_source_meta.c):
 * compiled as the user wrote it (its groups keep their numbers), matching whole topic names only,
 * and the matching of a cluster's topic names against it asks the cancel test as it goes, so that
 * tpc_job_cancel() ends an open (or a discovery) that matches many long names.
 */
#include "kafka_source_internal.h"
#include "tpc_kit.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static tpc_kafka_source_t *source(const char *pattern)
{
    tpc_kafka_source_t *src = NULL;
    tpc_error_t *err = tpc_kafka_source_new("127.0.0.1:9092", pattern, &src);
    ck_assert_msg(!err, "\"%s\": %s", pattern, err ? tpc_error_message(err) : "");
    ck_assert(src->is_pattern);
    return src;
}

static bool matches(const tpc_kafka_source_t *src, const char *name)
{
    return tpc__kafka_source_matches(src, name, strlen(name));
}

START_TEST(test_groups_numbered_as_written)
{
    tpc_kafka_source_t *src = source("^(orders)-(eu|us)-[0-9]+");
    ck_assert_uint_eq(src->pattern.re_nsub, 2); /* no group of the library's around them */
    tpc_kafka_source_destroy(src);
    src = source("^orders-.*");
    ck_assert_uint_eq(src->pattern.re_nsub, 0);
    tpc_kafka_source_destroy(src);
}
END_TEST

START_TEST(test_whole_names_only)
{
    tpc_kafka_source_t *src = source("^(orders)-(eu|us)-[0-9]+");
    ck_assert(matches(src, "orders-eu-1"));
    ck_assert(matches(src, "orders-us-42"));
    ck_assert(!matches(src, "orders-eu-1x"));
    ck_assert(!matches(src, "xorders-eu-1"));
    ck_assert(!matches(src, "orders-eu-"));
    tpc_kafka_source_destroy(src);
    /* An alternation at the top: each branch must match a whole name. */
    src = source("^a|b");
    ck_assert(matches(src, "a"));
    ck_assert(matches(src, "b"));
    ck_assert(!matches(src, "ab"));
    ck_assert(!matches(src, "xb"));
    ck_assert(!matches(src, "ba"));
    tpc_kafka_source_destroy(src);
    /* A shorter match at the start does not hide a whole one. */
    src = source("^(a|ab)(c|bcd)");
    ck_assert(matches(src, "abcd"));
    ck_assert(matches(src, "ac"));
    ck_assert(!matches(src, "abc_"));
    tpc_kafka_source_destroy(src);
    /* Kafka's internal topics never. */
    src = source("^.*");
    ck_assert(matches(src, "orders"));
    ck_assert(!matches(src, "__consumer_offsets"));
    tpc_kafka_source_destroy(src);
}
END_TEST

#define NAMES    2000
#define NAME_LEN 249 /* the longest topic name Kafka takes */

/* @n topics of 249-byte names of 'a' and 'b' (a fixed pseudo-random sequence). */
static struct rd_kafka_metadata *long_names(int n)
{
    struct rd_kafka_metadata *md = calloc(1, sizeof *md);
    md->topics = calloc((size_t)n, sizeof *md->topics);
    md->topic_cnt = n;
    uint32_t x = 2463534242u;
    for (int i = 0; i < n; i++) {
        char *name = malloc(NAME_LEN + 1);
        for (int k = 0; k < NAME_LEN; k++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            name[k] = "ab"[x >> 31];
        }
        name[NAME_LEN] = '\0';
        md->topics[i].topic = name;
        md->topics[i].partition_cnt = 1;
    }
    return md;
}

static void long_names_free(struct rd_kafka_metadata *md)
{
    for (int i = 0; i < md->topic_cnt; i++)
        free(md->topics[i].topic);
    free(md->topics);
    free(md);
}

/* Its automaton has 2^21 states: glibc builds those it meets and kept them all (one compiled
 * pattern for every name: 180 ms a name, 1.3 GB after 2,000 names). No back-reference. */
#define PATTERN "^(a|b)*a(a|b){20}"

/* Peak RSS of the whole match: 1.3 GB with one compiled pattern. AddressSanitizer adds its shadow
 * and its quarantine of freed memory (461 MB measured with the bounded matcher). */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_BOUND_MB 1000
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_BOUND_MB 1000
#endif
#endif
#ifndef RSS_BOUND_MB
#define RSS_BOUND_MB 300
#endif

typedef struct {
    int calls, cancel_at;
} cancel_t;

static bool cancel_after(void *arg)
{
    cancel_t *c = arg;
    return ++c->calls >= c->cancel_at;
}

START_TEST(test_long_match_canceled)
{
    tpc_kafka_source_t *src = source(PATTERN);
    struct rd_kafka_metadata *md = long_names(NAMES);

    /* Uncanceled: the names whose 21st byte from the end is 'a' match, in bounded time and
     * memory, and the cancel test was asked all along. */
    size_t want = 0;
    for (int i = 0; i < NAMES; i++)
        want += md->topics[i].topic[NAME_LEN - 21] == 'a';
    cancel_t never = {.cancel_at = 1 << 30};
    tpc__kafka_meta_t all = {0};
    int64_t t0 = tpc_clock_us();
    tpc__kafka_meta_pick(src, md, cancel_after, &never, &all);
    int64_t whole_us = tpc_clock_us() - t0;
    ck_assert(!all.canceled);
    ck_assert_int_eq(all.err, 0);
    ck_assert_uint_eq(all.ntopics, want);
    ck_assert_int_ge(never.calls, NAMES / TPC__KAFKA_META_CANCEL_EVERY);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%d names of %d bytes against \"%s\": %.1f ms, %.2f ms a name, %zu match; peak RSS "
           "%ld MB\n",
           NAMES, NAME_LEN, PATTERN, whole_us / 1000.0, (double)whole_us / NAMES / 1000, want,
           ru.ru_maxrss / 1024);
    ck_assert_int_lt(ru.ru_maxrss, RSS_BOUND_MB * 1024);
    ck_assert_int_lt(whole_us / NAMES, 40 * 1000); /* 180 ms a name with one */
    tpc__kafka_meta_free(&all);

    /* Canceled at the third question: nothing taken, and no more than 2 * EVERY names looked at
     * (the third question comes before the name after them). */
    cancel_t soon = {.cancel_at = 3};
    tpc__kafka_meta_t cut = {0};
    t0 = tpc_clock_us();
    tpc__kafka_meta_pick(src, md, cancel_after, &soon, &cut);
    int64_t cut_us = tpc_clock_us() - t0;
    ck_assert(cut.canceled);
    ck_assert_int_ne(cut.err, 0);
    ck_assert_uint_eq(cut.ntopics, 0);
    ck_assert_ptr_null(cut.topics);
    ck_assert_int_eq(soon.calls, 3);
    printf("canceled after %d names: %.1f ms\n", 2 * TPC__KAFKA_META_CANCEL_EVERY, cut_us / 1000.0);
    ck_assert_int_lt(cut_us, whole_us);

    long_names_free(md);
    tpc_kafka_source_destroy(src);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka_source_pattern");
    TCase *tc = tcase_create("pattern");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_groups_numbered_as_written);
    tcase_add_test(tc, test_whole_names_only);
    tcase_add_test(tc, test_long_match_canceled);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
