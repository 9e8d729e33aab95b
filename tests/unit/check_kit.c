/*
 * The connector kit (tpc_kit.h): backoff pauses double up to their cap and never pass the
 * deadline, a cancel cuts a long sleep short within a slice, and the clocks move as they should.
 * A growable array keeps its elements as it doubles and refuses a size that overflows; the hash
 * table finds, replaces and removes nodes among many keys and in long chains of equal hashes, and
 * its walk visits each node once, in an order fixed by the operations alone.
 */
#include "tpc_kit.h"
#include "tpc_txn.h"

#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_backoff_doubles_to_cap_and_stops_at_deadline)
{
    tpc_backoff_t b;
    int64_t t0 = tpc_clock_ms();
    tpc_backoff_init(&b, t0 + 200, 10, 40);
    int64_t pauses[16];
    int n = 0;
    while (n < 16) {
        pauses[n] = tpc_backoff_next_ms(&b);
        if (!tpc_backoff_wait(&b, NULL, NULL))
            break;
        n++;
    }
    ck_assert_msg(n >= 4, "only %d pauses", n);
    ck_assert_int_eq(pauses[0], 10);
    ck_assert_int_eq(pauses[1], 20);
    ck_assert_int_eq(pauses[2], 40);
    ck_assert_int_eq(pauses[3], 40); /* capped */
    ck_assert_int_eq(b.retries, n);
    ck_assert(!b.canceled);
    int64_t took = tpc_clock_ms() - t0;
    ck_assert_msg(took <= 200 + 25, "slept %lld ms past a 200 ms deadline", (long long)took);
    ck_assert_msg(took >= 10 + 20 + 40, "slept only %lld ms", (long long)took);
}
END_TEST

static atomic_int asked;

static bool cancel_after_three(void *arg)
{
    (void)arg;
    return atomic_fetch_add(&asked, 1) >= 3;
}

START_TEST(test_cancel_cuts_sleep_short)
{
    atomic_store(&asked, 0);
    int64_t t0 = tpc_clock_ms();
    ck_assert(!tpc_sleep_ms(10000, cancel_after_three, NULL));
    ck_assert_msg(tpc_clock_ms() - t0 < 1000, "a cancel waited %lld ms",
                  (long long)(tpc_clock_ms() - t0));
    tpc_backoff_t b;
    atomic_store(&asked, 0);
    tpc_backoff_init(&b, tpc_clock_ms() + 60000, 5000, 5000);
    ck_assert(!tpc_backoff_wait(&b, cancel_after_three, NULL));
    ck_assert(b.canceled);
    ck_assert_int_eq(b.retries, 0);
    ck_assert(tpc_sleep_ms(30, NULL, NULL));
    ck_assert(tpc_sleep_ms(0, NULL, NULL));
}
END_TEST

START_TEST(test_clocks)
{
    int64_t wall = tpc_wall_ms();
    ck_assert_msg(wall > 1600000000000LL, "wall clock %lld", (long long)wall);
    int64_t a = tpc_clock_ms();
    tpc_sleep_ms(15, NULL, NULL);
    ck_assert_int_ge(tpc_clock_ms() - a, 15);
    ck_assert(!tpc_txn_subtask_canceled(NULL));
}
END_TEST

START_TEST(test_byte_order)
{
    /* Known layouts: network order puts the high byte first, the checkpoint files the low one. */
    unsigned char p[8];
    tpc_store_be(p, 0x0102030405060708u, 8);
    static const unsigned char be[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ck_assert_mem_eq(p, be, 8);
    ck_assert_uint_eq(tpc_load_be(p, 8), 0x0102030405060708u);
    ck_assert_uint_eq(tpc_load_be(p, 2), 0x0102u);
    tpc_store_le(p, 0x0102030405060708u, 8);
    static const unsigned char le[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    ck_assert_mem_eq(p, le, 8);
    ck_assert_uint_eq(tpc_load_le(p, 4), 0x05060708u);
    /* Every width keeps exactly its low bytes, and writes no byte past them. */
    for (int n = 1; n <= 8; n++) {
        unsigned char q[9];
        memset(q, 0xee, sizeof q);
        uint64_t v = 0xf1e2d3c4b5a69788u, mask = n == 8 ? UINT64_MAX : (1ull << (8 * n)) - 1;
        tpc_store_be(q, v, n);
        ck_assert_uint_eq(tpc_load_be(q, n), v & mask);
        ck_assert_uint_eq(q[n], 0xee);
        tpc_store_le(q, v, n);
        ck_assert_uint_eq(tpc_load_le(q, n), v & mask);
        ck_assert_uint_eq(q[n], 0xee);
    }
}
END_TEST

/* ---- growable arrays ------------------------------------------------------------------------ */

START_TEST(test_array_grows_and_keeps_elements)
{
    uint64_t *a = NULL;
    size_t cap = 0;
    ck_assert(tpc_array_grow(&a, &cap, 0, sizeof *a)); /* nothing asked: nothing allocated */
    ck_assert_ptr_null(a);
    ck_assert_uint_eq(cap, 0);
    size_t grows = 0, last = 0;
    for (size_t i = 0; i < 100000; i++) {
        ck_assert(tpc_array_grow(&a, &cap, i + 1, sizeof *a));
        ck_assert_uint_ge(cap, i + 1);
        if (cap != last) {
            ck_assert_msg(!last || cap >= 2 * last, "capacity %zu after %zu", cap, last);
            grows++;
            last = cap;
        }
        a[i] = i * 7;
    }
    ck_assert_msg(grows <= 16, "%zu reallocations for 100000 appends", grows);
    for (size_t i = 0; i < 100000; i++)
        ck_assert_uint_eq(a[i], i * 7);
    /* Room already there: nothing moves. */
    uint64_t *before = a;
    ck_assert(tpc_array_grow(&a, &cap, cap, sizeof *a));
    ck_assert_ptr_eq(a, before);
    /* A jump past twice the capacity gets at least what was asked. */
    size_t want = 5 * cap;
    ck_assert(tpc_array_grow(&a, &cap, want, sizeof *a));
    ck_assert_uint_ge(cap, want);
    ck_assert_uint_eq(a[99999], 99999 * 7);
    free(a);
}
END_TEST

START_TEST(test_array_refuses_overflow_and_keeps_array)
{
    struct big {
        char bytes[64];
    } *a = NULL;
    size_t cap = 0;
    ck_assert(tpc_array_grow(&a, &cap, 3, sizeof *a));
    ck_assert_uint_eq(cap, 8); /* the first allocation */
    memset(a, 'x', 3 * sizeof *a);
    struct big *before = a;
    ck_assert(!tpc_array_grow(&a, &cap, SIZE_MAX / sizeof *a + 1, sizeof *a));
    ck_assert(!tpc_array_grow(&a, &cap, SIZE_MAX, sizeof *a));
    ck_assert_ptr_eq(a, before);
    ck_assert_uint_eq(cap, 8);
    ck_assert_int_eq(a[2].bytes[63], 'x');
    free(a);
}
END_TEST

/* ---- hash table ----------------------------------------------------------------------------- */

typedef struct {
    tpc_hash_node_t node;
    uint64_t key;
    int value;
    int seen;
} item_t;

static bool same_item(const tpc_hash_node_t *n, const void *key)
{
    return ((const item_t *)n)->key == *(const uint64_t *)key;
}

/* A hash that spreads keys, or (collide) one that puts every key in one chain. */
static uint64_t hash_of(uint64_t key, bool collide)
{
    return collide ? 42 : key * 0x9e3779b97f4a7c15ull;
}

static item_t *lookup(tpc_hash_t *t, uint64_t key, bool collide)
{
    tpc_hash_node_t **link = tpc_hash_find(t, hash_of(key, collide), same_item, &key);
    return link && *link ? (item_t *)*link : NULL;
}

static void insert(tpc_hash_t *t, item_t *it, uint64_t key, int value, bool collide)
{
    *it = (item_t){.node.hash = hash_of(key, collide), .key = key, .value = value};
    ck_assert(tpc_hash_reserve(t, 1));
    tpc_hash_node_t **link = tpc_hash_find(t, it->node.hash, same_item, &key);
    ck_assert_ptr_nonnull(link);
    ck_assert_ptr_null(*link);
    tpc_hash_insert(t, link, &it->node);
}

START_TEST(test_hash_insert_find_replace_remove)
{
    tpc_hash_t t = {0};
    uint64_t k = 1;
    ck_assert_ptr_null(tpc_hash_find(&t, hash_of(1, false), same_item, &k)); /* no buckets yet */
    tpc_hash_iter_t it;
    ck_assert_ptr_null(tpc_hash_first(&t, &it));
    item_t a, b, c;
    insert(&t, &a, 1, 10, false);
    insert(&t, &b, 2, 20, false);
    ck_assert_uint_eq(t.count, 2);
    ck_assert_ptr_eq(lookup(&t, 1, false), &a);
    ck_assert_ptr_eq(lookup(&t, 2, false), &b);
    ck_assert_ptr_null(lookup(&t, 3, false));
    /* Replace: the new node takes the old one's place. */
    k = 2;
    c = (item_t){.node.hash = hash_of(2, false), .key = 2, .value = 21};
    tpc_hash_replace(tpc_hash_find(&t, c.node.hash, same_item, &k), &c.node);
    ck_assert_ptr_eq(lookup(&t, 2, false), &c);
    ck_assert_uint_eq(t.count, 2);
    /* Remove. */
    k = 1;
    ck_assert_ptr_eq(tpc_hash_remove(&t, tpc_hash_find(&t, a.node.hash, same_item, &k)), &a.node);
    ck_assert_ptr_null(lookup(&t, 1, false));
    ck_assert_ptr_eq(lookup(&t, 2, false), &c);
    ck_assert_uint_eq(t.count, 1);
    tpc_hash_free(&t);
    ck_assert_uint_eq(t.count, 0);
    ck_assert_uint_eq(t.nbuckets, 0);
}
END_TEST

/* Many keys, spread or all in one chain: each is found, the load stays at three quarters at most,
 * a walk visits each once, and removing every other one leaves the rest. */
static void many_keys(bool collide, size_t n)
{
    tpc_hash_t t = {0};
    item_t *items = calloc(n, sizeof *items);
    ck_assert_ptr_nonnull(items);
    for (size_t i = 0; i < n; i++) {
        insert(&t, &items[i], i * 3 + 1, (int)i, collide);
        ck_assert_uint_le(t.count * 4, t.nbuckets * 3);
    }
    ck_assert_uint_eq(t.count, n);
    ck_assert_uint_eq(t.nbuckets & (t.nbuckets - 1), 0); /* a power of two */
    for (size_t i = 0; i < n; i++) {
        item_t *it = lookup(&t, i * 3 + 1, collide);
        ck_assert_ptr_eq(it, &items[i]);
        ck_assert_int_eq(it->value, (int)i);
        ck_assert_ptr_null(lookup(&t, i * 3 + 2, collide));
    }
    tpc_hash_iter_t it;
    size_t walked = 0;
    for (tpc_hash_node_t *node = tpc_hash_first(&t, &it); node; node = tpc_hash_next(&it)) {
        ((item_t *)node)->seen++;
        walked++;
    }
    ck_assert_uint_eq(walked, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(items[i].seen, 1);
    for (size_t i = 0; i < n; i += 2) {
        uint64_t key = i * 3 + 1;
        tpc_hash_node_t **link = tpc_hash_find(&t, hash_of(key, collide), same_item, &key);
        ck_assert_ptr_eq(tpc_hash_remove(&t, link), &items[i].node);
    }
    ck_assert_uint_eq(t.count, n / 2);
    for (size_t i = 0; i < n; i++)
        ck_assert_ptr_eq(lookup(&t, i * 3 + 1, collide), i % 2 ? &items[i] : NULL);
    tpc_hash_free(&t);
    free(items);
}

START_TEST(test_hash_many_keys)
{
    many_keys(false, 20000);
}
END_TEST

START_TEST(test_hash_collisions)
{
    many_keys(true, 2000);
}
END_TEST

/* The order of a walk: bucket by bucket, a chain in the order of its inserts, a replacement in its
 * place; two tables given the same operations walk alike. */
START_TEST(test_hash_walk_order)
{
    enum { N = 1000 };
    static item_t one[N], two[N], repl;
    tpc_hash_t t1 = {0}, t2 = {0};
    for (int i = 0; i < N; i++) {
        insert(&t1, &one[i], (uint64_t)i, i, false);
        insert(&t2, &two[i], (uint64_t)i, i, false);
    }
    uint64_t key = 500;
    repl = (item_t){.node.hash = hash_of(key, false), .key = key, .value = -1};
    tpc_hash_replace(tpc_hash_find(&t1, repl.node.hash, same_item, &key), &repl.node);
    tpc_hash_iter_t i1, i2;
    tpc_hash_node_t *a = tpc_hash_first(&t1, &i1), *b = tpc_hash_first(&t2, &i2);
    size_t last_bucket = 0;
    for (; a && b; a = tpc_hash_next(&i1), b = tpc_hash_next(&i2)) {
        ck_assert_uint_eq(((item_t *)a)->key, ((item_t *)b)->key);
        size_t bucket = a->hash & (t1.nbuckets - 1);
        ck_assert_uint_ge(bucket, last_bucket);
        last_bucket = bucket;
    }
    ck_assert(!a && !b);
    /* Within one chain, inserts come out in their order. */
    tpc_hash_t c = {0};
    static item_t chain[5];
    for (int i = 0; i < 5; i++)
        insert(&c, &chain[i], (uint64_t)(100 - i), i, true);
    tpc_hash_iter_t ic;
    int expect = 0;
    for (tpc_hash_node_t *n = tpc_hash_first(&c, &ic); n; n = tpc_hash_next(&ic))
        ck_assert_int_eq(((item_t *)n)->value, expect++);
    ck_assert_int_eq(expect, 5);
    tpc_hash_free(&t1);
    tpc_hash_free(&t2);
    tpc_hash_free(&c);
}
END_TEST

/* A walk that empties a table may free each node it is given. */
START_TEST(test_hash_walk_frees)
{
    tpc_hash_t t = {0};
    for (uint64_t i = 0; i < 1000; i++) {
        item_t *it = malloc(sizeof *it);
        ck_assert_ptr_nonnull(it);
        insert(&t, it, i, (int)i, i % 3 == 0);
    }
    tpc_hash_iter_t it;
    size_t freed = 0;
    for (tpc_hash_node_t *n = tpc_hash_first(&t, &it); n; n = tpc_hash_next(&it)) {
        free(n);
        freed++;
    }
    ck_assert_uint_eq(freed, 1000);
    tpc_hash_free(&t);
}
END_TEST

/* ---- open-addressing table ------------------------------------------------------------------ */

typedef struct {
    uint64_t key;
    bool in; /* in the table, as the model says */
} slot_item_t;

/* Check's assertions each write to a file: in loops of many thousands, assert only on failure. */
#define SLOTS_CHECK(expr)                                                                          \
    do {                                                                                           \
        if (!(expr))                                                                               \
            ck_assert(expr);                                                                       \
    } while (0)

static bool same_slot_item(const void *item, const void *key)
{
    return ((const slot_item_t *)item)->key == *(const uint64_t *)key;
}

/* Spread hashes, or (few) only 8 distinct ones, so that probes run long and wrap around. */
static uint64_t slot_hash(uint64_t key, bool few)
{
    return few ? (key % 8) * 0x2545f4914f6cdd1dull : key * 0xff51afd7ed558ccdull;
}

/* Random inserts and removals against a model: each lookup finds what the model holds, the load
 * stays at five eighths at most, a walk sees each item once, a peek finds an item of the hash. */
static void slots_against_model(bool few, size_t nkeys, int ops)
{
    tpc_slots_t t = {0};
    slot_item_t *items = calloc(nkeys, sizeof *items);
    ck_assert_ptr_nonnull(items);
    uint64_t k0 = 0;
    ck_assert_ptr_null(tpc_slots_find(&t, slot_hash(0, few), same_slot_item, &k0)); /* no slots */
    size_t in = 0;
    srand(7);
    for (int op = 0; op < ops; op++) {
        uint64_t key = (uint64_t)rand() % nkeys;
        uint64_t h = slot_hash(key, few);
        SLOTS_CHECK(tpc_slots_reserve(&t, 1));
        tpc_slot_t *s = tpc_slots_find(&t, h, same_slot_item, &key);
        SLOTS_CHECK(s != NULL);
        SLOTS_CHECK(s->item == (items[key].in ? &items[key] : NULL));
        if (!items[key].in) {
            items[key] = (slot_item_t){key, true};
            tpc_slots_insert(&t, s, h, &items[key]);
            in++;
        } else if (rand() % 2) {
            tpc_slots_remove(&t, s);
            items[key].in = false;
            in--;
        }
        SLOTS_CHECK(t.count == in);
        SLOTS_CHECK(t.count * 8 <= t.nslots * 5);
    }
    ck_assert_uint_eq(t.nslots & (t.nslots - 1), 0); /* a power of two */
    size_t walked = 0;
    for (size_t i = 0; i < t.nslots; i++)
        if (t.slots[i].item) {
            const slot_item_t *it = t.slots[i].item;
            SLOTS_CHECK(it->in);
            SLOTS_CHECK(t.slots[i].hash == slot_hash(it->key, few));
            walked++;
        }
    ck_assert_uint_eq(walked, in);
    for (uint64_t key = 0; key < nkeys; key++) {
        uint64_t h = slot_hash(key, few);
        tpc_slot_t *s = tpc_slots_find(&t, h, same_slot_item, &key);
        SLOTS_CHECK(s->item == (items[key].in ? &items[key] : NULL));
        const slot_item_t *peek = tpc_slots_peek(&t, h);
        if (!few)
            SLOTS_CHECK(peek == s->item);
        else if (items[key].in)
            SLOTS_CHECK(peek && slot_hash(peek->key, few) == h);
    }
    tpc_slots_free(&t);
    ck_assert_uint_eq(t.nslots, 0);
    ck_assert_ptr_null(t.slots);
    free(items);
}

START_TEST(test_slots_spread)
{
    slots_against_model(false, 5000, 200000);
}
END_TEST

START_TEST(test_slots_long_runs)
{
    slots_against_model(true, 300, 50000);
}
END_TEST

/* Removing keys leaves every other key findable, down to an empty table; a reserve that cannot be
 * met is refused and leaves the table as it was. */
START_TEST(test_slots_remove_all)
{
    enum { N = 200000 };
    tpc_slots_t t = {0};
    slot_item_t *items = calloc(N, sizeof *items);
    ck_assert_ptr_nonnull(items);
    for (uint64_t k = 0; k < N; k++) {
        SLOTS_CHECK(tpc_slots_reserve(&t, 1));
        tpc_slot_t *s = tpc_slots_find(&t, slot_hash(k, false), same_slot_item, &k);
        SLOTS_CHECK(s->item == NULL);
        items[k] = (slot_item_t){k, true};
        tpc_slots_insert(&t, s, slot_hash(k, false), &items[k]);
    }
    ck_assert_uint_ge(t.nslots * 5, (size_t)N * 8);
    for (uint64_t k = 0; k < N; k += 2)
        tpc_slots_remove(&t, tpc_slots_find(&t, slot_hash(k, false), same_slot_item, &k));
    for (uint64_t k = 0; k < N; k++) {
        tpc_slot_t *s = tpc_slots_find(&t, slot_hash(k, false), same_slot_item, &k);
        SLOTS_CHECK(s->item == (k % 2 ? &items[k] : NULL));
    }
    for (uint64_t k = 1; k < N; k += 2)
        tpc_slots_remove(&t, tpc_slots_find(&t, slot_hash(k, false), same_slot_item, &k));
    ck_assert_uint_eq(t.count, 0);
    for (size_t i = 0; i < t.nslots; i++)
        SLOTS_CHECK(t.slots[i].item == NULL);
    size_t nslots = t.nslots;
    ck_assert(!tpc_slots_reserve(&t, SIZE_MAX / 2));
    ck_assert_uint_eq(t.nslots, nslots);
    tpc_slots_free(&t);
    free(items);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kit");
    TCase *tc = tcase_create("kit");
    tcase_add_test(tc, test_backoff_doubles_to_cap_and_stops_at_deadline);
    tcase_add_test(tc, test_cancel_cuts_sleep_short);
    tcase_add_test(tc, test_clocks);
    tcase_add_test(tc, test_byte_order);
    tcase_add_test(tc, test_array_grows_and_keeps_elements);
    tcase_add_test(tc, test_array_refuses_overflow_and_keeps_array);
    tcase_add_test(tc, test_hash_insert_find_replace_remove);
    tcase_add_test(tc, test_hash_many_keys);
    tcase_add_test(tc, test_hash_collisions);
    tcase_add_test(tc, test_hash_walk_order);
    tcase_add_test(tc, test_hash_walk_frees);
    tcase_add_test(tc, test_slots_spread);
    tcase_add_test(tc, test_slots_long_runs);
    tcase_add_test(tc, test_slots_remove_all);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
