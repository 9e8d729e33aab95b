/*
 * `twopc pg transactions`, `twopc pg resolve` and `twopc pg drop-staged`: the prepared
 * transactions, marker rows and rows written ahead (pg.commit=write-ahead) of a PostgreSQL sink,
 * judged by the ground truth a restart uses. A prepared transaction that the newest completed
 * checkpoint lists as pending was promised: a restart commits it. Any other prepared transaction
 * of the prefix (the current one of the checkpoint, those of checkpoints that never completed) is
 * lingering: a restart rolls it back. A marker row is the trace of a committed transaction that
 * was not yet cleaned up. Rows written ahead follow the same rule by their gid: pending ones are
 * moved into the tables by a restart and may never be dropped by hand (their records would be
 * lost), lingering ones are dropped by a restart, or now by drop-staged. Gids are matched with the
 * sink's own parser, so a prefix never takes in the gids of a sink whose prefix merely starts the
 * same way.
 */
#include "tpc_pg.h"
#include "twopc_cli.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

static const char pg_help[] =
    "usage: twopc pg transactions --conninfo C [--prefix P] [--checkpoint-dir DIR]\n"
    "                             [--marker-table T] [--json] [--check]\n"
    "       twopc pg resolve --conninfo C --checkpoint-dir DIR [--prefix P] [--marker-table T]\n"
    "                        [--dry-run] [--json]\n"
    "       twopc pg drop-staged --conninfo C --checkpoint-dir DIR [--prefix P] [--gid G]\n"
    "                            [--write-ahead-table T] [--dry-run] [--json]\n"
    "\n"
    "transactions lists the prepared transactions (pg_prepared_xacts) whose gid is\n"
    "<prefix>:<subtask>:<parallelism>:<checkpoint> (every prepared transaction without --prefix)\n"
    "and the marker rows of that prefix. With --checkpoint-dir each is classified as a restart\n"
    "would judge it:\n"
    "  pending    prepared, listed as pending in the newest completed checkpoint: commit\n"
    "  lingering  prepared, not promised by that checkpoint: roll back\n"
    "  committed  a marker row: committed, its marker not yet cleaned up: nothing to do\n"
    "It also lists the rows written ahead (pg.commit=write-ahead) in the write-ahead table\n"
    "(--write-ahead-table, default twopc_write_ahead), one line per transaction with its\n"
    "checkpoint, parts, rows and age, classified by the same rule:\n"
    "  pending    a restart moves them into the tables: never drop them\n"
    "  lingering  no completed checkpoint will move them: a restart drops them\n"
    "--check exits with 3 when a prepared transaction or rows written ahead are left.\n"
    "\n"
    "resolve commits the pending and rolls back the lingering prepared transactions of the\n"
    "prefix (default: the prefixes of the gids in the checkpoint), as the job's next start would.\n"
    "Rows written ahead are left as they are.\n"
    "\n"
    "drop-staged deletes the rows written ahead of the lingering transactions of the prefix\n"
    "(default: the prefixes of the gids in the checkpoint), or of those --gid names; it refuses,\n"
    "dropping nothing, when a named one is pending or has no rows written ahead.\n"
    "Do not resolve or drop-staged a job that is still running or will be restarted with another\n"
    "checkpoint.\n"
    "Connect as the role that prepared the transactions (or a superuser), to their database.\n";

typedef struct {
    char gid[TPC_PG_GID_MAX + 1];
    char prepared[64];
    char owner[128];
    char database[128];
    bool here;   /* in the database of the connection */
    bool marker; /* a marker row, not a prepared transaction */
    int64_t marker_ckpt;
    const char *verdict; /* pending, lingering, committed, unknown */
    const char *action;  /* commit, rollback, none, ? */
} pg_item_t;

/* One transaction's rows in the write-ahead table. */
typedef struct {
    char gid[TPC_PG_GID_MAX + 1];
    uint64_t ckpt; /* of the gid: the checkpoint the transaction began in */
    int subtask;
    long long parts, rows, age_s;
    char written[64]; /* its first part */
    char database[128];
    const char *verdict; /* pending, lingering, unknown */
    const char *action;  /* move (a restart does it), drop, ? */
} pg_staged_t;

typedef struct {
    PGconn *conn;
    char **prefixes;
    size_t nprefixes;
    const twopc_checkpoint_t *ckpt; /* the one a restart restores, or NULL */
    pg_item_t *items;
    size_t nitems;
    pg_staged_t *staged;
    size_t nstaged;
    const char *staging; /* the write-ahead table as given */
    char *staging_q;     /* quoted; NULL while it is not there */
} pg_view_t;

static tpc_error_t *pg_error(PGconn *c, const char *what, const char *conninfo)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", PQerrorMessage(c));
    msg[strcspn(msg, "\n")] = 0;
    tpc_pg_hide_secrets(conninfo, msg);
    return tpc_error_new(TPC_ERR_EXTERNAL, 0, "could not %s: %s", what, msg);
}

/* The prefix of a gid "<prefix>:<s>:<p>:<c>" or "<prefix>:<s>:<p>:<c>:e<epoch>". */
static bool gid_prefix(const char *gid, char *out, size_t cap)
{
    const char *p = gid + strlen(gid);
    const char *last = strrchr(gid, ':');
    int want = last && last[1] == 'e' ? 4 : 3;
    for (int colons = 0; p > gid && colons < want; p--)
        if (p[-1] == ':' && ++colons == want)
            break;
    if (p <= gid + 1 || (size_t)(p - gid) > cap)
        return false;
    snprintf(out, cap, "%.*s", (int)(p - gid - 1), gid);
    int s, par;
    uint64_t c;
    return tpc_pg_parse_gid(gid, out, &s, &par, &c);
}

static bool matches(const pg_view_t *v, const char *gid)
{
    if (!v->nprefixes)
        return true;
    for (size_t i = 0; i < v->nprefixes; i++) {
        int s, p;
        uint64_t c;
        if (tpc_pg_parse_gid(gid, v->prefixes[i], &s, &p, &c))
            return true;
    }
    return false;
}

/* The gid of transaction @t of the checkpoint into @gid, when it is a PostgreSQL one. */
static bool gid_of(const twopc_txn_t *t, char *gid, size_t cap)
{
    tpc_txn_handle_view_t view;
    const char *g =
        twopc_txn_of(t, tpc_pg_sink_ops(), &view) ? twopc_view_text(&view, "gid") : NULL;
    if (g)
        snprintf(gid, cap, "%s", g);
    return g != NULL;
}

static const twopc_txn_t *in_checkpoint(const pg_view_t *v, const char *gid)
{
    char g[TPC_PG_GID_MAX + 1];
    for (size_t i = 0; v->ckpt && i < v->ckpt->ntxns; i++)
        if (gid_of(&v->ckpt->txns[i], g, sizeof g) && strcmp(g, gid) == 0)
            return &v->ckpt->txns[i];
    return NULL;
}

static pg_item_t *add_item(pg_view_t *v)
{
    v->items = realloc(v->items, (v->nitems + 1) * sizeof *v->items);
    if (!v->items)
        abort();
    pg_item_t *it = &v->items[v->nitems++];
    *it = (pg_item_t){0};
    return it;
}

static void classify(const pg_view_t *v, pg_item_t *it, bool have_ckpt)
{
    const twopc_txn_t *t = in_checkpoint(v, it->gid);
    if (it->marker) {
        it->verdict = "committed";
        it->action = "none";
    } else if (!have_ckpt) {
        it->verdict = "unknown";
        it->action = "?";
    } else if (t && t->kind == TWOPC_TXN_PENDING) {
        it->verdict = "pending";
        it->action = "commit";
    } else {
        it->verdict = "lingering";
        it->action = "rollback";
    }
}

static char *marker_table_sql(PGconn *c, const char *name)
{
    const char *dot = strchr(name, '.');
    char *schema = dot ? PQescapeIdentifier(c, name, (size_t)(dot - name)) : NULL;
    char *table = PQescapeIdentifier(c, dot ? dot + 1 : name, strlen(dot ? dot + 1 : name));
    if (!table || (dot && !schema)) {
        PQfreemem(schema);
        PQfreemem(table);
        return NULL;
    }
    size_t n = strlen(table) + (schema ? strlen(schema) : 0) + 2;
    char *q = malloc(n);
    if (!q)
        abort();
    snprintf(q, n, "%s%s%s", schema ? schema : "", schema ? "." : "", table);
    PQfreemem(schema);
    PQfreemem(table);
    return q;
}

static tpc_error_t *load(pg_view_t *v, const char *conninfo, const char *marker_table,
                         bool have_ckpt)
{
    PGresult *r = PQexec(v->conn, "SELECT gid, prepared::text, owner, database, "
                                  "database = current_database() FROM pg_prepared_xacts "
                                  "ORDER BY gid");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        PQclear(r);
        return pg_error(v->conn, "list prepared transactions", conninfo);
    }
    for (int i = 0; i < PQntuples(r); i++) {
        if (!matches(v, PQgetvalue(r, i, 0)))
            continue;
        pg_item_t *it = add_item(v);
        snprintf(it->gid, sizeof it->gid, "%s", PQgetvalue(r, i, 0));
        snprintf(it->prepared, sizeof it->prepared, "%s", PQgetvalue(r, i, 1));
        snprintf(it->owner, sizeof it->owner, "%s", PQgetvalue(r, i, 2));
        snprintf(it->database, sizeof it->database, "%s", PQgetvalue(r, i, 3));
        it->here = strcmp(PQgetvalue(r, i, 4), "t") == 0;
        classify(v, it, have_ckpt);
    }
    PQclear(r);
    char *table = marker_table_sql(v->conn, marker_table);
    if (!table)
        return tpc_error_new(TPC_ERR_CONFIG, 0, "invalid marker table name \"%s\"", marker_table);
    r = PQexecParams(v->conn, "SELECT to_regclass($1) IS NOT NULL", 1, NULL,
                     (const char *[]){table}, NULL, NULL, 0);
    bool exists = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                  strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (exists) {
        char sql[512];
        snprintf(sql, sizeof sql,
                 "SELECT gid, checkpoint, created::text, current_database() FROM %s ORDER BY gid",
                 table);
        r = PQexec(v->conn, sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            PQclear(r);
            free(table);
            return pg_error(v->conn, "read the marker table", conninfo);
        }
        for (int i = 0; i < PQntuples(r); i++) {
            if (!matches(v, PQgetvalue(r, i, 0)))
                continue;
            pg_item_t *it = add_item(v);
            snprintf(it->gid, sizeof it->gid, "%s", PQgetvalue(r, i, 0));
            it->marker = true;
            it->marker_ckpt = strtoll(PQgetvalue(r, i, 1), NULL, 10);
            snprintf(it->prepared, sizeof it->prepared, "%s", PQgetvalue(r, i, 2));
            snprintf(it->database, sizeof it->database, "%s", PQgetvalue(r, i, 3));
            it->here = true;
            classify(v, it, have_ckpt);
        }
        PQclear(r);
    }
    free(table);
    return NULL;
}

/* The rows written ahead in the write-ahead table, one item per gid of the prefixes. */
static tpc_error_t *load_staged(pg_view_t *v, const char *conninfo, bool have_ckpt)
{
    char *table = marker_table_sql(v->conn, v->staging);
    if (!table)
        return tpc_error_new(TPC_ERR_CONFIG, 0, "invalid write-ahead table name \"%s\"",
                             v->staging);
    PGresult *r = PQexecParams(v->conn, "SELECT to_regclass($1) IS NOT NULL", 1, NULL,
                               (const char *[]){table}, NULL, NULL, 0);
    bool exists = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                  strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (!exists) {
        free(table);
        return NULL;
    }
    char sql[700];
    snprintf(sql, sizeof sql,
             "SELECT gid, min(subtask), count(*), coalesce(sum(row_count), 0), min(created)::text, "
             "extract(epoch FROM now() - min(created))::bigint, current_database() FROM %s "
             "GROUP BY gid ORDER BY gid",
             table);
    r = PQexec(v->conn, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        PQclear(r);
        free(table);
        return tpc_error_hint(pg_error(v->conn, "read the write-ahead table", conninfo),
                              "connect as a role that may read \"%s\" (the sink's own)",
                              v->staging);
    }
    v->staging_q = table;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *gid = PQgetvalue(r, i, 0);
        char prefix[TPC_PG_GID_MAX + 1];
        int sub, par;
        uint64_t ckpt;
        if (!matches(v, gid) || !gid_prefix(gid, prefix, sizeof prefix) ||
            !tpc_pg_parse_gid(gid, prefix, &sub, &par, &ckpt))
            continue;
        v->staged = realloc(v->staged, (v->nstaged + 1) * sizeof *v->staged);
        if (!v->staged)
            abort();
        pg_staged_t *st = &v->staged[v->nstaged++];
        *st = (pg_staged_t){.ckpt = ckpt, .subtask = atoi(PQgetvalue(r, i, 1))};
        snprintf(st->gid, sizeof st->gid, "%s", gid);
        st->parts = atoll(PQgetvalue(r, i, 2));
        st->rows = atoll(PQgetvalue(r, i, 3));
        snprintf(st->written, sizeof st->written, "%s", PQgetvalue(r, i, 4));
        st->age_s = atoll(PQgetvalue(r, i, 5));
        snprintf(st->database, sizeof st->database, "%s", PQgetvalue(r, i, 6));
        const twopc_txn_t *t = in_checkpoint(v, gid);
        if (!have_ckpt) {
            st->verdict = "unknown";
            st->action = "?";
        } else if (t && t->kind == TWOPC_TXN_PENDING) {
            st->verdict = "pending";
            st->action = "move";
        } else {
            st->verdict = "lingering";
            st->action = "drop";
        }
    }
    PQclear(r);
    return NULL;
}

static void print_staged(const pg_view_t *v, bool json, const char *done)
{
    if (json) {
        printf(",\"write_ahead_table\":");
        twopc_json_str(stdout, v->staging);
        printf(",\"staged\":[");
        for (size_t i = 0; i < v->nstaged; i++) {
            const pg_staged_t *st = &v->staged[i];
            printf("%s{\"gid\":", i ? "," : "");
            twopc_json_str(stdout, st->gid);
            printf(
                ",\"state\":\"staged\",\"class\":\"%s\",\"action\":\"%s\",\"checkpoint\":%" PRIu64
                ",\"subtask\":%d,\"parts\":%lld,\"rows\":%lld,\"age_s\":%lld,\"time\":",
                st->verdict, st->action, st->ckpt, st->subtask, st->parts, st->rows, st->age_s);
            twopc_json_str(stdout, st->written);
            printf(",\"database\":");
            twopc_json_str(stdout, st->database);
            if (done)
                printf(",\"done\":%s", done[i] ? "true" : "false");
            printf("}");
        }
        printf("]");
        return;
    }
    if (!v->nstaged)
        return;
    printf("rows written ahead in %s (pg.commit=write-ahead):\n", v->staging);
    printf("%-48s %-10s %-10s %-9s %8s %5s %6s %10s %7s %s\n", "GID", "STATE", "CLASS",
           done ? "DONE" : "ACTION", "CKPT", "SUB", "PARTS", "ROWS", "AGE_S", "WRITTEN");
    for (size_t i = 0; i < v->nstaged; i++) {
        const pg_staged_t *st = &v->staged[i];
        /* After drop-staged: what it did to the lingering ones; a restart moves the others. */
        const char *act = st->action;
        if (done && strcmp(st->action, "drop") == 0)
            act = done[i] ? "dropped" : "kept";
        printf("%-48s %-10s %-10s %-9s %8" PRIu64 " %5d %6lld %10lld %7lld %s\n", st->gid, "staged",
               st->verdict, act, st->ckpt, st->subtask, st->parts, st->rows, st->age_s,
               st->written);
    }
}

/* The listing; @done (prepared items) and @staged_done (rows written ahead): what was done, or
 * NULL before anything was; @prepared: list the prepared transactions and marker rows too. */
static void print_items(const pg_view_t *v, bool json, bool prepared, const char *done,
                        const char *staged_done)
{
    if (json) {
        printf("{\"checkpoint\":");
        if (v->ckpt)
            printf("%" PRIu64, v->ckpt->id);
        else
            printf("null");
        printf(",\"transactions\":[");
        for (size_t i = 0; i < v->nitems; i++) {
            const pg_item_t *it = &v->items[i];
            printf("%s{\"gid\":", i ? "," : "");
            twopc_json_str(stdout, it->gid);
            printf(",\"state\":\"%s\",\"class\":\"%s\",\"action\":\"%s\",\"time\":",
                   it->marker ? "committed" : "prepared", it->verdict, it->action);
            twopc_json_str(stdout, it->prepared);
            printf(",\"database\":");
            twopc_json_str(stdout, it->database);
            if (done)
                printf(",\"done\":%s", done[i] ? "true" : "false");
            printf("}");
        }
        printf("]");
        print_staged(v, true, staged_done);
        printf("}\n");
        return;
    }
    if (v->ckpt)
        printf("judged by checkpoint %" PRIu64 " (the one a restart restores)\n", v->ckpt->id);
    if (!prepared) {
        if (!v->nstaged)
            printf("no rows written ahead%s in %s\n", v->nprefixes ? " of this prefix" : "",
                   v->staging);
        print_staged(v, false, staged_done);
        return;
    }
    if (!v->nitems) {
        printf("no prepared transactions or marker rows%s\n",
               v->nprefixes ? " of this prefix" : "");
        print_staged(v, false, staged_done);
        return;
    }
    printf("%-48s %-10s %-10s %-9s %-30s %s\n", "GID", "STATE", "CLASS", done ? "DONE" : "ACTION",
           "PREPARED/MARKED", "DATABASE");
    for (size_t i = 0; i < v->nitems; i++) {
        const pg_item_t *it = &v->items[i];
        char act[32];
        snprintf(act, sizeof act, "%s%s", done && !done[i] ? "not " : "", it->action);
        printf("%-48s %-10s %-10s %-9s %-30s %s\n", it->gid, it->marker ? "committed" : "prepared",
               it->verdict, done && strcmp(it->action, "none") != 0 ? act : it->action,
               it->prepared, it->database);
    }
    print_staged(v, false, staged_done);
}

/* COMMIT PREPARED / ROLLBACK PREPARED of every prepared item as classified. */
static tpc_error_t *resolve(pg_view_t *v, const char *conninfo, char *done)
{
    tpc_error_t *first = NULL;
    for (size_t i = 0; i < v->nitems; i++) {
        pg_item_t *it = &v->items[i];
        if (it->marker)
            continue;
        if (!it->here) {
            tpc_error_t *e = tpc_error_hint(
                tpc_error_new(TPC_ERR_CONFIG, 0,
                              "prepared transaction \"%s\" belongs to database \"%s\"", it->gid,
                              it->database),
                "run again with a --conninfo that names dbname=%s", it->database);
            if (!first)
                first = e;
            else
                tpc_error_destroy(e);
            continue;
        }
        bool commit = strcmp(it->action, "commit") == 0;
        char *lit = PQescapeLiteral(v->conn, it->gid, strlen(it->gid));
        char sql[TPC_PG_GID_MAX * 2 + 64];
        snprintf(sql, sizeof sql, "%s PREPARED %s", commit ? "COMMIT" : "ROLLBACK",
                 lit ? lit : "''");
        PQfreemem(lit);
        PGresult *r = PQexec(v->conn, sql);
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (PQresultStatus(r) == PGRES_COMMAND_OK) {
            done[i] = 1;
        } else if (state && strcmp(state, "42704") == 0) {
            /* Ended meanwhile, by a restart of the job or another resolve. */
            done[i] = 1;
        } else {
            tpc_error_t *e =
                pg_error(v->conn, commit ? "commit prepared" : "roll back prepared", conninfo);
            e = tpc_error_prefix(e, "transaction \"%s\"", it->gid);
            if (state && strcmp(state, "42501") == 0)
                e = tpc_error_hint(e, "connect as role \"%s\", which prepared it, or a superuser",
                                   it->owner);
            if (!first)
                first = e;
            else
                tpc_error_destroy(e);
        }
        PQclear(r);
    }
    return first;
}

static const pg_staged_t *staged_gid(const pg_view_t *v, const char *gid)
{
    for (size_t i = 0; i < v->nstaged; i++)
        if (strcmp(v->staged[i].gid, gid) == 0)
            return &v->staged[i];
    return NULL;
}

/* Before anything is dropped: every gid @a names has rows written ahead and is not pending. */
static tpc_error_t *check_named(const pg_view_t *v, const twopc_args_t *a)
{
    for (size_t i = 0; twopc_arg_nth(a, "gid", i); i++) {
        const char *gid = twopc_arg_nth(a, "gid", i);
        const pg_staged_t *st = staged_gid(v, gid);
        if (!st)
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                              "no rows written ahead for transaction \"%s\" in \"%s\"%s", gid,
                              v->staging, v->nprefixes ? " among the gids of the prefix" : ""),
                "`twopc pg transactions --checkpoint-dir DIR` lists the rows written ahead; give "
                "--write-ahead-table when the sink sets pg.write-ahead-table");
        if (strcmp(st->verdict, "pending") == 0)
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                              "refusing to drop the rows written ahead of transaction \"%s\": "
                              "checkpoint %" PRIu64
                              ", the newest completed one (the one a restart restores), lists it "
                              "as pending, so a restart moves these %lld rows into the tables; "
                              "dropping them would lose their records",
                              gid, v->ckpt->id, st->rows),
                "restart the job from this checkpoint, which moves them; only lingering rows "
                "(no completed checkpoint will move them) can be dropped");
    }
    return NULL;
}

/* Delete the rows written ahead of every lingering item (of those @a names, when it names any). */
static tpc_error_t *drop_staged(pg_view_t *v, const twopc_args_t *a, const char *conninfo,
                                char *done)
{
    char sql[600];
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE gid = $1", v->staging_q);
    for (size_t i = 0; i < v->nstaged; i++) {
        pg_staged_t *st = &v->staged[i];
        bool named = !twopc_arg(a, "gid");
        for (size_t k = 0; !named && twopc_arg_nth(a, "gid", k); k++)
            named = strcmp(twopc_arg_nth(a, "gid", k), st->gid) == 0;
        if (!named || strcmp(st->verdict, "lingering") != 0)
            continue;
        PGresult *r = PQexecParams(v->conn, sql, 1, NULL, (const char *[]){st->gid}, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            PQclear(r);
            return tpc_error_prefix(pg_error(v->conn, "delete rows written ahead", conninfo),
                                    "transaction \"%s\"", st->gid);
        }
        PQclear(r);
        done[i] = 1;
    }
    return NULL;
}

int twopc_cmd_pg(int argc, char **argv)
{
    static const twopc_opt_t spec[] = {
        {"conninfo", true, false},
        {"prefix", true, true},
        {"checkpoint-dir", true, false},
        {"marker-table", true, false},
        {"json", false, false},
        {"check", false, false},
        {"dry-run", false, false},
        {"help", false, false},
        {"gid", true, true},
        {"write-ahead-table", true, false},
        {NULL},
    };
    twopc_args_t a;
    if (!twopc_args_parse("pg", argc, argv, spec, &a))
        return TWOPC_EXIT_USAGE;
    if (twopc_flag(&a, "help") || a.npos == 0) {
        fputs(pg_help, a.npos ? stdout : stderr);
        bool help = twopc_flag(&a, "help");
        twopc_args_free(&a);
        return help ? TWOPC_EXIT_OK : TWOPC_EXIT_USAGE;
    }
    const char *sub = a.pos[0];
    bool do_drop = strcmp(sub, "drop-staged") == 0;
    bool do_resolve = strcmp(sub, "resolve") == 0;
    if (a.npos != 1 || (!do_resolve && !do_drop && strcmp(sub, "transactions") != 0)) {
        twopc_args_free(&a);
        return twopc_usage_error(
            "pg", "unknown subcommand \"%s\" (transactions, resolve, drop-staged)", sub);
    }
    const char *cmd = do_drop ? "pg drop-staged" : do_resolve ? "pg resolve" : "pg transactions";
    if (twopc_arg(&a, "gid") && !do_drop) {
        twopc_args_free(&a);
        return twopc_usage_error(cmd, "--gid belongs to drop-staged");
    }
    const char *conninfo = twopc_arg_required(&a, cmd, "conninfo");
    const char *dir = twopc_arg(&a, "checkpoint-dir");
    if (!conninfo || ((do_resolve || do_drop) && !twopc_arg_required(&a, cmd, "checkpoint-dir"))) {
        twopc_args_free(&a);
        return TWOPC_EXIT_USAGE;
    }
    const char *marker_table = twopc_arg(&a, "marker-table");
    bool json = twopc_flag(&a, "json"), check = twopc_flag(&a, "check");
    bool dry = twopc_flag(&a, "dry-run");

    int rc = TWOPC_EXIT_OK;
    tpc_error_t *err = NULL;
    twopc_folder_t folder = {0};
    pg_view_t v = {0};
    tpc_dir_lease_t *lease = NULL; /* resolve changes what a restart finds: no job may run */
    if (dir && (do_resolve || do_drop) && !dry && !(lease = twopc_lease(cmd, dir, &rc))) {
        twopc_args_free(&a);
        return rc;
    }
    if (dir) {
        err = twopc_folder_read(dir, false, &folder);
        if (!err)
            err = twopc_folder_refusal(&folder);
        if (!err && folder.restore_index >= 0) {
            v.ckpt = &folder.files[folder.restore_index];
            if (!v.ckpt->valid)
                err = tpc_error_hint(
                    tpc_error_new(TPC_ERR_CORRUPT, 0,
                                  "checkpoint %" PRIu64
                                  ", the newest completed one, is damaged: %s",
                                  v.ckpt->id, v.ckpt->error),
                    "without it no one can tell which prepared transactions were promised; "
                    "restore the file from a backup");
        }
    }
    for (size_t i = 0; twopc_arg_nth(&a, "prefix", i); i++) {
        v.prefixes = realloc(v.prefixes, (v.nprefixes + 1) * sizeof *v.prefixes);
        v.prefixes[v.nprefixes++] = strdup(twopc_arg_nth(&a, "prefix", i));
    }
    /* Without --prefix, resolve and drop-staged take the prefixes of the checkpoint's own gids:
     * they must never touch the transactions of other programs. */
    bool changes = do_resolve || do_drop;
    for (size_t i = 0; !err && changes && !twopc_arg(&a, "prefix") && v.ckpt && i < v.ckpt->ntxns;
         i++) {
        char p[TPC_PG_GID_MAX + 1], gid[TPC_PG_GID_MAX + 1];
        if (!gid_of(&v.ckpt->txns[i], gid, sizeof gid) || !gid_prefix(gid, p, sizeof p) ||
            (v.nprefixes && matches(&v, gid)))
            continue;
        v.prefixes = realloc(v.prefixes, (v.nprefixes + 1) * sizeof *v.prefixes);
        v.prefixes[v.nprefixes++] = strdup(p);
    }
    if (!err && changes && !v.nprefixes)
        err = tpc_error_hint(tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                                           "no gid prefix: the checkpoint names no PostgreSQL "
                                           "transaction"),
                             "give the sink's pg.gid-prefix (default <job>.<sink>) with --prefix");
    if (!err) {
        v.conn = PQconnectdb(conninfo);
        if (PQstatus(v.conn) != CONNECTION_OK)
            err = tpc_error_hint(pg_error(v.conn, "connect", conninfo),
                                 "check --conninfo (a libpq connection string or URI)");
    }
    v.staging = twopc_arg(&a, "write-ahead-table");
    if (!v.staging)
        v.staging = "twopc_write_ahead";
    if (!err && !do_drop)
        err = load(&v, conninfo, marker_table ? marker_table : "twopc_markers", dir != NULL);
    if (!err)
        err = load_staged(&v, conninfo, dir != NULL);
    if (!err && do_drop)
        err = check_named(&v, &a);
    char *done = NULL, *staged_done = NULL;
    if (!err && do_resolve && !dry) {
        done = calloc(v.nitems + 1, 1);
        err = resolve(&v, conninfo, done);
    }
    if (!err && do_drop && !dry) {
        staged_done = calloc(v.nstaged + 1, 1);
        err = drop_staged(&v, &a, conninfo, staged_done);
    }
    if (v.conn && (v.nitems || v.nstaged || !err))
        print_items(&v, json, !do_drop, done, staged_done);
    if (err) {
        rc = twopc_fail(cmd, err);
    } else if (check) {
        for (size_t i = 0; i < v.nitems; i++)
            if (!v.items[i].marker)
                rc = TWOPC_EXIT_PENDING;
        if (v.nstaged)
            rc = TWOPC_EXIT_PENDING;
    }
    free(done);
    free(staged_done);
    free(v.staged);
    free(v.staging_q);
    PQfinish(v.conn);
    free(v.items);
    for (size_t i = 0; i < v.nprefixes; i++)
        free(v.prefixes[i]);
    free(v.prefixes);
    twopc_folder_free(&folder);
    twopc_args_free(&a);
    tpc_checkpoint_dir_release(lease);
    return rc;
}
