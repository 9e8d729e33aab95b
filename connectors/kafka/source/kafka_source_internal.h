/*
 * Private to connectors/kafka/source: the replayable Kafka source. Its configuration in
 * kafka_source.c, its checkpoint entries and ownership rule in kafka_source_state.c, the topics'
 * metadata and the discovery thread in kafka_source_meta.c, a subtask's reading in
 * kafka_source_task.c (kafka_source_task.h), which partitions it reads in kafka_source_parts.c, the
 * bounded read-ahead in kafka_source_fetch.c, and its figures for the metrics endpoint in
 * kafka_source_metrics.c. It shares librdkafka's property handling with the sink through the wire
 * room's header (../wire/kafka_wire.h) and includes nothing of the sink's.
 */
#ifndef TPC_KAFKA_SOURCE_INTERNAL_H
#define TPC_KAFKA_SOURCE_INTERNAL_H

#include "kafka_wire.h"
#include "tpc_kafka.h"
#include "tpc_kit.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>

/* Where a fresh start of the source begins. */
typedef enum {
    TPC__KAFKA_START_EARLIEST,
    TPC__KAFKA_START_LATEST,
    TPC__KAFKA_START_TIMESTAMP, /* the first offset whose timestamp is >= start_timestamp */
    TPC__KAFKA_START_GROUP,     /* the group's committed offsets, else start_fallback_latest */
} tpc__kafka_start_t;

/* One partition's lag as a subtask last published it. */
typedef struct {
    char *topic; /* a copy, kept while the entry is reused for the same topic */
    int32_t partition;
    int64_t lag; /* offsets behind the high watermark */
} tpc__kafka_source_lag_t;

/* What one subtask of a source last published for the metrics endpoint (kafka_source_metrics.c):
 * written by the subtask's thread, read by the metrics server's. */
typedef struct {
    pthread_mutex_t mu; /* over lags: the subtask's partitions, replaced at each publication */
    tpc__kafka_source_lag_t *lags;
    size_t nlags, lags_cap;
    _Atomic int64_t queued;     /* records in librdkafka's read-ahead queue */
    _Atomic int64_t partitions; /* assigned */
    _Atomic uint64_t wakes;     /* wake-up requests, over all the subtask's attempts */
} tpc__kafka_source_slot_t;

/* A source added to a job: the vertex's arg, and the metrics callback's. Owned by the source's
 * configuration, so that it lives as long as every job the source was added to. */
typedef struct tpc__kafka_source_vertex_s {
    struct tpc__kafka_source_vertex_s *next;
    const struct tpc_kafka_source_s *conf;
    char *name; /* the vertex's */
    int parallelism;
    tpc__kafka_source_slot_t *slots; /* one per subtask */
    int nslots;
} tpc__kafka_source_vertex_t;

/* The metrics callback of a source vertex (tpc_job_add_metrics()). */
void tpc__kafka_source_metrics(void *arg, tpc_metrics_writer_t *w);
/* A vertex's slots made (mutexes initialised) and freed (with their copies). */
bool tpc__kafka_source_slots_new(tpc__kafka_source_vertex_t *v, int parallelism);
void tpc__kafka_source_slots_free(tpc__kafka_source_vertex_t *v);

/* The source's configuration (tpc_kafka_source_t), read-only once added to a job. */
struct tpc_kafka_source_s {
    tpc__kafka_source_vertex_t *vertices; /* the jobs it was added to */
    char **props;                         /* librdkafka name, value, name, value, ... */
    size_t nprops;
    char *topic;   /* the topics as given, for messages */
    char **topics; /* each topic once, sorted by name; none when pattern is set */
    size_t ntopics;
    bool is_pattern; /* topic began with '^': every topic that matches it */
    regex_t pattern; /* compiled by tpc_kafka_source_new() to check it; matching compiles its own */
    bool bounded;
    tpc__kafka_start_t start;
    int64_t start_timestamp;    /* milliseconds since the epoch */
    bool start_fallback_latest; /* start=group, a partition the group has no offset for */
    int max_batch;
    int poll_timeout_ms;
    int open_timeout_ms;
    int discovery_interval_ms; /* 0: no discovery */
    int32_t (*ranges)[2];      /* partitions=: only these, as ranges first..last; NULL: all */
    size_t nranges;
};

/* Whether the source reads @partition at all (partitions=), whichever subtask owns it. */
bool tpc__kafka_source_wanted(const tpc_kafka_source_t *conf, int32_t partition);

/* Kafka's limit on a topic's name. */
#define TPC__KAFKA_TOPIC_MAX 249

/* The offset of a partition found after the start, of which nothing was read yet: its first
 * offset, whatever retention left (librdkafka's RD_KAFKA_OFFSET_BEGINNING). */
#define TPC__KAFKA_FROM_BEGINNING (-2)

/* One partition a source subtask owns. */
typedef struct {
    int topic; /* index into the subtask's topics */
    int32_t partition;
    int64_t next; /* the offset of the next record to emit, or TPC__KAFKA_FROM_BEGINNING */
    int64_t end;  /* bounded: records from this offset on are not emitted; -1: unbounded */
    bool done;
    bool gone; /* its topic was deleted: no longer read nor checkpointed */
} tpc__kafka_source_part_t;

/* A checkpoint entry as kafka_source_state.c reads and writes it. */
typedef struct {
    const char *topic; /* topic_len bytes; decoded: points into the entry */
    size_t topic_len;
    int32_t partition; /* a floor entry: partitions below it count as known */
    int64_t next;
    int64_t end;
    bool floor;
    int version;
} tpc__kafka_source_entry_t;

/* The largest checkpoint entry of one partition. */
#define TPC__KAFKA_SOURCE_ENTRY_MAX (4 + TPC__KAFKA_TOPIC_MAX + 4 + 8 + 8)

extern const tpc_operator_ops_t tpc__kafka_source_ops;

/* kafka_source_fetch.c: the source's bounded read-ahead, and waking librdkafka's fetchers that
 * parked on a full queue. All on the subtask's thread. */
typedef struct {
    rd_kafka_queue_t *queue; /* the consumer's queue, which every partition's records go to */
    long min_messages;       /* queued.min.messages in force */
    long max_bytes;          /* queued.max.messages.kbytes in force, in bytes */
    uint64_t taken, taken_bytes;
    bool full;  /* the queue was full enough for a fetcher to park since the last wake-up */
    bool timer; /* the library re-checks a parked fetcher itself (fetch.queue.backoff.ms) */
    uint64_t wakes;
} tpc__kafka_fetch_t;

/* The source's read-ahead defaults on @rc, before the user's kafka.* keys. */
tpc_error_t *tpc__kafka_fetch_defaults(rd_kafka_conf_t *rc);
/* @rc: the configuration the consumer was made with (a copy: rd_kafka_new took the original). */
void tpc__kafka_fetch_init(tpc__kafka_fetch_t *f, rd_kafka_t *rk, const rd_kafka_conf_t *rc);
void tpc__kafka_fetch_destroy(tpc__kafka_fetch_t *f);
/* A record of @bytes (key and value) was taken from the queue. */
void tpc__kafka_fetch_taken(tpc__kafka_fetch_t *f, size_t bytes);
/* After a poll: true when a fetcher may be parked and the queue ran low. */
bool tpc__kafka_fetch_needs_wake(tpc__kafka_fetch_t *f);
/* Wake the broker threads that lead @parts (offsets are overwritten). */
void tpc__kafka_fetch_wake(tpc__kafka_fetch_t *f, rd_kafka_t *rk,
                           rd_kafka_topic_partition_list_t *parts);

/* kafka_source_state.c */
size_t tpc__kafka_source_encode(const tpc__kafka_source_entry_t *e, unsigned char *buf);
tpc_error_t *tpc__kafka_source_decode(const void *bytes, size_t len,
                                      tpc__kafka_source_entry_t *out);
/* The subtask, of @parallelism, that reads @partition of @topic: (FNV-1a-32(topic) + partition)
 * mod parallelism. Fresh starts, discoveries and restores at any parallelism all use it. */
int tpc__kafka_source_owner(const char *topic, size_t topic_len, int32_t partition,
                            int parallelism);

/* kafka_source_meta.c: what the cluster says of the source's topics. */
typedef struct {
    char *name;
    int partitions;
    rd_kafka_resp_err_t err; /* of this topic (a listed topic that does not exist, ...) */
} tpc__kafka_topic_meta_t;

typedef struct {
    tpc__kafka_topic_meta_t *topics; /* sorted by name */
    size_t ntopics;
    rd_kafka_resp_err_t err; /* the whole request failed: no topics */
    bool canceled;           /* cut short by the cancel test: no topics */
} tpc__kafka_meta_t;

/* Ask for the partition counts of the configured topics, or of every topic that matches the
 * pattern (names beginning with "__", Kafka's internal topics, never match). @canceled (NULL:
 * never) is asked between requests and every TPC__KAFKA_META_CANCEL_EVERY names matched: when it
 * says so, *out has no topics and canceled set. */
void tpc__kafka_meta_read(rd_kafka_t *rk, const tpc_kafka_source_t *conf, int timeout_ms,
                          tpc_canceled_fn canceled, void *arg, tpc__kafka_meta_t *out);
/* The topics of @md that the pattern of @conf matches, added to *@out; a cancel as above. A name
 * is at most 249 bytes, patterns take no back-references, and the matcher's cache is dropped
 * every few names, so one match takes bounded time and memory (kafka_source_meta.c). */
#define TPC__KAFKA_META_CANCEL_EVERY 16
void tpc__kafka_meta_pick(const tpc_kafka_source_t *conf, const struct rd_kafka_metadata *md,
                          tpc_canceled_fn canceled, void *arg, tpc__kafka_meta_t *out);
void tpc__kafka_meta_free(tpc__kafka_meta_t *m);
/* Whether the source reads @topic: one of its topics, or a whole match of its pattern. */
bool tpc__kafka_source_matches(const tpc_kafka_source_t *conf, const char *topic, size_t len);
/* The same for many names in a row, with a compiled pattern of its own that never grows large:
 * one thread's, for one run over names. */
typedef struct {
    const tpc_kafka_source_t *conf;
    regex_t re;
    bool compiled;
    unsigned names; /* matched with re */
} tpc__kafka_matcher_t;
void tpc__kafka_matcher_init(tpc__kafka_matcher_t *m, const tpc_kafka_source_t *conf);
bool tpc__kafka_matcher_test(tpc__kafka_matcher_t *m, const char *topic, size_t len);
void tpc__kafka_matcher_free(tpc__kafka_matcher_t *m);

/* A thread that reads the metadata every discovery interval, so that the subtask's polls never
 * wait for the cluster: the subtask takes the newest answer when it likes. */
typedef struct tpc__kafka_discovery_s tpc__kafka_discovery_t;
tpc_error_t *tpc__kafka_discovery_start(rd_kafka_t *rk, const tpc_kafka_source_t *conf,
                                        tpc__kafka_discovery_t **out);
/* @returns true and the newest answer (the caller frees it) when one came since the last call. */
bool tpc__kafka_discovery_take(tpc__kafka_discovery_t *d, tpc__kafka_meta_t *out);
/* Ask again soon rather than at the next interval (a consumer error hints at a change). */
void tpc__kafka_discovery_soon(tpc__kafka_discovery_t *d);
void tpc__kafka_discovery_stop(tpc__kafka_discovery_t *d);

#endif /* TPC_KAFKA_SOURCE_INTERNAL_H */
