/*
 * One unit on this process: a thread that builds the unit's job through the program's callback,
 * gives it the unit's own checkpoint folder or S3 prefix and runs it, and runs it again after a
 * failure, until the membership thread stops it. A revoked unit stops with a savepoint without
 * drain, so that its next owner resumes where it stopped; a lost one is canceled at once and
 * commits nothing more. A job that ends fenced is left alone while another process holds the unit,
 * and runs again if the group still assigns the unit here after twice the session timeout.
 */
#include "cluster_internal.h"
#include "tpc_s3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "<base>/unit-<u>/" for the application's key prefix @base ("unit-<u>/" when it is empty), the
 * same shape as the folder's "<checkpoint.dir>/unit-<u>". */
static char *s3_unit_prefix(const char *base, int index)
{
    size_t len = strlen(base);
    while (len > 0 && base[len - 1] == '/')
        len--;
    char *p = NULL;
    if (asprintf(&p, "%.*s%sunit-%d/", (int)len, base, len ? "/" : "", index) < 0)
        return NULL;
    return p;
}

tpc_error_t *tpc__unit_init(tpc_cluster_t *c, int index, tpc__unit_t *u)
{
    *u = (tpc__unit_t){.c = c};
    bool s3 = c->storage == 1;
    if (asprintf(&u->job_name, "%s-unit-%d", c->app, index) < 0)
        u->job_name = NULL;
    if (c->checkpoint_dir && !s3 &&
        asprintf(&u->checkpoint_dir, "%s/unit-%d", c->checkpoint_dir, index) < 0)
        u->checkpoint_dir = NULL;
    if (asprintf(&u->prefix, "%s-u%d", c->app, index) < 0)
        u->prefix = NULL;
    if (s3)
        u->s3_prefix = s3_unit_prefix(c->s3_prefix ? c->s3_prefix : c->app, index);
    if (!u->job_name || (!s3 && !u->checkpoint_dir) || !u->prefix || (s3 && !u->s3_prefix)) {
        tpc__unit_free(u);
        return tpc_error_nomem();
    }
    u->info = (tpc_cluster_unit_t){.app = c->app,
                                   .unit = index,
                                   .units = c->units,
                                   .job_name = u->job_name,
                                   .checkpoint_dir = u->checkpoint_dir,
                                   .transactional_id_prefix = u->prefix,
                                   .gid_prefix = u->prefix,
                                   .checkpoint_s3_prefix = u->s3_prefix};
    return NULL;
}

void tpc__unit_free(tpc__unit_t *u)
{
    free(u->job_name);
    free(u->checkpoint_dir);
    free(u->prefix);
    free(u->s3_prefix);
    *u = (tpc__unit_t){0};
}

/* The job keys the library sets on every unit's job, after the program's build: the unit's own
 * checkpoint folder or S3 prefix, restored on every start, and the claim of its owner epoch, so
 * that a process that still runs the unit after another took it over fails with TPC_ERR_FENCED at
 * its next checkpoint, before any sink hears of it (docs/architecture.md, "Owner epoch"). */
static tpc_error_t *set_unit_keys(const tpc__unit_t *u, tpc_job_t *job)
{
    const tpc_cluster_t *c = u->c;
    tpc_error_t *err = NULL;
    if (c->storage == 1) {
        err = tpc_job_set(job, "checkpoint.storage", "s3");
        for (size_t i = 0; !err && i < c->ns3_props; i++) /* pairs; the last one set wins */
            err = tpc_job_set(job, c->s3_props[2 * i], c->s3_props[2 * i + 1]);
        if (!err)
            err = tpc_job_set(job, "checkpoint.s3.prefix", u->s3_prefix);
    } else {
        err = tpc_job_set(job, "checkpoint.dir", u->checkpoint_dir);
    }
    if (!err)
        err = tpc_job_set(job, "checkpoint.owner", "claim");
    return err ? tpc_error_prefix(err, "unit %d: ", u->info.unit) : NULL;
}

tpc_error_t *tpc__unit_build(tpc__unit_t *u, tpc_job_t **out, void **resources)
{
    tpc_cluster_t *c = u->c;
    *out = NULL;
    *resources = NULL;
    tpc_job_t *job = tpc_job_new(u->job_name);
    if (!job)
        return tpc_error_nomem();
    /* The backend before the build, so that the program may set other keys of it too. */
    tpc_error_t *err = c->storage == 1 ? tpc_job_use_storage(job, tpc_s3_storage_backend()) : NULL;
    if (!err)
        err = c->build(c->build_opaque, &u->info, job, resources);
    if (!err)
        err = set_unit_keys(u, job);
    *out = job;
    return err;
}

/* One attempt of the unit's job: build, run, free. @returns its error; *@result how it ended. */
static tpc_error_t *run_once(tpc__unit_t *u, tpc_job_result_t *result)
{
    tpc_cluster_t *c = u->c;
    void *resources = NULL;
    tpc_job_t *job = NULL;
    tpc_error_t *err = tpc__unit_build(u, &job, &resources);
    *result = TPC_JOB_CANCELED;
    if (!err) {
        pthread_mutex_lock(&c->mu);
        bool go = !u->stopping;
        if (go)
            u->job = job;
        pthread_mutex_unlock(&c->mu);
        if (go)
            err = tpc_job_run(job, result);
        pthread_mutex_lock(&c->mu);
        u->job = NULL;
        while (u->job_users > 0)
            pthread_cond_wait(&c->cond, &c->mu);
        pthread_mutex_unlock(&c->mu);
    }
    tpc_job_destroy(job);
    if (c->release)
        c->release(c->build_opaque, &u->info, resources);
    return err;
}

/* Wait out the pause before the next attempt; @returns false when the unit is being stopped. */
static bool restart_pause(tpc__unit_t *u, int64_t ms)
{
    tpc_cluster_t *c = u->c;
    int64_t until = tpc_clock_ms() + ms;
    pthread_mutex_lock(&c->mu);
    while (!u->stopping && tpc_clock_ms() < until)
        tpc_cond_wait_us(&c->cond, &c->mu, (until - tpc_clock_ms()) * 1000);
    bool go = !u->stopping;
    pthread_mutex_unlock(&c->mu);
    return go;
}

/* A fenced unit still assigned here runs again after twice the session timeout: a member that
 * was frozen learns of its lost units within one heartbeat once it runs again, well before. */
static int64_t fence_pause_ms(const tpc_cluster_t *c)
{
    return 2 * c->session_timeout_ms;
}

static void *unit_main(void *arg)
{
    tpc__unit_t *u = arg;
    tpc_cluster_t *c = u->c;
    int unit = u->info.unit;
    for (;;) {
        tpc_job_result_t result;
        tpc_error_t *err = run_once(u, &result);
        pthread_mutex_lock(&c->mu);
        bool stopping = u->stopping;
        pthread_mutex_unlock(&c->mu);
        if (!err) {
            if (result == TPC_JOB_FINISHED) {
                tpc__cluster_log(c, TPC_LOG_INFO, "unit %d finished", unit);
                tpc__cluster_event(c, TPC_CLUSTER_UNIT_FINISHED, unit, NULL, NULL);
            }
            break;
        }
        if (tpc_error_code(err) == TPC_ERR_FENCED) {
            tpc__cluster_log(c, TPC_LOG_WARN,
                             "unit %d is held by another process, it no longer runs here: %s; "
                             "if the group still assigns it here in %lld ms, it runs again",
                             unit, tpc_error_message(err), (long long)fence_pause_ms(c));
            tpc__cluster_event(c, TPC_CLUSTER_UNIT_FENCED, unit, NULL, err);
            tpc_error_destroy(err);
            /* A member frozen past its session learns of the units it lost within a heartbeat
             * once it runs again (they are revoked or lost, and stopping is set). A unit that
             * the group still assigns here after twice the session timeout is this member's
             * (a rebalance under a freeze can leave a fenced unit with its old member, and
             * nobody would run it until the next one): it runs again and claims a new owner
             * epoch, whose fences keep any other holder from committing. */
            if (!restart_pause(u, fence_pause_ms(c)))
                break;
            tpc__cluster_log(c, TPC_LOG_WARN,
                             "unit %d is still assigned here %lld ms after it was fenced: it runs "
                             "again, as a new owner of its checkpoints",
                             unit, (long long)fence_pause_ms(c));
            continue;
        }
        if (stopping) {
            tpc__cluster_log(c, TPC_LOG_WARN, "unit %d failed while it stopped: %s", unit,
                             tpc_error_message(err));
            tpc_error_destroy(err);
            break;
        }
        if (tpc_error_is_fatal(err)) {
            tpc__cluster_log(c, TPC_LOG_ERROR, "unit %d failed: %s", unit, tpc_error_message(err));
            tpc__cluster_event(c, TPC_CLUSTER_UNIT_FAILED, unit, NULL, err);
            err = tpc_error_prefix(err, "unit %d: ", unit);
            pthread_mutex_lock(&c->mu);
            if (!c->fatal)
                c->fatal = err;
            else
                tpc_error_destroy(err);
            pthread_mutex_unlock(&c->mu);
            break;
        }
        tpc__cluster_log(c, TPC_LOG_ERROR, "unit %d failed, runs again in %d ms: %s", unit,
                         c->restart_delay_ms, tpc_error_message(err));
        tpc__cluster_event(c, TPC_CLUSTER_UNIT_FAILED, unit, NULL, err);
        tpc_error_destroy(err);
        if (!restart_pause(u, c->restart_delay_ms))
            break;
    }
    pthread_mutex_lock(&c->mu);
    u->done = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

tpc_error_t *tpc__unit_start(tpc__unit_t *u)
{
    if (u->thread_live) /* assigned twice without a revoke between: it runs already */
        return NULL;
    tpc_cluster_t *c = u->c;
    pthread_mutex_lock(&c->mu);
    u->stopping = false;
    u->done = false;
    pthread_mutex_unlock(&c->mu);
    int rc = pthread_create(&u->thread, NULL, unit_main, u);
    if (rc != 0)
        return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "could not start unit %d: %s",
                             u->info.unit, strerror(rc));
    u->thread_live = true;
    tpc__cluster_log(c, TPC_LOG_INFO, "unit %d assigned: its job starts from %s", u->info.unit,
                     u->checkpoint_dir);
    tpc__cluster_event(c, TPC_CLUSTER_UNIT_ASSIGNED, u->info.unit, NULL, NULL);
    return NULL;
}

void tpc__unit_stop(tpc__unit_t *u, bool savepoint)
{
    tpc_cluster_t *c = u->c;
    if (!u->thread_live)
        return;
    pthread_mutex_lock(&c->mu);
    u->stopping = true;
    tpc_job_t *job = u->job;
    if (job)
        u->job_users++;
    bool was_done = u->done;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->mu);
    char *path = NULL;
    tpc_error_t *err = NULL;
    if (job) {
        /* A savepoint the job cannot take (not yet running, or it aborted) falls back to a
         * cancel: the unit's next owner then restores its newest completed checkpoint. */
        if (savepoint)
            err = tpc_job_stop_with_savepoint(job, false, &path);
        if (!savepoint || err)
            tpc_job_cancel(job);
        pthread_mutex_lock(&c->mu);
        u->job_users--;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->mu);
    }
    pthread_join(u->thread, NULL);
    u->thread_live = false;
    int unit = u->info.unit;
    if (!savepoint) {
        tpc__cluster_log(c, TPC_LOG_WARN, "unit %d lost: its job was canceled", unit);
        tpc__cluster_event(c, TPC_CLUSTER_UNIT_LOST, unit, NULL, NULL);
    } else if (path) {
        tpc__cluster_log(c, TPC_LOG_INFO, "unit %d released after savepoint %s", unit, path);
        tpc__cluster_event(c, TPC_CLUSTER_UNIT_RELEASED, unit, path, NULL);
    } else {
        if (err)
            tpc__cluster_log(c, was_done ? TPC_LOG_INFO : TPC_LOG_WARN,
                             "unit %d released without a savepoint, its next owner restores its "
                             "newest completed checkpoint: %s",
                             unit, tpc_error_message(err));
        tpc__cluster_event(c, TPC_CLUSTER_UNIT_RELEASED, unit, NULL, err);
    }
    free(path);
    tpc_error_destroy(err);
}
