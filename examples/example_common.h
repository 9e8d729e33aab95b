/*
 * What exactly_once_pipeline and keyed_totals share besides Kafka (example_kafka.h): the options
 * they both take, the pacing of --rate, the job settings, the PostgreSQL table and sink, and the
 * exit status. Each program keeps its own job graph, records, output and option checks; these
 * helpers only say once what is the same in both.
 */
#ifndef EXAMPLE_COMMON_H
#define EXAMPLE_COMMON_H

#include <tpc_pg.h>
#include <tpc_props.h>
#include <tpc_runtime.h>

#include <getopt.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Seconds on the monotonic clock. */
static inline double ex_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- options both programs take ------------------------------------------------------------ */

/* The options with the same name and meaning in both programs. */
typedef struct {
    const char *bootstrap, *pg, *name, *ckpt_dir, *restore_mode; /* restore_mode NULL: auto */
    const char *config_path;                                     /* --config; NULL: none */
    tpc_config_t *config; /* --config and the TWOPC_ environment (ex_config_load) */
    char ckpt_buf[512];
    bool ckpt_given, interval_given; /* on the command line, which wins over the configuration */
    int parallelism, interval_ms;
    int source_par, pg_par, kafka_par; /* 0: --parallelism */
    uint64_t records;
    double rate; /* 0: unlimited */
    bool fill;
} ex_options_t;

/* The getopt_long entries of ex_options_t, to put first in a program's own table; their values are
 * the letters ex_option() takes, which a program's own entries must not use. */
/* clang-format off */
#define EX_LONGOPTS                                                                                \
    {"bootstrap", required_argument, 0, 'b'},                                                      \
    {"pg", required_argument, 0, 'g'},                                                             \
    {"name", required_argument, 0, 'n'},                                                           \
    {"checkpoint-dir", required_argument, 0, 'c'},                                                 \
    {"parallelism", required_argument, 0, 'p'},                                                    \
    {"interval", required_argument, 0, 'i'},                                                       \
    {"records", required_argument, 0, 'r'},                                                        \
    {"rate", required_argument, 0, 'R'},                                                           \
    {"fill", no_argument, 0, 'F'},                                                                 \
    {"restore-mode", required_argument, 0, 'M'},                                                   \
    {"source-parallelism", required_argument, 0, 'S'},                                             \
    {"pg-parallelism", required_argument, 0, 'G'},                                                 \
    {"kafka-parallelism", required_argument, 0, 'K'},                                             \
    {"config", required_argument, 0, 'C'}
/* clang-format on */

/* The defaults: servers from $TWOPC_KAFKA_BOOTSTRAP and $TWOPC_PG_CONNINFO, job @name, parallelism
 * 2, a checkpoint every 500 ms, @records records for --fill. */
static inline ex_options_t ex_options_defaults(const char *name, uint64_t records)
{
    return (ex_options_t){.bootstrap = getenv("TWOPC_KAFKA_BOOTSTRAP"),
                          .pg = getenv("TWOPC_PG_CONNINFO"),
                          .name = name,
                          .parallelism = 2,
                          .interval_ms = 500,
                          .records = records};
}

/* Take getopt_long's answer @c with @arg into @o when it is one of EX_LONGOPTS; false when not. */
static inline bool ex_option(ex_options_t *o, int c, char *arg)
{
    switch (c) {
    case 'b':
        o->bootstrap = arg;
        break;
    case 'g':
        o->pg = arg;
        break;
    case 'n':
        o->name = arg;
        break;
    case 'c':
        o->ckpt_dir = arg;
        o->ckpt_given = true;
        break;
    case 'p':
        o->parallelism = atoi(arg);
        break;
    case 'i':
        o->interval_ms = atoi(arg);
        o->interval_given = true;
        break;
    case 'r':
        o->records = strtoull(arg, NULL, 10);
        break;
    case 'R':
        o->rate = atof(arg);
        break;
    case 'F':
        o->fill = true;
        break;
    case 'M':
        o->restore_mode = arg;
        break;
    case 'S':
        o->source_par = atoi(arg);
        break;
    case 'G':
        o->pg_par = atoi(arg);
        break;
    case 'K':
        o->kafka_par = atoi(arg);
        break;
    case 'C':
        o->config_path = arg;
        break;
    default:
        return false;
    }
    return true;
}

/* Write "<name><suffix>" into @buf (topic and directory names) and return @buf. */
static inline char *ex_name(char *buf, size_t size, const char *name, const char *suffix)
{
    snprintf(buf, size, "%s%s", name, suffix);
    return buf;
}

/* The same for a table: '-' and '.' of the job name become '_', so it needs no quoting. */
static inline char *ex_table_name(char *buf, size_t size, const char *name, const char *suffix)
{
    for (char *p = ex_name(buf, size, name, suffix); *p; p++)
        if (*p == '-' || *p == '.')
            *p = '_';
    return buf;
}

/* The checkpoint directory: --checkpoint-dir, else "<name>.checkpoints". */
static inline void ex_default_checkpoint_dir(ex_options_t *o)
{
    if (!o->ckpt_dir)
        o->ckpt_dir = ex_name(o->ckpt_buf, sizeof o->ckpt_buf, o->name, ".checkpoints");
}

/* ---- --rate: an operator that sleeps, so that the sources wait through backpressure -------- */

typedef struct {
    double rate, started; /* records a second for this subtask; since when */
    uint64_t passed;
} ex_pace_t;

/* For an operator's open: *@self = a pace for one subtask of @ctx's vertex at its share of
 * @total_rate records a second (all subtasks together; 0: no pacing). free() it in close. */
static inline tpc_error_t *ex_pace_new(const tpc_ctx_t *ctx, double total_rate, void **self)
{
    ex_pace_t *pace = malloc(sizeof *pace);
    if (!pace)
        return tpc_error_new(TPC_ERR_NOMEM, 0, "out of memory");
    *pace = (ex_pace_t){.rate = total_rate / tpc_ctx_parallelism(ctx), .started = ex_now_s()};
    *self = pace;
    return NULL;
}

/* After the operator passed on @n records: sleep until the subtask is back at its rate. After a
 * stall (a restart, a slow checkpoint) it goes on at the rate instead of catching up. */
static inline void ex_pace(ex_pace_t *pace, const tpc_ctx_t *ctx, size_t n)
{
    pace->passed += n;
    if (pace->rate <= 0)
        return;
    double now = ex_now_s(), ahead = (double)pace->passed / pace->rate - (now - pace->started);
    if (ahead > 0 && !tpc_ctx_is_canceled(ctx))
        usleep((useconds_t)(ahead * 1e6));
    else if (ahead < -0.2)
        pace->started = now - (double)pace->passed / pace->rate - 0.2;
}

/* ---- the job ------------------------------------------------------------------------------- */

/* Set what both jobs want: checkpoints in o->ckpt_dir every o->interval_ms, up to 20 restarts half
 * a second apart and, with --rate, small channels and batches (a paced job's barriers then wait
 * behind fewer records); then the job's keys of the configuration file and the environment over
 * these, and the options given on the command line (--checkpoint-dir, --interval, --restore-mode)
 * over everything. */
static inline tpc_error_t *ex_job_configure(tpc_job_t *job, const ex_options_t *o)
{
    char interval[32];
    snprintf(interval, sizeof interval, "%d", o->interval_ms);
    tpc_error_t *err = tpc_job_set(job, "checkpoint.dir", o->ckpt_dir);
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", interval);
    if (!err)
        err = tpc_job_set(job, "restart.attempts", "20");
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "500");
    if (!err && o->rate > 0)
        err = tpc_job_set(job, "channel.capacity", "2");
    if (!err && o->rate > 0)
        err = tpc_job_set(job, "batch.size", "64");
    if (!err)
        err = tpc_job_configure(job, o->config);
    if (!err && o->ckpt_given)
        err = tpc_job_set(job, "checkpoint.dir", o->ckpt_dir);
    if (!err && o->interval_given)
        err = tpc_job_set(job, "checkpoint.interval.ms", interval);
    if (!err && o->restore_mode)
        err = tpc_job_set(job, "restore.mode", o->restore_mode);
    return err;
}

/* Report a failed run on stderr as "<program>: [refused: ]<code>: <message>" (and "hint: ..."), and
 * return the exit status: 3 when the library reported lost data, 4 when it refused to restore (a
 * damaged or missing checkpoint), 1 otherwise. */
static inline int ex_failure(const char *program, const tpc_error_t *err)
{
    const char *hint = tpc_error_hint_text(err);
    tpc_err_t code = tpc_error_code(err);
    bool refused = code == TPC_ERR_CORRUPT || code == TPC_ERR_NOT_FOUND;
    fprintf(stderr, "%s: %s%s: %s%s%s\n", program, refused ? "refused: " : "", tpc_err_name(code),
            tpc_error_message(err), hint ? "\nhint: " : "", hint ? hint : "");
    return code == TPC_ERR_DATA_LOSS ? 3 : refused ? 4 : 1;
}

/* ---- --config FILE and the environment ----------------------------------------------------- */

/* Keys of the examples' components that the program sets itself: it creates the table and the
 * topics on those servers, under those names, and its encoder fills those columns. */
static const char *const ex_program_keys[][3] = {
    {"postgres", "pg.conninfo", "--pg (or TWOPC_PG_CONNINFO)"},
    {"postgres", "pg.table", "--name"},
    {"postgres", "pg.columns", "the program"},
    {"postgres", "pg.key-columns", "the program"},
    {"kafka", "topic", "--name"},
    {"kafka", "kafka.bootstrap.servers", "--bootstrap (or TWOPC_KAFKA_BOOTSTRAP)"},
    {"source", "kafka.bootstrap.servers", "--bootstrap (or TWOPC_KAFKA_BOOTSTRAP)"},
};

/* Read --config FILE (when given) and the TWOPC_ environment into o->config: the job's keys and
 * those of the vertices "source", "postgres" and "kafka" (docs/examples.md). The checkpoint
 * directory and interval it names become o's unless the command line gave them. False after
 * saying why on stderr. */
static inline bool ex_config_load(const char *program, ex_options_t *o)
{
    o->config = tpc_config_new();
    tpc_error_t *err = o->config ? NULL : tpc_error_nomem();
    if (!err && o->config_path)
        err = tpc_config_read_file(o->config, o->config_path);
    if (!err)
        err = tpc_config_read_env(o->config, NULL);
    for (size_t i = 0; !err && i < sizeof ex_program_keys / sizeof *ex_program_keys; i++) {
        const char *const *k = ex_program_keys[i], *origin;
        if (tpc_config_get(o->config, k[0], k[1], &origin))
            err = tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                               "%s: \"%s\" of [%s] is set by the program", origin,
                                               k[1], k[0]),
                                 "remove it from the configuration; give it with %s", k[2]);
    }
    const char *v;
    if (!err && !o->interval_given &&
        (v = tpc_config_get(o->config, NULL, "checkpoint.interval.ms", NULL)))
        o->interval_ms = atoi(v);
    if (!err && !o->ckpt_given && (v = tpc_config_get(o->config, NULL, "checkpoint.dir", NULL)))
        o->ckpt_dir = v;
    if (!err)
        return true;
    ex_failure(program, err);
    tpc_error_destroy(err);
    tpc_config_destroy(o->config);
    o->config = NULL;
    return false;
}

/* ---- PostgreSQL ---------------------------------------------------------------------------- */

/* CREATE TABLE IF NOT EXISTS @table (@columns); errors go to stderr prefixed with @program. */
static inline bool ex_create_table(const char *program, const char *conninfo, const char *table,
                                   const char *columns)
{
    PGconn *pg = PQconnectdb(conninfo);
    bool ok = PQstatus(pg) == CONNECTION_OK;
    if (ok) {
        char *ident = PQescapeIdentifier(pg, table, strlen(table));
        char sql[1024];
        snprintf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS %s (%s)", ident ? ident : "\"\"",
                 columns);
        PQfreemem(ident);
        PQclear(PQexec(pg, "SET client_min_messages = warning")); /* no "already exists" */
        PGresult *res = PQexec(pg, sql);
        ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
    }
    if (!ok)
        fprintf(stderr, "%s: could not create table \"%s\": %s", program, table,
                PQerrorMessage(pg));
    PQfinish(pg);
    return ok;
}

/* A PostgreSQL sink into @table's @columns in @mode ("copy", "upsert", ...), its prepared
 * transactions' gids starting with the table's name, with a minute to connect and two to retry
 * a commit; then the keys of [postgres] in @config over these. On an error *sink may still need
 * tpc_txn_sink_destroy. */
static inline tpc_error_t *ex_pg_sink_new(const char *conninfo, const char *table,
                                          const char *columns, const char *mode,
                                          tpc_config_t *config, tpc_txn_sink_t **sink)
{
    tpc_error_t *err = tpc_pg_sink_new(sink);
    const char *kv[][2] = {{"pg.conninfo", conninfo},
                           {"pg.table", table},
                           {"pg.columns", columns},
                           {"pg.gid-prefix", table},
                           {"pg.mode", mode},
                           {"commit.retry.deadline.ms", "120000"},
                           {"pg.connect.deadline.ms", "60000"}};
    for (size_t i = 0; !err && i < sizeof kv / sizeof kv[0]; i++)
        err = tpc_txn_sink_set(*sink, kv[i][0], kv[i][1]);
    if (!err)
        err = tpc_txn_sink_configure(*sink, config, "postgres");
    return err;
}

#endif
