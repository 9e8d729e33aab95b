/*
 * What the transaction coordinators know about transactional ids, for the `twopc` command:
 * Metadata (which brokers there are), ListTransactions at each broker (each coordinates the ids
 * whose partition of __transaction_state it leads) and DescribeTransactions at the same broker
 * (state, producer id and epoch, start time, partitions). Over the recovery client's own
 * connection (kafka_wire.c), so TLS and SASL work as for recovery commits.
 */
#include "kafka_wire.h"
#include "tpc_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef tpc__kafka_node_t broker_t;

static tpc_error_t *malformed(const tpc__kafka_conn_t *c, const char *what)
{
    return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_RETRIABLE,
                         "broker \"%s\" sent a malformed %s response", tpc__kafka_conn_name(c),
                         what);
}

static tpc_error_t *unsupported(const tpc__kafka_conn_t *c, const char *what)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                                        "broker \"%s\" does not support %s",
                                        tpc__kafka_conn_name(c), what),
                          "listing transactions needs Apache Kafka 3.0 or later");
}

/* Ids kept in all, over every broker: about 0.9 KB each. */
#define IDS_MAX 1000000

/* Decoding checks the clock every this many entries: a long answer ends at the deadline too. */
#define CLOCK_EVERY 4096

static tpc_error_t *too_late(const char *what)
{
    return tpc_error_hint(tpc_error_new(TPC_ERR_TIMEOUT, TPC_ERROR_RETRIABLE,
                                        "listing transactions took longer than its time limit, "
                                        "while %s",
                                        what),
                          "give more time (--timeout-ms), or fewer ids (--prefix)");
}

static int by_address(const void *a, const void *b)
{
    const broker_t *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x->port > y->port) - (x->port < y->port);
}

tpc_error_t *tpc__kafka_metadata(tpc__kafka_conn_t *c, int v, const char *topic, int64_t deadline,
                                 tpc__kafka_rbuf_t *r, tpc__kafka_node_t **nodes, int32_t *count)
{
    *nodes = NULL;
    *count = 0;
    tpc__kafka_wbuf_t w = {0};
    tpc__kafka_w_i32(&w, topic ? 1 : 0);
    if (topic)
        tpc__kafka_w_str(&w, topic, false);
    tpc__kafka_w_i8(&w, 0); /* allow auto topic creation: no */
    if (v >= 8) {
        tpc__kafka_w_i8(&w, 0);
        tpc__kafka_w_i8(&w, 0);
    }
    tpc_error_t *err = tpc__kafka_conn_call(c, TPC__KAFKA_API_METADATA, v, false, &w, deadline, r);
    tpc__kafka_wbuf_free(&w);
    if (err)
        return err;
    tpc__kafka_r_i32(r); /* throttle */
    int32_t n = tpc__kafka_r_i32(r);
    if (r->bad || n < 0 || n > 10000)
        return malformed(c, "Metadata");
    tpc__kafka_node_t *all = calloc((size_t)n + 1, sizeof *all);
    if (!all)
        return tpc_error_nomem();
    for (int32_t i = 0; i < n; i++) {
        char rack[256];
        all[i].id = tpc__kafka_r_i32(r);
        tpc__kafka_r_str(r, false, all[i].host, sizeof all[i].host);
        all[i].port = tpc__kafka_r_i32(r);
        tpc__kafka_r_str(r, false, rack, sizeof rack);
    }
    if (r->bad) {
        free(all);
        return malformed(c, "Metadata");
    }
    *nodes = all;
    *count = n;
    return NULL;
}

static tpc_error_t *brokers_of(tpc__kafka_conn_t *c, int64_t deadline, broker_t **out, size_t *n)
{
    int v = tpc__kafka_conn_version(c, TPC__KAFKA_API_METADATA, 4, 8);
    if (v < 0)
        return unsupported(c, "Metadata versions 4 to 8");
    tpc__kafka_rbuf_t r;
    int32_t count;
    tpc_error_t *err = tpc__kafka_metadata(c, v, NULL, deadline, &r, out, &count);
    if (err)
        return err;
    /* Each broker once, however often an answer lists it. */
    qsort(*out, (size_t)count, sizeof **out, by_address);
    size_t k = 0;
    for (size_t i = 0; i < (size_t)count; i++)
        if (!k || by_address(&(*out)[k - 1], &(*out)[i]) != 0)
            (*out)[k++] = (*out)[i];
    *n = k;
    return NULL;
}

static bool open_state(const char *s)
{
    return strcmp(s, "Empty") != 0 && strcmp(s, "CompleteCommit") != 0 &&
           strcmp(s, "CompleteAbort") != 0 && strcmp(s, "Dead") != 0;
}

static tpc_error_t *list_at(tpc__kafka_conn_t *c, const char *prefix, int64_t deadline,
                            tpc__kafka_txn_info_t **out, size_t *n, size_t *cap)
{
    if (tpc__kafka_conn_version(c, TPC__KAFKA_API_LIST_TRANSACTIONS, 0, 0) < 0)
        return unsupported(c, "ListTransactions");
    tpc__kafka_wbuf_t w = {0};
    tpc__kafka_w_uvarint(&w, 1); /* no state filters */
    tpc__kafka_w_uvarint(&w, 1); /* no producer id filters */
    tpc__kafka_w_no_tags(&w);
    tpc__kafka_rbuf_t r;
    tpc_error_t *err =
        tpc__kafka_conn_call(c, TPC__KAFKA_API_LIST_TRANSACTIONS, 0, true, &w, deadline, &r);
    tpc__kafka_wbuf_free(&w);
    if (err)
        return err;
    tpc__kafka_r_i32(&r); /* throttle */
    int code = tpc__kafka_r_i16(&r);
    uint64_t nfilters = tpc__kafka_r_uvarint(&r);
    for (uint64_t i = 1; i < nfilters && !r.bad; i++) {
        char s[64];
        tpc__kafka_r_str(&r, true, s, sizeof s);
    }
    uint64_t count = tpc__kafka_r_uvarint(&r);
    if (r.bad || count > 1000000)
        return malformed(c, "ListTransactions");
    size_t plen = prefix ? strlen(prefix) : 0;
    if (code == TPC__KAFKA_E_COORDINATOR_LOADING || code == TPC__KAFKA_E_COORDINATOR_NOT_AVAILABLE)
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                             "broker \"%s\" is still loading its transactions: %s",
                             tpc__kafka_conn_name(c), tpc__kafka_code_name(code));
    if (code)
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL,
                             "ListTransactions at broker \"%s\" failed: %s",
                             tpc__kafka_conn_name(c), tpc__kafka_code_name(code));
    for (uint64_t i = 1; i < count; i++) {
        if (i % CLOCK_EVERY == 0 && tpc_clock_ms() >= deadline)
            return too_late("reading ListTransactions");
        tpc__kafka_txn_info_t t = {.producer_epoch = -1, .start_ms = -1};
        t.id_cut = tpc__kafka_r_str(&r, true, t.id, sizeof t.id) >= (int64_t)sizeof t.id;
        t.producer_id = tpc__kafka_r_i64(&r);
        tpc__kafka_r_str(&r, true, t.state, sizeof t.state);
        tpc__kafka_r_skip_tags(&r);
        if (r.bad)
            return malformed(c, "ListTransactions");
        if (prefix && strncmp(t.id, prefix, plen) != 0)
            continue;
        if (*n >= IDS_MAX)
            return tpc_error_hint(tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                                                "the cluster lists more than %d transactional "
                                                "ids%s",
                                                IDS_MAX, prefix ? " of that prefix" : ""),
                                  "narrow the listing with --prefix");
        if (!tpc_array_grow(out, cap, *n + 1, sizeof **out))
            return tpc_error_nomem();
        (*out)[(*n)++] = t;
    }
    return NULL;
}

/* By id; ids cut at 255 bytes after all others. */
static int by_id(const void *a, const void *b)
{
    const tpc__kafka_txn_info_t *x = a, *y = b;
    if (x->id_cut != y->id_cut)
        return x->id_cut ? 1 : -1;
    return strcmp(x->id, y->id);
}

/* DescribeTransactions for @count infos (ids filled in) at @c, which coordinates them. */
static tpc_error_t *describe_at(tpc__kafka_conn_t *c, tpc__kafka_txn_info_t *infos, size_t count,
                                int64_t deadline)
{
    /* Sorted by id, cut ones last (they cannot be asked for): each answer found by bisection. */
    qsort(infos, count, sizeof *infos, by_id);
    while (count && infos[count - 1].id_cut)
        count--;
    if (!count)
        return NULL;
    if (tpc__kafka_conn_version(c, TPC__KAFKA_API_DESCRIBE_TRANSACTIONS, 0, 0) < 0)
        return unsupported(c, "DescribeTransactions");
    tpc__kafka_wbuf_t w = {0};
    tpc__kafka_w_uvarint(&w, count + 1);
    for (size_t i = 0; i < count; i++)
        tpc__kafka_w_str(&w, infos[i].id, true);
    tpc__kafka_w_no_tags(&w);
    tpc__kafka_rbuf_t r;
    tpc_error_t *err =
        tpc__kafka_conn_call(c, TPC__KAFKA_API_DESCRIBE_TRANSACTIONS, 0, true, &w, deadline, &r);
    tpc__kafka_wbuf_free(&w);
    if (err)
        return err;
    tpc__kafka_r_i32(&r); /* throttle */
    uint64_t n = tpc__kafka_r_uvarint(&r);
    if (r.bad || n > count + 1)
        return malformed(c, "DescribeTransactions");
    for (uint64_t i = 1; i < n; i++) {
        if (i % CLOCK_EVERY == 0 && tpc_clock_ms() >= deadline)
            return too_late("reading DescribeTransactions");
        tpc__kafka_txn_info_t t = {0};
        t.error = tpc__kafka_r_i16(&r);
        tpc__kafka_r_str(&r, true, t.id, sizeof t.id);
        tpc__kafka_r_str(&r, true, t.state, sizeof t.state);
        t.timeout_ms = tpc__kafka_r_i32(&r);
        t.start_ms = tpc__kafka_r_i64(&r);
        t.producer_id = tpc__kafka_r_i64(&r);
        t.producer_epoch = tpc__kafka_r_i16(&r); /* int16 on the wire, whatever the schema says */
        uint64_t ntopics = tpc__kafka_r_uvarint(&r);
        size_t used = 0;
        for (uint64_t k = 1; k < ntopics && !r.bad; k++) {
            char topic[256];
            tpc__kafka_r_str(&r, true, topic, sizeof topic);
            uint64_t nparts = tpc__kafka_r_uvarint(&r);
            if (used < sizeof t.topics)
                used += (size_t)snprintf(t.topics + used, sizeof t.topics - used, "%s%s[",
                                         used ? "," : "", topic);
            for (uint64_t p = 1; p < nparts && !r.bad; p++) {
                int32_t part = tpc__kafka_r_i32(&r);
                if (used < sizeof t.topics)
                    used += (size_t)snprintf(t.topics + used, sizeof t.topics - used, "%s%d",
                                             p > 1 ? "," : "", (int)part);
            }
            if (used < sizeof t.topics)
                used += (size_t)snprintf(t.topics + used, sizeof t.topics - used, "]");
            tpc__kafka_r_skip_tags(&r);
        }
        tpc__kafka_r_skip_tags(&r);
        if (r.bad)
            return malformed(c, "DescribeTransactions");
        tpc__kafka_txn_info_t *known = bsearch(&t, infos, count, sizeof *infos, by_id);
        if (known)
            *known = t;
    }
    return NULL;
}

tpc_error_t *tpc__kafka_list_transactions(const tpc__kafka_wire_conf_t *conf, const char *prefix,
                                          bool open_only, int timeout_ms,
                                          tpc__kafka_txn_info_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int64_t deadline = tpc_clock_ms() + timeout_ms;
    tpc__kafka_conn_t *boot = NULL;
    broker_t *brokers = NULL;
    size_t nbrokers = 0, cap = 0;
    tpc_error_t *err = tpc__kafka_conn_open_bootstrap(conf, deadline, &boot);
    if (!err)
        err = brokers_of(boot, deadline, &brokers, &nbrokers);
    for (size_t b = 0; !err && b < nbrokers; b++) {
        char name[300];
        snprintf(name, sizeof name, "%s:%d", brokers[b].host, brokers[b].port);
        tpc__kafka_conn_t *c = NULL;
        bool own = strcmp(name, tpc__kafka_conn_name(boot)) != 0;
        if (own)
            err = tpc__kafka_conn_open(conf, brokers[b].host, brokers[b].port, deadline, &c);
        else
            c = boot;
        size_t first = *n;
        /* A broker that just started loads __transaction_state first: ask again until then. */
        tpc_backoff_t backoff;
        tpc_backoff_init(&backoff, deadline, 100, 100);
        while (!err) {
            err = list_at(c, prefix, deadline, out, n, &cap);
            if (!err || !tpc_error_is_retriable(err) || !tpc_backoff_wait(&backoff, NULL, NULL))
                break;
            tpc_error_destroy(err);
            err = NULL;
        }
        if (!err && *n > first) /* *out is still NULL when no broker listed any */
            err = describe_at(c, *out + first, *n - first, deadline);
        if (own)
            tpc__kafka_conn_close(c);
    }
    tpc__kafka_conn_close(boot);
    free(brokers);
    if (!err && open_only) {
        size_t k = 0;
        for (size_t i = 0; i < *n; i++)
            if (open_state((*out)[i].state))
                (*out)[k++] = (*out)[i];
        *n = k;
    }
    if (err) {
        free(*out);
        *out = NULL;
        *n = 0;
        return err;
    }
    if (*n)
        qsort(*out, *n, sizeof **out, by_id);
    return NULL;
}

/* The answer of a coordinator that is not (or not yet) the one of the id. */
static bool not_coordinator(int code)
{
    return code == TPC__KAFKA_E_COORDINATOR_LOADING || code == TPC__KAFKA_E_NOT_COORDINATOR ||
           code == TPC__KAFKA_E_COORDINATOR_NOT_AVAILABLE;
}

static void info_init(tpc__kafka_txn_info_t *out, const char *id)
{
    *out = (tpc__kafka_txn_info_t){.producer_epoch = -1, .start_ms = -1};
    snprintf(out->id, sizeof out->id, "%s", id);
}

/* The most of a call's time that its kept connection may take: a quarter, at most this. A kept
 * connection whose peer went silent (a host gone without a reset, a dropped route) answers nothing
 * until the deadline; the rest of the time is left to the call made afresh, which finds the
 * coordinator as it is now. */
#define KEPT_SHARE_MAX_MS 5000

/* DescribeTransactions for @id on the connection @conf->coords keeps to its coordinator, within
 * @timeout_ms's share above: true when it answered as the coordinator of the id; false when none
 * is kept, or it failed in any way (then it is forgotten, and the caller asks afresh). */
static bool describe_kept(const tpc__kafka_wire_conf_t *conf, const char *id, int timeout_ms,
                          tpc__kafka_txn_info_t *out)
{
    tpc__kafka_conn_t *kept = tpc__kafka_coords_get(conf->coords, id);
    if (!kept)
        return false;
    int share = timeout_ms / 4 < KEPT_SHARE_MAX_MS ? timeout_ms / 4 : KEPT_SHARE_MAX_MS;
    tpc_error_t *err = describe_at(kept, out, 1, tpc_clock_ms() + share);
    if (!err && !not_coordinator(out->error))
        return true;
    tpc_error_destroy(err);
    tpc__kafka_coords_drop(conf->coords, id);
    info_init(out, id);
    return false;
}

tpc_error_t *tpc__kafka_describe_transaction(const tpc__kafka_wire_conf_t *conf, const char *id,
                                             int timeout_ms, tpc__kafka_txn_info_t *out)
{
    info_init(out, id);
    int64_t deadline = tpc_clock_ms() + timeout_ms;
    if (describe_kept(conf, id, timeout_ms, out))
        return NULL;
    tpc_backoff_t backoff;
    tpc_backoff_init(&backoff, deadline, 100, 900);
    for (;;) {
        tpc__kafka_conn_t *boot = NULL, *coord = NULL;
        char host[256];
        int port = 0, code = 0;
        tpc_error_t *err = tpc__kafka_conn_open_bootstrap(conf, deadline, &boot);
        if (!err)
            err = tpc__kafka_find_coordinator(boot, id, deadline, host, sizeof host, &port, &code);
        if (!err && code)
            err = tpc_error_new(TPC_ERR_EXTERNAL,
                                code == TPC__KAFKA_E_COORDINATOR_LOADING ||
                                        code == TPC__KAFKA_E_COORDINATOR_NOT_AVAILABLE
                                    ? TPC_ERROR_RETRIABLE
                                    : TPC_ERROR_FATAL,
                                "FindCoordinator for transactional id \"%s\" failed: %s", id,
                                tpc__kafka_code_name(code));
        if (!err)
            err = tpc__kafka_conn_open(conf, host, port, deadline, &coord);
        if (!err)
            err = describe_at(coord, out, 1, deadline);
        if (!err && not_coordinator(out->error))
            err = tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                                "DescribeTransactions for \"%s\" failed: %s", id,
                                tpc__kafka_code_name(out->error));
        if (!err && tpc__kafka_coords_keep(conf->coords, id, host, port, coord))
            coord = NULL; /* kept for the next call */
        tpc__kafka_conn_close(boot);
        tpc__kafka_conn_close(coord);
        if (!err || !tpc_error_is_retriable(err) || !tpc_backoff_wait(&backoff, NULL, NULL))
            return err;
        tpc_error_destroy(err);
    }
}
