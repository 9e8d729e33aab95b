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
#include "kafka_source_task.h"
#include "tpc_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long close waits for offset commits still on their way to the group. */
#define COMMIT_WAIT_MS 2000

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
    char said[1024];
    if (level <= 6 &&
        tpc__kafka_log_quiet(facility, line, prop(s->conf, "security.protocol"), said, sizeof said))
        return; /* debug output is asked for, and kept whole */
    tpc_log(s->ctx, to, "kafka source: %s: %s", facility, level <= 6 ? said : line);
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

static bool ctx_canceled(void *ctx)
{
    return tpc_ctx_is_canceled(ctx);
}

/* The topics' partition counts at open, which also shows that the cluster answers. A listed
 * topic must exist; a pattern may match nothing yet. */
static tpc_error_t *read_metadata(source_t *s)
{
    tpc__kafka_meta_t *m = &s->opened;
    tpc__kafka_meta_read(s->rk, s->conf, s->conf->open_timeout_ms, ctx_canceled, s->ctx, m);
    /* A topic created a moment ago may have no leader yet. */
    int64_t deadline = tpc_clock_ms() + s->conf->open_timeout_ms;
    while (!m->err && waiting_for_leader(m) && tpc_clock_ms() < deadline) {
        tpc__kafka_meta_free(m);
        if (!tpc_sleep_ms(100, ctx_canceled, s->ctx))
            m->canceled = true;
        else
            tpc__kafka_meta_read(s->rk, s->conf, s->conf->open_timeout_ms, ctx_canceled, s->ctx, m);
    }
    if (m->canceled)
        return tpc_error_new(TPC_ERR_CANCELED, 0,
                             "kafka source: canceled while reading the "
                             "topics' metadata");
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
    tpc__kafka_source_publish(s, true);
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
    const tpc__kafka_source_vertex_t *v = arg;
    source_t *s = calloc(1, sizeof *s);
    if (!s)
        return tpc_error_nomem();
    s->conf = v->conf;
    s->ctx = ctx;
    int subtask = tpc_ctx_subtask(ctx);
    if (subtask >= 0 && subtask < v->parallelism)
        s->slot = &v->slots[subtask];
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

static tpc_error_t *source_initialize(void *self, tpc_ctx_t *ctx,
                                      const tpc_state_reader_t *restored)
{
    source_t *s = self;
    tpc_error_t *err =
        restored ? tpc__kafka_source_restored(s, restored) : tpc__kafka_source_fresh(s);
    /* After a restore, partitions that no checkpoint knows: appeared while the job was down. */
    for (size_t t = 0; !err && restored && !s->conf->bounded && t < s->ntopics; t++)
        err = tpc__kafka_source_take_new(s, (int)t, 0);
    tpc__kafka_meta_free(&s->opened);
    if (!err)
        err = tpc__kafka_source_assign_from(s, 0);
    if (err)
        return err;
    for (size_t i = 0; i < s->nparts; i++)
        tpc__kafka_source_mark_done(s, &s->parts[i]);
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
    case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE: {
        /* Out of range at either end: below the first offset, retention deleted what the job had
         * not read; past the end, the partition holds fewer records than the job has read. */
        int64_t lo = -1, hi = -1;
        if (rd_kafka_query_watermark_offsets(s->rk, rd_kafka_topic_name(msg->rkt), msg->partition,
                                             &lo, &hi, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            msg->offset > hi)
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_DATA_LOSS, TPC_ERROR_FATAL,
                              "data loss: kafka topic \"%s\" partition %d ends at offset %lld, "
                              "but the job has read it up to offset %lld: %s",
                              rd_kafka_topic_name(msg->rkt), (int)msg->partition, (long long)hi,
                              (long long)msg->offset, rd_kafka_message_errstr(msg)),
                "the partition lost records it had (the topic deleted and created again, an "
                "unclean leader election, or a checkpoint of a job that read another cluster); "
                "check the topic, then start the job over (restore.mode=fresh) or set "
                "kafka.auto.offset.reset to accept it");
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_DATA_LOSS, TPC_ERROR_FATAL,
                          "data loss: kafka topic \"%s\" partition %d no longer has the records "
                          "from offset %lld on: %s",
                          rd_kafka_topic_name(msg->rkt), (int)msg->partition,
                          (long long)msg->offset, rd_kafka_message_errstr(msg)),
            "the topic's retention deleted records the job had not read; keep records longer "
            "than the job may be down, or set kafka.auto.offset.reset to accept the loss");
    }
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
    if (!tpc_array_grow(&s->headers, &s->headers_cap, n, sizeof *s->headers))
        return tpc_error_nomem();
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
        s->last_topic = name ? tpc__kafka_source_topic(s, name, strlen(name)) : -1;
        s->last_rkt = msg->rkt;
    }
    int at = tpc__kafka_source_find(s, s->last_topic, msg->partition);
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
        tpc__kafka_source_mark_done(s, part);
        return NULL;
    }
    rd_kafka_timestamp_type_t type;
    int64_t ts = rd_kafka_message_timestamp(msg, &type);
    tpc_record_t rec = {.key = msg->key,
                        .key_len = msg->key_len,
                        .value = msg->payload,
                        .value_len = msg->len,
                        .timestamp = ts < 0 ? 0 : ts,
                        .flags = (msg->key ? 0 : TPC_RECORD_NULL_KEY) |
                                 (msg->payload ? 0 : TPC_RECORD_NULL_VALUE)};
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
    tpc__kafka_source_mark_done(s, part);
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
        err = tpc__kafka_source_discovered(s, &found);
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
    if (tpc_clock_ms() - s->published_ms >= TPC__KAFKA_PUBLISH_MS)
        tpc__kafka_source_publish(s, false);
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
