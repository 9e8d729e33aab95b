/*
 * One librdkafka producer of the sink: its configuration (the user's kafka.* properties over the
 * sink's defaults), its callbacks, starting it (init_transactions for a transactional one, which
 * also aborts a transaction a crashed run left open on the id), flushing with a check of every
 * delivery report, and stopping it. A transactional producer also publishes statistics, whose
 * "eos" object gives the producer id and epoch the coordinator knows: they are stored with each
 * pre-committed transaction so that a later process can commit it (kafka_recover.c). A fenced
 * producer's error ends the job without restarts (see tpc__kafka_fenced_error()).
 * librdkafka serves the callbacks inside poll and flush, on the subtask's own thread or on the
 * thread that serves its producers while it leaves them alone (kafka_serve.c), under its lock.
 */
#include "kafka_sink_internal.h"
#include "tpc_kit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STATS_INTERVAL "1000"

/* A flush waits on librdkafka in slices this long, between which a canceled subtask is noticed:
 * a cancel (a stop past stop.timeout.ms, an attempt failed elsewhere) must not wait out a broker
 * outage for the minute of a transaction timeout. What it leaves undone the next run finishes: it
 * commits what the checkpoint promised and aborts the rest. Calls that send a request each time
 * (metadata, init, commit and abort of a transaction) are not cut so: a request slower than a
 * slice would never be answered. */
#define CANCEL_SLICE_MS 200

static bool canceled(const tpc_txn_subtask_t *st)
{
    return st && tpc_txn_is_canceled(st);
}

/* The next slice of a wait until @deadline (monotonic ms): at most CANCEL_SLICE_MS, at least 0. */
static int slice_until(int64_t deadline)
{
    int64_t left = deadline - tpc_clock_ms();
    return left <= 0 ? 0 : left < CANCEL_SLICE_MS ? (int)left : CANCEL_SLICE_MS;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    tpc__kafka_producer_t *p = opaque;
    (void)rk;
    if (!msg->err) {
        p->delivered++;
        return;
    }
    if (p->failed++ == 0)
        snprintf(p->first_failure, sizeof p->first_failure, "%s (%s)", rd_kafka_err2str(msg->err),
                 rd_kafka_err2name(msg->err));
}

static int64_t json_int(const char *from, const char *key, int64_t dflt)
{
    const char *at = strstr(from, key);
    return at ? strtoll(at + strlen(key), NULL, 10) : dflt;
}

/* Is the string value of @key, after @from, @want? */
static bool json_str_is(const char *from, const char *key, const char *want)
{
    const char *at = strstr(from, key);
    if (!at)
        return false;
    at += strlen(key);
    at += strspn(at, " \t\n");
    return strncmp(at, want, strlen(want)) == 0;
}

static int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    tpc__kafka_producer_t *p = opaque;
    (void)rk;
    (void)len;
    if (p->stats)
        tpc__kafka_stats_take(p->stats, p->stats_last, json);
    const char *eos = p->id[0] ? strstr(json, "\"eos\":") : NULL;
    if (eos && json_str_is(eos, "\"idemp_state\":", "\"Assigned\"")) {
        p->pid = json_int(eos, "\"producer_id\":", -1);
        p->epoch = (int16_t)json_int(eos, "\"producer_epoch\":", -1);
    }
    return 0; /* librdkafka frees json */
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    tpc__kafka_producer_t *p = opaque;
    (void)rk;
    char said[1024];
    const char *name = rd_kafka_err2name((rd_kafka_resp_err_t)err);
    if (!tpc__kafka_log_quiet(name, reason, p->security_protocol, said, sizeof said))
        tpc_txn_log(p->st, TPC_LOG_WARN, "kafka producer \"%s\": %s: %s", p->id, name, said);
}

/* librdkafka's own log lines ("GETPID ... retrying", broker state, and with the debug property
 * its debug output) go to the job's logger like the sink's, instead of to stderr. Called on
 * librdkafka's threads: the job's logger is thread-safe, and the subtask outlives the producer. */
static void on_log(const rd_kafka_t *rk, int level, const char *facility, const char *line)
{
    const tpc__kafka_producer_t *p = rd_kafka_opaque(rk);
    /* As the source does: librdkafka's errors are mostly brokers it retries by itself. */
    tpc_log_level_t to = level <= 4 ? TPC_LOG_WARN : level <= 6 ? TPC_LOG_INFO : TPC_LOG_DEBUG;
    char said[1024];
    if (level <= 6 && tpc__kafka_log_quiet(facility, line, p->security_protocol, said, sizeof said))
        return; /* debug output is asked for, and kept whole */
    if (level > 6)
        snprintf(said, sizeof said, "%s", line);
    if (p->id[0])
        tpc_txn_log(p->st, to, "kafka producer \"%s\": %s: %s", p->id, facility, said);
    else
        tpc_txn_log(p->st, to, "kafka producer: %s: %s", facility, said);
}

static bool is_fenced(rd_kafka_resp_err_t code)
{
    return code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED;
}

/* A fenced producer can never write again: a newer producer initialised its transactional id.
 * That is another running copy of the job (or a program with the same prefix), or the broker
 * after it aborted a transaction that outlived its timeout. Restarting would fence the newer
 * producer in turn, so the error is one that ends the job without restarts. */
tpc_error_t *tpc__kafka_fenced_error(const char *what, const char *id, const char *reason)
{
    tpc_error_t *err = tpc_error_new(
        TPC_ERR_FENCED, TPC_ERROR_FATAL,
        "%s of transactional id \"%s\" failed: the producer was fenced (%s)", what, id, reason);
    return tpc_error_hint(err, "another program took over the transactional id: give every running "
                               "program its own transactional.id.prefix and stop the other copy "
                               "of this job; if none runs, the broker aborted a transaction that "
                               "outlived kafka.transaction.timeout.ms");
}

tpc_error_t *tpc__kafka_txn_error(rd_kafka_error_t *error, const char *what, const char *id,
                                  bool pre_committed)
{
    if (is_fenced(rd_kafka_error_code(error))) {
        tpc_error_t *err = tpc__kafka_fenced_error(what, id, rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
        return err;
    }
    bool retriable = rd_kafka_error_is_retriable(error);
    bool abortable = rd_kafka_error_txn_requires_abort(error);
    tpc_err_t code = TPC_ERR_EXTERNAL;
    if (abortable && pre_committed)
        code = TPC_ERR_DATA_LOSS;
    else if (rd_kafka_error_code(error) == RD_KAFKA_RESP_ERR__TIMED_OUT)
        code = TPC_ERR_TIMEOUT;
    /* librdkafka's "fatal" is about this producer instance: a new one, after a restart, gets a
     * new producer id and goes on. Only a lost pre-committed transaction (and fencing, above)
     * is beyond any restart. */
    int flags = retriable ? TPC_ERROR_RETRIABLE : code == TPC_ERR_DATA_LOSS ? TPC_ERROR_FATAL : 0;
    tpc_error_t *err = tpc_error_new(code, flags, "%s%s of transactional id \"%s\" failed: %s (%s)",
                                     code == TPC_ERR_DATA_LOSS ? "data loss: " : "", what, id,
                                     rd_kafka_error_string(error), rd_kafka_error_name(error));
    rd_kafka_error_destroy(error);
    return err;
}

static tpc_error_t *set(rd_kafka_conf_t *rc, const char *name, const char *value)
{
    return tpc__kafka_conf_set(rc, name, value,
                               "see librdkafka's CONFIGURATION.md for its properties");
}

static tpc_error_t *make_conf(tpc__kafka_producer_t *p, const tpc__kafka_conf_t *conf,
                              bool idempotent, rd_kafka_conf_t **out)
{
    rd_kafka_conf_t *rc = rd_kafka_conf_new();
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%" PRId64, conf->txn_timeout_ms);
    tpc_error_t *err = set(rc, "partitioner", "murmur2_random");
    if (!err && p->id[0])
        err = set(rc, "transaction.timeout.ms", timeout);
    /* The statistics feed the metrics (and show the producer id, which pre-commit compares with
     * the coordinator's); a handle's producer id and epoch come from the coordinator. */
    if (!err)
        err = set(rc, "statistics.interval.ms", STATS_INTERVAL);
    for (size_t i = 0; !err && i < conf->nprops; i++)
        err = set(rc, conf->props[2 * i], conf->props[2 * i + 1]);
    if (!err && p->id[0])
        err = set(rc, "transactional.id", p->id);
    if (!err && idempotent)
        err = set(rc, "enable.idempotence", "true");
    if (err) {
        rd_kafka_conf_destroy(rc);
        return err;
    }
    rd_kafka_conf_set_opaque(rc, p);
    rd_kafka_conf_set_dr_msg_cb(rc, on_delivery);
    rd_kafka_conf_set_error_cb(rc, on_error);
    rd_kafka_conf_set_log_cb(rc, on_log);
    rd_kafka_conf_set_stats_cb(rc, on_stats);
    p->stats = conf->stats;
    memset(p->stats_last, 0, sizeof p->stats_last);
    *out = rc;
    return NULL;
}

/* Ask the producer for the metadata of the sink's topic now: librdkafka 2.0.2 otherwise waits
 * about a second for it before the first commit. */
static tpc_error_t *fetch_metadata(tpc__kafka_producer_t *p, const tpc__kafka_conf_t *conf)
{
    if (!conf->topic)
        return NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(p->rk, conf->topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e =
        rkt ? rd_kafka_metadata(p->rk, 0, rkt, &md, conf->open_timeout_ms) : rd_kafka_last_error();
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    if (e)
        return tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE,
                             "could not fetch metadata of topic \"%s\": %s", conf->topic,
                             rd_kafka_err2str(e));
    return NULL;
}

tpc_error_t *tpc__kafka_producer_start(tpc__kafka_producer_t *p, const tpc__kafka_conf_t *conf,
                                       const tpc_txn_subtask_t *st, const char *txn_id,
                                       bool idempotent)
{
    memset(p, 0, sizeof *p);
    p->st = st;
    p->pid = -1;
    p->epoch = -1;
    snprintf(p->id, sizeof p->id, "%s", txn_id ? txn_id : "");
    p->security_protocol = tpc__kafka_prop(conf, "security.protocol");
    rd_kafka_conf_t *rc = NULL;
    tpc_error_t *err = make_conf(p, conf, idempotent, &rc);
    if (err)
        return err;
    char errstr[512];
    p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, rc, errstr, sizeof errstr);
    if (!p->rk) {
        rd_kafka_conf_destroy(rc);
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "could not create producer: %s",
                             errstr);
    }
    if (p->stats)
        atomic_fetch_add(&p->stats->producers, 1);
    if (p->id[0]) {
        rd_kafka_error_t *e = rd_kafka_init_transactions(p->rk, conf->open_timeout_ms);
        if (e) {
            err = tpc__kafka_txn_error(e, "init_transactions", p->id, false);
            if (tpc_error_code(err) == TPC_ERR_TIMEOUT)
                err = tpc_error_hint(err, "check kafka.bootstrap.servers and that the brokers "
                                          "run; raise open.timeout.ms for a slow cluster");
        }
        int64_t deadline = tpc_clock_ms() + conf->open_timeout_ms;
        while (!err && p->pid < 0 && tpc_clock_ms() < deadline && !canceled(st))
            rd_kafka_poll(p->rk, 20);
        if (!err && p->pid < 0)
            err = tpc_error_new(TPC_ERR_TIMEOUT, TPC_ERROR_RETRIABLE,
                                "producer \"%s\" reported no producer id within %d ms", p->id,
                                conf->open_timeout_ms);
    }
    if (!err && (p->id[0] || idempotent)) /* not for kafka_open.c's probe */
        err = fetch_metadata(p, conf);
    if (err) {
        tpc__kafka_producer_stop(p, false);
        return err;
    }
    return NULL;
}

void tpc__kafka_producer_stop(tpc__kafka_producer_t *p, bool abort_open)
{
    if (!p->rk)
        return;
    if (abort_open && p->id[0]) {
        rd_kafka_error_t *e = rd_kafka_abort_transaction(p->rk, 5000);
        if (e)
            rd_kafka_error_destroy(e);
    }
    rd_kafka_destroy(p->rk);
    p->rk = NULL;
    if (p->stats) {
        tpc__kafka_stats_drop(p->stats, p->stats_last);
        atomic_fetch_sub(&p->stats->producers, 1);
        p->stats = NULL;
    }
}

tpc_error_t *tpc__kafka_producer_fatal(tpc__kafka_producer_t *p, const char *what)
{
    char fatal[256];
    rd_kafka_resp_err_t fe = rd_kafka_fatal_error(p->rk, fatal, sizeof fatal);
    if (is_fenced(fe))
        return tpc__kafka_fenced_error(what, p->id, fatal);
    if (fe) /* this producer is done; a new one, after a restart, is not */
        return tpc_error_new(TPC_ERR_EXTERNAL, 0, "%s of producer \"%s\" failed: %s", what, p->id,
                             fatal);
    return NULL;
}

tpc_error_t *tpc__kafka_producer_flush(tpc__kafka_producer_t *p, int timeout_ms)
{
    int64_t deadline = tpc_clock_ms() + timeout_ms;
    rd_kafka_resp_err_t e;
    bool cut = false;
    for (;;) {
        int slice = slice_until(deadline);
        e = rd_kafka_flush(p->rk, slice);
        if (e != RD_KAFKA_RESP_ERR__TIMED_OUT || slice < CANCEL_SLICE_MS)
            break;
        if ((cut = canceled(p->st)))
            break;
    }
    tpc_error_t *err = tpc__kafka_producer_fatal(p, "flush");
    if (err)
        return err;
    if (p->failed)
        return tpc_error_new(TPC_ERR_EXTERNAL, 0,
                             "%" PRIu64 " records could not be delivered by producer \"%s\", "
                             "the first: %s",
                             p->failed, p->id, p->first_failure);
    if (e && cut)
        return tpc_error_new(TPC_ERR_TIMEOUT, 0,
                             "producer \"%s\" had %d records not yet delivered when the job was "
                             "canceled",
                             p->id, rd_kafka_outq_len(p->rk));
    if (e)
        return tpc_error_new(TPC_ERR_TIMEOUT, 0,
                             "producer \"%s\" could not deliver %d records within %d ms", p->id,
                             rd_kafka_outq_len(p->rk), timeout_ms);
    return NULL;
}
