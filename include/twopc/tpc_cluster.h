/**
 * @file tpc_cluster.h
 * @brief twopc beyond one machine: a job run as U units that the processes of an application
 * share, assigned by Kafka's group coordinator.
 *
 * A unit is a complete twopc job over its share of the work, with its own checkpoint folder (or
 * S3 key prefix), transactional-id prefix and gid prefix, which this library derives. Every process
 * of the application makes a tpc_cluster_t with the same application name and unit count, and runs
 * it: it joins the consumer group named after the application, subscribed to the lease topic (one
 * partition per unit, made when missing). The partitions the group coordinator assigns to a
 * process are the units it runs:
 * - assigned: the program's build callback makes the unit's job, which runs on a thread of its
 *   own and restores the unit's newest completed checkpoint;
 * - revoked (another process joined, or this one leaves): the job stops with a savepoint without
 *   drain, and only then does the process give the unit up, so that its next owner resumes from
 *   that savepoint;
 * - lost (this process missed its session): the job is canceled at once and commits nothing more;
 * - a job that fails is built and run again after unit.restart.delay.ms while the unit stays
 *   assigned; one that ends fenced (TPC_ERR_FENCED: another process holds the unit) is not run
 *   again while the group moves the unit away, and runs again, as a new owner of its
 *   checkpoints, if the group still assigns it here after twice the session timeout; a fatal
 *   error ends tpc_cluster_run().
 *
 * docs/cluster.md describes units, membership, fencing and storage, and what an operator does to
 * add a machine, change the unit count or move checkpoints.
 *
 * Threads: configure on one thread, then tpc_cluster_run() on that thread; tpc_cluster_stop()
 * from any thread or a signal handler. The build and release callbacks run on the unit's thread,
 * the event and log callbacks on any of the cluster's threads.
 */
#ifndef TPC_CLUSTER_H
#define TPC_CLUSTER_H

#include "tpc_props.h"
#include "tpc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A process's share of an application's units. Opaque. */
typedef struct tpc_cluster_s tpc_cluster_t;

/** What the library derived for one unit. Borrowed: valid from the build callback until the
 * release callback has returned. */
typedef struct {
    const char *app; /**< the application's name, the consumer group's */
    int unit;        /**< 0 .. units - 1 */
    int units;
    const char *job_name;       /**< "<app>-unit-<unit>", the unit's job's name */
    const char *checkpoint_dir; /**< "<checkpoint.dir>/unit-<unit>", the job's folder; NULL with
                                     checkpoint.storage=s3 */
    const char *transactional_id_prefix; /**< "<app>-u<unit>": a Kafka sink's
                                              transactional.id.prefix (with a suffix per sink) */
    const char *gid_prefix; /**< "<app>-u<unit>": a PostgreSQL sink's pg.gid-prefix or a file
                                 sink's file.prefix (with a suffix per sink) */
    const char *checkpoint_s3_prefix; /**< checkpoint.storage=s3: "<checkpoint.s3.prefix>/unit-
                                           <unit>/", the job's key prefix; NULL with a folder */
} tpc_cluster_unit_t;

/**
 * Build the job of @p unit into @p job: its vertices, edges, sinks and job keys (each unit
 * reads only its share of the input, e.g. partition @p unit of a repartition topic, and its
 * sinks take the unit's prefixes). The library then sets the unit's checkpoint storage itself
 * (checkpoint.dir; or, with checkpoint.storage=s3, the S3 backend, given to @p job before this
 * call, its checkpoint.s3.* keys and the unit's prefix) and checkpoint.owner=claim. Called on the
 * unit's thread, each time the unit's job starts, for several units at once: @p opaque must be safe
 * to share.
 * @param[out] resources what the job borrows (sinks, sources), given back to the release
 * callback after the job is destroyed.
 * @returns NULL, or an error: a fatal one ends tpc_cluster_run(), any other is retried after
 * unit.restart.delay.ms.
 */
typedef tpc_error_t *(*tpc_cluster_build_fn)(void *opaque, const tpc_cluster_unit_t *unit,
                                             tpc_job_t *job, void **resources);

/** Free what the build callback made for @p unit's job (its @p resources), after the job is
 * destroyed; also after a build that failed. Called on the unit's thread. */
typedef void (*tpc_cluster_release_fn)(void *opaque, const tpc_cluster_unit_t *unit,
                                       void *resources);

/** What happened to a unit of this process. */
typedef enum {
    TPC_CLUSTER_UNIT_ASSIGNED = 0, /**< assigned: its job is built and runs */
    TPC_CLUSTER_UNIT_RELEASED = 1, /**< revoked: its job stopped (savepoint names the savepoint;
                                        NULL when the stop had to cancel, error says why) */
    TPC_CLUSTER_UNIT_LOST = 2,     /**< the assignment was lost: its job was canceled */
    TPC_CLUSTER_UNIT_FINISHED = 3, /**< its job finished (bounded input); it stays done */
    TPC_CLUSTER_UNIT_FENCED = 4, /**< its job was fenced by a newer owner (runs again only if still
                                    assigned here after twice the session timeout) */
    TPC_CLUSTER_UNIT_FAILED = 5, /**< its job failed (error); it runs again after
                                      unit.restart.delay.ms */
} tpc_cluster_event_kind_t;

/** One event of a unit; borrowed, valid during the callback. */
typedef struct {
    tpc_cluster_event_kind_t kind;
    int unit;
    const char *savepoint;    /**< RELEASED: the savepoint's path, or NULL */
    const tpc_error_t *error; /**< FAILED, FENCED, RELEASED without savepoint: why; or NULL */
} tpc_cluster_event_t;

/** Called on any of the cluster's threads, one event at a time; must be quick. */
typedef void (*tpc_cluster_event_fn)(void *opaque, const tpc_cluster_event_t *event);

/**
 * @brief New cluster member of application @p app, whose work is @p units units.
 * @param bootstrap the Kafka cluster that holds the consumer group and the lease topic, copied.
 * @param app the application's name: the consumer group and, with a suffix, the lease topic, the
 * unit's job names and prefixes; 1 to 100 letters, digits, '_', '-' or '.'; copied.
 * @param units the number of units, 1 to 4096; fixed for the application's lifetime
 * (docs/cluster.md, "Changing the unit count").
 * @param[out] out the new member, owned by the caller (tpc_cluster_destroy()).
 * @returns NULL, or TPC_ERR_INVALID_ARG naming what is wrong / TPC_ERR_NOMEM.
 */
TPC_API tpc_error_t *tpc_cluster_new(const char *bootstrap, const char *app, int units,
                                     tpc_cluster_t **out);

/**
 * @brief Set a key (before tpc_cluster_run()): checkpoint.dir (required with the default
 * checkpoint.storage=folder), checkpoint.storage, checkpoint.s3.* (with s3), group.protocol,
 * lease.topic, lease.replication.factor, unit.restart.delay.ms, open.timeout.ms and
 * kafka.<property> for the membership consumer (group.instance.id for static membership,
 * session.timeout.ms, security). docs/configuration.md, generated from
 * tpc_cluster_properties().
 * @returns NULL, or TPC_ERR_CONFIG naming the key and what it takes.
 */
TPC_API tpc_error_t *tpc_cluster_set(tpc_cluster_t *c, const char *key, const char *value);

/** @returns the cluster member's keys (tpc_cluster_set()). */
TPC_API const tpc_props_t *tpc_cluster_properties(void);

/**
 * @brief Set how a unit's job is made (required), before tpc_cluster_run().
 * @param release may be NULL; @p opaque is borrowed and must outlive the run.
 * @returns NULL, or TPC_ERR_INVALID_ARG without @p build.
 */
TPC_API tpc_error_t *tpc_cluster_set_builder(tpc_cluster_t *c, tpc_cluster_build_fn build,
                                             tpc_cluster_release_fn release, void *opaque);

/** @brief Be told of every unit event (before tpc_cluster_run()). @p opaque is borrowed. */
TPC_API tpc_err_t tpc_cluster_set_event_callback(tpc_cluster_t *c, tpc_cluster_event_fn cb,
                                                 void *opaque);

/** @brief Route the member's log lines (assignments, stops, failures) to @p cb, up to
 * @p max_level; default: stderr, warnings and errors. Before tpc_cluster_run(). */
TPC_API tpc_err_t tpc_cluster_set_logger(tpc_cluster_t *c, tpc_log_cb cb, void *opaque,
                                         tpc_log_level_t max_level);

/**
 * @brief Join the group and run the units assigned to this process until tpc_cluster_stop().
 * Makes the lease topic with one partition per unit when it is missing.
 * @returns NULL after a stop (every unit stopped with a savepoint, the group left); or the error
 * that ended the run: TPC_ERR_CONFIG (no builder, no checkpoint.dir with a folder or no
 * checkpoint.s3.bucket with s3, a lease topic with another
 * partition count, a consumer property librdkafka refuses), TPC_ERR_UNSUPPORTED
 * (group.protocol=consumer with a librdkafka before 2.12), TPC_ERR_CONNECT / TPC_ERR_EXTERNAL
 * (the cluster could not be reached, a fatal consumer error), or a unit's fatal error, prefixed
 * with the unit. Units still running are stopped before it returns.
 */
TPC_API tpc_error_t *tpc_cluster_run(tpc_cluster_t *c);

/** @brief Ask tpc_cluster_run() to stop its units with savepoints, leave the group and return.
 * Any thread; async-signal-safe. */
TPC_API void tpc_cluster_stop(tpc_cluster_t *c);

/** @brief Free a member whose run returned (or never started). NULL is fine. */
TPC_API void tpc_cluster_destroy(tpc_cluster_t *c);

#ifdef __cplusplus
}
#endif
#endif /* TPC_CLUSTER_H */
