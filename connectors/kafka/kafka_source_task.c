/*
 * One subtask of the Kafka source: a read_committed librdkafka consumer with a manual assignment
 * of the partitions the subtask owns (of one or more topics), and for each of them the offset of
 * the next record to emit.
 * That offset is what checkpoints store, so a restore resumes right after the last record a
 * checkpoint includes. Polls wait at most poll.timeout.ms, so that barriers are never held up.
 *
 * Which subtask reads a partition is one rule (tpc__kafka_source_owner()), for the partitions
 * of a fresh start, those discovered later and those of a restore at any parallelism. An
 * unbounded source keeps looking at its topics' metadata (kafka_source_meta.c) and reads a
 * partition or a matching topic that appeared from its first offset. The partitions in the
 * checkpoint are those it had begun to read; one missing there, found after a restore, was not
 * read by any completed checkpoint, so reading it from its first offset again repeats nothing.
 *
 * Bounded mode stops each partition at the end offset taken at the first fresh start: the last
 * stable offset, which is what a read_committed watermark query answers. Every offset below it
 * belongs to a decided transaction, so the records below it are the same in every run. Counting
 * records cannot tell when a partition is done, because transaction markers and aborted records
 * occupy offsets too; the consumer's end-of-partition events, whose offset is the position after
 * everything skipped, and any record at or past the end offset can.
 */
#include "kafka_internal.h"
#include "tpc_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long close waits for offset commits still on their way to the group. */
#define COMMIT_WAIT_MS 2000
/* Discoveries in a row that must miss a topic before it counts as deleted: one answer without
 * it may come from a broker that has not loaded its metadata yet. */
#define MISSES_TO_DELETE 3

/* A topic the subtask reads or has read. */
typedef struct {
    char *name;
    int partitions; /* as the metadata said last */
    int *index;     /* partition -> position in parts, -1 when not owned */
    int floor;      /* partitions below it are known even without an entry (docs/kafka.md) */
    int misses;     /* discoveries in a row that did not find it */
    bool gone;      /* deleted: no longer read; a topic of that name again is another */
} topic_t;

typedef struct {
    const tpc_kafka_source_t *conf;
    tpc_ctx_t *ctx;
    rd_kafka_t *rk;
    rd_kafka_queue_t *commits; /* a consumer group was named: results of offset commits */
    int commits_in_flight;
    uint64_t snapshot_id; /* the last snapshot's checkpoint, and the offsets it stored */
    int64_t *snapshot_next;
    topic_t *topics;
    size_t ntopics, topics_cap;
    const rd_kafka_topic_t *last_rkt; /* the topic handle of the last message, and its index */
    int last_topic;
    tpc__kafka_source_part_t *parts;
    size_t nparts, parts_cap;
    size_t ndone;
    tpc__kafka_meta_t opened; /* the metadata read at open */
    tpc__kafka_discovery_t *discovery;
    tpc_header_t *headers; /* of the message being emitted */
    size_t headers_cap;
    uint64_t warnings;
    uint64_t discovery_failures;
    tpc__kafka_fetch_t fetch;
} source_t;

static tpc_error_t *conf_set(rd_kafka_conf_t *rc, const char *name, const char *value)
{
    return tpc__kafka_conf_set(rc, name, value,
                               "see librdkafka's CONFIGURATION.md for its consumer properties");
}

static const char *prop(const tpc_kafka_source_t *conf, const char *name)
{
    return tpc__kafka_props_get((const char *const *)conf->props, conf->nprops, name);
}

/* librdkafka's log lines, served by the consumer's poll on the subtask's thread, go to the job's
 * logger with the vertex and subtask in front. */
static void on_log(const rd_kafka_t *rk, int level, const char *facility, const char *line)
{
    source_t *s = rd_kafka_opaque(rk);
    tpc_log_level_t to = level <= 4 ? TPC_LOG_WARN : level <= 6 ? TPC_LOG_INFO : TPC_LOG_DEBUG;
    tpc_log(s->ctx, to, "kafka source: %s: %s", facility, line);
}

/* The consumer: the user's properties over the source's defaults, then what exactly-once replay
 * needs. A group id is required by librdkafka's assign(); no group is joined. */
static tpc_error_t *make_consumer(source_t *s, tpc_ctx_t *ctx)
{
    char group[512], errstr[512];
    snprintf(group, sizeof group, "twopc-%s-%s", tpc_ctx_job_name(ctx), tpc_ctx_vertex_name(ctx));
    rd_kafka_conf_t *rc = rd_kafka_conf_new();
    rd_kafka_conf_set_opaque(rc, s);
    rd_kafka_conf_set_log_cb(rc, on_log);
    tpc_error_t *err = conf_set(rc, "group.id", group);
    if (!err)
        err = conf_set(rc, "auto.offset.reset", "error");
    if (!err)
        err = tpc__kafka_fetch_defaults(rc);
    for (size_t i = 0; !err && i < s->conf->nprops; i++)
        err = conf_set(rc, s->conf->props[2 * i], s->conf->props[2 * i + 1]);
    if (!err)
        err = conf_set(rc, "isolation.level", "read_committed");
    if (!err)
        err = conf_set(rc, "enable.auto.commit", "false");
    if (!err)
        err = conf_set(rc, "enable.auto.offset.store", "false");
    if (!err)
        err = conf_set(rc, "enable.partition.eof", "true");
    if (!err)
        err = conf_set(rc, "log.queue", "true");
    if (err) {
        rd_kafka_conf_destroy(rc);
        return err;
    }
    s->rk = rd_kafka_new(RD_KAFKA_CONSUMER, rc, errstr, sizeof errstr);
    if (!s->rk) {
        rd_kafka_conf_destroy(rc);
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "could not create kafka consumer: %s",
                             errstr);
    }
    rd_kafka_set_log_queue(s->rk, NULL); /* the main queue, which the consumer's poll serves */
    rd_kafka_poll_set_consumer(s->rk);
    tpc__kafka_fetch_init(&s->fetch, s->rk, rd_kafka_conf(s->rk));
    if (prop(s->conf, "group.id"))
        s->commits = rd_kafka_queue_new(s->rk);
    return NULL;
}

static bool waiting_for_leader(const tpc__kafka_meta_t *m)
{
    for (size_t i = 0; i < m->ntopics; i++)
        if (m->topics[i].err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE)
            return true;
    return false;
}

/* The topics' partition counts at open, which also shows that the cluster answers. A listed
 * topic must exist; a pattern may match nothing yet. */
static tpc_error_t *read_metadata(source_t *s)
{
    tpc__kafka_meta_t *m = &s->opened;
    tpc__kafka_meta_read(s->rk, s->conf, s->conf->open_timeout_ms, m);
    /* A topic created a moment ago may have no leader yet. */
    int64_t deadline = tpc_clock_ms() + s->conf->open_timeout_ms;
    while (!m->err && waiting_for_leader(m) && tpc_clock_ms() < deadline) {
        tpc__kafka_meta_free(m);
        tpc_sleep_ms(100, NULL, NULL);
        tpc__kafka_meta_read(s->rk, s->conf, s->conf->open_timeout_ms, m);
    }
    if (m->err) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE,
                                         "could not reach kafka at \"%s\" within %d ms: %s",
                                         prop(s->conf, "bootstrap.servers"),
                                         s->conf->open_timeout_ms, rd_kafka_err2str(m->err));
        return tpc_error_hint(err, "check the bootstrap servers and that the brokers run; raise "
                                   "open.timeout.ms for a slow cluster");
    }
    for (size_t i = 0; i < m->ntopics; i++) {
        rd_kafka_resp_err_t te = m->topics[i].err;
        if (!te && m->topics[i].partitions > 0)
            continue;
        /* A missing or forbidden topic stays so; a partition without a leader after the wait
         * (a broker that is restarting) is for a restart to get past. */
        bool lasting = te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                       te == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                       te == RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION;
        tpc_error_t *err = tpc_error_new(
            te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ? TPC_ERR_NOT_FOUND : TPC_ERR_EXTERNAL,
            lasting ? TPC_ERROR_FATAL : TPC_ERROR_RETRIABLE,
            "could not read kafka topic \"%s\": %s", m->topics[i].name,
            rd_kafka_err2str(te ? te : RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION));
        return tpc_error_hint(err, "create the topic before the job starts (the source never "
                                   "creates it), check its name, and that the principal may "
                                   "describe and read it");
    }
    if (s->conf->is_pattern && m->ntopics == 0)
        tpc_log(s->ctx, TPC_LOG_WARN, "kafka source: no topic matches \"%s\" yet", s->conf->topic);
    return NULL;
}

/* Take the results of offset commits that arrived, waiting up to @wait_ms for the first. A
 * failed commit only delays the group's lag figures. */
static void commit_results(source_t *s, int wait_ms)
{
    rd_kafka_event_t *ev;
    while ((ev = rd_kafka_queue_poll(s->commits, wait_ms))) {
        if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_OFFSET_COMMIT) {
            s->commits_in_flight--;
            if (rd_kafka_event_error(ev))
                tpc_log(s->ctx, TPC_LOG_INFO,
                        "kafka source: offsets not committed to the group: %s",
                        rd_kafka_event_error_string(ev));
        }
        rd_kafka_event_destroy(ev);
        wait_ms = 0;
    }
}

static void source_close(void *self, tpc_ctx_t *ctx)
{
    source_t *s = self;
    (void)ctx;
    if (!s)
        return;
    tpc__kafka_discovery_stop(s->discovery);
    if (s->commits) {
        /* The last checkpoint's offsets are usually still on their way. */
        int64_t deadline = tpc_clock_ms() + COMMIT_WAIT_MS;
        while (s->commits_in_flight > 0 && tpc_clock_ms() < deadline)
            commit_results(s, 100);
        rd_kafka_queue_destroy(s->commits);
    }
    tpc__kafka_fetch_destroy(&s->fetch);
    if (s->rk) {
        rd_kafka_consumer_close(s->rk);
        rd_kafka_destroy(s->rk);
    }
    for (size_t t = 0; t < s->ntopics; t++) {
        free(s->topics[t].name);
        free(s->topics[t].index);
    }
    free(s->topics);
    tpc__kafka_meta_free(&s->opened);
    free(s->parts);
    free(s->snapshot_next);
    free(s->headers);
    free(s);
}

static tpc_error_t *source_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    source_t *s = calloc(1, sizeof *s);
    if (!s)
        return tpc_error_nomem();
    s->conf = arg;
    s->ctx = ctx;
    s->last_topic = -1;
    *self = s;
    tpc_error_t *err = NULL;
    if (s->conf->start == TPC__KAFKA_START_GROUP && !prop(s->conf, "group.id"))
        err = tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                           "kafka source start=group needs a consumer group"),
                             "set \"kafka.group.id\" to the group whose offsets to start from");
    if (!err)
        err = make_consumer(s, ctx);
    if (!err)
        err = read_metadata(s);
    if (err) {
        source_close(s, ctx); /* the runtime closes only what opened */
        *self = NULL;
    }
    return err;
}

/* ---- topics and partitions ------------------------------------------------------------------ */

/* The topic of that name that is read now, or -1. */
static int topic_index(const source_t *s, const char *name, size_t len)
{
    for (size_t t = 0; t < s->ntopics; t++)
        if (!s->topics[t].gone && strlen(s->topics[t].name) == len &&
            memcmp(s->topics[t].name, name, len) == 0)
            return (int)t;
    return -1;
}

static tpc_error_t *add_topic(source_t *s, const char *name, size_t len, int *at)
{
    if (s->ntopics == s->topics_cap) {
        size_t cap = s->topics_cap ? 2 * s->topics_cap : 4;
        topic_t *topics = realloc(s->topics, cap * sizeof *topics);
        if (!topics)
            return tpc_error_nomem();
        s->topics = topics;
        s->topics_cap = cap;
    }
    topic_t *t = &s->topics[s->ntopics];
    *t = (topic_t){.name = strndup(name, len)};
    if (!t->name)
        return tpc_error_nomem();
    *at = (int)s->ntopics++;
    return NULL;
}

/* Make room in topic @t's index for @partitions partitions. */
static tpc_error_t *grow_topic(topic_t *t, int partitions)
{
    if (partitions <= t->partitions)
        return NULL;
    int *index = realloc(t->index, (size_t)partitions * sizeof *index);
    if (!index)
        return tpc_error_nomem();
    for (int p = t->partitions; p < partitions; p++)
        index[p] = -1;
    t->index = index;
    t->partitions = partitions;
    return NULL;
}

/* Where the part for @partition of topic @topic is in parts, or -1 (not owned, or unknown). */
static int find(const source_t *s, int topic, int32_t partition)
{
    if (topic < 0 || partition < 0 || partition >= s->topics[topic].partitions)
        return -1;
    return s->topics[topic].index[partition];
}

static bool owns(const source_t *s, int topic, int32_t partition)
{
    const char *name = s->topics[topic].name;
    return tpc__kafka_source_owner(name, strlen(name), partition, tpc_ctx_parallelism(s->ctx)) ==
           tpc_ctx_subtask(s->ctx);
}

static tpc_error_t *own(source_t *s, const tpc__kafka_source_part_t *part)
{
    topic_t *t = &s->topics[part->topic];
    if (part->partition >= t->partitions)
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                          "restored kafka source state names partition %d of topic \"%s\", "
                          "which has %d partitions",
                          (int)part->partition, t->name, t->partitions),
            "the topic was deleted and created again: start the job with restore.mode=fresh");
    if (t->index[part->partition] >= 0)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "restored kafka source state lists partition %d of topic \"%s\" "
                             "twice",
                             (int)part->partition, t->name);
    if (s->nparts == s->parts_cap) {
        size_t cap = s->parts_cap ? 2 * s->parts_cap : 16;
        tpc__kafka_source_part_t *parts = realloc(s->parts, cap * sizeof *parts);
        int64_t *next = parts ? realloc(s->snapshot_next, cap * sizeof *next) : NULL;
        if (parts)
            s->parts = parts;
        if (!next)
            return tpc_error_nomem();
        s->snapshot_next = next;
        s->parts_cap = cap;
    }
    t->index[part->partition] = (int)s->nparts;
    s->parts[s->nparts++] = *part;
    return NULL;
}

static tpc_error_t *partition_list_error(rd_kafka_error_t *e, const source_t *s, const char *what)
{
    tpc_error_t *err = tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL,
                                     "could not %s partitions of kafka "
                                     "topics \"%s\": %s",
                                     what, s->conf->topic, rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    return err;
}

/* Read parts[first..] from their offsets, beside what the consumer reads already. */
static tpc_error_t *assign_from(source_t *s, size_t first)
{
    if (first == s->nparts)
        return NULL;
    rd_kafka_topic_partition_list_t *list =
        rd_kafka_topic_partition_list_new((int)(s->nparts - first));
    for (size_t i = first; i < s->nparts; i++) {
        tpc__kafka_source_part_t *part = &s->parts[i];
        rd_kafka_topic_partition_list_add(list, s->topics[part->topic].name, part->partition)
            ->offset = part->next;
    }
    rd_kafka_error_t *e = rd_kafka_incremental_assign(s->rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    return e ? partition_list_error(e, s, "assign") : NULL;
}

static void mark_done_if_past_end(source_t *s, tpc__kafka_source_part_t *part)
{
    if (part->done || part->end < 0 || part->next < part->end)
        return;
    part->done = true;
    s->ndone++;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, s->topics[part->topic].name, part->partition);
    rd_kafka_pause_partitions(s->rk, list); /* stop fetching what will not be emitted */
    rd_kafka_topic_partition_list_destroy(list);
}

/* First and end offset of a partition as a read_committed consumer sees them (the end is the
 * last stable offset). */
static tpc_error_t *watermarks(source_t *s, int topic, int32_t partition, int64_t *low,
                               int64_t *high)
{
    const char *name = s->topics[topic].name;
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(s->rk, name, partition, low, high,
                                                             s->conf->open_timeout_ms);
    if (!e)
        return NULL;
    return tpc_error_new(e == RD_KAFKA_RESP_ERR__TIMED_OUT ? TPC_ERR_TIMEOUT : TPC_ERR_EXTERNAL,
                         TPC_ERROR_RETRIABLE,
                         "could not read the offsets of kafka topic \"%s\" partition %d: %s", name,
                         (int)partition, rd_kafka_err2str(e));
}

/* start=timestamp and start=group: ask the cluster where each owned partition begins. A
 * partition with no answer (no record that late, no offset in the group) keeps the offset
 * fresh_parts() gave it. */
static tpc_error_t *start_offsets(source_t *s)
{
    bool by_time = s->conf->start == TPC__KAFKA_START_TIMESTAMP;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)s->nparts);
    for (size_t i = 0; i < s->nparts; i++)
        rd_kafka_topic_partition_list_add(list, s->topics[s->parts[i].topic].name,
                                          s->parts[i].partition)
            ->offset = by_time ? s->conf->start_timestamp : RD_KAFKA_OFFSET_INVALID;
    rd_kafka_resp_err_t e = by_time
                                ? rd_kafka_offsets_for_times(s->rk, list, s->conf->open_timeout_ms)
                                : rd_kafka_committed(s->rk, list, s->conf->open_timeout_ms);
    for (int i = 0; !e && i < list->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &list->elems[i];
        int at = find(s, topic_index(s, tp->topic, strlen(tp->topic)), tp->partition);
        if (tp->err)
            e = tp->err;
        else if (tp->offset >= 0 && at >= 0)
            s->parts[at].next = tp->offset;
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (!e)
        return NULL;
    return tpc_error_new(e == RD_KAFKA_RESP_ERR__TIMED_OUT ? TPC_ERR_TIMEOUT : TPC_ERR_EXTERNAL,
                         TPC_ERROR_RETRIABLE, "could not read the %s of kafka topics \"%s\": %s",
                         by_time ? "offsets by timestamp" : "group's committed offsets",
                         s->conf->topic, rd_kafka_err2str(e));
}

/* The topics the metadata at open names, as the subtask's topics. */
static tpc_error_t *topics_from_metadata(source_t *s)
{
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < s->opened.ntopics; i++) {
        const tpc__kafka_topic_meta_t *m = &s->opened.topics[i];
        int t = -1;
        err = add_topic(s, m->name, strlen(m->name), &t);
        if (!err)
            err = grow_topic(&s->topics[t], m->partitions);
    }
    return err;
}

/* The partitions a fresh start owns, from where start says, and their end offsets. */
static tpc_error_t *fresh_parts(source_t *s)
{
    tpc__kafka_start_t start = s->conf->start;
    /* Where a partition begins without a better answer: no record at or after the timestamp
     * means nothing to read yet, so the end. */
    bool at_end = start == TPC__KAFKA_START_LATEST || start == TPC__KAFKA_START_TIMESTAMP ||
                  (start == TPC__KAFKA_START_GROUP && s->conf->start_fallback_latest);
    tpc_error_t *err = topics_from_metadata(s);
    for (size_t t = 0; !err && t < s->ntopics; t++) {
        for (int32_t p = 0; !err && p < s->topics[t].partitions; p++) {
            if (!owns(s, (int)t, p))
                continue;
            int64_t low = 0, high = 0;
            err = watermarks(s, (int)t, p, &low, &high);
            tpc__kafka_source_part_t part = {.topic = (int)t,
                                             .partition = p,
                                             .next = at_end ? high : low,
                                             .end = s->conf->bounded ? high : -1};
            if (!err)
                err = own(s, &part);
        }
    }
    if (!err && s->nparts &&
        (start == TPC__KAFKA_START_TIMESTAMP || start == TPC__KAFKA_START_GROUP))
        err = start_offsets(s);
    return err;
}

/* The topic of a restored entry among the subtask's topics; -1 (and no error) for a topic of
 * the pattern that no longer exists, whose entries are dropped. */
static tpc_error_t *entry_topic(source_t *s, const tpc__kafka_source_entry_t *e, int *at)
{
    *at = topic_index(s, e->topic, e->topic_len);
    if (*at >= 0)
        return NULL;
    if (!tpc__kafka_source_matches(s->conf, e->topic, e->topic_len)) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                                         "restored kafka source state is for topic \"%.*s\", "
                                         "which the source (\"%s\") does not read",
                                         (int)e->topic_len, e->topic, s->conf->topic);
        return tpc_error_hint(err, "give the source reading other topics a new vertex name, or "
                                   "start the job with restore.mode=fresh");
    }
    /* Listed topics exist, or open failed: this one matched the pattern and was deleted. */
    if (!e->floor)
        tpc_log(s->ctx, TPC_LOG_ERROR,
                "kafka source: topic \"%.*s\" of the restored checkpoint was deleted: partition "
                "%d is no longer read, and its records from offset %lld on that the job had not "
                "read are lost",
                (int)e->topic_len, e->topic, (int)e->partition, (long long)e->next);
    return NULL;
}

/* A restore. Union entries (an unbounded source) name every partition the job had begun to
 * read: this subtask takes those the rule gives it. List entries (a bounded source, or a
 * checkpoint written before discovery existed) are spread by the runtime, so each subtask keeps
 * what it got; every partition the topics have now then counts as known (a floor), as no
 * subtask can tell which of them another one holds. */
static tpc_error_t *restored_parts(source_t *s, const tpc_state_reader_t *restored)
{
    tpc_error_t *err = topics_from_metadata(s);
    size_t nunion = tpc_state_count(restored, TPC_STATE_UNION);
    size_t nlist = tpc_state_count(restored, TPC_STATE_LIST);
    for (size_t i = 0; !err && i < nunion + nlist; i++) {
        bool from_union = i < nunion;
        const void *bytes;
        size_t len;
        tpc_state_get(restored, from_union ? TPC_STATE_UNION : TPC_STATE_LIST,
                      from_union ? i : i - nunion, &bytes, &len);
        tpc__kafka_source_entry_t e;
        int t = -1;
        err = tpc__kafka_source_decode(bytes, len, &e);
        if (!err)
            err = entry_topic(s, &e, &t);
        if (err || t < 0)
            continue;
        if (e.floor) {
            if (e.partition > s->topics[t].floor)
                s->topics[t].floor = e.partition;
            continue;
        }
        if (from_union && !owns(s, t, e.partition))
            continue;
        tpc__kafka_source_part_t part = {
            .topic = t, .partition = e.partition, .next = e.next, .end = e.end};
        if (!s->conf->bounded) {
            part.end = -1;
        } else if (part.end < 0) {
            /* Bounded now, unbounded in the checkpoint: the end is taken now. */
            int64_t low = 0;
            err = watermarks(s, t, part.partition, &low, &part.end);
        }
        if (!err)
            err = own(s, &part);
    }
    if (!err && nlist && !s->conf->bounded) {
        for (size_t t = 0; t < s->ntopics; t++)
            if (s->topics[t].floor < s->topics[t].partitions)
                s->topics[t].floor = s->topics[t].partitions;
        tpc_log(s->ctx, TPC_LOG_INFO,
                "kafka source: the restored state has no list of the partitions the job knew "
                "(a bounded run, or one before partition discovery): the partitions there are "
                "now count as known, partitions added from now on are read");
    }
    return err;
}

/* Partitions of topic @t from @from to its count that this subtask owns and that no checkpoint
 * knows: read from their first offsets. */
static tpc_error_t *take_new_partitions(source_t *s, int t, int from)
{
    tpc_error_t *err = NULL;
    int count = 0;
    for (int32_t p = from; !err && p < s->topics[t].partitions; p++) {
        if (p < s->topics[t].floor || !owns(s, t, p) || find(s, t, p) >= 0)
            continue;
        tpc__kafka_source_part_t part = {
            .topic = t, .partition = p, .next = TPC__KAFKA_FROM_BEGINNING, .end = -1};
        err = own(s, &part);
        count++;
    }
    if (count)
        tpc_log(s->ctx, TPC_LOG_INFO,
                "kafka source: reads %d more partitions of \"%s\" (now %d in the topic) from "
                "their first offsets",
                count, s->topics[t].name, s->topics[t].partitions);
    return err;
}

/* A topic no longer in the metadata: a listed one fails the subtask (the restart's open then
 * says it is gone); one of the pattern stops being read, loudly. */
static tpc_error_t *topic_missing(source_t *s, int t, rd_kafka_resp_err_t why)
{
    topic_t *topic = &s->topics[t];
    if (++topic->misses < MISSES_TO_DELETE)
        return NULL;
    if (!s->conf->is_pattern)
        return tpc_error_new(TPC_ERR_EXTERNAL, 0, "kafka topic \"%s\" is gone: %s", topic->name,
                             rd_kafka_err2str(why));
    topic->gone = true;
    s->last_rkt = NULL; /* a topic of that name again is another one */
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(4);
    for (size_t i = 0; i < s->nparts; i++) {
        tpc__kafka_source_part_t *part = &s->parts[i];
        if (part->topic != t)
            continue;
        part->gone = true;
        rd_kafka_topic_partition_list_add(list, topic->name, part->partition);
        tpc_log(s->ctx, TPC_LOG_ERROR,
                "kafka source: topic \"%s\", matched by \"%s\", was deleted: partition %d is no "
                "longer read; records from offset %lld on that the job had not read are lost",
                topic->name, s->conf->topic, (int)part->partition, (long long)part->next);
    }
    if (list->cnt == 0)
        tpc_log(s->ctx, TPC_LOG_ERROR, "kafka source: topic \"%s\", matched by \"%s\", was deleted",
                topic->name, s->conf->topic);
    rd_kafka_error_t *e = list->cnt ? rd_kafka_incremental_unassign(s->rk, list) : NULL;
    rd_kafka_topic_partition_list_destroy(list);
    return e ? partition_list_error(e, s, "unassign") : NULL;
}

/* What a discovery found: partitions and topics that appeared, topics that went. */
static tpc_error_t *apply_discovery(source_t *s, const tpc__kafka_meta_t *m)
{
    if (m->err) {
        if (s->discovery_failures++ % 10 == 0)
            tpc_log(s->ctx, TPC_LOG_WARN, "kafka source: partition discovery failed: %s",
                    rd_kafka_err2str(m->err));
        return NULL;
    }
    size_t first_new = s->nparts;
    size_t ntopics = s->ntopics; /* topics added here are found */
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < m->ntopics; i++) {
        const tpc__kafka_topic_meta_t *tm = &m->topics[i];
        int t = topic_index(s, tm->name, strlen(tm->name));
        if (tm->err) {
            if (t >= 0 && tm->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
                err = topic_missing(s, t, tm->err);
            continue;
        }
        if (t < 0) {
            err = add_topic(s, tm->name, strlen(tm->name), &t);
            if (!err)
                tpc_log(s->ctx, TPC_LOG_INFO, "kafka source: topic \"%s\" matches \"%s\"", tm->name,
                        s->conf->topic);
        }
        if (err)
            break;
        topic_t *topic = &s->topics[t];
        topic->misses = 0;
        int before = topic->partitions;
        if (tm->partitions < before) {
            err = tpc_error_new(TPC_ERR_STATE, 0,
                                "kafka topic \"%s\" has %d partitions, fewer than the %d read: it "
                                "was deleted and created again",
                                topic->name, tm->partitions, before);
            break;
        }
        err = grow_topic(topic, tm->partitions);
        if (!err)
            err = take_new_partitions(s, t, before);
    }
    /* A topic of the pattern that the answer leaves out is missing too. */
    for (size_t t = 0; !err && s->conf->is_pattern && t < ntopics; t++) {
        if (s->topics[t].gone)
            continue;
        bool listed = false;
        for (size_t j = 0; j < m->ntopics && !listed; j++)
            listed = strcmp(m->topics[j].name, s->topics[t].name) == 0;
        if (!listed)
            err = topic_missing(s, (int)t, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
    }
    return err ? err : assign_from(s, first_new);
}

static tpc_error_t *source_initialize(void *self, tpc_ctx_t *ctx,
                                      const tpc_state_reader_t *restored)
{
    source_t *s = self;
    tpc_error_t *err = restored ? restored_parts(s, restored) : fresh_parts(s);
    /* After a restore, partitions that no checkpoint knows: appeared while the job was down. */
    for (size_t t = 0; !err && restored && !s->conf->bounded && t < s->ntopics; t++)
        err = take_new_partitions(s, (int)t, 0);
    tpc__kafka_meta_free(&s->opened);
    if (!err)
        err = assign_from(s, 0);
    if (err)
        return err;
    for (size_t i = 0; i < s->nparts; i++)
        mark_done_if_past_end(s, &s->parts[i]);
    int total = 0;
    for (size_t t = 0; t < s->ntopics; t++)
        total += s->topics[t].partitions;
    tpc_log(ctx, TPC_LOG_INFO, "kafka source reads %zu of %d partitions of \"%s\"%s", s->nparts,
            total, s->conf->topic, restored ? " from the restored offsets" : "");
    if (!s->conf->bounded && s->conf->discovery_interval_ms > 0)
        err = tpc__kafka_discovery_start(s->rk, s->conf, &s->discovery);
    return err;
}

/* A consumer error: the ones that mean records cannot be read fail the subtask, the others are
 * librdkafka reporting what it retries by itself. */
static tpc_error_t *consumer_error(source_t *s, tpc_ctx_t *ctx, const rd_kafka_message_t *msg)
{
    switch (msg->err) {
    case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
    case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_DATA_LOSS, TPC_ERROR_FATAL,
                          "data loss: kafka topic \"%s\" partition %d no longer has the records "
                          "from offset %lld on: %s",
                          rd_kafka_topic_name(msg->rkt), (int)msg->partition,
                          (long long)msg->offset, rd_kafka_message_errstr(msg)),
            "the topic's retention deleted records the job had not read; keep records longer "
            "than the job may be down, or set kafka.auto.offset.reset to accept the loss");
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
        if (s->conf->is_pattern && s->discovery) {
            /* A topic of the pattern may come and go: discovery tells which. */
            tpc__kafka_discovery_soon(s->discovery);
            if (s->warnings++ % 100 == 0)
                tpc_log(ctx, TPC_LOG_WARN, "kafka source: %s", rd_kafka_message_errstr(msg));
            return NULL;
        }
        /* fall through */
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
        /* Denied access stays denied. A topic that seems gone is looked up again by the
         * restart's open, which ends the job if it is gone indeed. */
        return tpc_error_new(TPC_ERR_EXTERNAL,
                             msg->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                                     msg->err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED
                                 ? TPC_ERROR_FATAL
                                 : 0,
                             "could not read kafka topic \"%s\": %s",
                             msg->rkt ? rd_kafka_topic_name(msg->rkt) : s->conf->topic,
                             rd_kafka_message_errstr(msg));
    default:
        if (s->warnings++ % 100 == 0)
            tpc_log(ctx, TPC_LOG_WARN, "kafka source: %s (%s)", rd_kafka_message_errstr(msg),
                    rd_kafka_err2name(msg->err));
        return NULL;
    }
}

/* The message's headers as the record's, in s->headers; none costs one call. */
static tpc_error_t *headers_of(source_t *s, const rd_kafka_message_t *msg, size_t *count)
{
    rd_kafka_headers_t *hdrs = NULL;
    *count = 0;
    if (rd_kafka_message_headers(msg, &hdrs) || !hdrs)
        return NULL;
    size_t n = rd_kafka_header_cnt(hdrs);
    if (n > s->headers_cap) {
        tpc_header_t *headers = realloc(s->headers, n * sizeof *headers);
        if (!headers)
            return tpc_error_nomem();
        s->headers = headers;
        s->headers_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name;
        const void *value;
        size_t len;
        if (rd_kafka_header_get_all(hdrs, i, &name, &value, &len))
            break;
        s->headers[(*count)++] = (tpc_header_t){
            .name = name, .name_len = strlen(name), .value = value, .value_len = len};
    }
    return NULL;
}

/* Handle one message. Sets *emitted when it went downstream. */
static tpc_error_t *take(source_t *s, tpc_ctx_t *ctx, const rd_kafka_message_t *msg, bool *emitted,
                         bool *canceled)
{
    *emitted = false;
    if (msg->err && msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
        return consumer_error(s, ctx, msg);
    if (msg->rkt != s->last_rkt) {
        const char *name = msg->rkt ? rd_kafka_topic_name(msg->rkt) : NULL;
        s->last_topic = name ? topic_index(s, name, strlen(name)) : -1;
        s->last_rkt = msg->rkt;
    }
    int at = find(s, s->last_topic, msg->partition);
    if (at < 0)
        return NULL; /* not assigned to this subtask: cannot happen with assign() */
    tpc__kafka_source_part_t *part = &s->parts[at];
    if (part->done || part->gone || msg->offset < part->next)
        return NULL; /* fetched before the partition was paused */
    if (msg->err || (part->end >= 0 && msg->offset >= part->end)) {
        /* End of the partition for now: its offset is the position after every record, marker
         * and aborted record already skipped. A record past the end proves the same. */
        if (msg->offset > part->next)
            part->next = msg->err ? msg->offset : part->end;
        mark_done_if_past_end(s, part);
        return NULL;
    }
    rd_kafka_timestamp_type_t type;
    int64_t ts = rd_kafka_message_timestamp(msg, &type);
    tpc_record_t rec = {.key = msg->key,
                        .key_len = msg->key_len,
                        .value = msg->payload,
                        .value_len = msg->len,
                        .timestamp = ts < 0 ? 0 : ts};
    tpc_error_t *err = headers_of(s, msg, &rec.header_count);
    if (err)
        return err;
    rec.headers = rec.header_count ? s->headers : NULL;
    tpc_err_t rc = tpc_emit(ctx, &rec);
    if (rc == TPC_ERR_CANCELED) {
        *canceled = true;
        return NULL;
    }
    if (rc != TPC_OK)
        return tpc_error_new(rc, TPC_ERROR_FATAL, "kafka source could not emit a record: %s",
                             tpc_strerror(rc));
    part->next = msg->offset + 1;
    *emitted = true;
    tpc__kafka_fetch_taken(&s->fetch, msg->key_len + msg->len);
    mark_done_if_past_end(s, part);
    return NULL;
}

/* Fetchers may have parked on a full queue that ran low: wake the leaders of the partitions
 * still read (kafka_source_fetch.c). */
static void wake_fetchers(source_t *s)
{
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)s->nparts);
    for (size_t i = 0; i < s->nparts; i++)
        if (!s->parts[i].done && !s->parts[i].gone)
            rd_kafka_topic_partition_list_add(list, s->topics[s->parts[i].topic].name,
                                              s->parts[i].partition);
    tpc__kafka_fetch_wake(&s->fetch, s->rk, list);
    rd_kafka_topic_partition_list_destroy(list);
}

static tpc_error_t *source_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    source_t *s = self;
    if (s->conf->bounded && s->ndone == s->nparts) {
        *result = TPC_POLL_END;
        return NULL;
    }
    tpc_error_t *err = NULL;
    tpc__kafka_meta_t found;
    if (s->discovery && tpc__kafka_discovery_take(s->discovery, &found)) {
        err = apply_discovery(s, &found);
        tpc__kafka_meta_free(&found);
    }
    int emitted = 0;
    bool canceled = false;
    for (int i = 0; !err && !canceled && i < s->conf->max_batch; i++) {
        rd_kafka_message_t *msg =
            rd_kafka_consumer_poll(s->rk, i == 0 ? s->conf->poll_timeout_ms : 0);
        if (!msg)
            break;
        bool one = false;
        err = take(s, ctx, msg, &one, &canceled);
        emitted += one;
        rd_kafka_message_destroy(msg);
    }
    if (!err && tpc__kafka_fetch_needs_wake(&s->fetch))
        wake_fetchers(s);
    *result = emitted ? TPC_POLL_MORE : TPC_POLL_IDLE;
    if (s->conf->bounded && s->ndone == s->nparts)
        *result = TPC_POLL_MORE; /* the next poll ends, after these records went out */
    return err;
}

/* Unbounded: union state, so that a restore at any parallelism knows every partition the job
 * had begun to read. Bounded: list state, as its subtasks finish one by one (union state would
 * make a partly finished vertex decline checkpoints). */
static tpc_error_t *source_snapshot(void *self, tpc_ctx_t *ctx, uint64_t checkpoint_id,
                                    tpc_state_writer_t *w)
{
    source_t *s = self;
    (void)ctx;
    tpc_state_kind_t kind = s->conf->bounded ? TPC_STATE_LIST : TPC_STATE_UNION;
    unsigned char buf[TPC__KAFKA_SOURCE_ENTRY_MAX];
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < s->nparts; i++) {
        const tpc__kafka_source_part_t *part = &s->parts[i];
        s->snapshot_next[i] = part->next;
        if (part->gone)
            continue;
        const char *topic = s->topics[part->topic].name;
        tpc__kafka_source_entry_t e = {.topic = topic,
                                       .topic_len = strlen(topic),
                                       .partition = part->partition,
                                       .next = part->next,
                                       .end = part->end};
        err = tpc_state_add(w, kind, buf, tpc__kafka_source_encode(&e, buf));
    }
    for (size_t t = 0; !err && !s->conf->bounded && t < s->ntopics; t++) {
        if (s->topics[t].gone || s->topics[t].floor == 0)
            continue;
        tpc__kafka_source_entry_t e = {.topic = s->topics[t].name,
                                       .topic_len = strlen(s->topics[t].name),
                                       .partition = s->topics[t].floor,
                                       .end = -1,
                                       .floor = true};
        err = tpc_state_add(w, kind, buf, tpc__kafka_source_encode(&e, buf));
    }
    s->snapshot_id = checkpoint_id;
    return err;
}

/* With a consumer group named, the offsets of the last snapshot go to the group once its
 * checkpoint is complete: only for monitoring (lag), never read back. */
static tpc_error_t *source_notify(void *self, tpc_ctx_t *ctx, uint64_t checkpoint_id)
{
    source_t *s = self;
    (void)ctx;
    if (s->commits)
        commit_results(s, 0);
    if (!s->commits || !s->snapshot_id || checkpoint_id < s->snapshot_id || !s->nparts)
        return NULL;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)s->nparts);
    for (size_t i = 0; i < s->nparts; i++)
        if (!s->parts[i].gone && s->snapshot_next[i] >= 0)
            rd_kafka_topic_partition_list_add(list, s->topics[s->parts[i].topic].name,
                                              s->parts[i].partition)
                ->offset = s->snapshot_next[i];
    if (list->cnt && !rd_kafka_commit_queue(s->rk, list, s->commits, NULL, NULL))
        s->commits_in_flight++; /* asynchronous: the result comes through s->commits */
    rd_kafka_topic_partition_list_destroy(list);
    s->snapshot_id = 0;
    return NULL;
}

const tpc_operator_ops_t tpc__kafka_source_ops = {
    .version = TPC_OPERATOR_OPS_VERSION,
    .open = source_open,
    .initialize_state = source_initialize,
    .poll = source_poll,
    .snapshot_state = source_snapshot,
    .notify_checkpoint_complete = source_notify,
    .close = source_close,
};
