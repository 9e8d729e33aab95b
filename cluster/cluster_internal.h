/*
 * Private to cluster/: a process's share of an application's units. The member's configuration,
 * its run and its group membership in cluster.c, the lease topic in cluster_lease.c, and one
 * unit's job — built, run, restarted, stopped — in cluster_unit.c. The room sits above the
 * runtime and the connectors and sees only their public headers; it talks to Kafka's group
 * coordinator through librdkafka's consumer.
 */
#ifndef TPC_CLUSTER_INTERNAL_H
#define TPC_CLUSTER_INTERNAL_H

#include "tpc_cluster.h"
#include "tpc_kit.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>

/* One unit as this process sees it. Its fields are guarded by the member's mu, except those
 * the unit's own thread alone touches (noted). */
typedef struct {
    struct tpc_cluster_s *c;
    tpc_cluster_unit_t info; /* its strings are the unit's own, below */
    char *job_name, *checkpoint_dir, *prefix;
    char *s3_prefix; /* checkpoint.storage=s3: "<checkpoint.s3.prefix>/unit-<u>/"; else NULL */
    pthread_t thread;
    bool thread_live;   /* started and not yet joined (the membership thread's) */
    bool stopping;      /* no new attempt: revoked, lost or the run ends */
    bool cancel_only;   /* stopping without a savepoint (lost) */
    tpc_job_t *job;     /* the attempt in tpc_job_run(), or NULL */
    int job_users;      /* stoppers using job: the unit's thread waits for them before freeing it */
    bool done;          /* its thread ended */
    tpc_error_t *fatal; /* a fatal error of the unit's job, for tpc_cluster_run() */
} tpc__unit_t;

struct tpc_cluster_s {
    char *bootstrap, *app;
    int units;
    /* keys (tpc_cluster_properties()) */
    char **props; /* librdkafka consumer name, value, ...: nprops pairs */
    size_t nprops;
    char *checkpoint_dir;
    int storage;     /* 0 folder, 1 s3 */
    char **s3_props; /* checkpoint.s3.* keys but the prefix, for every unit's job: name, value */
    size_t ns3_props;
    char *s3_prefix;   /* checkpoint.s3.prefix: the application's (NULL: "<app>") */
    void *s3_conf;     /* the checkpoint.s3.* keys parsed, so that a bad value is refused at once */
    char *lease_topic; /* NULL: "<app>-units" */
    int protocol;      /* 0 classic, 1 consumer */
    int replication_factor;
    int restart_delay_ms;
    int64_t session_timeout_ms; /* the membership consumer's (set when it is made) */
    int open_timeout_ms;

    tpc_cluster_build_fn build;
    tpc_cluster_release_fn release;
    void *build_opaque;
    tpc_cluster_event_fn event_cb;
    void *event_opaque;
    tpc_log_cb log_cb;
    void *log_opaque;
    tpc_log_level_t log_level;

    atomic_bool stop_requested;
    /* Membership thread only: the consumer had an assignment (the rebalance callback took one,
     * if empty) in this run; the run is closing and takes assignments without starting units. */
    bool assigned_once, closing;
    /* A membership consumer was left undestroyed (librdkafka would abort destroying it): its
     * threads may still log, through this struct, which therefore outlives tpc_cluster_destroy()
     * and from then on says nothing. */
    atomic_bool consumer_left;
    pthread_mutex_t mu;       /* over units' shared fields, fatal */
    pthread_cond_t cond;      /* a unit's job left, a stopper finished, a restart pause may end */
    pthread_mutex_t event_mu; /* one event callback at a time */
    tpc__unit_t *unit;        /* units of them */
    tpc_error_t *fatal;       /* the first fatal error: the run ends */
};

/* A log line of the member, at @level (up to the logger's level). */
void tpc__cluster_log(tpc_cluster_t *c, tpc_log_level_t level, const char *fmt, ...)
    TPC_PRINTF(3, 4);
/* Tell the event callback. */
void tpc__cluster_event(tpc_cluster_t *c, tpc_cluster_event_kind_t kind, int unit,
                        const char *savepoint, const tpc_error_t *error);

/* cluster_unit.c */
/* The unit's names, from the member's application and its checkpoint folder or S3 prefix. */
tpc_error_t *tpc__unit_init(tpc_cluster_t *c, int index, tpc__unit_t *u);
void tpc__unit_free(tpc__unit_t *u);
/* Make the unit's job as tpc_job_run() will run it: the program's build, then the keys the library
 * sets (the unit's checkpoint folder or S3 prefix, checkpoint.owner=claim). *@job is NULL unless
 * it was made; *@resources is for the release callback either way. */
tpc_error_t *tpc__unit_build(tpc__unit_t *u, tpc_job_t **job, void **resources);
/* Assigned: start its thread, which builds and runs its job until it is stopped. */
tpc_error_t *tpc__unit_start(tpc__unit_t *u);
/* Revoked (savepoint) or lost (cancel): stop its job, join its thread. Membership thread. */
void tpc__unit_stop(tpc__unit_t *u, bool savepoint);

/* cluster_lease.c: the lease topic, made with @units partitions when missing; one with another
 * partition count is a configuration error. */
tpc_error_t *tpc__cluster_lease_topic(rd_kafka_t *rk, const char *topic, int units,
                                      int replication_factor, int timeout_ms);

#endif /* TPC_CLUSTER_INTERNAL_H */
