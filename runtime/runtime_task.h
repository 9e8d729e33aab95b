/*
 * Subtasks, attempts and the job, as the runtime's files share them. A job (tpc_job_s) holds the
 * graph and configuration; each run of it is an attempt: one thread per subtask, the channels
 * between them, and an event queue that the coordinator (job thread) reads. Subtasks talk to the
 * coordinator only through that queue, and the coordinator to subtasks only through their mailbox:
 * no shared mutable structure is touched from two threads without its lock.
 */
#ifndef TPC_RUNTIME_TASK_H
#define TPC_RUNTIME_TASK_H

#include "runtime_internal.h"

/* Lifecycle of a subtask, as in docs/architecture.md. */
typedef enum {
    TPC__TASK_RUNNING = 0,
    TPC__TASK_WAITING_FOR_FINAL, /* finished its operator, still takes part in checkpoints */
    TPC__TASK_FINISHED,          /* closed after a checkpoint following its finish completed */
    TPC__TASK_FAILED,
    TPC__TASK_CANCELED,
} tpc__task_state_t;

const char *tpc__task_state_name(tpc__task_state_t s);

/* Coordinator → subtask. */
typedef enum {
    TPC__MSG_TRIGGER = 0,     /* take checkpoint id (sources and tasks whose inputs all closed) */
    TPC__MSG_NOTIFY_COMPLETE, /* checkpoint id is durable */
    TPC__MSG_NOTIFY_ABORTED,  /* checkpoint id was aborted */
    TPC__MSG_END_INPUT,       /* stop with savepoint, drain: a source ends its input */
    TPC__MSG_STOP,            /* stop with savepoint, no drain: exit without finish() */
} tpc__msg_kind_t;

typedef struct {
    tpc__msg_kind_t kind;
    uint64_t id;
} tpc__msg_t;

/* Subtask → coordinator. */
typedef enum {
    TPC__EV_STATE = 0, /* the subtask entered `state` */
    TPC__EV_ACK,       /* snapshot for checkpoint id, with state and the finished flag */
    TPC__EV_DECLINE,   /* cannot take part in checkpoint id */
    TPC__EV_WAKE,      /* an outside request (stop, cancel) wants attention */
} tpc__event_kind_t;

typedef struct tpc__event {
    tpc__event_kind_t kind;
    int task;
    uint64_t id;
    tpc__task_state_t state;
    bool finished;
    tpc_state_writer_t snapshot;
    tpc_error_t *err; /* with TPC__TASK_FAILED */
    char *reason;     /* with a decline */
    struct tpc__event *next;
} tpc__event_t;

typedef struct tpc__attempt tpc__attempt_t;

/* One outgoing edge of a subtask: the channels to the downstream subtasks it feeds. */
typedef struct {
    tpc_edge_t kind;
    tpc__channel_t **chans;
    tpc_batch_t **cur; /* batch being filled, per channel */
    int n;
    size_t rr;
} tpc__out_edge_t;

struct tpc_ctx_s {
    tpc__task_t *task;
};

typedef struct {
    tpc__channel_t *ch;
    bool ended;       /* end of data or end of partition seen */
    bool closed;      /* end of partition seen: nothing more will come */
    bool got_barrier; /* during alignment */
} tpc__input_t;

typedef struct tpc__keyed tpc__keyed_t;
typedef struct tpc__timers tpc__timers_t;
typedef struct tpc__keyed_writer tpc__keyed_writer_t;

struct tpc__task {
    tpc__attempt_t *attempt;
    int index; /* in attempt->tasks */
    int vertex;
    int subtask;
    const tpc_operator_ops_t *ops;
    void *self;
    tpc_ctx_t ctx;
    pthread_t thread;

    /* Wake-up and mailbox, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool signaled, sleeping;
    tpc__msg_t *mbox;
    size_t mbox_n, mbox_cap;
    atomic_int mbox_pending;
    /* Set with TPC__MSG_STOP: the subtask leaves without finish(), and so may its consumers, so
     * its pushes must not wait for room in a channel that nobody will read again. */
    atomic_bool stop_requested;

    tpc__input_t *inputs;
    int ninputs;
    tpc__out_edge_t *outs;
    int nouts;
    int *preds; /* indexes of the tasks feeding this one */
    int npreds;

    /* Restore instructions, set before the thread starts. */
    bool start_closed;
    bool restored_finished;
    tpc_state_reader_t restored;
    bool has_restored;
    tpc__keyed_t *keyed;   /* keyed state, NULL until first used or restored (keyed.c) */
    tpc__timers_t *timers; /* processing-time timers, NULL until first used (timers.c) */
    bool keyed_allowed;    /* every input is a hash edge: checked at the first keyed call */
    tpc__keyed_writer_t *keyed_writer; /* a snapshot's keyed state being written (task.c) */

    /* Subtask-thread state. */
    tpc__task_state_t state;
    bool finished_operator;
    bool aligning;
    uint64_t aligning_id;
    uint64_t ckpt_floor;     /* barriers and triggers at or below this id are stale */
    uint64_t aborted_ids[8]; /* recently aborted checkpoints: their barriers are stale too */
    unsigned naborted;
    uint64_t first_after_finish; /* first checkpoint snapshotted after finish() */
    uint64_t last_notified;
    bool final_notified;
    bool end_input;
    bool stop_now;
    uint64_t records_out_local;

    /* Read by other threads. */
    atomic_uint_fast64_t records_in, records_out, backpressure_us;
    atomic_int published_state;
};

typedef struct {
    char *name;
    int parallelism;
    const tpc_operator_ops_t *ops;
    void *arg;
} tpc__vertex_t;

typedef struct {
    int from, to;
    tpc_edge_t kind;
} tpc__edge_t;

/* A pending stop-with-savepoint request, under job->ctl_mu. */
typedef struct {
    bool active, drain, started, done;
    tpc_error_t *err;
    char *path;
} tpc__stop_t;

typedef struct {
    int64_t interval_ms, timeout_ms, min_pause_ms, restart_delay_ms;
    int64_t stop_timeout_ms; /* a stop with savepoint waits this long, then cancels; 0: no bound */
    int retained, max_concurrent, tolerable_failures, restart_attempts;
    bool after_finish;
    char *dir;
    enum { TPC__STORAGE_FOLDER, TPC__STORAGE_S3 } storage; /* checkpoint.storage */
    enum { TPC__OWNER_NONE, TPC__OWNER_CLAIM } owner;      /* checkpoint.owner */
    char *metrics_listen;                                  /* metrics.listen, NULL: no endpoint */
    enum { TPC__RESTORE_AUTO, TPC__RESTORE_FRESH, TPC__RESTORE_REQUIRED } restore;
    int max_parallelism;         /* key groups */
    bool incremental;            /* state.incremental */
    int max_chain;               /* state.incremental.max-chain */
    bool fallback_at_least_once; /* restore.fallback */
    size_t channel_capacity, batch_size;
    int64_t channel_capacity_ms;
} tpc__conf_t;

struct tpc_job_s {
    char *name;
    tpc__conf_t conf;
    tpc__logger_t log;
    tpc__vertex_t *vertices;
    int nvertices;
    tpc__edge_t *edges;
    int nedges;
    tpc_checkpoint_cb ckpt_cb;
    void *ckpt_cb_opaque;

    uint64_t next_checkpoint_id;
    /* The completion record of checkpoint.dir as this run knows it (record.c), and what this run
     * itself completed: a restore never goes behind either. run_first is the first checkpoint id
     * of a run that started over (restore.mode=fresh); its later attempts restore nothing older. */
    tpc__record_t record;
    bool record_found;
    uint64_t run_newest, run_first;

    /* Where the checkpoints go during a run (NULL: none are taken): the folder checkpoint.dir
     * (folder), or the store of checkpoint.storage's backend (backend_store). */
    tpc_storage_t *store;
    tpc__store_folder_t folder;
    const tpc_storage_backend_t *backend; /* tpc_job_use_storage() */
    void *backend_conf;                   /* its keys, by its property table */
    tpc_storage_t *backend_store;
    /* checkpoint.owner=claim: the owner epoch this run took (0: no owners), and the epoch whose
     * files newer than the record a restore may take (the record's before the take-over). */
    uint64_t owner_epoch, restore_epoch;

    /* Shared with other threads, under ctl_mu. */
    pthread_mutex_t ctl_mu;
    pthread_cond_t ctl_cv;
    bool running;
    bool dir_listed; /* this run has listed checkpoint.dir: ids at or above next are foreign */
    tpc__attempt_t *attempt;
    atomic_bool cancel_requested;
    tpc__stop_t stop;
    tpc_job_stats_t stats;        /* checkpoint counters; vertex counters of past attempts */
    struct tpc__metrics *metrics; /* metrics.c: collectors, server, counters */
};

/* restore.c: write job->record, over the version this owner last wrote when it has an owner epoch
 * (TPC_ERR_FENCED, fatal, when another owner took the job over), else whatever is there. */
tpc_error_t *tpc__restore_record_store(tpc_job_t *job);
/* With owners: when @err (a failed checkpoint write) came because another owner took the job
 * over (the record holds a newer epoch), that TPC_ERR_FENCED (fatal) in its place; else @err. */
tpc_error_t *tpc__restore_owner_check(tpc_job_t *job, tpc_error_t *err);
/* job_config.c: the names of checkpoint.storage's values, by tpc__conf_t.storage. */
extern const char *const tpc__job_storages[];
/* The job takes checkpoints that survive the process (checkpoint.dir, or another storage). */
bool tpc__job_durable(const tpc_job_t *job);
/* The keys of the job's storage backend (tpc_job_use_storage()), NULL without one. */
const tpc_props_t *tpc__job_backend_props(const tpc_job_t *job);

struct tpc__attempt {
    tpc_job_t *job;
    int number;
    atomic_bool canceled;
    tpc__task_t *tasks;
    int ntasks;
    tpc__channel_t **channels;
    int nchannels;
    uint64_t restored_id;
    uint64_t first_checkpoint_id; /* lowest id a checkpoint of this attempt can have */
    bool restored_behind;         /* restore.fallback=at-least-once took an older checkpoint */
    int *restored_parallelism;    /* per vertex, 0 when the restored checkpoint lacks it */
    int *highest_parallelism;     /* per vertex, in this checkpoint.dir, at least the current */
    tpc__checkpoint_t restored;   /* kept alive until tasks initialised */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    tpc__event_t *head, *tail;
};

/* output.c */
tpc_err_t tpc__task_flush(tpc__task_t *t);
tpc_err_t tpc__task_broadcast_event(tpc__task_t *t, tpc__item_kind_t kind, uint64_t id);
bool tpc__task_outputs_drained(tpc__task_t *t);
void tpc__task_release_outputs(tpc__task_t *t);

/* metrics.c: the Prometheus endpoint. new at tpc_job_new(); listen (again) whenever
 * metrics.listen is set and at the start of a run (fails when it cannot listen; nothing when it
 * listens there already); run_start/run_end around tpc_job_run(); free at tpc_job_destroy(), which
 * stops the server first; note_* from the coordinator and at the end of an attempt (under
 * ctl_mu). */
void tpc__metrics_new(tpc_job_t *job);
tpc_error_t *tpc__metrics_listen(tpc_job_t *job);
void tpc__metrics_run_start(tpc_job_t *job);
void tpc__metrics_run_end(tpc_job_t *job, tpc_job_result_t result, const tpc_error_t *err);
void tpc__metrics_free(tpc_job_t *job);
/* A checkpoint ended: when @completed, its duration and the size of its file. */
void tpc__metrics_note_checkpoint(tpc_job_t *job, bool completed, uint64_t duration_us,
                                  uint64_t bytes);
void tpc__metrics_note_declined(tpc_job_t *job);
/* A checkpoint aborted because it timed out, or because its file could not be written. */
typedef enum { TPC__FAILED_TIMEOUT, TPC__FAILED_WRITE } tpc__failure_cause_t;
void tpc__metrics_note_failed(tpc_job_t *job, tpc__failure_cause_t cause);
void tpc__metrics_note_attempt(tpc_job_t *job, const tpc__attempt_t *a);

/* task.c */
void tpc__task_wake(tpc__task_t *t);
void tpc__task_post(tpc__task_t *t, tpc__msg_kind_t kind, uint64_t id);
void *tpc__task_main(void *arg);

/* coordinator.c */
void tpc__attempt_post(tpc__attempt_t *a, tpc__event_t *ev);
typedef enum { TPC__END_FINISHED, TPC__END_FAILED, TPC__END_CANCELED, TPC__END_STOPPED } tpc__end_t;
tpc__end_t tpc__coordinate(tpc__attempt_t *a, tpc_error_t **err);

/* job.c */
void tpc__attempt_cancel(tpc__attempt_t *a);

/* keyed.c */
uint64_t tpc__key_hash(const void *key, size_t len);
/* The key group of a key hash, and the subtask of @parallelism that owns it: the mapping of
 * tpc_key_group() / tpc_key_group_subtask() without their argument checks, for the record path. */
static inline int tpc__key_group_of(uint64_t key_hash, int max_parallelism)
{
    return (int)(key_hash % (uint64_t)max_parallelism);
}
static inline int tpc__group_owner(int group, int max_parallelism, int parallelism)
{
    return (int)((int64_t)group * parallelism / max_parallelism);
}
void tpc__keyed_free(tpc__keyed_t *k);
/* keyed_snapshot.c */
/* A copy-on-write snapshot of keyed state: tpc__keyed_freeze lists the entries (NULL when there
 * are none) on the subtask's thread; tpc__keyed_write_frozen writes them on any one thread while
 * the subtask goes on; tpc__keyed_thaw, on the subtask's thread after the writer is done, frees
 * what the subtask replaced or removed meanwhile. */
typedef struct tpc__frozen tpc__frozen_t;
tpc__frozen_t *tpc__keyed_freeze(tpc__keyed_t *k, uint64_t id);
void tpc__keyed_write_frozen(const tpc__frozen_t *f, tpc_state_writer_t *w);
void tpc__keyed_thaw(tpc__keyed_t *k, tpc__frozen_t *f);
/* Checkpoint @p id completed (its snapshot is the chain's new last link) or aborted (the next
 * snapshot builds on what the last one did). */
void tpc__keyed_completed(tpc__keyed_t *k, uint64_t id);
void tpc__keyed_aborted(tpc__keyed_t *k, uint64_t id);
/* Keyed entries (state and timers) of a restore into the subtask's tables. */
tpc_error_t *tpc__keyed_load(tpc__task_t *t, const tpc__slice_t *entries, size_t n);
/* Append one keyed entry to @w (@one is scratch space). */
void tpc__keyed_entry_write(tpc_state_writer_t *w, tpc__buf_t *one, int group, int kind,
                            const char *name, const void *key, size_t key_len, const void *map_key,
                            size_t map_key_len, const void *value, size_t value_len);
/* keyed.c */
/* Around process() of batch @p b for a subtask that uses keyed state: hash the records' keys once
 * for every keyed call on them, and prefetch their slots and entries in a large table (which
 * misses the cache on nearly every key). */
void tpc__keyed_batch_begin(tpc__task_t *t, const tpc_batch_t *b);
void tpc__keyed_batch_end(tpc__task_t *t);
/* The rule for keyed state and timers (every input a hash edge, a key of the subtask's groups);
 * gives the key's group and hash. @what names the caller in errors. */
tpc_error_t *tpc__keyed_check(tpc_ctx_t *ctx, const char *what, const char *state, const void *key,
                              size_t key_len, int *group, uint64_t *key_hash);

/* timers.c */
void tpc__timers_add(tpc__task_t *t, int group, uint64_t key_hash, const void *key, size_t key_len,
                     int64_t at_ms);
void tpc__timers_free(tpc__timers_t *tm);
void tpc__timers_snapshot(const tpc__timers_t *tm, tpc_state_writer_t *w);
/* The time of the earliest timer, INT64_MAX when none. */
int64_t tpc__timers_next(const tpc__timers_t *tm);
/* Fire the timers due now (a bounded number per call), in time order. */
tpc_error_t *tpc__timers_fire(tpc__task_t *t);

/* restore.c: checkpoint @id is durable; record it as the newest completed before any sink hears
 * of it. An error fails the attempt (nothing may be committed on an unrecorded checkpoint). */
tpc_error_t *tpc__restore_note_complete(tpc_job_t *job, uint64_t id);

#endif
