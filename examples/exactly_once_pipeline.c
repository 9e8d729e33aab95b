/*
 * An exactly-once pipeline from Kafka into PostgreSQL and Kafka at once:
 *
 *   Kafka source ──forward──> transform ──hash(key)──> PostgreSQL sink (table; PREPARE TRANSACTION
 *   (input topic, offsets                │             per checkpoint, COMMIT PREPARED after it)
 *    in checkpoints)                     └─hash(key)──> Kafka sink (output topic; one transaction
 *                                                       per checkpoint per subtask)
 *
 * The input is deterministic: record i has key "key-<i mod keys>" and value "<i>"
 * (exactly_once_records.h), written into the input topic by `--fill`. The source reads it with
 * read_committed and keeps its offsets in each checkpoint, so after a crash the job replays exactly
 * what the last completed checkpoint did not cover. The transform turns value "<i>" into
 * "<i>:<hex of mix(i)>". Both sinks commit a checkpoint's records only once that checkpoint is
 * durable: whatever kills and restarts happen, each record ends up once in the table and once in
 * the output topic (for read_committed readers), and the records of one key reach the output topic
 * in order (one key: one input partition, one source subtask, one sink subtask, one output
 * partition). verify_output checks exactly that.
 *
 * Kill it with kill -9 at any moment and start it again with the same options: it resumes from its
 * checkpoint directory. A bounded run (the default) reads the input up to the end it had when the
 * job first started, and ends after the final checkpoint with everything committed; running it
 * again after that adds nothing. While it runs, a progress line on stderr shows records per
 * second, checkpoints, commits and pending transactions.
 *
 *   exactly_once_pipeline --fill [options]     write records 0 .. N-1 into the input topic
 *                                              (FIRST .. FIRST+N-1 with --first FIRST)
 *   exactly_once_pipeline [options]            run the job
 *     --bootstrap HOST:PORT  Kafka brokers (default: $TWOPC_KAFKA_BOOTSTRAP)
 *     --pg CONNINFO          PostgreSQL connection (default: $TWOPC_PG_CONNINFO)
 *     --sinks S              pg,kafka (default), pg or kafka: the sinks the job writes to; the
 *                            other one is left out of the job (and its server is not needed).
 *                            Keep it the same between runs on one checkpoint directory
 *     --name NAME            job name; topics NAME-in and NAME-out, table NAME_out
 *                            (default twopc-demo)
 *     --input T / --topic T / --table T        other names
 *     --checkpoint-dir DIR   where checkpoints live (default NAME.checkpoints)
 *     --pg-layout L          rows (default: a row (id, k, v) per record), changelog (one row per
 *                            key: each record upserts it, or deletes it when eo_is_delete(i);
 *                            pg.mode=changelog) or two-tables (each record also gives (id, k) to
 *                            table T_ids, committed with the first in one transaction). Keep it
 *                            the same between runs on one checkpoint directory
 *     --parallelism P        subtasks per vertex and partitions per topic (default 2, at most 8)
 *     --source-parallelism P / --pg-parallelism P / --kafka-parallelism P
 *                            subtasks of the source (and transform) and of each sink (default:
 *                            --parallelism); change them between runs to rescale
 *     --restore-mode M       auto, fresh (start over without state) or required
 *     --restore-fallback F   refuse (default) or at-least-once: what to do when the newest
 *                            completed checkpoint is damaged or missing
 *     --interval MS          checkpoint interval (default 500)
 *     --config FILE          keys of the job and of the vertices "source", "postgres" and "kafka"
 *                            (docs/examples.md); TWOPC_<KEY> and TWOPC_<VERTEX>__<KEY> variables
 *                            override it, options given here override both
 *     --records N            records to write with --fill (default 100000)
 *     --first FIRST          with --fill: the number of the first record (default 0), to add
 *                            input for a running --unbounded job; verify_output then wants
 *                            --records covering every record written
 *     --unbounded            keep reading new input for ever; stop with SIGINT
 *     --discovery-ms MS      unbounded: how often the source looks for new partitions (default:
 *                            the source's, 10 s)
 *     --grow-to F            with --fill: place record i in partition FNV-1a(key) mod F, and
 *                            write only the records of partitions below --parallelism (the ones
 *                            the topic is created with); with --grow too, first give the topic F
 *                            partitions, then write only the records of the partitions added. So
 *                            a fill, a growth while the job runs and a second fill write every
 *                            record once, each key in one partition, in order
 *     --keys K               distinct keys written by --fill (default 840)
 *     --rate R               records per second through the transform, all subtasks together
 *                            (default 0: unlimited), to watch a run or kill it half-way
 *     --progress MODE        tty (rewrite one line), lines (a line a second), off
 *                            (default: tty on a terminal, lines otherwise)
 *
 * Exit status: 0 when the job finished, or was stopped with SIGINT / SIGTERM (with a savepoint, or
 * without one when none came within the job's stop.timeout.ms: nothing is lost either way),
 * 3 when the library reported lost data, 4 when it refused to restore (a damaged or missing
 * checkpoint: the line starting "refused:" says which and what to do), 1 on any other error, 2 on
 * bad options.
 */
#include "example_common.h"
#include "example_kafka.h"
#include "exactly_once_records.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define PROGRAM "exactly_once_pipeline"

typedef struct {
    ex_options_t common; /* the options keyed_totals takes as well */
    const char *input, *topic, *table, *progress, *restore_fallback;
    char input_buf[256], topic_buf[256], table_buf[256];
    uint64_t first;
    uint32_t keys;
    bool unbounded, grow;
    bool to_pg, to_kafka;      /* --sinks */
    const char *pg_layout;     /* rows, changelog, two-tables */
    int grow_to, discovery_ms; /* 0: none, the source's default */
} options_t;

/* ---- transform: value "<i>" -> "<i>:<hex of mix(i)>", key unchanged; no state ------------
 * With --rate it also paces the job: it sleeps so that its subtask passes rate / P records a
 * second, which makes the sources wait through backpressure. */

static tpc_error_t *transform_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    const options_t *opt = arg;
    return ex_pace_new(ctx, opt->common.rate, self);
}

static tpc_error_t *transform_process(void *self, tpc_ctx_t *ctx, const tpc_batch_t *batch)
{
    for (size_t n = 0; n < tpc_batch_count(batch); n++) {
        tpc_record_t in;
        tpc_batch_get(batch, n, &in);
        uint64_t i;
        if (!eo_parse_number(in.value, in.value_len, &i))
            return tpc_error_new(TPC_ERR_CORRUPT, 0, "input value is not a record number");
        char value[EO_VALUE_MAX];
        tpc_record_t out = in;
        out.value = value;
        out.value_len = (size_t)eo_output_value(i, value);
        if (tpc_emit(ctx, &out) != TPC_OK)
            break; /* canceled */
    }
    ex_pace(self, ctx, tpc_batch_count(batch));
    return NULL;
}

static void transform_close(void *self, tpc_ctx_t *ctx)
{
    (void)ctx, free(self);
}

static const tpc_operator_ops_t transform_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = transform_open,
    .process = transform_process,
    .close = transform_close,
};

/* ---- PostgreSQL rows: (id bigint, k text, v text) ------------------------------------------- */

static tpc_error_t *encode_row(void *opaque, const tpc_record_t *rec, tpc_pg_row_t *row)
{
    const options_t *opt = opaque;
    uint64_t i;
    if (!eo_parse_number(rec->value, rec->value_len, &i))
        return tpc_error_new(TPC_ERR_CORRUPT, 0, "output value is not a record number");
    if (!strcmp(opt->pg_layout, "changelog") && eo_is_delete(i))
        tpc_pg_row_op(row, TPC_PG_OP_DELETE); /* the key finds the row; the rest is ignored */
    tpc_pg_row_int8(row, (int64_t)i);
    tpc_pg_row_text(row, rec->key, rec->key_len);
    tpc_pg_row_text(row, rec->value, rec->value_len);
    if (!strcmp(opt->pg_layout, "two-tables")) {
        tpc_pg_row_table(row, 1); /* (id, k) into T_ids, in the same transaction */
        tpc_pg_row_int8(row, (int64_t)i);
        tpc_pg_row_text(row, rec->key, rec->key_len);
    }
    return NULL;
}

static bool create_table(const options_t *opt)
{
    if (!strcmp(opt->pg_layout, "changelog"))
        return ex_create_table(PROGRAM, opt->common.pg, opt->table,
                               "k text PRIMARY KEY, id bigint NOT NULL, v text NOT NULL");
    char ids[300];
    snprintf(ids, sizeof ids, "%s_ids", opt->table);
    return ex_create_table(PROGRAM, opt->common.pg, opt->table,
                           "id bigint NOT NULL, k text NOT NULL, v text NOT NULL") &&
           (strcmp(opt->pg_layout, "two-tables") ||
            ex_create_table(PROGRAM, opt->common.pg, ids, "id bigint NOT NULL, k text NOT NULL"));
}

/* ---- Kafka topics with P partitions (the default of 1 would serialise the sink) ------------ */

static bool create_topic(const options_t *opt, const char *topic)
{
    return ex_create_topic(PROGRAM, opt->common.bootstrap, topic, opt->common.parallelism);
}

/* ---- --fill: records FIRST .. FIRST+N-1 into the input topic, in order per partition -------- */

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    if (msg->err)
        atomic_fetch_add((atomic_ullong *)opaque, 1);
}

#define SKIP_RECORD (-2) /* RD_KAFKA_PARTITION_UA is -1 */

/* Where a record goes (RD_KAFKA_PARTITION_UA: the partitioner decides), SKIP_RECORD when this
 * fill leaves it out (--grow-to). */
static int32_t fill_partition(const options_t *opt, const char *key, int kl)
{
    if (!opt->grow_to)
        return RD_KAFKA_PARTITION_UA;
    uint32_t h = 2166136261u;
    for (int i = 0; i < kl; i++)
        h = (h ^ (unsigned char)key[i]) * 16777619u;
    int32_t p = (int32_t)(h % (uint32_t)opt->grow_to);
    return (p < opt->common.parallelism) != opt->grow ? p : SKIP_RECORD;
}

static int fill_input(const options_t *opt)
{
    atomic_ullong failed = 0;
    rd_kafka_t *rk = ex_fill_producer_new(PROGRAM, opt->common.bootstrap, on_delivery, &failed);
    if (!rk)
        return 1;
    if (opt->grow && !ex_grow_topic(PROGRAM, rk, opt->input, opt->grow_to)) {
        rd_kafka_destroy(rk);
        return 1;
    }
    uint64_t end = opt->first + opt->common.records;
    for (uint64_t i = opt->first; i < end; i++) {
        char key[EO_KEY_MAX], value[EO_VALUE_MAX];
        int kl = eo_key(i, opt->keys, key), vl = eo_input_value(i, value);
        int32_t partition = fill_partition(opt, key, kl);
        if (partition == SKIP_RECORD)
            continue;
        rd_kafka_resp_err_t err = ex_produce(rk, opt->input, partition, key, kl, value, vl);
        if (err) {
            fprintf(stderr, PROGRAM ": could not produce: %s\n", rd_kafka_err2str(err));
            failed++;
            break;
        }
        rd_kafka_poll(rk, 0);
    }
    rd_kafka_resp_err_t err = rd_kafka_flush(rk, 60000);
    rd_kafka_destroy(rk);
    if (err || failed) {
        fprintf(stderr, PROGRAM ": filling \"%s\" failed (%s, %llu failed)\n", opt->input,
                rd_kafka_err2str(err), (unsigned long long)failed);
        return 1;
    }
    fprintf(stderr, PROGRAM ": wrote records %llu .. %llu into \"%s\"\n",
            (unsigned long long)opt->first, (unsigned long long)(end - 1), opt->input);
    return 0;
}

/* ---- progress line and log lines on stderr -------------------------------------------------- */

typedef struct {
    tpc_job_t *job;
    tpc_txn_sink_t *pg, *kafka;
    bool tty, lines;
    atomic_bool done;
    pthread_mutex_t mu; /* one writer of stderr at a time */
} progress_t;

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void log_line(void *opaque, tpc_log_level_t level, const char *message)
{
    progress_t *p = opaque;
    static const char *names[] = {"error", "warning", "info", "debug"};
    pthread_mutex_lock(&p->mu);
    fprintf(stderr, "%s%s: %s\n", p->tty ? "\r\033[K" : "", names[level], message);
    pthread_mutex_unlock(&p->mu);
}

static void print_progress(progress_t *p, double elapsed, uint64_t records, double rate)
{
    tpc_job_stats_t js;
    tpc_txn_sink_stats_t ps, ks;
    tpc_job_get_stats(p->job, &js);
    tpc_txn_sink_get_stats(p->pg, &ps);
    tpc_txn_sink_get_stats(p->kafka, &ks);
    pthread_mutex_lock(&p->mu);
    fprintf(stderr,
            "%s%6.1fs  records %8llu  %7.0f rec/s  checkpoints %4llu  commits pg %4llu kafka %4llu"
            "  pending pg %llu kafka %llu  restarts %llu%s",
            p->tty ? "\r\033[K" : "", elapsed, (unsigned long long)records, rate,
            (unsigned long long)js.checkpoints_completed,
            (unsigned long long)(ps.commits + ps.recovered_commits),
            (unsigned long long)(ks.commits + ks.recovered_commits), (unsigned long long)ps.pending,
            (unsigned long long)ks.pending, (unsigned long long)js.restarts, p->tty ? "" : "\n");
    pthread_mutex_unlock(&p->mu);
}

static uint64_t source_records(tpc_job_t *job)
{
    tpc_job_stats_t js;
    tpc_job_get_stats(job, &js);
    return js.vertex_count > 0 ? js.vertices[0].records_out : 0;
}

static void *progress_main(void *arg)
{
    progress_t *p = arg;
    double start = ex_now_s(), last = start, last_print = start;
    uint64_t last_records = 0;
    while (!atomic_load(&p->done)) {
        usleep(100000);
        if (stop_signal) {
            stop_signal = 0;
            log_line(p, TPC_LOG_WARN, "stopping with a savepoint (within stop.timeout.ms)");
            tpc_error_t *err = tpc_job_stop_with_savepoint(p->job, false, NULL);
            if (err) {
                char line[1024];
                snprintf(line, sizeof line, "no savepoint: %s (%s)", tpc_error_message(err),
                         tpc_error_hint_text(err) ? tpc_error_hint_text(err) : "");
                log_line(p, TPC_LOG_WARN, line);
            }
            tpc_error_destroy(err);
        }
        double now = ex_now_s();
        if (!(p->tty || p->lines) || now - last_print < (p->tty ? 0.5 : 1.0))
            continue;
        uint64_t records = source_records(p->job);
        double rate = (double)(records - last_records) / (now - last);
        print_progress(p, now - start, records, rate);
        last = last_print = now;
        last_records = records;
    }
    if (p->tty || p->lines) {
        print_progress(p, ex_now_s() - start, source_records(p->job), 0);
        if (p->tty)
            fputc('\n', stderr);
    }
    return NULL;
}

/* ---- the job -------------------------------------------------------------------------------- */

static tpc_error_t *build_job(const options_t *opt, tpc_job_t *job, tpc_kafka_source_t **source,
                              tpc_txn_sink_t **pg_sink, tpc_txn_sink_t **kafka_sink)
{
    const ex_options_t *o = &opt->common;
    int src, xf, to_pg, to_kafka;
    tpc_error_t *err = ex_job_configure(job, o);
    if (!err && opt->restore_fallback)
        err = tpc_job_set(job, "restore.fallback", opt->restore_fallback);

    /* Kafka: partition p of the input belongs to subtask (FNV-1a(topic) + p) % P; bounded = up to
     * the end at the first start, unbounded = new input and new partitions as they come. */
    if (!err)
        err = ex_kafka_source_new(o->bootstrap, opt->input, opt->unbounded, o->config, source);
    char discovery[32];
    snprintf(discovery, sizeof discovery, "%d", opt->discovery_ms);
    if (!err && opt->discovery_ms)
        err = tpc_kafka_source_set(*source, "partition.discovery.interval.ms", discovery);
    if (!err)
        err = tpc_kafka_source_add_to_job(*source, job, "source", o->source_par, &src);
    if (!err)
        err = tpc_job_add_vertex(job, "transform", o->source_par, &transform_ops, (void *)opt, &xf);
    if (!err)
        err = tpc_job_connect(job, src, xf, TPC_EDGE_FORWARD);

    /* PostgreSQL: binary COPY into (id, k, v); gids start with the table's name. A changelog
     * applies upserts and deletes by key; two tables commit together. */
    bool changelog = !strcmp(opt->pg_layout, "changelog");
    if (!err && opt->to_pg)
        err = ex_pg_sink_new(o->pg, opt->table, "id,k,v", changelog ? "changelog" : "copy",
                             o->config, pg_sink);
    if (!err && opt->to_pg && changelog)
        err = tpc_txn_sink_set(*pg_sink, "pg.key-columns", "k");
    if (!err && opt->to_pg && !strcmp(opt->pg_layout, "two-tables")) {
        char tables[600];
        snprintf(tables, sizeof tables, "%s,%s_ids", opt->table, opt->table);
        err = tpc_txn_sink_set(*pg_sink, "pg.table", tables);
        if (!err)
            err = tpc_txn_sink_set(*pg_sink, "pg.columns", "id,k,v;id,k");
    }
    if (!err && opt->to_pg)
        err = tpc_pg_sink_set_encoder(*pg_sink, encode_row, (void *)opt);
    if (!err && opt->to_pg)
        err = tpc_txn_sink_add_to_job(*pg_sink, job, "postgres", o->pg_par, &to_pg);
    if (!err && opt->to_pg)
        err = tpc_job_connect(job, xf, to_pg, TPC_EDGE_HASH);

    /* Kafka: transactional ids "<topic>-<subtask>-<n>", stable across restarts of this job. */
    if (!err && opt->to_kafka)
        err = ex_kafka_sink_new(o->bootstrap, opt->topic, o->config, kafka_sink);
    if (!err && opt->to_kafka)
        err = tpc_txn_sink_add_to_job(*kafka_sink, job, "kafka", o->kafka_par, &to_kafka);
    if (!err && opt->to_kafka)
        err = tpc_job_connect(job, xf, to_kafka, TPC_EDGE_HASH);
    /* Whatever the configuration holds for a vertex this job does not have is a mistake. */
    if (!err)
        err = tpc_config_check_used(o->config);
    return err;
}

static int usage(const char *msg)
{
    fprintf(
        stderr,
        "exactly_once_pipeline: %s\n"
        "usage: exactly_once_pipeline [--bootstrap HOST:PORT] [--pg CONNINFO] [--name NAME]\n"
        "         [--sinks pg,kafka|pg|kafka] [--pg-layout rows|changelog|two-tables]\n"
        "         [--topic T] [--table T] [--checkpoint-dir DIR] [--parallelism P]\n"
        "         [--interval MS] [--records N | --unbounded] [--keys K] [--rate R]\n"
        "         [--input T] [--progress tty|lines|off] [--discovery-ms MS]\n"
        "         [--fill [--first FIRST] [--grow-to F [--grow]]]\n"
        "         [--source-parallelism P] [--pg-parallelism P] [--kafka-parallelism P]\n"
        "         [--restore-mode auto|fresh|required] [--restore-fallback refuse|at-least-once]\n"
        "         [--config FILE]\n",
        msg);
    return 2;
}

static int parse_options(int argc, char **argv, options_t *opt)
{
    static const struct option longopts[] = {EX_LONGOPTS,
                                             {"topic", required_argument, 0, 't'},
                                             {"table", required_argument, 0, 'T'},
                                             {"unbounded", no_argument, 0, 'u'},
                                             {"keys", required_argument, 0, 'k'},
                                             {"progress", required_argument, 0, 'P'},
                                             {"input", required_argument, 0, 'I'},
                                             {"first", required_argument, 0, 'f'},
                                             {"restore-fallback", required_argument, 0, 'B'},
                                             {"sinks", required_argument, 0, 'O'},
                                             {"discovery-ms", required_argument, 0, 'D'},
                                             {"grow-to", required_argument, 0, 'X'},
                                             {"grow", no_argument, 0, 'W'},
                                             {"pg-layout", required_argument, 0, 'L'},
                                             {0, 0, 0, 0}};
    *opt = (options_t){.common = ex_options_defaults("twopc-demo", 100000),
                       .keys = EO_DEFAULT_KEYS,
                       .to_pg = true,
                       .to_kafka = true,
                       .pg_layout = "rows",
                       .progress = isatty(STDERR_FILENO) ? "tty" : "lines"};
    ex_options_t *o = &opt->common;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            opt->topic = optarg;
            break;
        case 'T':
            opt->table = optarg;
            break;
        case 'u':
            opt->unbounded = true;
            break;
        case 'k':
            opt->keys = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'P':
            opt->progress = optarg;
            break;
        case 'I':
            opt->input = optarg;
            break;
        case 'f':
            opt->first = strtoull(optarg, NULL, 10);
            break;
        case 'B':
            opt->restore_fallback = optarg;
            break;
        case 'D':
            opt->discovery_ms = atoi(optarg);
            break;
        case 'X':
            opt->grow_to = atoi(optarg);
            break;
        case 'W':
            opt->grow = true;
            break;
        case 'L':
            opt->pg_layout = optarg;
            if (strcmp(optarg, "rows") && strcmp(optarg, "changelog") &&
                strcmp(optarg, "two-tables"))
                return usage("--pg-layout is rows, changelog or two-tables");
            break;
        case 'O':
            opt->to_pg =
                !strcmp(optarg, "pg") || !strcmp(optarg, "pg,kafka") || !strcmp(optarg, "kafka,pg");
            opt->to_kafka = !strcmp(optarg, "kafka") || !strcmp(optarg, "pg,kafka") ||
                            !strcmp(optarg, "kafka,pg");
            if (!opt->to_pg && !opt->to_kafka)
                return usage("--sinks is pg,kafka, pg or kafka");
            break;
        default:
            if (!ex_option(o, c, optarg))
                return usage("unknown option");
        }
    }
    if (optind != argc)
        return usage("unexpected argument");
    if (!o->bootstrap || (!o->pg && opt->to_pg && !o->fill))
        return usage("name the servers with --bootstrap and --pg (or TWOPC_KAFKA_BOOTSTRAP and "
                     "TWOPC_PG_CONNINFO); --sinks kafka needs no --pg");
    if (o->parallelism < 1 || o->parallelism > 8 || o->interval_ms < 10)
        return usage("--parallelism must be 1 to 8, --interval at least 10");
    if (opt->keys == 0)
        return usage("--keys must be at least 1");
    if (opt->grow_to && (opt->grow_to <= o->parallelism || opt->grow_to > 64))
        return usage("--grow-to must be more than --parallelism, and at most 64");
    if ((opt->grow && !opt->grow_to) || opt->discovery_ms < 0)
        return usage("--grow needs --grow-to; --discovery-ms is 0 or more");
    int *pars[] = {&o->source_par, &o->pg_par, &o->kafka_par};
    for (int i = 0; i < 3; i++) {
        if (!*pars[i])
            *pars[i] = o->parallelism;
        if (*pars[i] < 1 || *pars[i] > 8)
            return usage("--source-parallelism, --pg-parallelism and --kafka-parallelism must be "
                         "1 to 8");
    }
    if (strcmp(opt->progress, "tty") && strcmp(opt->progress, "lines") &&
        strcmp(opt->progress, "off"))
        return usage("--progress is tty, lines or off");
    if (!opt->input)
        opt->input = ex_name(opt->input_buf, sizeof opt->input_buf, o->name, "-in");
    if (!opt->topic)
        opt->topic = ex_name(opt->topic_buf, sizeof opt->topic_buf, o->name, "-out");
    if (!opt->table)
        opt->table = ex_table_name(opt->table_buf, sizeof opt->table_buf, o->name, "_out");
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
        return create_topic(&opt, opt.input) ? fill_input(&opt) : 1;
    if (!ex_config_load(PROGRAM, &opt.common))
        return 1;
    if ((opt.to_pg && !create_table(&opt)) || (opt.to_kafka && !create_topic(&opt, opt.topic))) {
        tpc_config_destroy(opt.common.config);
        return 1;
    }

    tpc_job_t *job = tpc_job_new(o->name);
    tpc_kafka_source_t *source = NULL;
    tpc_txn_sink_t *pg_sink = NULL, *kafka_sink = NULL;
    tpc_error_t *err = build_job(&opt, job, &source, &pg_sink, &kafka_sink);
    progress_t p = {.job = job,
                    .pg = pg_sink,
                    .kafka = kafka_sink,
                    .tty = !strcmp(opt.progress, "tty"),
                    .lines = !strcmp(opt.progress, "lines")};
    pthread_mutex_init(&p.mu, NULL);
    tpc_job_set_logger(job, log_line, &p, TPC_LOG_WARN);
    fprintf(stderr, PROGRAM ": reading \"%s\"%s", opt.input,
            opt.unbounded ? " for ever" : " to its end");
    fprintf(stderr,
            ", parallelism %d (source %d, postgres %d, kafka %d), checkpoint every %d ms\n"
            "topic: %s\ntable: %s\n",
            o->parallelism, o->source_par, o->pg_par, o->kafka_par, o->interval_ms,
            opt.to_kafka ? opt.topic : "(no kafka sink)", opt.to_pg ? opt.table : "(no pg sink)");

    tpc_job_result_t result = TPC_JOB_FINISHED;
    if (!err) {
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        pthread_t thread;
        pthread_create(&thread, NULL, progress_main, &p);
        err = tpc_job_run(job, &result);
        atomic_store(&p.done, true);
        pthread_join(thread, NULL);
    }
    if (err)
        rc = ex_failure(PROGRAM, err);
    else
        fprintf(stderr, PROGRAM ": %s\n",
                result == TPC_JOB_FINISHED  ? "finished, everything committed"
                : result == TPC_JOB_STOPPED ? "stopped with a savepoint"
                                            : "stopped without a savepoint (the next start "
                                              "goes on from the last checkpoint)");
    tpc_job_destroy(job);
    tpc_txn_sink_destroy(pg_sink);
    tpc_txn_sink_destroy(kafka_sink);
    tpc_kafka_source_destroy(source);
    tpc_error_destroy(err);
    tpc_config_destroy(opt.common.config);
    pthread_mutex_destroy(&p.mu);
    return rc;
}
