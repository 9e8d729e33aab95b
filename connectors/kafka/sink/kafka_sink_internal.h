/*
 * Private to connectors/kafka/sink: the sink's configuration, a subtask's instance with its pool of
 * transactional producers, and the transaction handle. Split over kafka_sink.c (configuration and
 * the ops table), kafka_producer.c (one librdkafka producer and its callbacks), kafka_open.c (the
 * checks at open), kafka_txn.c (writing, pre-committing and committing a transaction),
 * kafka_pool.c (which transactional id may carry the next transaction), kafka_recover.c
 * (recovery commits and lingering transactions), kafka_serve.c (the thread that polls the
 * producers the subtask leaves alone) and kafka_metrics.c (librdkafka's statistics for the metrics
 * endpoint). The sink uses the wire client (../wire/kafka_wire.h) for what librdkafka cannot do;
 * the source (../source/) is a room of its own, and neither includes the other.
 */
#ifndef TPC_KAFKA_SINK_INTERNAL_H
#define TPC_KAFKA_SINK_INTERNAL_H

#include "kafka_wire.h"
#include "tpc_kafka.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>

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
    tpc_txn_sink_t *sink; /* the sink this is the configuration of, for its timeout */
} tpc__kafka_conf_t;

/* @returns the value of librdkafka property @name as configured, or NULL. */
const char *tpc__kafka_prop(const tpc__kafka_conf_t *conf, const char *name);

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
    uint64_t delivered;
    uint64_t failed;
    char first_failure[256];
    tpc__kafka_stats_t *stats; /* the sink's, for the metrics endpoint */
    int64_t stats_last[TPC__KAFKA_NSTATS];
    const char *security_protocol; /* the sink's, for what its log lines may say (kafka_logq.c) */
} tpc__kafka_producer_t;

typedef struct {
    tpc__kafka_producer_t prod;
    tpc__kafka_slot_state_t state;
    uint64_t release_after; /* HELD: free once a checkpoint >= this one is known complete */
    int64_t last_start_ms;  /* coordinator's start time of the slot's last named transaction */
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
    /* The topic's retention.ms (-1: none known); a record stamped older is deleted by the broker
     * soon after its commit, which the sink says once (warned_old, kafka_txn.c). */
    int64_t retention_ms;
    bool warned_old;
    /* Connections to the transaction coordinators, kept for the descriptions of pre-commit and of
     * the commit's proof (NULL when memory ran out: each opens its own); the subtask's thread
     * alone uses them, under the lock. */
    tpc__kafka_coords_t *coords;
} tpc__kafka_sub_t;

typedef struct {
    int slot; /* pool slot of this instance, -1 for a restored or plain handle */
    char id[TPC__KAFKA_ID_MAX];
    int64_t pid;
    int16_t epoch;
    /* The coordinator's start time of the transaction (DescribeTransactions at pre-commit): with
     * id, pid and epoch it names this one transaction (kafka_proof.c); -1 before pre-commit and
     * in handles of version 1, which had none. */
    int64_t start_ms;
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
/* Flush and check that every delivery succeeded; a cancel of the subtask cuts the wait short. */
tpc_error_t *tpc__kafka_producer_flush(tpc__kafka_producer_t *p, int timeout_ms);
/* The error of a producer that a newer producer of its transactional id fenced: TPC_ERR_FENCED,
 * ending the job without restarts (a restart would fence the newer one in turn). */
tpc_error_t *tpc__kafka_fenced_error(const char *what, const char *id, const char *reason);
/* Turn a librdkafka transaction error into a twopc error; takes @error. An error that requires
 * aborting the transaction is data loss once it was pre-committed (@pre_committed). */
tpc_error_t *tpc__kafka_txn_error(rd_kafka_error_t *error, const char *what, const char *id,
                                  bool pre_committed);

/* The wire client's settings of a subtask: the sink's librdkafka properties, so that describing
 * and ending transactions uses the producers' TLS and SASL settings. */
tpc__kafka_wire_conf_t tpc__kafka_sink_wire(const tpc__kafka_sub_t *c);

/* kafka_open.c: the checks at open; @retention_ms (may be NULL) gets the topic's retention.ms,
 * -1 when records are kept for ever, stamped by the broker, or the setting cannot be read. */
tpc_error_t *tpc__kafka_check_cluster(const tpc__kafka_conf_t *conf, const tpc_txn_subtask_t *st,
                                      bool transactional, int64_t *retention_ms);

/* kafka_pool.c */
/* Transactional id @n of @subtask under @owner_epoch: `<prefix>-<subtask>-<n>` for epoch 0 (a job
 * without owners), `<prefix>-e<epoch>-<subtask>-<n>` otherwise. */
void tpc__kafka_id_of(const tpc__kafka_sub_t *c, uint64_t owner_epoch, int subtask, int n,
                      char *buf, size_t cap);
/* The owner epoch of @id if it is one of this sink's ids (of either form); false if not. */
bool tpc__kafka_id_epoch(const tpc__kafka_sub_t *c, const char *id, uint64_t *owner_epoch);
/* This subtask's id @n under its owner epoch. */
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
/* tpc__kafka_fence() on each of @n ids, in parallel; @returns the first error. */
tpc_error_t *tpc__kafka_fence_all(tpc__kafka_sub_t *c, const char (*ids)[TPC__KAFKA_ID_MAX], int n);
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
tpc_error_t *tpc__kafka_describe_handle(const void *bytes, size_t len, tpc_txn_handle_view_t *out);
tpc_error_t *tpc__kafka_serialize(void *conn, const void *txn, tpc_txn_buf_t *out);
tpc_error_t *tpc__kafka_deserialize(void *conn, const void *bytes, size_t len, void **txn);

/* kafka_recover.c */
tpc_error_t *tpc__kafka_recover_and_commit(void *conn, void *txn);
tpc_error_t *tpc__kafka_recover_and_abort(void *conn, void *txn);
tpc_error_t *tpc__kafka_abort_lingering(void *conn, const tpc_txn_lingering_t *lingering);

#endif /* TPC_KAFKA_SINK_INTERNAL_H */
