/*
 * The job's settings: its property table (the keys of tpc_job_set(), from which `twopc config` and
 * docs/configuration.md are generated), the storage backend, the logger and the checkpoint
 * callback. They are set before tpc_job_run(); job.c runs the job they describe.
 */
#include "runtime_task.h"
#include "tpc_props.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JOB_FIELD(member) TPC_PROP_FIELD(tpc__conf_t, member)
#define MS_MAX            (INT64_MAX / 1000)

static const char *const restore_modes[] = {"auto", "fresh", "required", NULL};
const char *const tpc__job_storages[] = {"folder", "s3", NULL};
static const char *const owners[] = {"none", "claim", NULL};
static const char *const fallbacks[] = {"refuse", "at-least-once", NULL};

/* The job's keys; docs/configuration.md is generated from this table (`twopc config`). */
static const tpc_prop_t job_props[] = {
    {.name = "checkpoint.interval.ms",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(interval_ms),
     .min = 0,
     .max = MS_MAX,
     .def = "1000",
     .unit = "ms",
     .doc = "Periodic checkpoint trigger; 0 takes no periodic checkpoints."},
    {.name = "checkpoint.timeout.ms",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(timeout_ms),
     .min = 1,
     .max = MS_MAX,
     .def = "60000",
     .unit = "ms",
     .doc = "A checkpoint not complete by then is aborted."},
    {.name = "checkpoint.dir",
     .type = TPC_PROP_STRING,
     .field = JOB_FIELD(dir),
     .accepts = "a directory path",
     .doc = "Where checkpoints and the completion record are stored; without it the job takes no "
            "checkpoints and exactly-once sinks refuse to run."},
    {.name = "checkpoint.storage",
     .type = TPC_PROP_ENUM,
     .field = JOB_FIELD(storage),
     .choices = tpc__job_storages,
     .def = "folder",
     .doc = "Where checkpoints and the completion record are kept. folder: the local folder "
            "checkpoint.dir; s3: S3-compatible object storage, with the checkpoint.s3.* keys of "
            "the S3 checkpoint storage (the program calls tpc_job_use_storage(job, "
            "tpc_s3_storage_backend()) first; without a bucket the job refuses to run)."},
    {.name = "checkpoint.owner",
     .type = TPC_PROP_ENUM,
     .field = JOB_FIELD(owner),
     .choices = owners,
     .def = "none",
     .doc = "none: one process holds the checkpoints. claim: the checkpoints may be held by one "
            "process after another (a unit of a job spread over several processes); each run "
            "takes them over first, raising the owner epoch in the completion record by "
            "compare-and-set, and a process whose checkpoints were taken over ends with "
            "TPC_ERR_FENCED at its next checkpoint, before it tells any sink that it completed "
            "(docs/architecture.md, \"Owner epoch\")."},
    {.name = "checkpoint.retained",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(retained),
     .min = 1,
     .max = 1000000,
     .def = "3",
     .doc = "Completed checkpoints kept in checkpoint.dir."},
    {.name = "checkpoint.max-concurrent",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(max_concurrent),
     .min = 1,
     .max = 64,
     .def = "1",
     .doc = "Checkpoints in flight at once."},
    {.name = "checkpoint.min-pause.ms",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(min_pause_ms),
     .min = 0,
     .max = MS_MAX,
     .def = "0",
     .unit = "ms",
     .doc = "Pause between a completed checkpoint and the next trigger."},
    {.name = "checkpoint.tolerable-failures",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(tolerable_failures),
     .min = 0,
     .max = 1000000,
     .def = "3",
     .doc = "Consecutive aborted checkpoints before the job fails."},
    {.name = "checkpoint.after-finish",
     .type = TPC_PROP_BOOL,
     .field = JOB_FIELD(after_finish),
     .def = "true",
     .doc = "Keep checkpointing after some tasks finished, and take a final checkpoint before "
            "the job ends (what exactly-once sinks need to commit everything)."},
    {.name = "restart.attempts",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(restart_attempts),
     .min = 0,
     .max = 1000000,
     .def = "3",
     .doc = "Restarts after a failure before tpc_job_run() fails."},
    {.name = "restart.delay.ms",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(restart_delay_ms),
     .min = 0,
     .max = MS_MAX,
     .def = "100",
     .unit = "ms",
     .doc = "Pause before a restart."},
    {.name = "stop.timeout.ms",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(stop_timeout_ms),
     .min = 0,
     .max = MS_MAX,
     .def = "20000",
     .unit = "ms",
     .doc = "How long tpc_job_stop_with_savepoint() (SIGTERM in the examples) waits for the "
            "savepoint, through failures and restarts. Past it the job is canceled without a "
            "savepoint: nothing a checkpoint promised is lost, the next start commits it. 0 "
            "waits as long as it takes."},
    {.name = "restore.mode",
     .type = TPC_PROP_ENUM,
     .field = JOB_FIELD(restore),
     .choices = restore_modes,
     .def = "auto",
     .doc = "auto: resume from the newest completed checkpoint in checkpoint.dir if there is one; "
            "fresh: start over, once per run (after a failure the run resumes from its own "
            "checkpoints); required: fail when there is none."},
    {.name = "restore.fallback",
     .type = TPC_PROP_ENUM,
     .field = JOB_FIELD(fallback_at_least_once),
     .choices = fallbacks,
     .def = "refuse",
     .doc = "When the newest completed checkpoint is damaged or gone. refuse: fail with "
            "TPC_ERR_CORRUPT or TPC_ERR_NOT_FOUND and say what to do; at-least-once: restore the "
            "newest valid older one (or none) with a loud warning, and sinks write again what the "
            "lost checkpoints covered."},
    {.name = "channel.capacity",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(channel_capacity),
     .min = 2,
     .max = 1 << 20,
     .def = "16",
     .unit = "batches",
     .doc = "Batches buffered per channel: the backpressure bound."},
    {.name = "channel.capacity.ms",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(channel_capacity_ms),
     .min = 0,
     .max = 3600000,
     .def = "500",
     .unit = "ms",
     .doc = "The bound in time: a channel takes no further batch while the records it holds "
            "would take its consumer longer than this to get through, at the pace it took "
            "them lately (at least one batch always fits). It bounds how long a checkpoint "
            "barrier waits behind buffered records when an operator is slow; 0: batches only."},
    {.name = "batch.size",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(batch_size),
     .min = 1,
     .max = 1 << 20,
     .def = "256",
     .unit = "records",
     .doc = "Records per batch."},
    {.name = "metrics.listen",
     .type = TPC_PROP_STRING,
     .field = JOB_FIELD(metrics_listen),
     .accepts = "a port, or an IPv4 address and a port (\"9464\", \"127.0.0.1:9464\"); port 0 "
                "takes a free one",
     .doc = "Serve Prometheus metrics at http://ADDRESS:PORT/metrics, and the probes /healthz "
            "and /readyz, from the moment this is set until the job is destroyed (a port "
            "that is taken fails the setting); a bare port listens on 127.0.0.1 only "
            "(docs/metrics.md). Unset: no endpoint."},
    {.name = "max-parallelism",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(max_parallelism),
     .min = 1,
     .max = 32768,
     .def = "128",
     .doc = "Key groups: the highest parallelism any vertex may have. Stored in checkpoints; a "
            "restore with another value is refused."},
    {.name = "state.incremental",
     .type = TPC_PROP_BOOL,
     .field = JOB_FIELD(incremental),
     .def = "false",
     .doc = "Incremental checkpoints of keyed state: a checkpoint writes only the keyed entries "
            "put and deleted since the last completed one (an aborted one's changes are written "
            "again), and a restore reads the chain back to the "
            "last full snapshot (docs/keyed-state.md)."},
    {.name = "state.incremental.max-chain",
     .type = TPC_PROP_INT,
     .field = JOB_FIELD(max_chain),
     .min = 1,
     .max = 1000,
     .def = "10",
     .doc = "With state.incremental: the most checkpoints a restore reads for one subtask's keyed "
            "state; when the chain has this many, the next checkpoint writes a full snapshot "
            "(1: every one is full)."},
};

static const tpc_props_t job_table = {"job", "tpc_job_set()", job_props,
                                      sizeof job_props / sizeof *job_props};

const tpc_props_t *tpc_job_properties(void)
{
    return &job_table;
}

tpc_error_t *tpc_job_set(tpc_job_t *job, const char *key, const char *value)
{
    if (!job || !key || !value)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0, "tpc_job_set needs a job, a key and a value");
    /* Under ctl_mu: the metrics server reads the configuration while it answers a probe. */
    pthread_mutex_lock(&job->ctl_mu);
    tpc_error_t *err = tpc_props_set(&job_table, &job->conf, key, value);
    if (err && tpc_error_code(err) == TPC_ERR_NOT_FOUND && job->backend) {
        tpc_error_destroy(err);
        err = tpc_props_set(job->backend->props, job->backend_conf, key, value);
    }
    pthread_mutex_unlock(&job->ctl_mu);
    if (err && tpc_error_code(err) == TPC_ERR_NOT_FOUND) {
        tpc_error_destroy(err);
        const tpc_props_t *tables[] = {&job_table, job->backend ? job->backend->props : NULL};
        err = tpc_props_unknown(tables, job->backend ? 2 : 1, key);
    }
    /* The endpoint is up from the moment it has an address until the job is destroyed. */
    if (!err && strcmp(key, "metrics.listen") == 0)
        err = tpc__metrics_listen(job);
    return err;
}

tpc_error_t *tpc_job_use_storage(tpc_job_t *job, const tpc_storage_backend_t *backend)
{
    if (!job || !backend || !backend->kind || !backend->props || !backend->open)
        return tpc_error_new(TPC_ERR_INVALID_ARG, 0,
                             "tpc_job_use_storage needs a job and a complete backend");
    if (job->backend)
        return tpc_error_new(TPC_ERR_STATE, 0, "job \"%s\" has a storage backend (\"%s\") already",
                             job->name, job->backend->kind);
    void *conf = calloc(1, backend->conf_size ? backend->conf_size : 1);
    if (!conf)
        return tpc_error_nomem();
    tpc_error_t *err = tpc_props_init(backend->props, conf);
    if (err) {
        free(conf);
        return err;
    }
    pthread_mutex_lock(&job->ctl_mu);
    job->backend = backend;
    job->backend_conf = conf;
    pthread_mutex_unlock(&job->ctl_mu);
    return NULL;
}

const tpc_props_t *tpc__job_backend_props(const tpc_job_t *job)
{
    return job->backend ? job->backend->props : NULL;
}

bool tpc__job_durable(const tpc_job_t *job)
{
    return job->conf.storage == TPC__STORAGE_FOLDER ? job->conf.dir != NULL : true;
}

tpc_err_t tpc_job_set_logger(tpc_job_t *job, tpc_log_cb cb, void *opaque, tpc_log_level_t max_level)
{
    if (!job)
        return TPC_ERR_INVALID_ARG;
    job->log = (tpc__logger_t){cb, opaque, max_level};
    return TPC_OK;
}

tpc_err_t tpc_job_set_checkpoint_callback(tpc_job_t *job, tpc_checkpoint_cb cb, void *opaque)
{
    if (!job)
        return TPC_ERR_INVALID_ARG;
    job->ckpt_cb = cb;
    job->ckpt_cb_opaque = opaque;
    return TPC_OK;
}
