/*
 * Ending a transaction that a producer of another process began: FindCoordinator (key type
 * transaction) on a bootstrap server, then EndTxn with the transactional id, producer id and epoch
 * on the coordinator. librdkafka cannot do this, because initialising a producer with the same
 * transactional id aborts the open transaction. Coordinator moves, a coordinator still loading,
 * a transaction still completing (CONCURRENT_TRANSACTIONS) and network errors are retried with
 * growing pauses until the deadline; what the coordinator says definitely is handed back for the
 * caller to judge (kafka_recover.c, and tpc_kafka_end_transaction()).
 *
 * EndTxn is sent at version 4 at most: version 5 asks the coordinator for the epoch-bump-per-
 * transaction rules (transaction version 2), which the transactions librdkafka 2.0.2 begins do
 * not follow.
 */
#include "kafka_wire.h"
#include "tpc_kit.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define KEY_TYPE_TRANSACTION 1

static bool retriable_code(int code)
{
    return code == TPC__KAFKA_E_COORDINATOR_LOADING ||
           code == TPC__KAFKA_E_COORDINATOR_NOT_AVAILABLE || code == TPC__KAFKA_E_NOT_COORDINATOR ||
           code == TPC__KAFKA_E_CONCURRENT_TRANSACTIONS || code == TPC__KAFKA_E_REQUEST_TIMED_OUT ||
           code == TPC__KAFKA_E_NETWORK;
}

static tpc_error_t *broker_error(const char *what, const char *txn_id, int code)
{
    tpc_error_t *err = tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL,
                                     "%s for transactional id \"%s\" failed: %s", what, txn_id,
                                     tpc__kafka_code_name(code));
    if (code == TPC__KAFKA_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        err = tpc_error_hint(err, "grant the sink's principal Write on the transactional id");
    return err;
}

tpc_error_t *tpc__kafka_find_coordinator(tpc__kafka_conn_t *boot, const char *txn_id,
                                         int64_t deadline_ms, char *host, size_t cap, int *port,
                                         int *code)
{
    int v = tpc__kafka_conn_version(boot, TPC__KAFKA_API_FIND_COORDINATOR, 1, 4);
    if (v < 0)
        return tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                             "broker \"%s\" supports no FindCoordinator version from 1 to 4",
                             tpc__kafka_conn_name(boot));
    bool flex = v >= 3;
    tpc__kafka_wbuf_t w = {0};
    if (v < 4) {
        tpc__kafka_w_str(&w, txn_id, flex);
        tpc__kafka_w_i8(&w, KEY_TYPE_TRANSACTION);
    } else {
        tpc__kafka_w_i8(&w, KEY_TYPE_TRANSACTION);
        tpc__kafka_w_uvarint(&w, 2); /* compact array of one key */
        tpc__kafka_w_str(&w, txn_id, true);
    }
    if (flex)
        tpc__kafka_w_no_tags(&w);
    tpc__kafka_rbuf_t r;
    tpc_error_t *err =
        tpc__kafka_conn_call(boot, TPC__KAFKA_API_FIND_COORDINATOR, v, flex, &w, deadline_ms, &r);
    tpc__kafka_wbuf_free(&w);
    if (err)
        return err;
    char msg[256];
    tpc__kafka_r_i32(&r); /* throttle time */
    if (v < 4) {
        *code = tpc__kafka_r_i16(&r);
        tpc__kafka_r_str(&r, flex, msg, sizeof msg);
        tpc__kafka_r_i32(&r); /* node id */
        tpc__kafka_r_str(&r, flex, host, cap);
        *port = tpc__kafka_r_i32(&r);
    } else {
        if (tpc__kafka_r_uvarint(&r) != 2)
            r.bad = true;
        tpc__kafka_r_str(&r, true, msg, sizeof msg); /* key */
        tpc__kafka_r_i32(&r);                        /* node id */
        tpc__kafka_r_str(&r, true, host, cap);
        *port = tpc__kafka_r_i32(&r);
        *code = tpc__kafka_r_i16(&r);
    }
    if (r.bad)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_RETRIABLE,
                             "broker \"%s\" sent a malformed FindCoordinator response",
                             tpc__kafka_conn_name(boot));
    return NULL;
}

static tpc_error_t *send_end_txn(tpc__kafka_conn_t *coord, const char *txn_id, int64_t pid,
                                 int16_t epoch, bool commit, int64_t deadline_ms, int *code)
{
    int v = tpc__kafka_conn_version(coord, TPC__KAFKA_API_END_TXN, 0, 4);
    if (v < 0)
        return tpc_error_new(TPC_ERR_UNSUPPORTED, TPC_ERROR_FATAL,
                             "broker \"%s\" supports no EndTxn version from 0 to 4",
                             tpc__kafka_conn_name(coord));
    bool flex = v >= 3;
    tpc__kafka_wbuf_t w = {0};
    tpc__kafka_w_str(&w, txn_id, flex);
    tpc__kafka_w_i64(&w, pid);
    tpc__kafka_w_i16(&w, epoch);
    tpc__kafka_w_i8(&w, commit ? 1 : 0);
    if (flex)
        tpc__kafka_w_no_tags(&w);
    tpc__kafka_rbuf_t r;
    tpc_error_t *err =
        tpc__kafka_conn_call(coord, TPC__KAFKA_API_END_TXN, v, flex, &w, deadline_ms, &r);
    tpc__kafka_wbuf_free(&w);
    if (err)
        return err;
    tpc__kafka_r_i32(&r); /* throttle time */
    *code = tpc__kafka_r_i16(&r);
    if (r.bad)
        return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_RETRIABLE,
                             "broker \"%s\" sent a malformed EndTxn response",
                             tpc__kafka_conn_name(coord));
    return NULL;
}

/* One round: find the coordinator, send EndTxn. @returns NULL with @code set when the broker
 * answered EndTxn, else the error of the step that failed. */
static tpc_error_t *one_round(const tpc__kafka_wire_conf_t *conf, const char *txn_id, int64_t pid,
                              int16_t epoch, bool commit, int64_t deadline_ms, int *code)
{
    tpc__kafka_conn_t *boot = NULL, *coord = NULL;
    char host[256];
    int port = 0;
    tpc_error_t *err = tpc__kafka_conn_open_bootstrap(conf, deadline_ms, &boot);
    if (!err)
        err =
            tpc__kafka_find_coordinator(boot, txn_id, deadline_ms, host, sizeof host, &port, code);
    if (!err && *code == TPC__KAFKA_E_NONE) {
        char name[300];
        snprintf(name, sizeof name, "%s:%d", host, port);
        if (strcmp(name, tpc__kafka_conn_name(boot)) == 0) {
            coord = boot;
            boot = NULL;
        } else {
            err = tpc__kafka_conn_open(conf, host, port, deadline_ms, &coord);
        }
        /* CONCURRENT_TRANSACTIONS lasts while the markers of an earlier EndTxn are written:
         * ask the same coordinator again after a short pause. */
        tpc_backoff_t backoff;
        tpc_backoff_init(&backoff, deadline_ms, 20, 500);
        while (!err) {
            err = send_end_txn(coord, txn_id, pid, epoch, commit, deadline_ms, code);
            if (err || *code != TPC__KAFKA_E_CONCURRENT_TRANSACTIONS ||
                !tpc_backoff_wait(&backoff, NULL, NULL))
                break;
        }
    } else if (!err && !retriable_code(*code)) {
        err = broker_error("FindCoordinator", txn_id, *code);
    } else if (!err) {
        *code = -*code - 1000; /* a FindCoordinator error: retry the round */
    }
    tpc__kafka_conn_close(boot);
    tpc__kafka_conn_close(coord);
    return err;
}

tpc_error_t *tpc__kafka_end_txn(const tpc__kafka_wire_conf_t *conf, const char *txn_id, int64_t pid,
                                int16_t epoch, bool commit, int timeout_ms,
                                tpc__kafka_end_result_t *result, int *broker_code)
{
    tpc_backoff_t backoff;
    tpc_backoff_init(&backoff, tpc_clock_ms() + timeout_ms, 50, 1000);
    *broker_code = 0;
    for (;;) {
        int code = 0;
        tpc_error_t *err = one_round(conf, txn_id, pid, epoch, commit, backoff.deadline_ms, &code);
        if (!err && code > -1000)
            *broker_code = code;
        else if (!err)
            *broker_code = -(code + 1000);
        if (!err) {
            switch (code) {
            case TPC__KAFKA_E_NONE:
                *result = TPC__KAFKA_END_DONE;
                return NULL;
            case TPC__KAFKA_E_INVALID_PRODUCER_EPOCH:
            case TPC__KAFKA_E_PRODUCER_FENCED:
                *result = TPC__KAFKA_END_FENCED;
                return NULL;
            case TPC__KAFKA_E_INVALID_TXN_STATE:
                *result = TPC__KAFKA_END_BAD_STATE;
                return NULL;
            case TPC__KAFKA_E_INVALID_PRODUCER_ID_MAPPING:
                *result = TPC__KAFKA_END_UNKNOWN_ID;
                return NULL;
            default:
                if (code > -1000 && !retriable_code(code))
                    return broker_error("EndTxn", txn_id, code);
                err = tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                                    "%s for transactional id \"%s\" kept failing: %s",
                                    code > -1000 ? "EndTxn" : "FindCoordinator", txn_id,
                                    tpc__kafka_code_name(*broker_code));
            }
        }
        if (tpc_error_is_fatal(err) && !tpc_error_is_retriable(err))
            return err;
        if (!tpc_backoff_wait(&backoff, NULL, NULL))
            return tpc_error_prefix(err, "gave up ending the transaction of \"%s\" after %d ms",
                                    txn_id, timeout_ms);
        tpc_error_destroy(err);
    }
}
