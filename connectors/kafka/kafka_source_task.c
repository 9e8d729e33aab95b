/*
 * One subtask of the Kafka source: a read_committed librdkafka consumer with a manual assignment
 * of the partitions the subtask owns (of one or more topics), and for each of them the offset of
 * the next record to emit.
 * That offset is what checkpoints store, so a restore resumes right after the last record a
 * checkpoint includes. Polls wait at most poll.timeout.ms, so that barriers are never held up.
 *
 * Bounded mode stops each partition at the end offset taken at the first fresh start: the last
 * stable offset, which is what a read_committed watermark query answers. Every offset below it
 * belongs to a decided transaction, so the records below it are the same in every run. Counting
 * records cannot tell when a partition is done, because transaction markers and aborted records
 * occupy offsets too; the consumer's end-of-partition events, whose offset is the position after
 * everything skipped, and any record at or past the end offset can.
 */
#include "kafka_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long close waits for offset commits still on their way to the group. */
#define COMMIT_WAIT_MS 2000

typedef struct {
    const tpc_kafka_source_t *conf;
    tpc_ctx_t *ctx;
    rd_kafka_t *rk;
    rd_kafka_queue_t *commits; /* a consumer group was named: results of offset commits */
    int commits_in_flight;
    uint64_t snapshot_id; /* the last snapshot's checkpoint, and the offsets it stored */
    int64_t *snapshot_next;
    int *partition_count; /* per topic of the configuration */
    int *base;            /* per topic: where its partitions begin in index */
    int partitions;       /* of all topics */
    int *index;           /* base[topic] + partition -> position in parts, -1 when not owned */
    const rd_kafka_topic_t *last_rkt; /* the topic handle of the last message, and its index */
    int last_topic;
    tpc__kafka_source_part_t *parts;
    size_t nparts;
    size_t ndone;
    uint64_t warnings;
} source_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static tpc_error_t *oom(void)
{
    return tpc_error_nomem();
}

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
    if (prop(s->conf, "group.id"))
        s->commits = rd_kafka_queue_new(s->rk);
    return NULL;
}

/* A topic's partition count, which also shows that the cluster answers. */
static tpc_error_t *read_metadata(source_t *s, int t)
{
    const char *topic = s->conf->topics[t];
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(s->rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(s->rk, 0, rkt, &md, s->conf->open_timeout_ms);
    /* A topic created a moment ago may have no leader yet. */
    int64_t deadline = now_ms() + s->conf->open_timeout_ms;
    while (!e && md->topic_cnt == 1 &&
           md->topics[0].err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE && now_ms() < deadline) {
        rd_kafka_metadata_destroy(md);
        md = NULL;
        struct timespec pause = {0, 100 * 1000 * 1000};
        nanosleep(&pause, NULL);
        e = rd_kafka_metadata(s->rk, 0, rkt, &md, s->conf->open_timeout_ms);
    }
    tpc_error_t *err = NULL;
    if (e) {
        err = tpc_error_new(TPC_ERR_CONNECT, TPC_ERROR_RETRIABLE,
                            "could not reach kafka at \"%s\" within %d ms: %s",
                            prop(s->conf, "bootstrap.servers"), s->conf->open_timeout_ms,
                            rd_kafka_err2str(e));
        err = tpc_error_hint(err, "check the bootstrap servers and that the brokers run; raise "
                                  "open.timeout.ms for a slow cluster");
    } else if (md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt <= 0) {
        rd_kafka_resp_err_t te = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__FAIL;
        /* A missing or forbidden topic stays so; a partition without a leader after the wait
         * (a broker that is restarting) is for a restart to get past. */
        bool lasting = te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                       te == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                       te == RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION;
        err = tpc_error_new(te == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ? TPC_ERR_NOT_FOUND
                                                                          : TPC_ERR_EXTERNAL,
                            lasting ? TPC_ERROR_FATAL : TPC_ERROR_RETRIABLE,
                            "could not read kafka topic \"%s\": %s", topic,
                            rd_kafka_err2str(te ? te : RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION));
        err = tpc_error_hint(err, "create the topic before the job starts (the source never "
                                  "creates it), check its name, and that the principal may "
                                  "describe and read it");
    } else {
        s->partition_count[t] = md->topics[0].partition_cnt;
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return err;
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
    if (s->commits) {
        /* The last checkpoint's offsets are usually still on their way. */
        int64_t deadline = now_ms() + COMMIT_WAIT_MS;
        while (s->commits_in_flight > 0 && now_ms() < deadline)
            commit_results(s, 100);
        rd_kafka_queue_destroy(s->commits);
    }
    if (s->rk) {
        rd_kafka_consumer_close(s->rk);
        rd_kafka_destroy(s->rk);
    }
    free(s->index);
    free(s->base);
    free(s->partition_count);
    free(s->parts);
    free(s->snapshot_next);
    free(s);
}

static tpc_error_t *source_open(tpc_ctx_t *ctx, void *arg, void **self)
{
    source_t *s = calloc(1, sizeof *s);
    if (!s)
        return oom();
    s->conf = arg;
    s->ctx = ctx;
    *self = s;
    tpc_error_t *err = NULL;
    if (s->conf->start == TPC__KAFKA_START_GROUP && !prop(s->conf, "group.id"))
        err = tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                           "kafka source start=group needs a consumer group"),
                             "set \"kafka.group.id\" to the group whose offsets to start from");
    size_t nt = s->conf->ntopics;
    if (!err)
        err = make_consumer(s, ctx);
    if (!err && (!(s->partition_count = calloc(nt, sizeof *s->partition_count)) ||
                 !(s->base = calloc(nt + 1, sizeof *s->base))))
        err = oom();
    for (size_t t = 0; !err && t < nt; t++) {
        err = read_metadata(s, (int)t);
        if (!err)
            s->base[t + 1] = s->base[t] + s->partition_count[t];
    }
    if (!err) {
        s->partitions = s->base[nt];
        if (!(s->index = malloc((size_t)s->partitions * sizeof *s->index)))
            err = oom();
    }
    for (int p = 0; !err && p < s->partitions; p++)
        s->index[p] = -1;
    if (err) {
        source_close(s, ctx); /* the runtime closes only what opened */
        *self = NULL;
    }
    return err;
}

/* First and end offset of a partition as a read_committed consumer sees them (the end is the
 * last stable offset). */
static tpc_error_t *watermarks(source_t *s, int topic, int32_t partition, int64_t *low,
                               int64_t *high)
{
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
        s->rk, s->conf->topics[topic], partition, low, high, s->conf->open_timeout_ms);
    if (!e)
        return NULL;
    return tpc_error_new(e == RD_KAFKA_RESP_ERR__TIMED_OUT ? TPC_ERR_TIMEOUT : TPC_ERR_EXTERNAL,
                         TPC_ERROR_RETRIABLE,
                         "could not read the offsets of kafka topic \"%s\" partition %d: %s",
                         s->conf->topics[topic], (int)partition, rd_kafka_err2str(e));
}

/* Where the part for @partition of topic @topic is in parts, or -1 (not owned, or unknown). */
static int find(const source_t *s, int topic, int32_t partition)
{
    if (topic < 0 || partition < 0 || partition >= s->partition_count[topic])
        return -1;
    return s->index[s->base[topic] + partition];
}

static int topic_index(const source_t *s, const char *name)
{
    for (size_t t = 0; t < s->conf->ntopics; t++)
        if (strcmp(s->conf->topics[t], name) == 0)
            return (int)t;
    return -1;
}

static tpc_error_t *own(source_t *s, const tpc__kafka_source_part_t *part)
{
    if (part->partition >= s->partition_count[part->topic])
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                          "restored kafka source state names partition %d of topic \"%s\", "
                          "which has %d partitions",
                          (int)part->partition, s->conf->topics[part->topic],
                          s->partition_count[part->topic]),
            "the topic was deleted and created again: start the job with restore.mode=fresh");
    int *slot = &s->index[s->base[part->topic] + part->partition];
    if (*slot >= 0)
        return tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                             "restored kafka source state lists partition %d of topic \"%s\" "
                             "twice",
                             (int)part->partition, s->conf->topics[part->topic]);
    *slot = (int)s->nparts;
    s->parts[s->nparts++] = *part;
    return NULL;
}

static void mark_done_if_past_end(source_t *s, tpc__kafka_source_part_t *part)
{
    if (part->done || part->end < 0 || part->next < part->end)
        return;
    part->done = true;
    s->ndone++;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, s->conf->topics[part->topic], part->partition);
    rd_kafka_pause_partitions(s->rk, list); /* stop fetching what will not be emitted */
    rd_kafka_topic_partition_list_destroy(list);
}

/* start=timestamp and start=group: ask the cluster where each owned partition begins. A
 * partition with no answer (no record that late, no offset in the group) keeps the offset
 * fresh_parts() gave it. */
static tpc_error_t *start_offsets(source_t *s)
{
    bool by_time = s->conf->start == TPC__KAFKA_START_TIMESTAMP;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)s->nparts);
    for (size_t i = 0; i < s->nparts; i++)
        rd_kafka_topic_partition_list_add(list, s->conf->topics[s->parts[i].topic],
                                          s->parts[i].partition)
            ->offset = by_time ? s->conf->start_timestamp : RD_KAFKA_OFFSET_INVALID;
    rd_kafka_resp_err_t e = by_time
                                ? rd_kafka_offsets_for_times(s->rk, list, s->conf->open_timeout_ms)
                                : rd_kafka_committed(s->rk, list, s->conf->open_timeout_ms);
    for (int i = 0; !e && i < list->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &list->elems[i];
        int at = find(s, topic_index(s, tp->topic), tp->partition);
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

/* The partitions a fresh start owns, from where start says, and their end offsets. The
 * partitions of all topics, topics sorted by name, are dealt round robin: the i-th goes to
 * subtask i % parallelism. */
static tpc_error_t *fresh_parts(source_t *s, tpc_ctx_t *ctx)
{
    int n = tpc_ctx_parallelism(ctx);
    tpc__kafka_start_t start = s->conf->start;
    /* Where a partition begins without a better answer: no record at or after the timestamp
     * means nothing to read yet, so the end. */
    bool at_end = start == TPC__KAFKA_START_LATEST || start == TPC__KAFKA_START_TIMESTAMP ||
                  (start == TPC__KAFKA_START_GROUP && s->conf->start_fallback_latest);
    tpc_error_t *err = NULL;
    for (int i = tpc_ctx_subtask(ctx), t = 0; !err && i < s->partitions; i += n) {
        while (i >= s->base[t + 1])
            t++;
        int32_t p = i - s->base[t];
        int64_t low = 0, high = 0;
        err = watermarks(s, t, p, &low, &high);
        tpc__kafka_source_part_t part = {.topic = t,
                                         .partition = p,
                                         .next = at_end ? high : low,
                                         .end = s->conf->bounded ? high : -1};
        if (!err)
            err = own(s, &part);
    }
    if (!err && s->nparts &&
        (start == TPC__KAFKA_START_TIMESTAMP || start == TPC__KAFKA_START_GROUP))
        err = start_offsets(s);
    return err;
}

static tpc_error_t *restored_parts(source_t *s, const tpc_state_reader_t *restored)
{
    tpc_error_t *err = NULL;
    size_t n = tpc_state_count(restored, TPC_STATE_LIST);
    for (size_t i = 0; !err && i < n; i++) {
        const void *bytes;
        size_t len;
        tpc_state_get(restored, TPC_STATE_LIST, i, &bytes, &len);
        tpc__kafka_source_part_t part;
        err = tpc__kafka_source_decode(bytes, len, s->conf, &part);
        if (!err && !s->conf->bounded) {
            part.end = -1;
        } else if (!err && part.end < 0) {
            /* Bounded now, unbounded in the checkpoint: the end is taken now. */
            int64_t low = 0;
            err = watermarks(s, part.topic, part.partition, &low, &part.end);
        }
        if (!err)
            err = own(s, &part);
    }
    return err;
}

static tpc_error_t *source_initialize(void *self, tpc_ctx_t *ctx,
                                      const tpc_state_reader_t *restored)
{
    source_t *s = self;
    size_t cap = (size_t)s->partitions;
    if (restored && tpc_state_count(restored, TPC_STATE_LIST) > cap)
        cap = tpc_state_count(restored, TPC_STATE_LIST);
    s->parts = calloc(cap ? cap : 1, sizeof *s->parts);
    s->snapshot_next = calloc(cap ? cap : 1, sizeof *s->snapshot_next);
    if (!s->parts || !s->snapshot_next)
        return oom();
    tpc_error_t *err = restored ? restored_parts(s, restored) : fresh_parts(s, ctx);
    if (err)
        return err;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new((int)s->nparts);
    for (size_t i = 0; i < s->nparts; i++) {
        tpc__kafka_source_part_t *part = &s->parts[i];
        rd_kafka_topic_partition_list_add(list, s->conf->topics[part->topic], part->partition)
            ->offset = part->next;
    }
    rd_kafka_resp_err_t e = rd_kafka_assign(s->rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (e)
        return tpc_error_new(TPC_ERR_EXTERNAL, TPC_ERROR_FATAL,
                             "could not assign partitions of kafka topics \"%s\": %s",
                             s->conf->topic, rd_kafka_err2str(e));
    for (size_t i = 0; i < s->nparts; i++)
        mark_done_if_past_end(s, &s->parts[i]);
    tpc_log(ctx, TPC_LOG_INFO, "kafka source reads %zu of %d partitions of \"%s\"%s", s->nparts,
            s->partitions, s->conf->topic, restored ? " from the restored offsets" : "");
    return NULL;
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

/* Handle one message. Sets *emitted when it went downstream. */
static tpc_error_t *take(source_t *s, tpc_ctx_t *ctx, const rd_kafka_message_t *msg, bool *emitted,
                         bool *canceled)
{
    *emitted = false;
    if (msg->err && msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
        return consumer_error(s, ctx, msg);
    if (msg->rkt != s->last_rkt) {
        s->last_topic = msg->rkt ? topic_index(s, rd_kafka_topic_name(msg->rkt)) : -1;
        s->last_rkt = msg->rkt;
    }
    int at = find(s, s->last_topic, msg->partition);
    if (at < 0)
        return NULL; /* not assigned to this subtask: cannot happen with assign() */
    tpc__kafka_source_part_t *part = &s->parts[at];
    if (part->done || msg->offset < part->next)
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
    mark_done_if_past_end(s, part);
    return NULL;
}

static tpc_error_t *source_poll(void *self, tpc_ctx_t *ctx, tpc_poll_result_t *result)
{
    source_t *s = self;
    if (s->conf->bounded && s->ndone == s->nparts) {
        *result = TPC_POLL_END;
        return NULL;
    }
    int emitted = 0;
    bool canceled = false;
    tpc_error_t *err = NULL;
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
    *result = emitted ? TPC_POLL_MORE : TPC_POLL_IDLE;
    if (s->conf->bounded && s->ndone == s->nparts)
        *result = TPC_POLL_MORE; /* the next poll ends, after these records went out */
    return err;
}

static tpc_error_t *source_snapshot(void *self, tpc_ctx_t *ctx, uint64_t checkpoint_id,
                                    tpc_state_writer_t *w)
{
    source_t *s = self;
    (void)ctx;
    unsigned char buf[TPC__KAFKA_SOURCE_ENTRY_MAX];
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < s->nparts; i++) {
        size_t len =
            tpc__kafka_source_encode(s->conf->topics[s->parts[i].topic], &s->parts[i], buf);
        err = tpc_state_add(w, TPC_STATE_LIST, buf, len);
        s->snapshot_next[i] = s->parts[i].next;
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
        rd_kafka_topic_partition_list_add(list, s->conf->topics[s->parts[i].topic],
                                          s->parts[i].partition)
            ->offset = s->snapshot_next[i];
    if (!rd_kafka_commit_queue(s->rk, list, s->commits, NULL, NULL))
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
