/*
 * Which partitions a Kafka source subtask reads, and from which offset: at a fresh start (from
 * where start says), after a restore (the checkpoint's offsets; partitions it does not list from
 * their first offsets) and when a discovery finds partitions or topics that appeared, or topics
 * that went. Every decision of who reads a partition is tpc__kafka_source_owner()'s.
 */
#include "kafka_source_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The topic of that name that is read now, or -1. */
int tpc__kafka_source_topic(const source_t *s, const char *name, size_t len)
{
    for (size_t t = 0; t < s->ntopics; t++)
        if (!s->topics[t].gone && strlen(s->topics[t].name) == len &&
            memcmp(s->topics[t].name, name, len) == 0)
            return (int)t;
    return -1;
}

static tpc_error_t *add_topic(source_t *s, const char *name, size_t len, int *at)
{
    if (!tpc_array_grow(&s->topics, &s->topics_cap, s->ntopics + 1, sizeof *s->topics))
        return tpc_error_nomem();
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
int tpc__kafka_source_find(const source_t *s, int topic, int32_t partition)
{
    if (topic < 0 || partition < 0 || partition >= s->topics[topic].partitions)
        return -1;
    return s->topics[topic].index[partition];
}

static bool owns(const source_t *s, int topic, int32_t partition)
{
    const char *name = s->topics[topic].name;
    return tpc__kafka_source_wanted(s->conf, partition) &&
           tpc__kafka_source_owner(name, strlen(name), partition, tpc_ctx_parallelism(s->ctx)) ==
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
    /* parts and snapshot_next have one capacity: each grows from it the same way. */
    size_t cap = s->parts_cap, next_cap = s->parts_cap;
    if (!tpc_array_grow(&s->parts, &cap, s->nparts + 1, sizeof *s->parts) ||
        !tpc_array_grow(&s->snapshot_next, &next_cap, s->nparts + 1, sizeof *s->snapshot_next))
        return tpc_error_nomem();
    s->parts_cap = cap < next_cap ? cap : next_cap;
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
tpc_error_t *tpc__kafka_source_assign_from(source_t *s, size_t first)
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

void tpc__kafka_source_mark_done(source_t *s, tpc__kafka_source_part_t *part)
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
 * tpc__kafka_source_fresh() gave it. */
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
        int at = tpc__kafka_source_find(s, tpc__kafka_source_topic(s, tp->topic, strlen(tp->topic)),
                                        tp->partition);
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

/* The topics the metadata at open names, as the subtask's topics. A listed topic must have
 * every partition partitions= names. */
static tpc_error_t *topics_from_metadata(source_t *s)
{
    tpc_error_t *err = NULL;
    for (size_t i = 0; !err && i < s->opened.ntopics; i++) {
        const tpc__kafka_topic_meta_t *m = &s->opened.topics[i];
        for (size_t r = 0; !s->conf->is_pattern && r < s->conf->nranges; r++)
            if (s->conf->ranges[r][1] >= m->partitions)
                return tpc_error_hint(
                    tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                  "kafka source: \"partitions\" names partition %d, but topic "
                                  "\"%s\" has %d partitions",
                                  (int)s->conf->ranges[r][1], m->name, m->partitions),
                    "give partitions the topic has, or add partitions to the topic");
        int t = -1;
        err = add_topic(s, m->name, strlen(m->name), &t);
        if (!err)
            err = grow_topic(&s->topics[t], m->partitions);
    }
    return err;
}

/* The partitions a fresh start owns, from where start says, and their end offsets. */
tpc_error_t *tpc__kafka_source_fresh(source_t *s)
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
    *at = tpc__kafka_source_topic(s, e->topic, e->topic_len);
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
tpc_error_t *tpc__kafka_source_restored(source_t *s, const tpc_state_reader_t *restored)
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
        if ((from_union && !owns(s, t, e.partition)) ||
            !tpc__kafka_source_wanted(s->conf, e.partition))
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
tpc_error_t *tpc__kafka_source_take_new(source_t *s, int t, int from)
{
    tpc_error_t *err = NULL;
    int count = 0;
    for (int32_t p = from; !err && p < s->topics[t].partitions; p++) {
        if (p < s->topics[t].floor || !owns(s, t, p) || tpc__kafka_source_find(s, t, p) >= 0)
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
    if (++topic->misses < TPC__KAFKA_MISSES_TO_DELETE)
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
tpc_error_t *tpc__kafka_source_discovered(source_t *s, const tpc__kafka_meta_t *m)
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
        int t = tpc__kafka_source_topic(s, tm->name, strlen(tm->name));
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
            err = tpc__kafka_source_take_new(s, t, before);
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
    return err ? err : tpc__kafka_source_assign_from(s, first_new);
}
