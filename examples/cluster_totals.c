/*
 * keyed_totals as an application that runs as U units over any number of processes
 * (docs/cluster.md). Each process is a member of the consumer group NAME; the units assigned to it
 * run here, each a complete twopc job with its own checkpoint folder and prefixes:
 *
 *   unit u of U:  NAME-in partition u ──> parse ──> Kafka sink into NAME-by-user, partition = the
 *                                                   user's unit (exactly once)         [ingest]
 *                 NAME-by-user partition u (read_committed) ──hash(user)──> totals ──> PostgreSQL
 *                                                   NAME_totals (upsert), Kafka NAME-out  [keyed]
 *
 * A user's purchases all lie in one input partition and go to one partition of the repartition
 * topic, so one unit keeps the user's total in its keyed state, whichever process runs it. The
 * outputs are keyed_totals', and verify_output --totals checks them.
 *
 *   cluster_totals --fill [options]   make the topics (U partitions each) and write purchases
 *                                     0 .. N-1 into NAME-in
 *   cluster_totals [options]          be a member until SIGTERM or SIGINT, then stop the units
 *                                     here with savepoints and leave
 *     --bootstrap HOST:PORT  Kafka brokers (default: $TWOPC_KAFKA_BOOTSTRAP)
 *     --pg CONNINFO          PostgreSQL connection (default: $TWOPC_PG_CONNINFO)
 *     --name NAME            application name (default twopc-cluster-totals)
 *     --checkpoint-dir DIR   every unit's checkpoints under DIR/unit-<u> (default
 * NAME.checkpoints); every process must reach it
 *     --units U              units, and partitions of each topic (default 6, at most 64)
 *     --instance ID          static membership: this process's group.instance.id
 *     --session-timeout MS   classic protocol: the member's session timeout (default 6000)
 *     --protocol P           classic (default) or consumer (KIP-848, librdkafka 2.12 or later)
 *     --interval MS          checkpoint interval (default 500)
 *     --records N            purchases written by --fill (default 20000)
 *     --users U              distinct users (default 300)
 *     --rate R               purchases per second through each unit's parse (default 0: unlimited)
 *     --direct               no repartition topic: each unit's parse feeds its totals at once.
 *                            Right only because --fill writes all of a user's purchases into one
 *                            input partition; it shows what the hop costs (make bench-cluster)
 *     --config FILE          the keys of every unit's job (the file's first section or [job])
 *                            and of the member, tpc_cluster_set()'s ([member]): checkpoint
 *                            storage, group settings, security
 *
 * The job's and the member's keys can also come from the environment: TWOPC_<KEY> for the job,
 * TWOPC_MEMBER__<KEY> for the member (TWOPC_MEMBER__KAFKA_GROUP_INSTANCE_ID=orders-0 is
 * kafka.group.instance.id). The command line wins over both, the environment over the file
 * (docs/configuration.md). A key that neither takes is refused at the start.
 *
 * Exit status: 0 after a stop, 1 when the member failed, 2 for bad options.
 */
#include "keyed_totals_ops.h"
#include "tpc_cluster.h"

#include <pthread.h>
#include <signal.h>

#define PROGRAM "cluster_totals"

typedef struct {
    ex_options_t common;
    char input[256], by_user[256], topic[256], table[256];
    int units;
    bool direct;
    uint32_t users;
    pthread_mutex_t config_mu; /* units build their jobs at once; the configuration counts uses */
    const char *instance, *protocol, *session_ms;
} options_t;

/* ---- the repartition hop: a record goes to the partition of its key's unit ----------------- */

static tpc_error_t *to_unit(void *opaque, const tpc_record_t *record, tpc_kafka_message_t *out)
{
    const options_t *opt = opaque;
    out->partition = tpc_key_group(record->key, record->key_len, opt->units);
    return NULL;
}

/* ---- one unit's job ------------------------------------------------------------------------- */

/* What a unit's job borrows. */
typedef struct {
    tpc_kafka_source_t *input, *by_user;
    tpc_txn_sink_t *to_by_user, *pg, *out;
} unit_parts_t;

static tpc_error_t *source_new(const options_t *opt, const char *topic, int unit,
                               tpc_kafka_source_t **src)
{
    char partition[16];
    snprintf(partition, sizeof partition, "%d", unit);
    tpc_error_t *err = tpc_kafka_source_new(opt->common.bootstrap, topic, src);
    if (!err)
        err = tpc_kafka_source_set(*src, "partitions", partition);
    if (!err)
        err = tpc_kafka_source_set(*src, "open.timeout.ms", "60000");
    return err;
}

/* A Kafka sink into @topic, its transactional ids "<unit prefix>-<suffix>-...". */
static tpc_error_t *sink_new(const options_t *opt, const tpc_cluster_unit_t *unit,
                             const char *topic, const char *suffix, tpc_txn_sink_t **sink)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s-%s", unit->transactional_id_prefix, suffix);
    const char *kv[][2] = {
        {"transactional.id.prefix", prefix},   {"kafka.transaction.timeout.ms", "60000"},
        {"transaction.timeout.ms", "60000"},   {"kafka.linger.ms", "5"},
        {"open.timeout.ms", "60000"},          {"recovery.timeout.ms", "120000"},
        {"commit.retry.deadline.ms", "120000"}};
    tpc_error_t *err = tpc_kafka_sink_new(opt->common.bootstrap, topic, sink);
    for (size_t i = 0; !err && i < sizeof kv / sizeof kv[0]; i++)
        err = tpc_txn_sink_set(*sink, kv[i][0], kv[i][1]);
    return err;
}

static tpc_error_t *pg_new(const options_t *opt, const tpc_cluster_unit_t *unit,
                           tpc_txn_sink_t **sink)
{
    const char *kv[][2] = {
        {"pg.conninfo", opt->common.pg},        {"pg.table", opt->table},
        {"pg.columns", "user_id,n,total"},      {"pg.key-columns", "user_id"},
        {"pg.gid-prefix", unit->gid_prefix},    {"pg.mode", "upsert"},
        {"commit.retry.deadline.ms", "120000"}, {"pg.connect.deadline.ms", "60000"}};
    tpc_error_t *err = tpc_pg_sink_new(sink);
    for (size_t i = 0; !err && i < sizeof kv / sizeof kv[0]; i++)
        err = tpc_txn_sink_set(*sink, kv[i][0], kv[i][1]);
    if (!err)
        err = tpc_pg_sink_set_encoder(*sink, kt_encode_row, NULL);
    return err;
}

static tpc_error_t *build_unit(void *opaque, const tpc_cluster_unit_t *unit, tpc_job_t *job,
                               void **resources)
{
    options_t *opt = opaque;
    unit_parts_t *p = calloc(1, sizeof *p);
    if (!p)
        return tpc_error_nomem();
    *resources = p;
    char interval[32];
    snprintf(interval, sizeof interval, "%d", opt->common.interval_ms);
    int in, parse, to_by_user, by_user, totals, to_pg, to_out;
    tpc_error_t *err = tpc_job_set(job, "restart.attempts", "20");
    if (!err)
        err = tpc_job_set(job, "restart.delay.ms", "500");
    if (!err) {
        pthread_mutex_lock(&opt->config_mu);
        err = tpc_job_configure(job, opt->common.config);
        pthread_mutex_unlock(&opt->config_mu);
    }
    /* --interval, or else the configuration's, which parse_options took */
    if (!err)
        err = tpc_job_set(job, "checkpoint.interval.ms", interval);
    /* ingest: the unit's input partition, parsed, into the repartition topic by user */
    if (!err)
        err = source_new(opt, opt->input, unit->unit, &p->input);
    if (!err)
        err = tpc_kafka_source_add_to_job(p->input, job, "input", 1, &in);
    if (!err)
        err = tpc_job_add_vertex(job, "parse", 1, &kt_parse_ops, &opt->common.rate, &parse);
    if (!err)
        err = tpc_job_connect(job, in, parse, TPC_EDGE_FORWARD);
    if (!err && !opt->direct)
        err = sink_new(opt, unit, opt->by_user, "r", &p->to_by_user);
    if (!err && !opt->direct)
        err = tpc_kafka_sink_set_mapper(p->to_by_user, to_unit, opt);
    if (!err && !opt->direct)
        err = tpc_txn_sink_add_to_job(p->to_by_user, job, "to-by-user", 1, &to_by_user);
    if (!err && !opt->direct)
        err = tpc_job_connect(job, parse, to_by_user, TPC_EDGE_FORWARD);
    /* keyed: the unit's users, their totals into PostgreSQL and Kafka */
    if (!err && !opt->direct)
        err = source_new(opt, opt->by_user, unit->unit, &p->by_user);
    if (!err && !opt->direct)
        err = tpc_kafka_source_add_to_job(p->by_user, job, "by-user", 1, &by_user);
    if (!err)
        err = tpc_job_add_vertex(job, "totals", 1, &kt_totals_ops, NULL, &totals);
    if (!err)
        err = tpc_job_connect(job, opt->direct ? parse : by_user, totals, TPC_EDGE_HASH);
    if (!err)
        err = pg_new(opt, unit, &p->pg);
    if (!err)
        err = tpc_txn_sink_add_to_job(p->pg, job, "postgres", 1, &to_pg);
    if (!err)
        err = tpc_job_connect(job, totals, to_pg, TPC_EDGE_HASH);
    if (!err)
        err = sink_new(opt, unit, opt->topic, "o", &p->out);
    if (!err)
        err = tpc_txn_sink_add_to_job(p->out, job, "kafka", 1, &to_out);
    if (!err)
        err = tpc_job_connect(job, totals, to_out, TPC_EDGE_HASH);
    return err;
}

static void release_unit(void *opaque, const tpc_cluster_unit_t *unit, void *resources)
{
    (void)opaque, (void)unit;
    unit_parts_t *p = resources;
    if (!p)
        return;
    tpc_kafka_source_destroy(p->input);
    tpc_kafka_source_destroy(p->by_user);
    tpc_txn_sink_destroy(p->to_by_user);
    tpc_txn_sink_destroy(p->pg);
    tpc_txn_sink_destroy(p->out);
    free(p);
}

/* ---- the member ----------------------------------------------------------------------------- */

static tpc_cluster_t *member;

static void on_signal(int sig)
{
    (void)sig;
    tpc_cluster_stop(member);
}

static int usage(const char *msg)
{
    fprintf(stderr,
            PROGRAM ": %s\n"
                    "usage: " PROGRAM " [--fill] [--bootstrap HOST:PORT] [--pg CONNINFO] [--name "
                    "NAME]\n"
                    "         [--checkpoint-dir DIR] [--units U] [--instance ID]\n"
                    "         [--session-timeout MS] [--protocol classic|consumer] [--interval "
                    "MS]\n"
                    "         [--records N] [--users U] [--rate R] [--direct] [--config FILE]\n",
            msg);
    return 2;
}

static int parse_options(int argc, char **argv, options_t *opt)
{
    static const struct option longopts[] = {EX_LONGOPTS,
                                             {"users", required_argument, 0, 'u'},
                                             {"units", required_argument, 0, 'U'},
                                             {"instance", required_argument, 0, 'I'},
                                             {"session-timeout", required_argument, 0, 'T'},
                                             {"protocol", required_argument, 0, 'P'},
                                             {"direct", no_argument, 0, 'D'},
                                             {0, 0, 0, 0}};
    *opt = (options_t){.common = ex_options_defaults("twopc-cluster-totals", 20000),
                       .users = KT_DEFAULT_USERS,
                       .units = 6,
                       .protocol = "classic",
                       .session_ms = "6000"};
    ex_options_t *o = &opt->common;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'u')
            opt->users = (uint32_t)strtoul(optarg, NULL, 10);
        else if (c == 'U')
            opt->units = atoi(optarg);
        else if (c == 'I')
            opt->instance = optarg;
        else if (c == 'T')
            opt->session_ms = optarg;
        else if (c == 'P')
            opt->protocol = optarg;
        else if (c == 'D')
            opt->direct = true;
        else if (!ex_option(o, c, optarg))
            return usage("unknown option");
    }
    if (optind != argc)
        return usage("unexpected argument");
    if (!o->bootstrap || !o->pg)
        return usage("name the servers with --bootstrap and --pg (or TWOPC_KAFKA_BOOTSTRAP and "
                     "TWOPC_PG_CONNINFO)");
    if (opt->units < 1 || opt->units > 64 || o->interval_ms < 10 || opt->users < 1 ||
        o->records < 1)
        return usage("--units must be 1 to 64, --interval at least 10, --users and --records at "
                     "least 1");
    ex_name(opt->input, sizeof opt->input, o->name, "-in");
    ex_name(opt->by_user, sizeof opt->by_user, o->name, "-by-user");
    ex_name(opt->topic, sizeof opt->topic, o->name, "-out");
    ex_table_name(opt->table, sizeof opt->table, o->name, "_totals");
    ex_default_checkpoint_dir(o);
    return 0;
}

static tpc_error_t *member_set(void *component, const char *key, const char *value)
{
    return tpc_cluster_set(component, key, value);
}

/* The job's keys of the configuration, tried on a job that never runs, so that a wrong one stops
 * the member before it joins rather than every unit's job on its thread; then any key that
 * neither the member nor the job took is refused. */
static tpc_error_t *check_configuration(tpc_config_t *config)
{
    tpc_job_t *job = tpc_job_new("cluster_totals-configuration");
    tpc_error_t *err = job ? tpc_job_configure(job, config) : tpc_error_nomem();
    tpc_job_destroy(job);
    return err ? err : tpc_config_check_used(config);
}

static tpc_error_t *member_new(options_t *opt)
{
    const ex_options_t *o = &opt->common;
    const tpc_props_t *member_keys[] = {tpc_cluster_properties()};
    tpc_error_t *err = tpc_cluster_new(o->bootstrap, o->name, opt->units, &member);
    if (!err)
        err = tpc_cluster_set(member, "checkpoint.dir", o->ckpt_dir);
    if (!err)
        err = tpc_cluster_set(member, "group.protocol", opt->protocol);
    if (!err && strcmp(opt->protocol, "classic") == 0)
        err = tpc_cluster_set(member, "kafka.session.timeout.ms", opt->session_ms);
    if (!err)
        err = tpc_config_apply(o->config, "member", member_keys, 1, member_set, member);
    if (!err)
        err = check_configuration(o->config);
    if (!err && opt->instance)
        err = tpc_cluster_set(member, "kafka.group.instance.id", opt->instance);
    if (!err)
        err = tpc_cluster_set_builder(member, build_unit, release_unit, opt);
    if (!err)
        tpc_cluster_set_logger(member, NULL, NULL, TPC_LOG_INFO);
    return err;
}

int main(int argc, char **argv)
{
    options_t opt;
    int rc = parse_options(argc, argv, &opt);
    if (rc)
        return rc;
    const ex_options_t *o = &opt.common;
    if (o->fill) {
        bool made = ex_create_topic(PROGRAM, o->bootstrap, opt.input, opt.units) &&
                    ex_create_topic(PROGRAM, o->bootstrap, opt.by_user, opt.units) &&
                    ex_create_topic(PROGRAM, o->bootstrap, opt.topic, opt.units) &&
                    ex_create_table(PROGRAM, o->pg, opt.table,
                                    "user_id text PRIMARY KEY, n bigint NOT NULL, total bigint "
                                    "NOT NULL");
        return made ? kt_fill_input(PROGRAM, o, opt.input, opt.users) : 1;
    }
    if (!ex_config_load(PROGRAM, &opt.common))
        return 1;
    pthread_mutex_init(&opt.config_mu, NULL);
    tpc_error_t *err = member_new(&opt);
    if (!err) {
        struct sigaction sa = {.sa_handler = on_signal};
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        /* the instance and the storage as the configuration may have set them */
        const char *id = tpc_config_get(o->config, "member", "kafka.group.instance.id", NULL);
        const char *s3 = tpc_config_get(o->config, "member", "checkpoint.storage", NULL);
        const char *bucket = tpc_config_get(o->config, "member", "checkpoint.s3.bucket", NULL);
        bool on_s3 = s3 && strcmp(s3, "s3") == 0;
        id = opt.instance ? opt.instance : id;
        fprintf(stderr, PROGRAM ": member%s%s of \"%s\" over %d units, checkpoints %s %s\n",
                id ? " " : "", id ? id : "", o->name, opt.units, on_s3 ? "on S3 in bucket" : "in",
                on_s3 ? (bucket ? bucket : "(none)") : o->ckpt_dir);
        err = tpc_cluster_run(member);
    }
    if (err)
        rc = ex_failure(PROGRAM, err);
    else
        fprintf(stderr, PROGRAM ": stopped; the units that ran here stopped with savepoints\n");
    tpc_error_destroy(err);
    tpc_cluster_destroy(member);
    tpc_config_destroy(opt.common.config);
    pthread_mutex_destroy(&opt.config_mu);
    return rc;
}
