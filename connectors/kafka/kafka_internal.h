/*
 * Private to connectors/kafka: the sink's configuration, a subtask's instance with its pool of
 * transactional producers, and the transaction handle. Split over kafka_sink.c (configuration and
 * the ops table), kafka_producer.c (one librdkafka producer and its callbacks), kafka_open.c (the
 * checks at open), kafka_txn.c (writing, pre-committing and committing a transaction),
 * kafka_pool.c (which transactional id may carry the next transaction), kafka_recover.c
 * (recovery commits and lingering transactions) and kafka_serve.c (the thread that polls the
 * producers the subtask leaves alone). The source is apart: its configuration in
 * kafka_source.c, its checkpoint entries and ownership rule in kafka_source_state.c, the topics'
 * metadata and the discovery thread in kafka_source_meta.c, a subtask's reading in
 * kafka_source_task.c, which partitions it reads in kafka_source_parts.c, and its figures for
 * the metrics endpoint in kafka_source_metrics.c.
 */
#ifndef TPC_KAFKA_INTERNAL_H
#define TPC_KAFKA_INTERNAL_H

#include "kafka_wire.h"
#include "tpc_kafka.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <regex.h>

#define TPC__KAFKA_ID_MAX   200
#define TPC__KAFKA_POOL_MAX 64

/* kafka_metrics.c: librdkafka's statistics of a sink's producers, summed over them for the job's
 * metrics endpoint. Each producer remembers the values it last reported and adds the change. */
enum {
    TPC__KAFKA_STAT_TX,          /* requests sent */
    TPC__KAFKA_STAT_TX_BYTES,    /* bytes sent */
    TPC__KAFKA_STAT_RX,          /* responses received */
    TPC__KAFKA_STAT_RX_BYTES,    /* bytes received */
    TPC__KAFKA_STAT_TXMSGS,      /* messages sent to brokers */
    TPC__KAFKA_STAT_TXMSG_BYTES, /* message bytes sent */
    TPC__KAFKA_STAT_MSG_CNT,     /* gauge: messages in the producer's queues */
    TPC__KAFKA_STAT_MSG_SIZE,    /* gauge: bytes of them */
    TPC__KAFKA_STAT_REPLYQ,      /* gauge: operations waiting for the application */
    TPC__KAFKA_NSTATS
};
typedef struct {
    atomic_int_fast64_t v[TPC__KAFKA_NSTATS];
    atomic_int_fast64_t producers; /* gauge: producers alive */
} tpc__kafka_stats_t;
/* Take a statistics JSON document of a client whose last values are @last. */
void tpc__kafka_stats_take(tpc__kafka_stats_t *s, int64_t last[TPC__KAFKA_NSTATS],
                           const char *json);
/* The client is gone: its gauges no longer count. */
void tpc__kafka_stats_drop(tpc__kafka_stats_t *s, int64_t last[TPC__KAFKA_NSTATS]);
void tpc__kafka_sink_metrics(void *arg, const char *sink, tpc_metrics_writer_t *w);

typedef struct {
    char **props; /* librdkafka name, value, name, value, ... */
    size_t nprops;
    tpc__kafka_stats_t *stats;
    char *topic;
    char *id_prefix;
    int pool_size;
    int64_t txn_timeout_ms;
    int64_t checkpoint_interval_ms;
    int open_timeout_ms;
    int recovery_timeout_ms;
    tpc_kafka_mapper_t mapper;
    void *mapper_opaque;
} tpc__kafka_conf_t;

/* @returns the value of librdkafka property @name as configured, or NULL. */
const char *tpc__kafka_prop(const tpc__kafka_conf_t *conf, const char *name);

/* kafka_props.c: set @name on @rc; a refusal is a configuration error with @hint. */
tpc_error_t *tpc__kafka_conf_set(rd_kafka_conf_t *rc, const char *name, const char *value,
                                 const char *hint);
/* Check a property as it is set: librdkafka takes it, and so does the recovery client. */
tpc_error_t *tpc__kafka_prop_check(const char *name, const char *value, const char *hint);
/* The librdkafka properties of a sink or a source: pairs name, value in one array. */
tpc_error_t *tpc__kafka_props_add(char ***props, size_t *nprops, const char *name,
                                  const char *value);
void tpc__kafka_props_free(char **props, size_t nprops);

/* What a transactional id of the pool is doing. */
typedef enum {
    TPC__KAFKA_SLOT_UNUSED = 0, /* no producer yet: one is initialised on first use */
    TPC__KAFKA_SLOT_FREE,       /* producer initialised, no transaction */
    TPC__KAFKA_SLOT_BUSY,       /* carries the current or a pending transaction */
    TPC__KAFKA_SLOT_HELD,       /* its last transaction may still be listed in a checkpoint that
                                   could be restored: free once release_after is complete */
} tpc__kafka_slot_state_t;

/* One librdkafka producer and what its callbacks (served by poll and flush, on the subtask's
 * thread or its serving thread, under the subtask's lock) saw. */
typedef struct {
    rd_kafka_t *rk;
    const tpc_txn_subtask_t *st;
    char id[TPC__KAFKA_ID_MAX]; /* transactional id, "" for a plain producer */
    int64_t pid;                /* from the statistics' "eos" object; -1 until seen */
    int16_t epoch;
    int64_t stats_us; /* when librdkafka made the statistics pid and epoch come from */
    int64_t ended_us; /* when the last transaction ended (same clock): newer statistics needed */
    uint64_t delivered;
    uint64_t failed;
    char first_failure[256];
    tpc__kafka_stats_t *stats; /* the sink's, for the metrics endpoint */
    int64_t stats_last[TPC__KAFKA_NSTATS];
} tpc__kafka_producer_t;

typedef struct {
    tpc__kafka_producer_t prod;
    tpc__kafka_slot_state_t state;
    uint64_t release_after; /* HELD: free once a checkpoint >= this one is known complete */
} tpc__kafka_slot_t;

typedef struct {
    const tpc__kafka_conf_t *conf;
    const tpc_txn_subtask_t *st;
    bool transactional;
    tpc__kafka_wire_conf_t wire;
    tpc__kafka_producer_t plain; /* at-least-once and none */
    tpc__kafka_slot_t slots[TPC__KAFKA_POOL_MAX];
    uint64_t latest_begin; /* highest checkpoint id given to begin */
    /* Ids of subtasks that no longer exist, owned by this one (tpc_txn_owns()), whose restored
     * transaction it committed or aborted: initialised (fenced) once a checkpoint >= release_after
     * is complete, like held slots. */
    struct tpc__kafka_orphan {
        char id[TPC__KAFKA_ID_MAX];
        uint64_t release_after;
    } * orphans;
    int norphans;
    /* kafka_serve.c: a thread polls every producer once a second. The lock is held by it while it
     * polls, and by every call of the subtask that uses a producer. */
    pthread_mutex_t lock;
    pthread_cond_t serve_wake;
    pthread_t server;
    bool serving, serve_stop;
} tpc__kafka_sub_t;

typedef struct {
    int slot; /* pool slot of this instance, -1 for a restored or plain handle */
    char id[TPC__KAFKA_ID_MAX];
    int64_t pid;
    int16_t epoch;
    uint64_t begin_ckpt;
    uint64_t ckpt; /* pre-committed for this checkpoint, 0 before */
    uint64_t records;
} tpc__kafka_txn_t;

extern const tpc_txn_connector_ops_t tpc__kafka_ops;

/* kafka_producer.c */
tpc_error_t *tpc__kafka_producer_start(tpc__kafka_producer_t *p, const tpc__kafka_conf_t *conf,
                                       const tpc_txn_subtask_t *st, const char *txn_id,
                                       bool idempotent);
/* Destroy the producer, aborting its open transaction first when @abort_open. */
void tpc__kafka_producer_stop(tpc__kafka_producer_t *p, bool abort_open);
/* The producer's fatal error, if it has one, as a twopc error (fenced: one that ends the job
 * without restarts); NULL if it has none. */
tpc_error_t *tpc__kafka_producer_fatal(tpc__kafka_producer_t *p, const char *what);
/* Flush and check that every delivery succeeded. */
/* Note that the producer's transaction just ended (committed or aborted): with transaction
 * version 2 the coordinator gives the producer a new epoch at every end, which the statistics
 * report only in their next round. */
void tpc__kafka_producer_ended(tpc__kafka_producer_t *p);
/* Wait until statistics made after the last end of a transaction have come (pid and epoch then
 * are the ones of the transaction open now), serving the producer's callbacks, for @timeout_ms at
 * most. */
tpc_error_t *tpc__kafka_producer_current_epoch(tpc__kafka_producer_t *p, int timeout_ms);
tpc_error_t *tpc__kafka_producer_flush(tpc__kafka_producer_t *p, int timeout_ms);
/* Turn a librdkafka transaction error into a twopc error; takes @error. An error that requires
 * aborting the transaction is data loss once it was pre-committed (@pre_committed). */
tpc_error_t *tpc__kafka_txn_error(rd_kafka_error_t *error, const char *what, const char *id,
                                  bool pre_committed);

/* kafka_open.c */
tpc_error_t *tpc__kafka_check_cluster(const tpc__kafka_conf_t *conf, const tpc_txn_subtask_t *st,
                                      bool transactional);

/* kafka_pool.c */
void tpc__kafka_slot_id(const tpc__kafka_sub_t *c, int n, char *buf, size_t cap);
/* Initialise the slot's producer (fencing older ones with its id); the slot is then free. */
tpc_error_t *tpc__kafka_pool_start(tpc__kafka_sub_t *c, int slot);
/* Start every unused slot, in parallel; @returns the first error (the others started). */
tpc_error_t *tpc__kafka_pool_start_unused(tpc__kafka_sub_t *c);
/* A slot free to carry a new transaction, its producer initialised. */
tpc_error_t *tpc__kafka_pool_acquire(tpc__kafka_sub_t *c, int *slot);
/* Checkpoint @ckpt is known complete: free the slots held until it. */
void tpc__kafka_pool_complete(tpc__kafka_sub_t *c, uint64_t ckpt);
/* The slot's transaction was committed: hold it until a checkpoint that cannot list it. */
/* Initialise a producer with transactional id @id and close it: fences whoever held it and aborts
 * its open transaction. */
tpc_error_t *tpc__kafka_fence(tpc__kafka_sub_t *c, const char *id);
void tpc__kafka_pool_hold(tpc__kafka_sub_t *c, int slot, uint64_t release_after);

/* kafka_serve.c */
/* Start the thread that polls the subtask's producers; also initialises the lock. */
tpc_error_t *tpc__kafka_serve_start(tpc__kafka_sub_t *c);
/* Stop and join it (nothing if it never started); the producers are then the caller's alone. */
void tpc__kafka_serve_stop(tpc__kafka_sub_t *c);

/* kafka_txn.c */
tpc_error_t *tpc__kafka_open(void *arg, const tpc_txn_subtask_t *st, void **conn);
void tpc__kafka_close(void *conn);
tpc_error_t *tpc__kafka_begin(void *conn, uint64_t checkpoint_id, void **txn);
tpc_error_t *tpc__kafka_write(void *conn, void *txn, const tpc_record_t *records, size_t count);
tpc_error_t *tpc__kafka_flush(void *conn, void *txn);
tpc_error_t *tpc__kafka_pre_commit(void *conn, void *txn, uint64_t checkpoint_id);
tpc_error_t *tpc__kafka_commit(void *conn, void *txn);
tpc_error_t *tpc__kafka_abort(void *conn, void *txn);
bool tpc__kafka_is_empty(void *conn, const void *txn);
void tpc__kafka_free_txn(void *conn, void *txn);
void tpc__kafka_describe(void *conn, const void *txn, char *buf, size_t cap);
tpc_error_t *tpc__kafka_serialize(void *conn, const void *txn, tpc_txn_buf_t *out);
tpc_error_t *tpc__kafka_deserialize(void *conn, const void *bytes, size_t len, void **txn);

/* kafka_recover.c */
tpc_error_t *tpc__kafka_recover_and_commit(void *conn, void *txn);
tpc_error_t *tpc__kafka_recover_and_abort(void *conn, void *txn);
tpc_error_t *tpc__kafka_abort_lingering(void *conn, const tpc_txn_lingering_t *lingering);

/* Where a fresh start of the source begins. */
typedef enum {
    TPC__KAFKA_START_EARLIEST,
    TPC__KAFKA_START_LATEST,
    TPC__KAFKA_START_TIMESTAMP, /* the first offset whose timestamp is >= start_timestamp */
    TPC__KAFKA_START_GROUP,     /* the group's committed offsets, else start_fallback_latest */
} tpc__kafka_start_t;

/* What one subtask of a source last published for the metrics endpoint (kafka_source_metrics.c):
 * written by the subtask's thread, read by the metrics server's. */
typedef struct {
    _Atomic int64_t lag;        /* offsets behind the high watermarks */
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
} tpc__kafka_source_vertex_t;

/* The metrics callback of a source vertex (tpc_job_add_metrics()). */
void tpc__kafka_source_metrics(void *arg, tpc_metrics_writer_t *w);

/* The source's configuration (tpc_kafka_source_t), read-only once added to a job. */
struct tpc_kafka_source_s {
    tpc__kafka_source_vertex_t *vertices; /* the jobs it was added to */
    char **props;                         /* librdkafka name, value, name, value, ... */
    size_t nprops;
    char *topic;   /* the topics as given, for messages */
    char **topics; /* each topic once, sorted by name; none when pattern is set */
    size_t ntopics;
    bool is_pattern; /* topic began with '^': every topic that matches it */
    regex_t pattern;
    bool bounded;
    tpc__kafka_start_t start;
    int64_t start_timestamp;    /* milliseconds since the epoch */
    bool start_fallback_latest; /* start=group, a partition the group has no offset for */
    int max_batch;
    int poll_timeout_ms;
    int open_timeout_ms;
    int discovery_interval_ms; /* 0: no discovery */
};

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
} tpc__kafka_meta_t;

/* Ask for the partition counts of the configured topics, or of every topic that matches the
 * pattern (names beginning with "__", Kafka's internal topics, never match). */
void tpc__kafka_meta_read(rd_kafka_t *rk, const tpc_kafka_source_t *conf, int timeout_ms,
                          tpc__kafka_meta_t *out);
void tpc__kafka_meta_free(tpc__kafka_meta_t *m);
bool tpc__kafka_source_matches(const tpc_kafka_source_t *conf, const char *topic, size_t len);

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

#endif /* TPC_KAFKA_INTERNAL_H */
