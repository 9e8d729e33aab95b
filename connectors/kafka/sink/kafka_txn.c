/*
 * A Kafka transaction of the sink. begin costs nothing; the first record takes a transactional id
 * from the pool (kafka_pool.c) and begins a librdkafka transaction on its producer. pre_commit
 * flushes and waits for every delivery report (one failure fails the checkpoint) and stores, with
 * the handle, what names this one transaction at its coordinator: producer id, epoch and start
 * time; commit on notify uses the live producer and then proves the commit from the coordinator's
 * description (kafka_proof.c), recovery uses EndTxn and the same proof (kafka_recover.c). With the
 * weaker guarantees one plain producer (idempotent for at-least-once) writes everything and
 * pre_commit is its flush. Also the handle's bytes. Every call that uses a producer holds the
 * subtask's lock, which kafka_serve.c's thread takes to poll.
 */
#include "kafka_sink_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HANDLE_VERSION 2

tpc_error_t *tpc__kafka_open(void *arg, const tpc_txn_subtask_t *st, void **out)
{
    const tpc__kafka_conf_t *conf = arg;
    bool transactional = st->guarantee == TPC_TXN_EXACTLY_ONCE;
    if (transactional && !conf->id_prefix)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "exactly-once kafka sink \"%s\" needs a "
                                            "transactional id prefix",
                                            st->sink_name),
                              "set \"transactional.id.prefix\" to a name no other program "
                              "uses, or choose guarantee at-least-once");
    int64_t retention_ms;
    tpc_error_t *err = tpc__kafka_check_cluster(conf, st, transactional, &retention_ms);
    if (err)
        return err;
    tpc__kafka_sub_t *c = calloc(1, sizeof *c);
    if (!c)
        return tpc_error_nomem();
    c->retention_ms = retention_ms;
    c->conf = conf;
    c->st = st;
    c->transactional = transactional;
    c->wire.bootstrap = tpc__kafka_prop(conf, "bootstrap.servers");
    c->wire.security_protocol = tpc__kafka_prop(conf, "security.protocol");
    c->coords = transactional ? tpc__kafka_coords_new() : NULL;
    if (!transactional)
        err = tpc__kafka_producer_start(&c->plain, conf, st, NULL,
                                        st->guarantee == TPC_TXN_AT_LEAST_ONCE);
    if (!err)
        err = tpc__kafka_serve_start(c);
    if (err) {
        tpc__kafka_producer_stop(&c->plain, false);
        tpc__kafka_coords_free(c->coords);
        free(c);
        return err;
    }
    *out = c;
    return NULL;
}

void tpc__kafka_close(void *conn)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_serve_stop(c);
    /* Pending transactions stay open on purpose: a restart commits them. */
    for (int n = 0; n < c->conf->pool_size; n++)
        tpc__kafka_producer_stop(&c->slots[n].prod, false);
    tpc__kafka_producer_stop(&c->plain, false);
    tpc__kafka_coords_free(c->coords);
    free(c->orphans);
    free(c);
}

tpc_error_t *tpc__kafka_begin(void *conn, uint64_t checkpoint_id, void **txn)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_txn_t *t = calloc(1, sizeof *t);
    if (!t)
        return tpc_error_nomem();
    t->slot = -1;
    t->pid = -1;
    t->epoch = -1;
    t->start_ms = -1;
    t->begin_ckpt = checkpoint_id;
    if (checkpoint_id > c->latest_begin)
        c->latest_begin = checkpoint_id;
    *txn = t;
    return NULL;
}

static tpc__kafka_producer_t *producer_of(tpc__kafka_sub_t *c, const tpc__kafka_txn_t *t)
{
    return c->transactional ? &c->slots[t->slot].prod : &c->plain;
}

/* The first record of a transaction: take an id and begin a transaction on its producer. */
static tpc_error_t *start(tpc__kafka_sub_t *c, tpc__kafka_txn_t *t)
{
    int slot = -1;
    tpc_error_t *err = tpc__kafka_pool_acquire(c, &slot);
    if (err)
        return err;
    tpc__kafka_producer_t *p = &c->slots[slot].prod;
    p->delivered = p->failed = 0;
    p->first_failure[0] = '\0';
    rd_kafka_error_t *e = rd_kafka_begin_transaction(p->rk);
    if (e)
        return tpc__kafka_txn_error(e, "begin_transaction", p->id, false);
    c->slots[slot].state = TPC__KAFKA_SLOT_BUSY;
    t->slot = slot;
    snprintf(t->id, sizeof t->id, "%s", p->id);
    return NULL;
}

static tpc_error_t *produce(tpc__kafka_sub_t *c, tpc__kafka_producer_t *p,
                            const tpc_kafka_message_t *m)
{
    const char *topic = m->topic ? m->topic : c->conf->topic;
    if (!topic)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "a record of kafka sink \"%s\" has no topic",
                                            c->st->sink_name),
                              "set \"topic\", or name one in the mapper");
    rd_kafka_headers_t *hdrs = NULL;
    if (m->header_count) {
        hdrs = rd_kafka_headers_new(m->header_count);
        for (size_t i = 0; i < m->header_count; i++)
            rd_kafka_header_add(hdrs, m->headers[i].name, (ssize_t)m->headers[i].name_len,
                                m->headers[i].value,
                                m->headers[i].value ? (ssize_t)m->headers[i].value_len : 0);
    }
    for (;;) {
        rd_kafka_headers_t *copy = hdrs ? rd_kafka_headers_copy(hdrs) : NULL;
        rd_kafka_resp_err_t e = rd_kafka_producev(
            p->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(m->partition),
            RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE((void *)m->value, m->value_len),
            RD_KAFKA_V_TIMESTAMP(m->timestamp), RD_KAFKA_V_HEADERS(copy),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (e && copy)
            rd_kafka_headers_destroy(copy);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL && !tpc_txn_is_canceled(c->st)) {
            rd_kafka_poll(p->rk, 10);
            continue;
        }
        if (hdrs)
            rd_kafka_headers_destroy(hdrs);
        if (!e)
            return NULL;
        tpc_error_t *fatal =
            e == RD_KAFKA_RESP_ERR__FATAL ? tpc__kafka_producer_fatal(p, "produce") : NULL;
        if (fatal)
            return fatal;
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL,
                             "could not produce to topic \"%s\" with producer \"%s\": %s", topic,
                             p->id, rd_kafka_err2str(e));
    }
}

/* A record stamped longer ago than the topic keeps records is committed and then deleted at the
 * broker's next retention check (minutes later): to a reader it looks lost. Said once per subtask,
 * for the sink's own topic (c->retention_ms, read at open). The stamp before which a record is
 * that old, INT64_MIN when there is nothing to say: taken once per write, so that a record costs
 * one comparison. */
static int64_t old_before(const tpc__kafka_sub_t *c)
{
    return c->warned_old || c->retention_ms <= 0 ? INT64_MIN : tpc_wall_ms() - c->retention_ms;
}

static void warn_old(tpc__kafka_sub_t *c, const tpc_kafka_message_t *m)
{
    if (c->warned_old || (m->topic && strcmp(m->topic, c->conf->topic) != 0))
        return;
    int64_t age = tpc_wall_ms() - m->timestamp;
    c->warned_old = true;
    tpc_txn_log(c->st, TPC_LOG_WARN,
                "records are stamped older than topic \"%s\" keeps records (a timestamp %" PRId64
                " ms old, retention.ms %" PRId64 "): the broker deletes them at its next "
                "retention check, soon after they are committed; raise the topic's retention.ms "
                "above the records' age (-1 keeps them), use message.timestamp.type=LogAppendTime, "
                "or give records timestamp 0 to stamp them at write time",
                c->conf->topic, age, c->retention_ms);
}

tpc_error_t *tpc__kafka_write(void *conn, void *txn, const tpc_record_t *records, size_t count)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_txn_t *t = txn;
    tpc_error_t *err = NULL;
    pthread_mutex_lock(&c->lock);
    if (count && c->transactional && t->slot < 0)
        err = start(c, t);
    tpc__kafka_producer_t *p = err ? NULL : producer_of(c, t);
    int64_t old = old_before(c);
    for (size_t i = 0; i < count && !err; i++) {
        tpc_kafka_message_t m = {
            .partition = RD_KAFKA_PARTITION_UA,
            /* Null stays null: a tombstone is not an empty value. */
            .key = records[i].flags & TPC_RECORD_NULL_KEY ? NULL : records[i].key,
            .key_len = records[i].key_len,
            .value = records[i].flags & TPC_RECORD_NULL_VALUE ? NULL : records[i].value,
            .value_len = records[i].value_len,
            .timestamp = records[i].timestamp,
            .headers = records[i].headers,
            .header_count = records[i].header_count,
        };
        if (c->conf->mapper)
            err = c->conf->mapper(c->conf->mapper_opaque, &records[i], &m);
        if (!err && m.timestamp > 0 && m.timestamp < old)
            warn_old(c, &m);
        if (!err)
            err = produce(c, p, &m);
        if (!err)
            t->records++;
    }
    if (p)
        rd_kafka_poll(p->rk, 0); /* serve delivery reports */
    pthread_mutex_unlock(&c->lock);
    return err;
}

/* Under the subtask's lock, as everything below that uses a producer. */
static tpc_error_t *flush(tpc__kafka_sub_t *c, tpc__kafka_txn_t *t)
{
    if (c->transactional && t->slot < 0)
        return NULL;
    return tpc__kafka_producer_flush(producer_of(c, t), (int)c->conf->txn_timeout_ms);
}

tpc_error_t *tpc__kafka_flush(void *conn, void *txn)
{
    tpc__kafka_sub_t *c = conn;
    pthread_mutex_lock(&c->lock);
    tpc_error_t *err = flush(c, txn);
    pthread_mutex_unlock(&c->lock);
    return err;
}

/* How long the abort at close of a canceled subtask may wait for the broker. */
#define CANCELED_ABORT_MS 1000

/* At close. A canceled subtask (a stop past stop.timeout.ms, an attempt failed elsewhere) waits
 * a second at most: the broker may be away, and the next run aborts what is left open
 * (init_transactions of the id). */
static tpc_error_t *abort_txn(tpc__kafka_sub_t *c, tpc__kafka_txn_t *t)
{
    tpc__kafka_producer_t *p = producer_of(c, t);
    int timeout_ms = tpc_txn_is_canceled(c->st) ? CANCELED_ABORT_MS : (int)c->conf->txn_timeout_ms;
    rd_kafka_error_t *e = rd_kafka_abort_transaction(p->rk, timeout_ms);
    if (e)
        return tpc__kafka_txn_error(e, "abort_transaction", p->id, false);
    c->slots[t->slot].state = TPC__KAFKA_SLOT_FREE;
    t->slot = -1;
    return NULL;
}

/* Name the transaction on @p for its handle: the coordinator's producer id, epoch and start
 * time of the open transaction of the id. Asking the coordinator rather than the producer's
 * statistics also shows that the transaction is really open there, with every partition added,
 * before a checkpoint promises it. */
static tpc_error_t *name_txn(tpc__kafka_sub_t *c, tpc__kafka_txn_t *t, tpc__kafka_producer_t *p)
{
    tpc__kafka_wire_conf_t wire = tpc__kafka_sink_wire(c);
    wire.coords = c->coords;
    tpc__kafka_txn_info_t now;
    tpc_error_t *err =
        tpc__kafka_describe_transaction(&wire, t->id, (int)c->conf->open_timeout_ms, &now);
    if (err)
        return tpc_error_prefix(err, "could not describe transaction \"%s\" at pre-commit", t->id);
    int64_t last = c->slots[t->slot].last_start_ms;
    bool ours = !now.error && strcmp(now.state, "Ongoing") == 0 &&
                (p->pid < 0 || now.producer_id == p->pid);
    if (!ours) {
        /* Lost before any checkpoint promised it: the broker aborted it (its timeout), or
         * another instance of the job initialised the id. Abort it here and let the producer
         * tell which: fenced ends the job (a restart would fence the other instance in turn);
         * anything else is a retriable failure that replays the records. */
        tpc_error_t *aborted = abort_txn(c, t);
        if (aborted && tpc_error_code(aborted) == TPC_ERR_FENCED)
            return tpc_error_prefix(aborted,
                                    "transaction \"%s\" is not open at its coordinator "
                                    "at pre-commit",
                                    t->id);
        tpc_error_destroy(aborted);
        char name[300];
        tpc__kafka_txn_name(name, sizeof name, t->id, now.producer_id, now.producer_epoch,
                            now.start_ms);
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_RETRIABLE,
                             "transaction \"%s\" with %" PRIu64 " records is not open at its "
                             "coordinator at pre-commit: it holds %s in state %s%s%s",
                             t->id, t->records, name, now.error ? "?" : now.state,
                             now.error ? ", error " : "",
                             now.error ? tpc__kafka_code_name(now.error) : "");
    }
    /* Start times are milliseconds: two transactions of one id begun in the same one could not
     * be told apart, so such a transaction is not promised (the checkpoint fails and is taken
     * again; it takes longer than a millisecond to end a transaction and begin the next). */
    if (now.start_ms <= last)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_RETRIABLE,
                             "transaction \"%s\" began at %" PRId64 " ms, not after the previous "
                             "one of its id (%" PRId64 " ms): it could not be told apart from it",
                             t->id, now.start_ms, last);
    t->pid = now.producer_id;
    t->epoch = (int16_t)now.producer_epoch;
    t->start_ms = now.start_ms;
    c->slots[t->slot].last_start_ms = now.start_ms;
    return NULL;
}

tpc_error_t *tpc__kafka_pre_commit(void *conn, void *txn, uint64_t checkpoint_id)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_txn_t *t = txn;
    pthread_mutex_lock(&c->lock);
    tpc_error_t *err = flush(c, t);
    if (!err && c->transactional && t->slot >= 0)
        err = name_txn(c, t, producer_of(c, t));
    if (!err)
        t->ckpt = checkpoint_id;
    pthread_mutex_unlock(&c->lock);
    return err;
}

/* This producer's transaction could not be shown committed, and the coordinator now holds a
 * later transaction or epoch of the same producer id: since this producer began nothing after it,
 * another producer initialised the id in between, which is another running copy of the job that
 * restored the checkpoint holding this transaction (and proves its commit itself), or a program
 * with the same prefix. This copy was fenced, and that is what it reports (ending the job without
 * a restart, which would fence the other copy in turn); its own evidence is gone with the
 * coordinator's state, so it can say nothing of the commit, and says so. Any other answer keeps
 * @lost, the data loss. */
static tpc_error_t *taken_over(tpc__kafka_sub_t *c, const tpc__kafka_txn_t *t,
                               const tpc__kafka_wire_conf_t *wire, tpc_error_t *lost)
{
    tpc__kafka_txn_info_t now;
    tpc_error_t *err =
        tpc__kafka_describe_transaction(wire, t->id, c->conf->recovery_timeout_ms, &now);
    if (err) {
        tpc_error_destroy(err);
        return lost;
    }
    if (now.error || now.producer_id != t->pid || now.producer_epoch <= t->epoch ||
        now.start_ms == t->start_ms)
        return lost;
    char name[300], reason[600];
    tpc__kafka_txn_name(name, sizeof name, t->id, t->pid, t->epoch, t->start_ms);
    snprintf(reason, sizeof reason,
             "transaction %s of checkpoint %" PRIu64 " cannot be shown committed here: the "
             "coordinator holds epoch %d of its producer id since, which another producer "
             "initialised; the copy of the job that took the id over restored the checkpoint "
             "and proves that commit",
             name, t->ckpt, now.producer_epoch);
    tpc_error_destroy(lost);
    return tpc__kafka_fenced_error("commit_transaction", t->id, reason);
}

/* librdkafka's success is not the evidence: it also reports one when it sent no EndTxn (no
 * partitions registered, or a resume after COMMIT_NOT_ACKED). The coordinator's description of
 * this very transaction is (kafka_proof.c), before the id is held and later reused. */
static tpc_error_t *prove(tpc__kafka_sub_t *c, tpc__kafka_txn_t *t)
{
    char what[48];
    snprintf(what, sizeof what, "checkpoint %" PRIu64, t->ckpt);
    tpc__kafka_wire_conf_t wire = tpc__kafka_sink_wire(c);
    wire.coords = c->coords;
    bool ended_here = false;
    tpc_error_t *err = tpc__kafka_prove_commit(&wire, t->id, t->pid, t->epoch, &t->start_ms,
                                               c->conf->recovery_timeout_ms, what, &ended_here);
    if (err && tpc_error_code(err) == TPC_ERR_DATA_LOSS)
        err = taken_over(c, t, &wire, err);
    if (!err && ended_here)
        tpc_txn_log(c->st, TPC_LOG_WARN,
                    "librdkafka reported the commit of transaction \"%s\" of checkpoint %" PRIu64
                    ", but it was still open at its coordinator: committed it with EndTxn",
                    t->id, t->ckpt);
    return err;
}

static tpc_error_t *commit(tpc__kafka_sub_t *c, tpc__kafka_txn_t *t)
{
    tpc__kafka_producer_t *p = producer_of(c, t);
    rd_kafka_error_t *e = rd_kafka_commit_transaction(p->rk, (int)c->conf->txn_timeout_ms);
    if (e)
        return tpc__kafka_txn_error(e, "commit_transaction", p->id, true);
    tpc_error_t *err = prove(c, t);
    if (err)
        return err;
    tpc__kafka_pool_complete(c, t->ckpt);
    tpc__kafka_pool_hold(c, t->slot, c->latest_begin);
    t->slot = -1;
    return NULL;
}

tpc_error_t *tpc__kafka_commit(void *conn, void *txn)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_txn_t *t = txn;
    if (!c->transactional || t->slot < 0)
        return NULL; /* nothing to commit, or committed by an earlier call */
    pthread_mutex_lock(&c->lock);
    tpc_error_t *err = commit(c, t);
    pthread_mutex_unlock(&c->lock);
    return err;
}

tpc_error_t *tpc__kafka_abort(void *conn, void *txn)
{
    tpc__kafka_sub_t *c = conn;
    tpc__kafka_txn_t *t = txn;
    if (!c->transactional || t->slot < 0)
        return NULL;
    pthread_mutex_lock(&c->lock);
    tpc_error_t *err = abort_txn(c, t);
    pthread_mutex_unlock(&c->lock);
    return err;
}

bool tpc__kafka_is_empty(void *conn, const void *txn)
{
    (void)conn;
    return ((const tpc__kafka_txn_t *)txn)->records == 0;
}

void tpc__kafka_free_txn(void *conn, void *txn)
{
    (void)conn;
    free(txn);
}

void tpc__kafka_describe(void *conn, const void *txn, char *buf, size_t cap)
{
    const tpc__kafka_txn_t *t = txn;
    (void)conn;
    if (t->id[0])
        tpc__kafka_txn_name(buf, cap, t->id, t->pid, t->epoch, t->start_ms);
    else
        snprintf(buf, cap, "(no transactional id yet, begun for checkpoint %" PRIu64 ")",
                 t->begin_ckpt);
}

/* Handle bytes, version 2: version(1) pid(8) epoch(2) ckpt(8) begin_ckpt(8) id_len(2) id
 * start_ms(8). Version 1 ended with the id: its transactions are unnamed (start_ms -1). */
#define HANDLE_FIXED 29
#define HANDLE_START 8

tpc_error_t *tpc__kafka_serialize(void *conn, const void *txn, tpc_txn_buf_t *out)
{
    const tpc__kafka_txn_t *t = txn;
    (void)conn;
    unsigned char b[HANDLE_FIXED + TPC__KAFKA_ID_MAX + HANDLE_START];
    size_t idlen = strlen(t->id);
    b[0] = HANDLE_VERSION;
    tpc_store_be(b + 1, (uint64_t)t->pid, 8);
    tpc_store_be(b + 9, (uint16_t)t->epoch, 2);
    tpc_store_be(b + 11, t->ckpt, 8);
    tpc_store_be(b + 19, t->begin_ckpt, 8);
    tpc_store_be(b + 27, idlen, 2);
    memcpy(b + HANDLE_FIXED, t->id, idlen);
    tpc_store_be(b + HANDLE_FIXED + idlen, (uint64_t)t->start_ms, 8);
    return tpc_txn_buf_append(out, b, HANDLE_FIXED + idlen + HANDLE_START);
}

tpc_error_t *tpc__kafka_deserialize(void *conn, const void *bytes, size_t len, void **txn)
{
    const unsigned char *b = bytes;
    (void)conn;
    size_t idlen = len >= HANDLE_FIXED ? (size_t)tpc_load_be(b + 27, 2) : 0;
    int version = len ? b[0] : 0;
    size_t want = HANDLE_FIXED + idlen + (version >= 2 ? HANDLE_START : 0);
    /* An id with a NUL in it would be cut short: a recovery would end the transaction of another
     * id, or none (an id that starts with NUL reads as an empty transaction). */
    if (len < HANDLE_FIXED || version < 1 || version > HANDLE_VERSION ||
        idlen >= TPC__KAFKA_ID_MAX || len != want || memchr(b + HANDLE_FIXED, '\0', idlen))
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "kafka transaction handle of %zu bytes is not one this version "
                             "reads",
                             len);
    int64_t start_ms = version >= 2 ? (int64_t)tpc_load_be(b + HANDLE_FIXED + idlen, 8) : -1;
    if (start_ms < -1)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                             "kafka transaction handle names a start time of %" PRId64 " ms",
                             start_ms);
    tpc__kafka_txn_t *t = calloc(1, sizeof *t);
    if (!t)
        return tpc_error_nomem();
    t->slot = -1;
    t->pid = (int64_t)tpc_load_be(b + 1, 8);
    t->epoch = (int16_t)tpc_load_be(b + 9, 2);
    t->ckpt = tpc_load_be(b + 11, 8);
    t->begin_ckpt = tpc_load_be(b + 19, 8);
    memcpy(t->id, b + HANDLE_FIXED, idlen);
    t->start_ms = start_ms;
    t->records = t->id[0] ? 1 : 0;
    *txn = t;
    return NULL;
}

tpc_error_t *tpc__kafka_describe_handle(const void *bytes, size_t len, tpc_txn_handle_view_t *out)
{
    void *txn = NULL;
    tpc_error_t *err = tpc__kafka_deserialize(NULL, bytes, len, &txn);
    if (err)
        return err;
    const tpc__kafka_txn_t *t = txn;
    tpc__kafka_describe(NULL, t, out->line, sizeof out->line);
    tpc_txn_handle_text(out, "transactional_id", t->id);
    tpc_txn_handle_number(out, "producer_id", t->pid);
    tpc_txn_handle_number(out, "producer_epoch", t->epoch);
    tpc_txn_handle_number(out, "transaction_start_ms", t->start_ms);
    tpc__kafka_free_txn(NULL, txn);
    return NULL;
}
