/*
 * Commit, recovery and cleanup of the PostgreSQL sink, on the control connection. All of it works
 * from a handle and the server alone, because after a crash the handle comes from a checkpoint and
 * the prepared transaction from a process that is gone. A handle of the write-ahead mode goes to
 * pg_staged.c; one committed directly at its checkpoint (at-least-once) needs nothing here.
 *
 * COMMIT PREPARED is idempotent only with help: a second commit of a gid fails with 42704 (no such
 * prepared transaction), exactly as a commit of a transaction that somebody rolled back does. The
 * marker row written inside each transaction tells the two apart. The lookup goes first to
 * pg_prepared_xacts, then, in a new READ COMMITTED transaction, to the marker table: a transaction
 * that commits between the two lookups is then seen by the second (one statement over both, or a
 * REPEATABLE READ snapshot, could miss it and cry data loss). Marker present = committed before;
 * absent = lost, a loud error.
 *
 * Markers are deleted once no checkpoint can ask for them: a transaction prepared in checkpoint n
 * carries the highest checkpoint this instance had committed by then (its floor); once that
 * transaction commits, n is complete, every checkpoint a restore can pick is at least n and none
 * lists a transaction at or below the floor.
 *
 * Cleanup at start rolls back prepared transactions of this sink's gid prefix (in this database)
 * that no checkpoint will commit. Gid "<prefix>:<s>:<p>:<b>" was begun by subtask s (of p); the
 * subtask that owns s (tpc_txn_owns()) got back every handle that s stored in the restored
 * checkpoint R and has just committed or rolled them back, so any other prepared gid of s is dead.
 * Then it deletes the marker rows of the subtasks it owns above R: no checkpoint that can be
 * restored lists their transactions, and a run that started over (R = 0, possibly with a new
 * checkpoint.dir whose ids begin at 1 again) must be free to use the same gids.
 */
#include "pg_internal.h"
#include "tpc_kit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool tpc_pg_parse_gid_epoch(const char *gid, const char *prefix, int *subtask, int *parallelism,
                            uint64_t *ckpt, uint64_t *epoch)
{
    size_t n = strlen(prefix);
    if (strncmp(gid, prefix, n) != 0 || gid[n] != ':')
        return false;
    const char *p = gid + n + 1;
    uint64_t v[4] = {0, 0, 0, 0};
    int count = 3;
    for (int i = 0; i < count; i++) {
        if (i == 3 && *p++ != 'e') /* ":e<epoch>" after the checkpoint: an owner's gid */
            return false;
        if (*p < '0' || *p > '9')
            return false;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (v[i] > (UINT64_MAX - 9) / 10)
                return false;
            v[i] = v[i] * 10 + (uint64_t)(*p - '0');
        }
        if (i == 2 && *p == ':')
            count = 4;
        if (*p != (i < count - 1 ? ':' : '\0'))
            return false;
        p += i < count - 1;
    }
    if (v[0] > 0x7fffffff || v[1] > 0x7fffffff || (count == 4 && v[3] == 0))
        return false;
    *subtask = (int)v[0];
    *parallelism = (int)v[1];
    *ckpt = v[2];
    *epoch = v[3];
    return true;
}

bool tpc_pg_parse_gid(const char *gid, const char *prefix, int *subtask, int *parallelism,
                      uint64_t *ckpt)
{
    uint64_t epoch;
    return tpc_pg_parse_gid_epoch(gid, prefix, subtask, parallelism, ckpt, &epoch);
}

/* "COMMIT PREPARED 'gid'" and friends take no parameters; the gid is quoted as a literal. */
static PGresult *finish_prepared(tpc__pg_conn_t *c, const char *verb, const char *gid)
{
    char *lit = PQescapeLiteral(c->control, gid, strlen(gid));
    if (!lit)
        return NULL;
    char sql[TPC_PG_GID_MAX * 2 + 64];
    snprintf(sql, sizeof sql, "%s %s", verb, lit);
    PQfreemem(lit);
    return PQexec(c->control, sql);
}

/* 55000 from COMMIT / ROLLBACK PREPARED: another backend holds the transaction right now, such as
 * the backend of a killed program that is still finishing its PREPARE. It passes. */
static bool busy(const PGresult *res)
{
    return tpc__pg_sqlstate_is(res, "55000") || tpc__pg_sqlstate_is(res, "55006");
}

static void committed(tpc__pg_conn_t *c, tpc__pg_txn_t *t)
{
    if (t->local) {
        t->local = false;
        c->prepared_here--;
    }
    if (t->ckpt > c->committed_ckpt)
        c->committed_ckpt = t->ckpt;
    if (t->floor > c->marker_floor)
        c->marker_floor = t->floor;
}

/* COMMIT PREPARED said 42704: committed before, or lost? */
static tpc_error_t *resolve_missing(tpc__pg_conn_t *c, tpc__pg_txn_t *t)
{
    const char *params[] = {t->gid};
    PGresult *res = NULL;
    tpc_error_t *err =
        tpc__pg_exec(c->control,
                     "SELECT database, database = current_database() FROM pg_prepared_xacts "
                     "WHERE gid = $1",
                     1, params, "look up the prepared transaction", &res);
    if (err)
        return err;
    if (PQntuples(res) > 0) {
        bool here = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
        err = here ? tpc_error_new(TPC_ERR_COMMIT, TPC_ERROR_RETRIABLE,
                                   "prepared transaction \"%s\" was not found but is listed in "
                                   "pg_prepared_xacts",
                                   t->gid)
                   : tpc_error_hint(tpc_error_new(TPC_ERR_COMMIT, TPC_ERROR_FATAL,
                                                  "prepared transaction \"%s\" belongs to "
                                                  "database \"%s\", not to this sink's",
                                                  t->gid, PQgetvalue(res, 0, 0)),
                                    "point pg.conninfo at the database the sink wrote to, and "
                                    "give sinks of different databases their own pg.gid-prefix");
        PQclear(res);
        return err;
    }
    PQclear(res);
    char sql[600];
    snprintf(sql, sizeof sql, "SELECT checkpoint FROM %s WHERE gid = $1", c->marker_q);
    err = tpc__pg_exec(c->control, "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY", 0, NULL,
                       "look up the marker row", NULL);
    if (!err)
        err = tpc__pg_exec(c->control, sql, 1, params, "look up the marker row", &res);
    tpc_error_t *end = tpc__pg_exec(c->control, err ? "ROLLBACK" : "COMMIT", 0, NULL,
                                    "end the marker lookup", NULL);
    if (err || end) {
        if (!err)
            PQclear(res);
        tpc_error_destroy(err ? end : NULL);
        return err ? err : end;
    }
    bool found = PQntuples(res) > 0;
    PQclear(res);
    if (found) {
        tpc_txn_log(c->st, TPC_LOG_INFO,
                    "transaction \"%s\" of checkpoint %" PRIu64 " was committed before", t->gid,
                    t->ckpt);
        committed(c, t);
        return NULL;
    }
    err = tpc_error_new(TPC_ERR_DATA_LOSS, TPC_ERROR_FATAL,
                        "prepared transaction \"%s\" of checkpoint %" PRIu64
                        " is gone and was never committed (no marker row in \"%s\"): its "
                        "records are lost",
                        t->gid, t->ckpt, c->conf->marker_table);
    return tpc_error_hint(err,
                          "something rolled it back behind the sink's back: ROLLBACK PREPARED "
                          "by hand, or another program using the gid prefix \"%s\"; write those "
                          "records again from their source, and give every sink its own "
                          "pg.gid-prefix",
                          c->prefix);
}

static tpc_error_t *rollback_gid(tpc__pg_conn_t *c, const char *gid, bool *done);

/* With owners, at each checkpoint's pre-commit and commit (once the cleanup at start is done; once
 * per checkpoint): roll back the
 * prepared gids of the subtasks this one owns that an older owner epoch prepared. The restore
 * committed every one a checkpoint lists, and no later restore takes a file of an older epoch, so
 * the rest belong to an owner that was taken over (a zombie that went on after the take-over)
 * and no one will commit them; they hold their locks (the marker rows they deleted, the keys they
 * wrote) until someone rolls them back, so the pre-commit, which deletes old marker rows, does it
 * first. A gid of a newer epoch is never touched. */
tpc_error_t *tpc__pg_sweep_older(tpc__pg_conn_t *c, uint64_t ckpt)
{
    const tpc_txn_subtask_t *st = c->st;
    if (!st->owner_epoch || !c->lingering_done || ckpt <= c->older_swept)
        return NULL;
    c->older_swept = ckpt;
    const char *params[] = {c->prefix};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_control_ready(c);
    if (!err)
        err = tpc__pg_exec(c->control,
                           "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() "
                           "AND left(gid, length($1)) = $1 ORDER BY gid",
                           1, params, "list prepared transactions", &res);
    int rolled = 0;
    for (int i = 0; !err && i < PQntuples(res); i++) {
        const char *gid = PQgetvalue(res, i, 0);
        int s, p;
        uint64_t b, e;
        if (!tpc_pg_parse_gid_epoch(gid, c->prefix, &s, &p, &b, &e) || e >= st->owner_epoch ||
            !tpc_txn_owns(st, s))
            continue;
        bool done = false;
        err = rollback_gid(c, gid, &done);
        rolled += done;
    }
    PQclear(res);
    if (rolled)
        tpc_txn_log(st, TPC_LOG_WARN,
                    "rolled back %d prepared transactions of prefix \"%s\" that an older owner "
                    "epoch than %" PRIu64 " prepared after this owner took over",
                    rolled, c->prefix, st->owner_epoch);
    return err;
}

tpc_error_t *tpc__pg_commit(void *conn, void *txn)
{
    tpc__pg_conn_t *c = conn;
    tpc__pg_txn_t *t = txn;
    if (!t->ckpt)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "transaction \"%s\" committed before it was prepared", t->gid);
    if (t->kind == TPC__PG_TXN_STAGED)
        return tpc__pg_stage_move(c, t);
    if (t->kind == TPC__PG_TXN_DIRECT)
        return NULL; /* committed by its pre-commit */
    tpc_error_t *err = tpc__pg_control_ready(c);
    if (err)
        return err;
    PGresult *res = finish_prepared(c, "COMMIT PREPARED", t->gid);
    if (PQresultStatus(res) == PGRES_COMMAND_OK) {
        PQclear(res);
        committed(c, t);
        return tpc__pg_sweep_older(c, t->ckpt);
    }
    if (tpc__pg_sqlstate_is(res, "42704")) {
        PQclear(res);
        return resolve_missing(c, t);
    }
    if (busy(res)) {
        PQclear(res);
        return tpc_error_new(TPC_ERR_COMMIT, TPC_ERROR_RETRIABLE,
                             "prepared transaction \"%s\" is busy in another session", t->gid);
    }
    return tpc__pg_result_error(c->control, res, "commit prepared transaction");
}

/* Roll back @gid if it is still prepared; gone already is fine. */
static tpc_error_t *rollback_gid(tpc__pg_conn_t *c, const char *gid, bool *done)
{
    *done = false;
    PGresult *res = finish_prepared(c, "ROLLBACK PREPARED", gid);
    if (PQresultStatus(res) == PGRES_COMMAND_OK) {
        *done = true;
        PQclear(res);
        return NULL;
    }
    if (tpc__pg_sqlstate_is(res, "42704")) {
        PQclear(res);
        return NULL;
    }
    if (busy(res)) {
        PQclear(res);
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_RETRIABLE,
                             "prepared transaction \"%s\" is busy in another session", gid);
    }
    return tpc__pg_result_error(c->control, res, "roll back prepared transaction");
}

static tpc_error_t *prepared_here(tpc__pg_conn_t *c, const char *gid, bool *found)
{
    const char *params[] = {gid};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(c->control,
                                    "SELECT 1 FROM pg_prepared_xacts WHERE gid = $1 AND "
                                    "database = current_database()",
                                    1, params, "look up the prepared transaction", &res);
    if (!err) {
        *found = PQntuples(res) > 0;
        PQclear(res);
    }
    return err;
}

tpc_error_t *tpc__pg_recover_and_abort(void *conn, void *txn)
{
    /* The restored current transaction: its data connection died with the process, which rolled
     * back everything not prepared; if it got as far as PREPARE, it goes now. */
    tpc__pg_conn_t *c = conn;
    tpc__pg_txn_t *t = txn;
    if (t->kind == TPC__PG_TXN_STAGED)
        return tpc__pg_stage_drop(c, t);
    bool found = false, done;
    tpc_error_t *err = tpc__pg_control_ready(c);
    if (!err)
        err = prepared_here(c, t->gid, &found);
    if (!err && found)
        err = rollback_gid(c, t->gid, &done);
    return err;
}

/* Marker rows of the subtasks this one owns, above checkpoint @above: no restorable checkpoint
 * can ask for them (see the top of this file). */
static tpc_error_t *drop_markers(tpc__pg_conn_t *c, uint64_t above)
{
    char par[16], sub[16], ckpt[24], sql[600];
    snprintf(par, sizeof par, "%d", c->st->parallelism);
    snprintf(sub, sizeof sub, "%d", c->st->subtask);
    snprintf(ckpt, sizeof ckpt, "%" PRIu64, above);
    const char *params[] = {c->prefix, par, sub, ckpt};
    snprintf(sql, sizeof sql,
             "DELETE FROM %s WHERE sink = $1 AND subtask %% $2::integer = $3::integer AND "
             "checkpoint > $4::bigint",
             c->marker_q);
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_exec(c->control, sql, 4, params, "delete stale marker rows", &res);
    if (err)
        return err;
    const char *n = PQcmdTuples(res);
    if (n && *n && strcmp(n, "0") != 0)
        tpc_txn_log(c->st, TPC_LOG_INFO,
                    "deleted %s marker rows of prefix \"%s\" above checkpoint %" PRIu64
                    ", which no restorable checkpoint lists",
                    n, c->prefix, above);
    PQclear(res);
    return NULL;
}

bool tpc__pg_known(const tpc_txn_lingering_t *l, const char *gid)
{
    for (size_t i = 0; i < l->known_count; i++)
        if (strcmp(((const tpc__pg_txn_t *)l->known[i])->gid, gid) == 0)
            return true;
    return false;
}

tpc_error_t *tpc__pg_abort_lingering(void *conn, const tpc_txn_lingering_t *l)
{
    tpc__pg_conn_t *c = conn;
    const tpc_txn_subtask_t *st = c->st;
    const char *params[] = {c->prefix};
    PGresult *res = NULL;
    tpc_error_t *err = tpc__pg_control_ready(c);
    if (!err)
        err = tpc__pg_exec(c->control,
                           "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() "
                           "AND left(gid, length($1)) = $1 ORDER BY gid",
                           1, params, "list prepared transactions", &res);
    if (err)
        return err;
    int rolled = 0;
    for (int i = 0; i < PQntuples(res) && !err; i++) {
        const char *gid = PQgetvalue(res, i, 0);
        int s, p;
        uint64_t b, e;
        /* A gid of a newer owner epoch is its owner's, who took the job over: never touched. */
        if (!tpc_pg_parse_gid_epoch(gid, c->prefix, &s, &p, &b, &e) || !tpc_txn_owns(st, s) ||
            e > st->owner_epoch || tpc__pg_known(l, gid))
            continue;
        {
            bool done;
            /* Busy: the backend of a killed run may still be finishing its PREPARE. */
            for (int tries = 0;; tries++) {
                err = rollback_gid(c, gid, &done);
                if (!err || !tpc_error_is_retriable(err) || tries == 200 || tpc_txn_is_canceled(st))
                    break;
                tpc_error_destroy(err);
                tpc_sleep_ms(25, tpc_txn_subtask_canceled, (void *)st);
            }
            rolled += done;
        }
    }
    PQclear(res);
    if (!err)
        err = tpc__pg_stage_lingering(c, l);
    if (!err)
        err = drop_markers(c, l->restored_checkpoint);
    if (!err)
        c->lingering_done = true;
    if (rolled)
        tpc_txn_log(st, TPC_LOG_INFO,
                    "rolled back %d prepared transactions of prefix \"%s\" that no checkpoint up "
                    "to %" PRIu64 " holds",
                    rolled, c->prefix, l->restored_checkpoint);
    return err;
}
