/*
 * An independent reader of what exactly_once_pipeline wrote. It reads the output topic from the
 * beginning of every partition to its end as a read_committed consumer sees it (aborted and open
 * transactions are invisible), and every row of the output table, and compares both with the input
 * the pipeline was given, records 0 .. N-1 (exactly_once_records.h): each must appear exactly once
 * with its own key and value, nothing else may appear, and in the topic the records of one key must
 * come in the order of their numbers. It uses only librdkafka and libpq, none of twopc.
 *
 *   verify_output --records N [--topic T] [--table T] [--bootstrap HOST:PORT] [--pg CONNINFO]
 *                 [--keys K] [--name NAME] [--times T] [--sinks pg,kafka|pg|kafka]
 *
 * The names default as in exactly_once_pipeline (NAME-out, NAME_out), the servers to
 * $TWOPC_KAFKA_BOOTSTRAP and $TWOPC_PG_CONNINFO. It prints a summary table and the lines
 * `topic: <name>` and `table: <name>`. With --times T (a job run T times from scratch on the same
 * outputs, restore.mode=fresh) every record must appear exactly T times, and in the topic the
 * numbers of one key may start again from the beginning T - 1 times. Exit status: 0 when both
 * outputs hold every record exactly once, 1 when anything is missing, repeated, wrong or out of
 * order, 2 when it could not read. --sinks as given to exactly_once_pipeline: the output it left
 * out is neither read nor counted.
 *
 * With --totals it reads what keyed_totals wrote instead (keyed_totals_records.h; --keys is then
 * the number of users, default 300, and the table defaults to NAME_totals): the topic must hold,
 * per user and in order, the user's running total after each of the user's purchases exactly
 * once ("<n>,<total>", the prefix sums of that user's amounts in input order: no gap, no repeat,
 * no wrong total), and the table one row per user with the final count and total. Record i of the
 * input stands for the total after purchase i, so the same table of counts serves both readers.
 *
 * --pg-layout as given to exactly_once_pipeline: with changelog the table must hold, for each key,
 * exactly the row of its last record, or none when that record is a delete (eo_is_delete()), also
 * after runs from scratch; with two-tables the table is checked as usual and TABLE_ids must hold
 * exactly its (id, k) pairs (rows of one table without the other's count as "rows apart").
 */
#include "keyed_totals_records.h"

#include <getopt.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#define READ_TIMEOUT_S 60
#define EXAMPLES_SHOWN 5

/* What one output holds, compared with the input. */
typedef struct {
    const char *what;
    uint8_t *seen; /* per record number, saturating at 255 */
    uint64_t total, duplicates, missing, unexpected, bad, out_of_order;
    uint64_t *last;  /* per key: 1 + the last record number seen (Kafka only) */
    uint8_t *passes; /* per key: times its numbers started again (Kafka only) */
    uint64_t dup_examples[EXAMPLES_SHOWN], miss_examples[EXAMPLES_SHOWN];
    int ndup_examples, nmiss_examples;
    char blocked[512]; /* Kafka: partitions whose last stable offset is below the high watermark */
    bool final_only;   /* --totals or changelog, PostgreSQL: only each key's last record, once */
    uint64_t apart;    /* two-tables: rows of one table that the other does not hold */
} tally_t;

typedef struct {
    const char *bootstrap, *pg, *topic, *table;
    char topic_buf[256], table_buf[256];
    uint64_t records;
    uint32_t keys;
    uint32_t times;
    bool totals;
    bool to_pg, to_kafka;  /* --sinks: the outputs to read */
    const char *pg_layout; /* rows, changelog, two-tables */
    uint64_t *prefix;      /* --totals: the total of user i % keys after purchase i */
} options_t;

enum { REC_OK, REC_FOREIGN, REC_WRONG };

/* A record of exactly_once_pipeline: key and value of record number *i. A changelog's row must be
 * of its key's last record, and not of a delete. */
static int plain_record(const options_t *opt, const tally_t *t, const void *key, size_t key_len,
                        const void *value, size_t value_len, uint64_t *i)
{
    char want_key[EO_KEY_MAX], want_value[EO_VALUE_MAX];
    if (!eo_parse_number(value, value_len, i) || *i >= opt->records)
        return REC_FOREIGN;
    size_t kl = (size_t)eo_key(*i, opt->keys, want_key);
    size_t vl = (size_t)eo_output_value(*i, want_value);
    if (kl != key_len || memcmp(key, want_key, kl) || vl != value_len ||
        memcmp(value, want_value, vl))
        return REC_WRONG;
    if (t->final_only && (*i + opt->keys < opt->records || eo_is_delete(*i)))
        return REC_WRONG;
    return REC_OK;
}

/* A total of keyed_totals: user u's n-th purchase is input record *i = u + (n - 1) * users, and
 * the total must be the prefix sum there; a final row must be of the user's last purchase. */
static int totals_record(const options_t *opt, const tally_t *t, const char *key, size_t key_len,
                         const void *value, size_t value_len, uint64_t *i)
{
    uint64_t u, n, total;
    if (key_len <= 5 || memcmp(key, "user-", 5) || !eo_parse_number(key + 5, key_len - 5, &u) ||
        u >= opt->keys || u >= opt->records || !kt_parse_pair(value, value_len, &n, &total) ||
        n == 0 || n - 1 > (opt->records - u) / opt->keys)
        return REC_FOREIGN;
    char want[KT_USER_MAX];
    *i = u + (n - 1) * opt->keys;
    if (*i >= opt->records || (size_t)kt_user(*i, opt->keys, want) != key_len ||
        memcmp(want, key, key_len))
        return REC_FOREIGN;
    if (total != opt->prefix[*i] || (t->final_only && *i + opt->keys < opt->records))
        return REC_WRONG;
    return REC_OK;
}

static bool tally_init(tally_t *t, const char *what, const options_t *opt, bool ordered)
{
    *t = (tally_t){.what = what};
    t->seen = calloc(opt->records ? opt->records : 1, 1);
    t->last = ordered ? calloc(opt->keys, sizeof *t->last) : NULL;
    t->passes = ordered ? calloc(opt->keys, 1) : NULL;
    return t->seen && (!ordered || (t->last && t->passes));
}

/* How often each record must appear. */
static uint32_t tally_times(const tally_t *t, const options_t *opt)
{
    return t->final_only ? 1 : opt->times; /* an upsert leaves one row however often it ran */
}

/* One record found in an output. */
static void tally_add(tally_t *t, const options_t *opt, const void *key, size_t key_len,
                      const void *value, size_t value_len)
{
    uint64_t i = 0;
    t->total++;
    int kind = opt->totals ? totals_record(opt, t, key, key_len, value, value_len, &i)
                           : plain_record(opt, t, key, key_len, value, value_len, &i);
    if (kind == REC_FOREIGN) {
        t->unexpected++;
        return;
    }
    if (kind == REC_WRONG) {
        t->bad++;
        return;
    }
    if (t->seen[i] >= tally_times(t, opt)) {
        if (t->ndup_examples < EXAMPLES_SHOWN)
            t->dup_examples[t->ndup_examples++] = i;
        t->duplicates++;
    }
    if (t->seen[i] < 255)
        t->seen[i]++;
    if (t->last) {
        uint64_t *last = &t->last[i % opt->keys];
        uint8_t *passes = &t->passes[i % opt->keys];
        if (i + 1 < *last && *passes + 1u < opt->times) {
            (*passes)++; /* the next run from scratch */
            *last = i + 1;
        } else if (i + 1 < *last) {
            t->out_of_order++;
        } else {
            *last = i + 1;
        }
    }
}

static void tally_finish(tally_t *t, const options_t *opt)
{
    uint64_t first = t->final_only && opt->records > opt->keys ? opt->records - opt->keys : 0;
    for (uint64_t i = first; i < opt->records; i++) {
        if (t->seen[i] >= tally_times(t, opt) ||
            (t->final_only && !opt->totals && eo_is_delete(i))) /* a deleted key: no row */
            continue;
        if (t->nmiss_examples < EXAMPLES_SHOWN)
            t->miss_examples[t->nmiss_examples++] = i;
        t->missing++;
    }
}

static bool tally_ok(const tally_t *t)
{
    return !t->duplicates && !t->missing && !t->unexpected && !t->bad && !t->out_of_order &&
           !t->apart && !t->blocked[0];
}

static void tally_examples(const tally_t *t)
{
    if (t->blocked[0])
        printf("%s partitions stuck behind a transaction that never ended:%s\n", t->what,
               t->blocked);
    if (t->ndup_examples) {
        printf("first duplicates in %s:", t->what);
        for (int n = 0; n < t->ndup_examples; n++)
            printf(" %llu", (unsigned long long)t->dup_examples[n]);
        printf("\n");
    }
    if (t->nmiss_examples) {
        printf("first missing in %s:", t->what);
        for (int n = 0; n < t->nmiss_examples; n++)
            printf(" %llu", (unsigned long long)t->miss_examples[n]);
        printf("\n");
    }
}

/* ---- Kafka, read_committed, every partition from its beginning to its end ------------------- */

static bool conf_set(rd_kafka_conf_t *conf, const char *name, const char *value)
{
    char errstr[512];
    if (rd_kafka_conf_set(conf, name, value, errstr, sizeof errstr) == RD_KAFKA_CONF_OK)
        return true;
    fprintf(stderr, "verify_output: %s\n", errstr);
    return false;
}

/* A read_committed reader stops at a partition's last stable offset: the first offset of the
 * oldest transaction still open there. Once the pipeline has ended, every transaction should have
 * ended too, so a last stable offset below the high watermark means records that no
 * read_committed reader will ever see (a transaction whose markers were never written). */
static void find_blocked(const options_t *opt, rd_kafka_t *committed, int parts, tally_t *t)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* librdkafka's consumers read committed by default; the high watermark needs uncommitted. */
    if (!conf_set(conf, "bootstrap.servers", opt->bootstrap) ||
        !conf_set(conf, "isolation.level", "read_uncommitted")) {
        rd_kafka_conf_destroy(conf);
        return;
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk)
        return;
    size_t used = 0;
    for (int p = 0; p < parts; p++) {
        int64_t lo, stable, high;
        if (rd_kafka_query_watermark_offsets(committed, opt->topic, p, &lo, &stable, 10000) ||
            rd_kafka_query_watermark_offsets(rk, opt->topic, p, &lo, &high, 10000) ||
            stable >= high || used >= sizeof t->blocked - 1)
            continue;
        used += (size_t)snprintf(t->blocked + used, sizeof t->blocked - used,
                                 " %d (last stable offset %lld, high watermark %lld)", p,
                                 (long long)stable, (long long)high);
    }
    rd_kafka_destroy(rk);
}

static bool read_kafka(const options_t *opt, tally_t *t)
{
    char errstr[512], group[128];
    snprintf(group, sizeof group, "verify-output-%ld-%ld", (long)time(NULL), (long)clock());
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf_set(conf, "bootstrap.servers", opt->bootstrap) ||
        !conf_set(conf, "group.id", group) ||
        !conf_set(conf, "isolation.level", "read_committed") ||
        !conf_set(conf, "enable.partition.eof", "true") ||
        !conf_set(conf, "enable.auto.commit", "false")) {
        rd_kafka_conf_destroy(conf);
        return false;
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, "verify_output: could not create a consumer: %s\n", errstr);
        return false;
    }
    rd_kafka_poll_set_consumer(rk);

    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, opt->topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 30000);
    int parts = 0;
    if (!err && md->topic_cnt == 1 && !md->topics[0].err)
        parts = md->topics[0].partition_cnt;
    else
        fprintf(stderr, "verify_output: no topic \"%s\": %s\n", opt->topic,
                rd_kafka_err2str(err ? err : md->topics[0].err));
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);

    bool ok = parts > 0;
    if (ok) {
        rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(parts);
        for (int p = 0; p < parts; p++)
            rd_kafka_topic_partition_list_add(list, opt->topic, p)->offset =
                RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_assign(rk, list);
        rd_kafka_topic_partition_list_destroy(list);

        int at_end = 0;
        time_t deadline = time(NULL) + READ_TIMEOUT_S;
        while (at_end < parts && time(NULL) < deadline) {
            rd_kafka_message_t *msg = rd_kafka_consumer_poll(rk, 200);
            if (!msg)
                continue;
            if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
                at_end++;
            else if (msg->err)
                fprintf(stderr, "verify_output: consumer: %s\n", rd_kafka_message_errstr(msg));
            else
                tally_add(t, opt, msg->key, msg->key_len, msg->payload, msg->len);
            rd_kafka_message_destroy(msg);
        }
        if (at_end < parts) {
            fprintf(stderr,
                    "verify_output: the read_committed consumer did not reach the end of \"%s\" "
                    "in %d s (a transaction left open?)\n",
                    opt->topic, READ_TIMEOUT_S);
            ok = false;
        }
        find_blocked(opt, rk, parts, t);
        rd_kafka_consumer_close(rk);
    }
    rd_kafka_destroy(rk);
    return ok;
}

/* ---- PostgreSQL: every committed row --------------------------------------------------------- */

static bool read_pg(const options_t *opt, tally_t *t)
{
    PGconn *pg = PQconnectdb(opt->pg);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "verify_output: could not connect to PostgreSQL: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return false;
    }
    char *ident = PQescapeIdentifier(pg, opt->table, strlen(opt->table));
    char sql[1024];
    if (opt->totals) /* the row as the Kafka record of the same total would be */
        snprintf(sql, sizeof sql, "SELECT user_id, n || ',' || total FROM %s",
                 ident ? ident : "\"\"");
    else
        snprintf(sql, sizeof sql, "SELECT k, v FROM %s", ident ? ident : "\"\"");
    PQfreemem(ident);
    bool ok = PQsendQuery(pg, sql) && PQsetSingleRowMode(pg);
    PGresult *res;
    while (ok && (res = PQgetResult(pg)) != NULL) {
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_SINGLE_TUPLE) {
            tally_add(t, opt, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0),
                      PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
        } else if (st != PGRES_TUPLES_OK) {
            fprintf(stderr, "verify_output: could not read table \"%s\": %s", opt->table,
                    PQresultErrorMessage(res));
            ok = false;
        }
        PQclear(res);
    }
    if (ok && !strcmp(opt->pg_layout, "two-tables")) {
        /* Both tables of a checkpoint commit together: T_ids holds exactly T's (id, k). */
        char ids[300];
        snprintf(ids, sizeof ids, "%s_ids", opt->table);
        char *a = PQescapeIdentifier(pg, opt->table, strlen(opt->table));
        char *b = PQescapeIdentifier(pg, ids, strlen(ids));
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM ((SELECT id, k FROM %s EXCEPT ALL SELECT id, k FROM %s) "
                 "UNION ALL (SELECT id, k FROM %s EXCEPT ALL SELECT id, k FROM %s)) apart",
                 a ? a : "\"\"", b ? b : "\"\"", b ? b : "\"\"", a ? a : "\"\"");
        PQfreemem(a);
        PQfreemem(b);
        res = PQexec(pg, sql);
        ok = PQresultStatus(res) == PGRES_TUPLES_OK;
        if (ok)
            t->apart = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
        else
            fprintf(stderr, "verify_output: could not compare table \"%s\" with \"%s\": %s",
                    opt->table, ids, PQresultErrorMessage(res));
        PQclear(res);
    }
    PQfinish(pg);
    return ok;
}

static int usage(const char *msg)
{
    fprintf(stderr,
            "verify_output: %s\n"
            "usage: verify_output --records N [--topic T] [--table T] [--name NAME]\n"
            "         [--bootstrap HOST:PORT] [--pg CONNINFO] [--keys K] [--times T]\n"
            "         [--totals] [--sinks pg,kafka|pg|kafka]\n"
            "         [--pg-layout rows|changelog|two-tables]\n",
            msg);
    return 2;
}

static int parse_options(int argc, char **argv, options_t *opt)
{
    static const struct option longopts[] = {
        {"bootstrap", required_argument, 0, 'b'}, {"pg", required_argument, 0, 'g'},
        {"name", required_argument, 0, 'n'},      {"topic", required_argument, 0, 't'},
        {"table", required_argument, 0, 'T'},     {"records", required_argument, 0, 'r'},
        {"keys", required_argument, 0, 'k'},      {"times", required_argument, 0, 'x'},
        {"totals", no_argument, 0, 'S'},          {"sinks", required_argument, 0, 'O'},
        {"pg-layout", required_argument, 0, 'L'}, {0, 0, 0, 0}};
    const char *name = "twopc-demo";
    *opt = (options_t){.bootstrap = getenv("TWOPC_KAFKA_BOOTSTRAP"),
                       .pg = getenv("TWOPC_PG_CONNINFO"),
                       .keys = EO_DEFAULT_KEYS,
                       .times = 1,
                       .to_pg = true,
                       .to_kafka = true,
                       .pg_layout = "rows"};
    bool have_records = false, have_keys = false;
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
            name = optarg;
            break;
        case 't':
            opt->topic = optarg;
            break;
        case 'T':
            opt->table = optarg;
            break;
        case 'r':
            opt->records = strtoull(optarg, NULL, 10), have_records = true;
            break;
        case 'k':
            opt->keys = (uint32_t)strtoul(optarg, NULL, 10), have_keys = true;
            break;
        case 'S':
            opt->totals = true;
            break;
        case 'x':
            opt->times = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'O':
            opt->to_pg = strstr(optarg, "pg") != NULL;
            opt->to_kafka = strstr(optarg, "kafka") != NULL;
            break;
        case 'L':
            opt->pg_layout = optarg;
            if (strcmp(optarg, "rows") && strcmp(optarg, "changelog") &&
                strcmp(optarg, "two-tables"))
                return usage("--pg-layout is rows, changelog or two-tables");
            break;
        default:
            return usage("unknown option");
        }
    }
    if (opt->totals && !have_keys)
        opt->keys = KT_DEFAULT_USERS;
    if (optind != argc || !have_records || opt->keys == 0)
        return usage("give --records (and --keys, when not the default)");
    if (opt->times < 1 || opt->times > 200)
        return usage("--times must be 1 to 200");
    if (!opt->to_pg && !opt->to_kafka)
        return usage("--sinks is pg,kafka, pg or kafka");
    if (!opt->bootstrap || (opt->to_pg && !opt->pg))
        return usage("name the servers with --bootstrap and --pg (or TWOPC_KAFKA_BOOTSTRAP and "
                     "TWOPC_PG_CONNINFO)");
    if (!opt->topic) {
        snprintf(opt->topic_buf, sizeof opt->topic_buf, "%s-out", name);
        opt->topic = opt->topic_buf;
    }
    if (!opt->table) {
        snprintf(opt->table_buf, sizeof opt->table_buf, opt->totals ? "%s_totals" : "%s_out", name);
        for (char *p = opt->table_buf; *p; p++)
            if (*p == '-' || *p == '.')
                *p = '_';
        opt->table = opt->table_buf;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options_t opt;
    int rc = parse_options(argc, argv, &opt);
    if (rc)
        return rc;
    tally_t pg, kafka;
    if (!tally_init(&pg, "PostgreSQL", &opt, false) || !tally_init(&kafka, "Kafka", &opt, true) ||
        (opt.totals && !(opt.prefix = calloc(opt.records, sizeof *opt.prefix)))) {
        fprintf(stderr, "verify_output: out of memory\n");
        return 2;
    }
    pg.final_only = opt.totals || !strcmp(opt.pg_layout, "changelog");
    for (uint64_t i = 0; opt.totals && i < opt.records; i++)
        opt.prefix[i] = (i >= opt.keys ? opt.prefix[i - opt.keys] : 0) + kt_amount(i);
    bool read = (!opt.to_pg || read_pg(&opt, &pg)) && (!opt.to_kafka || read_kafka(&opt, &kafka));
    tally_finish(&pg, &opt);
    tally_finish(&kafka, &opt);
    bool ok = read && (!opt.to_pg || tally_ok(&pg)) && (!opt.to_kafka || tally_ok(&kafka));

    printf("%-36s %12llu\n", "records in", (unsigned long long)opt.records);
    printf("%-36s %12llu\n", "rows in PostgreSQL", (unsigned long long)pg.total);
    printf("%-36s %12llu\n", "records in Kafka (read_committed)", (unsigned long long)kafka.total);
    printf("%-36s %12s %12s\n", "", "PostgreSQL", "Kafka");
    printf("%-36s %12llu %12llu\n", "duplicates", (unsigned long long)pg.duplicates,
           (unsigned long long)kafka.duplicates);
    printf("%-36s %12llu %12llu\n", "missing", (unsigned long long)pg.missing,
           (unsigned long long)kafka.missing);
    printf("%-36s %12llu %12llu\n", "not from the input", (unsigned long long)pg.unexpected,
           (unsigned long long)kafka.unexpected);
    printf("%-36s %12llu %12llu\n", "wrong key or value", (unsigned long long)pg.bad,
           (unsigned long long)kafka.bad);
    printf("%-36s %12s %12llu\n", "out of order within a key", "-",
           (unsigned long long)kafka.out_of_order);
    if (!strcmp(opt.pg_layout, "two-tables"))
        printf("%-36s %12llu %12s\n", "rows apart in the two tables", (unsigned long long)pg.apart,
               "-");
    printf("topic: %s\ntable: %s\n", opt.topic, opt.table);
    if (opt.to_pg)
        tally_examples(&pg);
    if (opt.to_kafka)
        tally_examples(&kafka);
    printf("result: %s\n", !read ? "could not read the outputs"
                           : !ok ? "MISMATCH"
                           : opt.totals
                               ? "every running total exactly once and in order, every final total"
                           : pg.final_only && opt.to_pg
                               ? "every record exactly once in Kafka, the changelog applied once "
                                 "in PostgreSQL"
                               : "every record exactly once");
    free(pg.seen);
    free(kafka.seen);
    free(kafka.last);
    free(kafka.passes);
    free(opt.prefix);
    return !read ? 2 : ok ? 0 : 1;
}
