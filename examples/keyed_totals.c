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
 *     --config FILE          keys of the job and of the vertices "source", "postgres" and "kafka",
 *                            as exactly_once_pipeline (docs/examples.md)
 *     --records N            purchases written by --fill (default 20000)
 *     --users U              distinct users (default 300)
 *     --rate R               purchases per second through `parse`, all subtasks together
 *                            (default 0: unlimited)
 *
 * Exit status as exactly_once_pipeline: 0 finished, 3 lost data reported, 4 refused to restore
 * (a "refused:" line says why), 1 other errors, 2 bad options.
 */
#include "example_common.h"
#include "example_kafka.h"
#include "keyed_totals_ops.h"

#define PROGRAM "keyed_totals"

typedef struct {
    ex_options_t common; /* the options exactly_once_pipeline takes as well */
    char input[256], topic[256], table[256];
    int totals_par;
    uint32_t users;
} options_t;

static bool create_table(const options_t *opt)
{
    return ex_create_table(PROGRAM, opt->common.pg, opt->table,
                           "user_id text PRIMARY KEY, n bigint NOT NULL, total bigint NOT NULL");
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
    const ex_options_t *o = &opt->common;
    int src, parse, totals, to_pg, to_kafka;
    tpc_error_t *err = ex_job_configure(job, o);

    if (!err)
        err = ex_kafka_source_new(o->bootstrap, opt->input, false, o->config, source);
    if (!err)
        err = tpc_kafka_source_add_to_job(*source, job, "source", o->source_par, &src);
    if (!err)
        err = tpc_job_add_vertex(job, "parse", o->source_par, &kt_parse_ops, (void *)&o->rate,
                                 &parse);
    if (!err)
        err = tpc_job_connect(job, src, parse, TPC_EDGE_FORWARD);
    /* Keyed state needs every input of its vertex to be a hash edge. */
    if (!err)
        err = tpc_job_add_vertex(job, "totals", opt->totals_par, &kt_totals_ops, NULL, &totals);
    if (!err)
        err = tpc_job_connect(job, parse, totals, TPC_EDGE_HASH);

    /* PostgreSQL: one row per user, updated in place (upsert on user_id). */
    if (!err)
        err = ex_pg_sink_new(o->pg, opt->table, "user_id,n,total", "upsert", o->config, pg_sink);
    if (!err)
        err = tpc_txn_sink_set(*pg_sink, "pg.key-columns", "user_id");
    if (!err)
        err = tpc_pg_sink_set_encoder(*pg_sink, kt_encode_row, NULL);
    if (!err)
        err = tpc_txn_sink_add_to_job(*pg_sink, job, "postgres", o->pg_par, &to_pg);
    if (!err)
        err = tpc_job_connect(job, totals, to_pg, TPC_EDGE_HASH);

    if (!err)
        err = ex_kafka_sink_new(o->bootstrap, opt->topic, o->config, kafka_sink);
    if (!err)
        err = tpc_txn_sink_add_to_job(*kafka_sink, job, "kafka", o->kafka_par, &to_kafka);
    if (!err)
        err = tpc_job_connect(job, totals, to_kafka, TPC_EDGE_HASH);
    if (!err)
        err = tpc_config_check_used(o->config);
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
                    "         [--pg-parallelism P] [--kafka-parallelism P] [--config FILE]\n",
            msg);
    return 2;
}

static int parse_options(int argc, char **argv, options_t *opt)
{
    static const struct option longopts[] = {EX_LONGOPTS,
                                             {"users", required_argument, 0, 'u'},
                                             {"totals-parallelism", required_argument, 0, 'T'},
                                             {0, 0, 0, 0}};
    *opt = (options_t){.common = ex_options_defaults("twopc-totals", 20000),
                       .users = KT_DEFAULT_USERS};
    ex_options_t *o = &opt->common;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'u')
            opt->users = (uint32_t)strtoul(optarg, NULL, 10);
        else if (c == 'T')
            opt->totals_par = atoi(optarg);
        else if (!ex_option(o, c, optarg))
            return usage("unknown option");
    }
    if (optind != argc)
        return usage("unexpected argument");
    if (!o->bootstrap || !o->pg)
        return usage("name the servers with --bootstrap and --pg (or TWOPC_KAFKA_BOOTSTRAP and "
                     "TWOPC_PG_CONNINFO)");
    if (o->parallelism < 1 || o->parallelism > 8 || o->interval_ms < 10 || opt->users < 1 ||
        o->records < 1)
        return usage("--parallelism must be 1 to 8, --interval at least 10, --users and "
                     "--records at least 1");
    int *pars[] = {&o->source_par, &opt->totals_par, &o->pg_par, &o->kafka_par};
    for (int i = 0; i < 4; i++) {
        if (!*pars[i])
            *pars[i] = o->parallelism;
        if (*pars[i] < 1 || *pars[i] > 8)
            return usage("every parallelism must be 1 to 8");
    }
    ex_name(opt->input, sizeof opt->input, o->name, "-in");
    ex_name(opt->topic, sizeof opt->topic, o->name, "-out");
    ex_table_name(opt->table, sizeof opt->table, o->name, "_totals");
    ex_default_checkpoint_dir(o);
    return 0;
}

int main(int argc, char **argv)
{
    options_t opt;
    int rc = parse_options(argc, argv, &opt);
    if (rc)
        return rc;
    const ex_options_t *o = &opt.common;
    if (o->fill)
        return ex_create_topic(PROGRAM, o->bootstrap, opt.input, o->parallelism)
                   ? kt_fill_input(PROGRAM, o, opt.input, opt.users)
                   : 1;
    if (!ex_config_load(PROGRAM, &opt.common))
        return 1;
    if (!create_table(&opt) || !ex_create_topic(PROGRAM, o->bootstrap, opt.topic, o->parallelism)) {
        tpc_config_destroy(opt.common.config);
        return 1;
    }

    tpc_job_t *job = tpc_job_new(o->name);
    tpc_kafka_source_t *source = NULL;
    tpc_txn_sink_t *pg_sink = NULL, *kafka_sink = NULL;
    tpc_job_set_logger(job, log_line, NULL, TPC_LOG_WARN);
    tpc_error_t *err = build_job(&opt, job, &source, &pg_sink, &kafka_sink);
    fprintf(stderr,
            PROGRAM ": parallelism source %d, totals %d, postgres %d, kafka %d; checkpoint every "
                    "%d ms\n",
            o->source_par, opt.totals_par, o->pg_par, o->kafka_par, o->interval_ms);
    if (!err)
        err = tpc_job_run(job, NULL);
    if (err)
        rc = ex_failure(PROGRAM, err);
    else
        fprintf(stderr, PROGRAM ": finished, everything committed\n");
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(pg_sink);
    tpc_txn_sink_destroy(kafka_sink);
    tpc_kafka_source_destroy(source);
    tpc_error_destroy(err);
    tpc_config_destroy(opt.common.config);
    return rc;
}
