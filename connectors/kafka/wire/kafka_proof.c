/*
 * Proving that one Kafka transaction committed. The coordinator's answers to EndTxn speak of a
 * transactional id's state, not of one transaction: under transaction protocol v1 EndTxn(commit)
 * is answered NONE for any transaction of that producer id and epoch that is complete-committed,
 * and the epoch stays the same across the transactions of one producer session; under v2 every
 * end bumps the epoch and an EndTxn with the epoch before the bump is answered as a successful
 * retry. Neither answer says whether *this* transaction committed. What only this transaction has
 * is the coordinator's start time (transactionStartTimeMs of DescribeTransactions: set when it
 * became Ongoing, kept through PrepareCommit/CompleteCommit and PrepareAbort/CompleteAbort, and
 * replaced when the next transaction of the id begins). So a transaction is named by
 * (id, producer id, epoch, start time), and "committed" is decided by DescribeTransactions alone:
 * EndTxn is only the means to move an Ongoing transaction on, never the evidence.
 */
#include "kafka_wire.h"
#include "tpc_kit.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static bool is(const char *state, const char *name)
{
    return strcmp(state, name) == 0;
}

tpc__kafka_fate_t tpc__kafka_txn_fate(const tpc__kafka_txn_info_t *now, int64_t pid, int16_t epoch,
                                      int64_t start_ms)
{
    if (now->error || now->producer_id != pid)
        return TPC__KAFKA_FATE_GONE;
    if (start_ms < 0) {
        /* Unnamed (a handle of an older version, or an operator who gave no start time): only
         * the open transaction of that producer id and epoch can be told apart. */
        if (is(now->state, "Ongoing") && now->producer_epoch == epoch)
            return TPC__KAFKA_FATE_OPEN;
        return TPC__KAFKA_FATE_GONE;
    }
    if (now->start_ms != start_ms)
        return TPC__KAFKA_FATE_GONE;
    /* Under v2 an end gives the producer the next epoch; a timeout or a fence bumps it too. */
    bool same_epoch = now->producer_epoch == epoch;
    bool next_epoch = now->producer_epoch == epoch + 1;
    if (is(now->state, "Ongoing"))
        return same_epoch ? TPC__KAFKA_FATE_OPEN : TPC__KAFKA_FATE_GONE;
    if (!same_epoch && !next_epoch)
        return TPC__KAFKA_FATE_GONE;
    if (is(now->state, "PrepareCommit") || is(now->state, "CompleteCommit"))
        return TPC__KAFKA_FATE_COMMITTED;
    if (is(now->state, "PrepareAbort") || is(now->state, "CompleteAbort") ||
        is(now->state, "PrepareEpochFence"))
        return TPC__KAFKA_FATE_ABORTED;
    return TPC__KAFKA_FATE_GONE; /* Empty after a re-initialisation, Dead: the outcome is gone */
}

void tpc__kafka_txn_name(char *buf, size_t cap, const char *id, int64_t pid, int epoch,
                         int64_t start_ms)
{
    if (start_ms < 0) {
        snprintf(buf, cap, "%s (producer id %" PRId64 ", epoch %d)", id, pid, epoch);
        return;
    }
    time_t s = (time_t)(start_ms / 1000);
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r(&s, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s (producer id %" PRId64 ", epoch %d, begun %s.%03dZ)", id, pid, epoch,
             when, (int)(start_ms % 1000));
}

static void found_text(char *buf, size_t cap, const tpc__kafka_txn_info_t *now)
{
    if (now->error == TPC__KAFKA_E_TRANSACTIONAL_ID_NOT_FOUND) {
        snprintf(buf, cap,
                 "the coordinator no longer knows the id (it expires "
                 "transactional.id.expiration.ms after its last transaction)");
        return;
    }
    if (now->error) {
        snprintf(buf, cap, "the coordinator answered %s", tpc__kafka_code_name(now->error));
        return;
    }
    char name[300];
    tpc__kafka_txn_name(name, sizeof name, now->id, now->producer_id, now->producer_epoch,
                        now->start_ms);
    snprintf(buf, cap, "the coordinator holds %s in state %s", name, now->state);
}

tpc_error_t *tpc__kafka_txn_lost(const tpc__kafka_txn_info_t *now, int64_t pid, int16_t epoch,
                                 int64_t start_ms, const char *what)
{
    char name[300], found[400];
    tpc__kafka_txn_name(name, sizeof name, now->id, pid, epoch, start_ms);
    found_text(found, sizeof found, now);
    tpc__kafka_fate_t fate = tpc__kafka_txn_fate(now, pid, epoch, start_ms);
    tpc_error_t *err = tpc_error_new(
        TPC_ERR_DATA_LOSS, TPC_ERROR_FATAL, "data loss: transaction %s%s%s %s: %s", name,
        what ? " of " : "", what ? what : "",
        fate == TPC__KAFKA_FATE_ABORTED
            ? "was aborted by the coordinator (its timeout, or another producer took over the id)"
            : "cannot be shown to be committed",
        found);
    return tpc_error_hint(err, "keep kafka.transaction.timeout.ms well above the checkpoint "
                               "interval plus the restart time, give every program its own "
                               "transactional.id.prefix, and never end a job's transactions by "
                               "hand while a checkpoint promises them");
}

/* DescribeTransactions until @deadline_ms, including an id the coordinator does not know. */
static tpc_error_t *describe(const tpc__kafka_wire_conf_t *conf, const char *id,
                             int64_t deadline_ms, tpc__kafka_txn_info_t *now)
{
    int64_t left = deadline_ms - tpc_clock_ms();
    return tpc__kafka_describe_transaction(conf, id, left > 0 ? (int)left : 0, now);
}

tpc_error_t *tpc__kafka_prove_commit(const tpc__kafka_wire_conf_t *conf, const char *id,
                                     int64_t pid, int16_t epoch, int64_t *start_ms, int timeout_ms,
                                     const char *what, bool *ended_here)
{
    int64_t deadline = tpc_clock_ms() + timeout_ms;
    tpc_backoff_t backoff;
    tpc_backoff_init(&backoff, deadline, 50, 500);
    *ended_here = false;
    for (int sent = 0;;) {
        tpc__kafka_txn_info_t now;
        tpc_error_t *err = describe(conf, id, deadline, &now);
        if (err)
            return tpc_error_prefix(err, "could not learn whether transaction \"%s\" committed",
                                    id);
        switch (tpc__kafka_txn_fate(&now, pid, epoch, *start_ms)) {
        case TPC__KAFKA_FATE_COMMITTED:
            return NULL;
        case TPC__KAFKA_FATE_ABORTED:
        case TPC__KAFKA_FATE_GONE:
            return tpc__kafka_txn_lost(&now, pid, epoch, *start_ms, what);
        case TPC__KAFKA_FATE_OPEN:
            break;
        }
        /* Still open: this one transaction, named now if it was not. EndTxn moves it on; what
         * the coordinator then describes decides. Its answer (NONE, a fence, a bad state) is
         * not evidence of anything about this transaction. */
        *start_ms = now.start_ms;
        if (sent < 5) {
            tpc__kafka_end_result_t result;
            int code = 0;
            int64_t left = deadline - tpc_clock_ms();
            err = tpc__kafka_end_txn(conf, id, pid, epoch, true, left > 0 ? (int)left : 0, &result,
                                     &code);
            if (err)
                return err;
            *ended_here = true;
            sent++;
            continue;
        }
        if (!tpc_backoff_wait(&backoff, NULL, NULL))
            return tpc_error_new(TPC_ERR_TIMEOUT, TPC_ERROR_RETRIABLE,
                                 "transaction \"%s\" was still open %d ms after its commit was "
                                 "asked for",
                                 id, timeout_ms);
    }
}
