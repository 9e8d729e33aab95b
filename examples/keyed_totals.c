/*
 * A running total per user, kept in keyed state, into PostgreSQL and Kafka, exactly once:
 *
 *   Kafka source ──forward──> parse ──hash(user)──> totals ──hash──> PostgreSQL sink (upsert of
 *   ("user,amount",                    (keyed value      │           (user_id, n, total))
 *    offsets in checkpoints)            state "total")   └──hash──> Kafka sink ("n,total" per
 *                                                                    purchase, key = user)
 *
 * The input (keyed_totals_records.h) is purchases "user-<u>,<amount>", keyed by user. `parse` turns
 * each into a record keyed by the user; `totals`, behind a hash edge, keeps per user the number of
 * purchases and their sum in keyed state and emits "<n>,<total>" after each one. The keyed state
 * follows its users through restores at any parallelism (key groups): run the job again with other
 * --source-parallelism / --totals-parallelism / --pg-parallelism / --kafka-parallelism and every
 * total goes on from where the last completed checkpoint left it. The PostgreSQL table ends up with
 * each user's final total; the output topic holds, per user and in order, every intermediate total
 * once (for read_committed readers). verify_totals checks both.
 *
 *   keyed_totals --fill [options]     write purchases 0 .. N-1 into the input topic
 *   keyed_totals [options]            run the job (bounded: to the end the input had at the start)
 *     --bootstrap HOST:PORT  Kafka brokers (default: $TWOPC_KAFKA_BOOTSTRAP)
 *     --pg CONNINFO          PostgreSQL connection (default: $TWOPC_PG_CONNINFO)
 *     --name NAME            job name; topics NAME-in and NAME-out, table NAME_totals
 *                            (default twopc-totals)
 *     --checkpoint-dir DIR   where checkpoints live (default NAME.checkpoints)
 *     --parallelism P        partitions per topic and default parallelism (default 2, at most 8)
 *     --source-parallelism P / --totals-parallelism P / --pg-parallelism P / --kafka-parallelism P
 *     --restore-mode M       auto, fresh or required
 *     --interval MS          checkpoint interval (default 500)
 *     --records N            purchases written by --fill (default 20000)
 *     --users U              distinct users (default 300)
 *     --rate R               purchases per second through `parse`, all subtasks together
 *                            (default 0: unlimited)
 *
 * Exit status as exactly_once_pipeline: 0 finished, 3 lost data reported, 4 refused to restore
 * (a "refused:" line says why), 1 other errors, 2 bad options.
 */
#include "example_kafka.h"
#include "keyed_totals_records.h"

#include <tpc_kafka.h>
#include <tpc_pg.h>

#include <getopt.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROGRAM "keyed_totals"

typedef struct {
    const char *bootstrap, *pg, *name, *ckpt_dir, *restore_mode;
    char input[256], topic[256], table[256], ckpt_buf[512];
    int parallelism, interval_ms, source_par, totals_par, pg_par, kafka_par;
    uint64_t records;
    uint32_t users;
    double rate;
    bool fill;
} options_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- parse: "user,amount" -> key user, value amount (8 bytes); paces the job with --rate ----- */

typedef struct {
    double rate, started;
    uint64_t passed;
} parse_t;

static tpc_error_t *parse_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    const options_t *opt = arg;
    parse_t *p = calloc(1, sizeof *p);
    if (!p)
        return tpc_error_new(TPC_ERR_NOMEM, 0, "out of memory");
    p->rate = opt->rate / tpc_ctx_parallelism(ctx);
    p->started = now_s();
    *self = p;
    return NULL;
}

static tpc_error_t *parse_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    parse_t *p = self;
    for (size_t n = 0; n < tpc_batch_count(batch); n++) {
        tpc_record_t in;
        tpc_batch_get(batch, n, &in);
        const char *v = in.value, *comma = memchr(v, ',', in.value_len);
        uint64_t amount;
        if (!comma || comma == v ||
            !eo_parse_number(comma + 1, in.value_len - (size_t)(comma + 1 - v), &amount))
            return tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL,
                                 "input value \"%.*s\" is not \"user,amount\"", (int)in.value_len,
                                 v);
        tpc_record_t out = {.key = v,
                            .key_len = (size_t)(comma - v),
                            .value = &amount,
                            .value_len = sizeof amount,
                            .timestamp = in.timestamp};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return NULL; /* canceled */
    }
    p->passed += tpc_batch_count(batch);
    if (p->rate > 0) {
        double now = now_s(), ahead = (double)p->passed / p->rate - (now - p->started);
        if (ahead > 0 && !tpc_ctx_is_canceled(ctx))
            usleep((useconds_t)(ahead * 1e6));
        else if (ahead < -0.2) /* after a stall, go on at the rate instead of catching up */
            p->started = now - (double)p->passed / p->rate - 0.2;
    }
    return NULL;
}

static void parse_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx, free(self);
}

static const tpc_operator_ops_t parse_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = parse_open,
    .process = parse_process,
    .close = parse_close,
};

/* ---- totals: keyed state "total" = {purchases, sum} per user -------------------------------- */

typedef struct {
    uint64_t n, total;
} total_t;

static tpc_error_t *totals_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    (void)ctx, (void)arg;
    *self = NULL;
    return NULL;
}

static tpc_error_t *totals_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    (void)self;
    for (size_t i = 0; i < tpc_batch_count(batch); i++) {
        tpc_record_t in;
        tpc_batch_get(batch, i, &in);
        uint64_t amount;
        memcpy(&amount, in.value, sizeof amount);
        total_t t = {0, 0};
        const void *v;
        size_t len;
        tpc_error_t *err = tpc_keyed_get(ctx, "total", in.key, in.key_len, &v, &len);
        if (err)
            return err;
        if (v && len == sizeof t) /* absent until the user's first purchase */
            memcpy(&t, v, sizeof t);
        t.n++;
        t.total += amount;
        if ((err = tpc_keyed_put(ctx, "total", in.key, in.key_len, &t, sizeof t)))
            return err;
        char value[KT_VALUE_MAX];
        tpc_record_t out = {.key = in.key,
                            .key_len = in.key_len,
                            .value = value,
                            .value_len = (size_t)kt_output_value(t.n, t.total, value),
                            .timestamp = in.timestamp};
        if (tpc_emit(ctx, &out) != TPC_OK)
            return NULL; /* canceled */
    }
    return NULL;
}

static const tpc_operator_ops_t totals_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = totals_open,
    .process = totals_process,
};

/* ---- PostgreSQL rows: (user_id text primary key, n bigint, total bigint) -------------------- */

static tpc_error_t *encode_row(void *opaque, const tpc_record_t *rec, tpc_pg_row_t *row)
{
    (void)opaque;
    uint64_t n, total;
    if (!kt_parse_pair(rec->value, rec->value_len, &n, &total))
        return tpc_error_new(TPC_ERR_CORRUPT, 0, "output value is not \"n,total\"");
    tpc_pg_row_text(row, rec->key, rec->key_len);
    tpc_pg_row_int8(row, (int64_t)n);
    tpc_pg_row_int8(row, (int64_t)total);
    return NULL;
}

static bool create_table(const options_t *opt)
{
    PGconn *pg = PQconnectdb(opt->pg);
    bool ok = PQstatus(pg) == CONNECTION_OK;
    if (ok) {
        char *ident = PQescapeIdentifier(pg, opt->table, strlen(opt->table));
        char sql[1024];
        snprintf(sql, sizeof sql,
                 "CREATE TABLE IF NOT EXISTS %s (user_id text PRIMARY KEY, n bigint NOT NULL, "
                 "total bigint NOT NULL)",
                 ident ? ident : "\"\"");
        PQfreemem(ident);
        PQclear(PQexec(pg, "SET client_min_messages = warning")); /* no "already exists" */
        PGresult *res = PQexec(pg, sql);
        ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
    }
    if (!ok)
        fprintf(stderr, PROGRAM ": could not create table \"%s\": %s", opt->table,
                PQerrorMessage(pg));
    PQfinish(pg);
    return ok;
}

/* ---- --fill: purchases 0 .. N-1, keyed by user, in order per partition --------------------- */

static int fill_input(const options_t *opt)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* Idempotence keeps each partition in order and free of duplicates across retries. */
    const char *kv[][2] = {{"bootstrap.servers", opt->bootstrap},
                           {"enable.idempotence", "true"},
                           {"linger.ms", "20"},
                           {"partitioner", "murmur2_random"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        rd_kafka_conf_set(conf, kv[i][0], kv[i][1], errstr, sizeof errstr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, PROGRAM ": %s\n", errstr);
        return 1;
    }
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    for (uint64_t i = 0; i < opt->records && !err; i++) {
        char user[KT_USER_MAX], value[KT_VALUE_MAX];
        int ul = kt_user(i, opt->users, user), vl = kt_input_value(i, opt->users, value);
        while ((err = rd_kafka_producev(
                    rk, RD_KAFKA_V_TOPIC(opt->input), RD_KAFKA_V_KEY(user, (size_t)ul),
                    RD_KAFKA_V_VALUE(value, (size_t)vl), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 100);
        rd_kafka_poll(rk, 0);
    }
    if (!err)
        err = rd_kafka_flush(rk, 60000);
    /* A message that failed after its retries makes the idempotent producer fatal. */
    if (!err)
        err = rd_kafka_fatal_error(rk, errstr, sizeof errstr);
    rd_kafka_destroy(rk);
    if (err) {
        fprintf(stderr, PROGRAM ": filling \"%s\" failed: %s\n", opt->input, rd_kafka_err2str(err));
        return 1;
    }
    fprintf(stderr, PROGRAM ": wrote purchases 0 .. %llu of %u users into \"%s\"\n",
            (unsigned long long)opt->records - 1, opt->users, opt->input);
    return 0;
}

/* ---- the job -------------------------------------------------------------------------------- */

static void log_line(void *opaque, tpc_log_level_t level, const char *message)
{
    (void)opaque;
    static const char *names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "%s: %s\n", names[level], message);
}

static tpc_error_t *build_job(const options_t *opt, tpc_job_t *job, tpc_kafka_source_t **source,
                              tpc_txn_sink_t **pg_sink, tpc_txn_sink_t **kafka_sink)
{
    char interval[32];
    int src, parse, totals, to_pg, to_kafka;
    snprintf(interval, sizeof interval, "%d", opt->interval_ms);
    const char *job_kv[][2] = {{"checkpoint.dir", opt->ckpt_dir},
                               {"checkpoint.interval.ms", interval},
                               {"restart.attempts", "20"},
                               {"restart.delay.ms", "500"},
                               {"restore.mode", opt->restore_mode ? opt->restore_mode : "auto"},
                               /* small buffers: a paced job's barriers wait behind fewer records */
                               {"channel.capacity", opt->rate > 0 ? "2" : "16"},
                               {"batch.size", opt->rate > 0 ? "64" : "256"}};
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < sizeof job_kv / sizeof job_kv[0]; i++)
        err = tpc_job_set(job, job_kv[i][0], job_kv[i][1]);

    if (!err)
        err = tpc_kafka_source_new(opt->bootstrap, opt->input, source);
    if (!err)
        err = tpc_kafka_source_set(*source, "bounded", "true");
    if (!err)
        err = tpc_kafka_source_set(*source, "open.timeout.ms", "60000");
    if (!err)
        err = tpc_kafka_source_add_to_job(*source, job, "source", opt->source_par, &src);
    if (!err)
        err = tpc_job_add_vertex(job, "parse", opt->source_par, &parse_ops, (void *)opt, &parse);
    if (!err)
        err = tpc_job_connect(job, src, parse, TPC_EDGE_FORWARD);
    /* Keyed state needs every input of its vertex to be a hash edge. */
    if (!err)
        err = tpc_job_add_vertex(job, "totals", opt->totals_par, &totals_ops, NULL, &totals);
    if (!err)
        err = tpc_job_connect(job, parse, totals, TPC_EDGE_HASH);

    if (!err)
        err = tpc_pg_sink_new(pg_sink);
    const char *pg_kv[][2] = {{"pg.conninfo", opt->pg},
                              {"pg.table", opt->table},
                              {"pg.columns", "user_id,n,total"},
                              {"pg.mode", "upsert"},
                              {"pg.key-columns", "user_id"},
                              {"pg.gid-prefix", opt->table},
                              {"commit.retry.deadline.ms", "120000"},
                              {"pg.connect.deadline.ms", "60000"}};
    for (size_t i = 0; !err && i < sizeof pg_kv / sizeof pg_kv[0]; i++)
        err = tpc_txn_sink_set(*pg_sink, pg_kv[i][0], pg_kv[i][1]);
    if (!err)
        err = tpc_pg_sink_set_encoder(*pg_sink, encode_row, NULL);
    if (!err)
        err = tpc_txn_sink_add_to_job(*pg_sink, job, "postgres", opt->pg_par, &to_pg);
    if (!err)
        err = tpc_job_connect(job, totals, to_pg, TPC_EDGE_HASH);

    if (!err)
        err = tpc_kafka_sink_new(opt->bootstrap, opt->topic, kafka_sink);
    const char *kafka_kv[][2] = {{"transactional.id.prefix", opt->topic},
                                 {"kafka.transaction.timeout.ms", "60000"},
                                 {"transaction.timeout.ms", "60000"},
                                 {"checkpoint.interval.ms", interval},
                                 {"kafka.linger.ms", "5"},
                                 {"open.timeout.ms", "60000"},
                                 {"recovery.timeout.ms", "120000"},
                                 {"commit.retry.deadline.ms", "120000"}};
    for (size_t i = 0; !err && i < sizeof kafka_kv / sizeof kafka_kv[0]; i++)
        err = tpc_txn_sink_set(*kafka_sink, kafka_kv[i][0], kafka_kv[i][1]);
    if (!err)
        err = tpc_txn_sink_add_to_job(*kafka_sink, job, "kafka", opt->kafka_par, &to_kafka);
    if (!err)
        err = tpc_job_connect(job, totals, to_kafka, TPC_EDGE_HASH);
    return err;
}

static int usage(const char *msg)
{
    fprintf(stderr,
            PROGRAM ": %s\n"
                    "usage: " PROGRAM " [--fill] [--bootstrap HOST:PORT] [--pg CONNINFO] [--name "
                    "NAME]\n"
                    "         [--checkpoint-dir DIR] [--parallelism P] [--interval MS]\n"
                    "         [--records N] [--users U] [--rate R] [--restore-mode M]\n"
                    "         [--source-parallelism P] [--totals-parallelism P]\n"
                    "         [--pg-parallelism P] [--kafka-parallelism P]\n",
            msg);
    return 2;
}

static int parse_options(int argc, char **argv, options_t *opt)
{
    static const struct option longopts[] = {{"bootstrap", required_argument, 0, 'b'},
                                             {"pg", required_argument, 0, 'g'},
                                             {"name", required_argument, 0, 'n'},
                                             {"checkpoint-dir", required_argument, 0, 'c'},
                                             {"parallelism", required_argument, 0, 'p'},
                                             {"interval", required_argument, 0, 'i'},
                                             {"records", required_argument, 0, 'r'},
                                             {"users", required_argument, 0, 'u'},
                                             {"rate", required_argument, 0, 'R'},
                                             {"fill", no_argument, 0, 'F'},
                                             {"restore-mode", required_argument, 0, 'M'},
                                             {"source-parallelism", required_argument, 0, 'S'},
                                             {"totals-parallelism", required_argument, 0, 'T'},
                                             {"pg-parallelism", required_argument, 0, 'G'},
                                             {"kafka-parallelism", required_argument, 0, 'K'},
                                             {0, 0, 0, 0}};
    *opt = (options_t){.bootstrap = getenv("TWOPC_KAFKA_BOOTSTRAP"),
                       .pg = getenv("TWOPC_PG_CONNINFO"),
                       .name = "twopc-totals",
                       .parallelism = 2,
                       .interval_ms = 500,
                       .records = 20000,
                       .users = KT_DEFAULT_USERS};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            opt->bootstrap = optarg;
            break;
        case 'g':
            opt->pg = optarg;
            break;
        case 'n':
            opt->name = optarg;
            break;
        case 'c':
            opt->ckpt_dir = optarg;
            break;
        case 'p':
            opt->parallelism = atoi(optarg);
            break;
        case 'i':
            opt->interval_ms = atoi(optarg);
            break;
        case 'r':
            opt->records = strtoull(optarg, NULL, 10);
            break;
        case 'u':
            opt->users = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'R':
            opt->rate = atof(optarg);
            break;
        case 'F':
            opt->fill = true;
            break;
        case 'M':
            opt->restore_mode = optarg;
            break;
        case 'S':
            opt->source_par = atoi(optarg);
            break;
        case 'T':
            opt->totals_par = atoi(optarg);
            break;
        case 'G':
            opt->pg_par = atoi(optarg);
            break;
        case 'K':
            opt->kafka_par = atoi(optarg);
            break;
        default:
            return usage("unknown option");
        }
    }
    if (optind != argc)
        return usage("unexpected argument");
    if (!opt->bootstrap || !opt->pg)
        return usage("name the servers with --bootstrap and --pg (or TWOPC_KAFKA_BOOTSTRAP and "
                     "TWOPC_PG_CONNINFO)");
    if (opt->parallelism < 1 || opt->parallelism > 8 || opt->interval_ms < 10 || opt->users < 1 ||
        opt->records < 1)
        return usage("--parallelism must be 1 to 8, --interval at least 10, --users and "
                     "--records at least 1");
    int *pars[] = {&opt->source_par, &opt->totals_par, &opt->pg_par, &opt->kafka_par};
    for (int i = 0; i < 4; i++) {
        if (!*pars[i])
            *pars[i] = opt->parallelism;
        if (*pars[i] < 1 || *pars[i] > 8)
            return usage("every parallelism must be 1 to 8");
    }
    snprintf(opt->input, sizeof opt->input, "%s-in", opt->name);
    snprintf(opt->topic, sizeof opt->topic, "%s-out", opt->name);
    snprintf(opt->table, sizeof opt->table, "%s_totals", opt->name);
    for (char *p = opt->table; *p; p++)
        if (*p == '-' || *p == '.')
            *p = '_';
    if (!opt->ckpt_dir)
        opt->ckpt_dir = opt->ckpt_buf,
        snprintf(opt->ckpt_buf, sizeof opt->ckpt_buf, "%s.checkpoints", opt->name);
    return 0;
}

int main(int argc, char **argv)
{
    options_t opt;
    int rc = parse_options(argc, argv, &opt);
    if (rc)
        return rc;
    if (opt.fill)
        return ex_create_topic(PROGRAM, opt.bootstrap, opt.input, opt.parallelism)
                   ? fill_input(&opt)
                   : 1;
    if (!create_table(&opt) || !ex_create_topic(PROGRAM, opt.bootstrap, opt.topic, opt.parallelism))
        return 1;

    tpc_job_t *job = tpc_job_new(opt.name);
    tpc_kafka_source_t *source = NULL;
    tpc_txn_sink_t *pg_sink = NULL, *kafka_sink = NULL;
    tpc_job_set_logger(job, log_line, NULL, TPC_LOG_WARN);
    tpc_error_t *err = build_job(&opt, job, &source, &pg_sink, &kafka_sink);
    fprintf(stderr,
            PROGRAM ": parallelism source %d, totals %d, postgres %d, kafka %d; checkpoint every "
                    "%d ms\n",
            opt.source_par, opt.totals_par, opt.pg_par, opt.kafka_par, opt.interval_ms);
    if (!err)
        err = tpc_job_run(job, NULL);
    if (err) {
        const char *hint = tpc_error_hint_text(err);
        tpc_err_t code = tpc_error_code(err);
        bool refused = code == TPC_ERR_CORRUPT || code == TPC_ERR_NOT_FOUND;
        fprintf(stderr, PROGRAM ": %s%s: %s%s%s\n", refused ? "refused: " : "", tpc_err_name(code),
                tpc_error_message(err), hint ? "\nhint: " : "", hint ? hint : "");
        rc = code == TPC_ERR_DATA_LOSS ? 3 : refused ? 4 : 1;
    } else {
        fprintf(stderr, PROGRAM ": finished, everything committed\n");
    }
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(pg_sink);
    tpc_txn_sink_destroy(kafka_sink);
    tpc_kafka_source_destroy(source);
    tpc_error_destroy(err);
    return rc;
}
