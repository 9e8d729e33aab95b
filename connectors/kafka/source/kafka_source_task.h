/*
 * Private to the Kafka source's subtask: its state, shared by kafka_source_task.c (the consumer,
 * polls and checkpoints) and kafka_source_parts.c (which partitions it reads, and from where: a
 * fresh start, a restore, a discovery).
 */
#ifndef TPC_KAFKA_SOURCE_TASK_H
#define TPC_KAFKA_SOURCE_TASK_H

#include "kafka_source_internal.h"
#include "tpc_kit.h"

/* Discoveries in a row that must miss a topic before it counts as deleted: one answer without
 * it may come from a broker that has not loaded its metadata yet. */
#define TPC__KAFKA_MISSES_TO_DELETE 3

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
    tpc__kafka_source_slot_t *slot; /* where it publishes its figures for the metrics endpoint */
    int64_t published_ms;           /* when it last did */
    uint64_t wakes_published;       /* fetch.wakes already added to the slot */
} source_t;

/* kafka_source_parts.c */
int tpc__kafka_source_topic(const source_t *s, const char *name, size_t len);
/* Where the part for @partition of topic @topic is in parts, or -1 (not owned, or unknown). */
int tpc__kafka_source_find(const source_t *s, int topic, int32_t partition);
/* A bounded partition whose next offset reached its end is done: no longer fetched. */
void tpc__kafka_source_mark_done(source_t *s, tpc__kafka_source_part_t *part);
/* Read parts[first..] from their offsets, beside what the consumer reads already. */
tpc_error_t *tpc__kafka_source_assign_from(source_t *s, size_t first);
/* A fresh start's partitions, from where start says. */
tpc_error_t *tpc__kafka_source_fresh(source_t *s);
/* A restore's partitions, from the checkpoint's offsets. */
tpc_error_t *tpc__kafka_source_restored(source_t *s, const tpc_state_reader_t *restored);
/* Partitions of topic @t from @from on that this subtask owns and no checkpoint knows. */
tpc_error_t *tpc__kafka_source_take_new(source_t *s, int t, int from);
/* What a discovery found: partitions and topics that appeared, topics that went. */
tpc_error_t *tpc__kafka_source_discovered(source_t *s, const tpc__kafka_meta_t *m);

/* kafka_source_metrics.c: at most every TPC__KAFKA_PUBLISH_MS, put the subtask's lag, queue,
 * partitions and wake-ups into its slot; @closing: add the last wake-ups, zero the gauges. */
#define TPC__KAFKA_PUBLISH_MS 100
void tpc__kafka_source_publish(source_t *s, bool closing);

#endif
