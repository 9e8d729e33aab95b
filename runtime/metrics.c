/*
 * The job's Prometheus endpoint: with metrics.listen set, the job serves GET /metrics in
 * Prometheus' text exposition format (version 0.0.4) from a libmicrohttpd thread, and beside it
 * /healthz and /readyz for an orchestrator's probes (health() below). It listens from the moment
 * metrics.listen is set until the job is destroyed, so that a job that has not started yet, waits
 * to restart or has ended (and the transactions it left pending) can still be seen.
 * What the runtime knows is written here (records and backpressure per vertex and subtask,
 * checkpoints, their durations and sizes, restarts, the build); the layers above add theirs
 * through tpc_job_add_metrics() callbacks, so the runtime stays ignorant of sinks and Kafka: they
 * name the libraries they are built on with tpc_metrics_build_info(). Samples are grouped by
 * family before they are sent, so that callbacks of several sinks can write the same family.
 * Counters of subtasks add up over restarts: an attempt's counters are added to the totals when
 * it ends (under ctl_mu, like the job statistics).
 */
#include "runtime_task.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <math.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds of the checkpoint duration histogram, in seconds. */
static const double duration_bounds[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define NBOUNDS (sizeof duration_bounds / sizeof duration_bounds[0])

typedef struct {
    tpc_metrics_fn fn;
    void *opaque;
} collector_t;

typedef struct {
    uint64_t records_in, records_out, backpressure_us;
} subtask_totals_t;

/* Where the job is, for the probes. */
typedef enum { PHASE_CREATED, PHASE_RUNNING, PHASE_ENDED } phase_t;

struct tpc__metrics {
    /* Held while collectors are added and while a scrape calls them. */
    pthread_mutex_t collectors_mu;
    collector_t *collectors;
    int ncollectors;
    /* The server; changed only by the thread that configures or destroys the job, read by
     * tpc_job_metrics_port() under ctl_mu. */
    struct MHD_Daemon *daemon;
    int port;
    char *listening; /* the metrics.listen value it was started with */
    /* Under the job's ctl_mu. */
    phase_t phase;
    tpc_job_result_t result;   /* PHASE_ENDED: how */
    char *failure;             /* PHASE_ENDED: the error the run returned, NULL for none */
    uint64_t checkpoint_bytes; /* size of the last completed checkpoint's file */
    uint64_t declined, timed_out, write_failed;
    uint64_t buckets[NBOUNDS + 1]; /* the last: above every bound */
    double duration_sum;
    uint64_t durations;
    uint64_t last_completed_us; /* monotonic; 0: none yet */
    uint64_t started_us;
    int *first_task; /* per vertex: index of its subtask 0 in totals */
    int nfirst;      /* vertices first_task covers (the job's when its last run started) */
    subtask_totals_t *totals;
};

/* ---- the writer --------------------------------------------------------------------------- */

typedef struct {
    char *name;
    const char *type, *help;
    tpc__buf_t samples;
} family_t;

struct tpc_metrics_writer_s {
    family_t *families;
    size_t nfamilies;
    char **build; /* library, version, library, version, ... (copies) */
    size_t nbuild;
};

static void put_str(tpc__buf_t *b, const char *s)
{
    tpc__buf_put(b, s, strlen(s));
}

static void put_escaped(tpc__buf_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            tpc__buf_put(b, "\\", 1);
        if (*s == '\n')
            put_str(b, "\\n");
        else
            tpc__buf_put(b, s, 1);
    }
}

void tpc_metrics_add(tpc_metrics_writer_t *w, const char *family, const char *type,
                     const char *help, const char *suffix, const char *const *labels, double value)
{
    if (!w || !family)
        return;
    family_t *f = NULL;
    for (size_t i = 0; i < w->nfamilies && !f; i++)
        if (strcmp(w->families[i].name, family) == 0)
            f = &w->families[i];
    if (!f) {
        w->families = tpc__xrealloc(w->families, (w->nfamilies + 1) * sizeof *w->families);
        f = &w->families[w->nfamilies++];
        *f = (family_t){.name = tpc__xstrdup(family), .type = type, .help = help};
    }
    put_str(&f->samples, family);
    put_str(&f->samples, suffix ? suffix : "");
    for (int i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
        put_str(&f->samples, i ? "," : "{");
        put_str(&f->samples, labels[i]);
        put_str(&f->samples, "=\"");
        put_escaped(&f->samples, labels[i + 1]);
        put_str(&f->samples, "\"");
    }
    if (labels && labels[0])
        put_str(&f->samples, "}");
    /* Prometheus spells the special values NaN, +Inf and -Inf; a value is converted to an integer
     * only once it is known to fit (the conversion of one that does not is undefined). */
    char num[64];
    if (isnan(value))
        snprintf(num, sizeof num, " NaN\n");
    else if (isinf(value))
        snprintf(num, sizeof num, " %cInf\n", value > 0 ? '+' : '-');
    else if (value < 9e15 && value > -9e15 && value == (double)(int64_t)value)
        snprintf(num, sizeof num, " %" PRId64 "\n", (int64_t)value);
    else
        snprintf(num, sizeof num, " %.9g\n", value);
    put_str(&f->samples, num);
}

void tpc_metrics_build_info(tpc_metrics_writer_t *w, const char *library, const char *version)
{
    if (!w || !library || !version || strcmp(library, "twopc") == 0)
        return;
    for (size_t i = 0; i < w->nbuild; i += 2)
        if (strcmp(w->build[i], library) == 0)
            return;
    w->build = tpc__xrealloc(w->build, (w->nbuild + 2) * sizeof *w->build);
    w->build[w->nbuild++] = tpc__xstrdup(library);
    w->build[w->nbuild++] = tpc__xstrdup(version);
}

/* twopc_build_info: twopc's version and those of the libraries the job's components named. */
static void build_info(tpc_metrics_writer_t *w)
{
    const char **labels = tpc__xcalloc(w->nbuild + 3, sizeof *labels);
    labels[0] = "twopc";
    labels[1] = tpc_version_string();
    for (size_t i = 0; i < w->nbuild; i++)
        labels[i + 2] = w->build[i];
    tpc_metrics_add(w, "twopc_build_info", "gauge",
                    "Versions of twopc and of the client libraries the job uses, as labels; "
                    "always 1.",
                    "", labels, 1);
    free(labels);
    for (size_t i = 0; i < w->nbuild; i++)
        free(w->build[i]);
    free(w->build);
    w->build = NULL;
    w->nbuild = 0;
}

/* The exposition text of @w, and @w freed. */
static tpc__buf_t finish(tpc_metrics_writer_t *w)
{
    tpc__buf_t out = {0};
    for (size_t i = 0; i < w->nfamilies; i++) {
        family_t *f = &w->families[i];
        put_str(&out, "# HELP ");
        put_str(&out, f->name);
        put_str(&out, " ");
        put_str(&out, f->help ? f->help : "");
        put_str(&out, "\n# TYPE ");
        put_str(&out, f->name);
        put_str(&out, " ");
        put_str(&out, f->type ? f->type : "untyped");
        put_str(&out, "\n");
        tpc__buf_put(&out, f->samples.data, f->samples.len);
        tpc__buf_free(&f->samples);
        free(f->name);
    }
    free(w->families);
    return out;
}

/* ---- what the runtime knows ---------------------------------------------------------------- */

static void subtask_sample(tpc_metrics_writer_t *w, const char *family, const char *help,
                           const char *vertex, int subtask, double value)
{
    char sub[16];
    snprintf(sub, sizeof sub, "%d", subtask);
    const char *labels[] = {"vertex", vertex, "subtask", sub, NULL};
    tpc_metrics_add(w, family, "counter", help, "", labels, value);
}

static void runtime_metrics(tpc_job_t *job, tpc_metrics_writer_t *w)
{
    struct tpc__metrics *m = job->metrics;
    /* No "job" label: Prometheus' own job and instance labels tell scraped processes apart. */
    pthread_mutex_lock(&job->ctl_mu);
    const tpc__attempt_t *a = job->attempt;
    for (int v = 0; v < job->nvertices; v++) {
        for (int s = 0; s < job->vertices[v].parallelism; s++) {
            /* A vertex added after the last run started has counted nothing yet. */
            subtask_totals_t t = {0};
            if (v < m->nfirst)
                t = m->totals[m->first_task[v] + s];
            for (int i = 0; a && i < a->ntasks; i++) {
                const tpc__task_t *task = &a->tasks[i];
                if (task->vertex != v || task->subtask != s)
                    continue;
                t.records_in += atomic_load_explicit(&task->records_in, memory_order_relaxed);
                t.records_out += atomic_load_explicit(&task->records_out, memory_order_relaxed);
                t.backpressure_us +=
                    atomic_load_explicit(&task->backpressure_us, memory_order_relaxed);
            }
            const char *name = job->vertices[v].name;
            subtask_sample(w, "twopc_records_in_total", "Records a subtask received.", name, s,
                           (double)t.records_in);
            subtask_sample(w, "twopc_records_out_total", "Records a subtask emitted.", name, s,
                           (double)t.records_out);
            subtask_sample(w, "twopc_backpressure_seconds_total",
                           "Time a subtask spent blocked on full output channels.", name, s,
                           (double)t.backpressure_us / 1e6);
        }
    }
    const tpc_job_stats_t *st = &job->stats;
    uint64_t other = st->checkpoints_aborted - m->declined - m->timed_out - m->write_failed;
    tpc_metrics_add(w, "twopc_checkpoints_completed_total", "counter",
                    "Checkpoints completed (durable, sinks told).", "", NULL,
                    (double)st->checkpoints_completed);
    const struct {
        const char *cause;
        uint64_t n;
    } failed[] = {{"timeout", m->timed_out}, {"write", m->write_failed}, {"other", other}};
    for (size_t i = 0; i < sizeof failed / sizeof failed[0]; i++) {
        const char *labels[] = {"cause", failed[i].cause, NULL};
        tpc_metrics_add(w, "twopc_checkpoints_failed_total", "counter",
                        "Checkpoints aborted for another reason than a decline, by cause: "
                        "checkpoint.timeout.ms passed, the file or the completion record could "
                        "not be written, or a subtask failed.",
                        "", labels, (double)failed[i].n);
    }
    tpc_metrics_add(w, "twopc_checkpoints_declined_total", "counter",
                    "Checkpoints a subtask declined (it finished while the trigger was in flight).",
                    "", NULL, (double)m->declined);
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= NBOUNDS; i++) {
        char le[32];
        if (i < NBOUNDS)
            snprintf(le, sizeof le, "%g", duration_bounds[i]);
        else
            snprintf(le, sizeof le, "+Inf");
        cumulative += m->buckets[i];
        const char *labels[] = {"le", le, NULL};
        tpc_metrics_add(w, "twopc_checkpoint_duration_seconds", "histogram",
                        "Time from a checkpoint's trigger to its completion.", "_bucket", labels,
                        (double)cumulative);
    }
    tpc_metrics_add(w, "twopc_checkpoint_duration_seconds", "histogram", NULL, "_sum", NULL,
                    m->duration_sum);
    tpc_metrics_add(w, "twopc_checkpoint_duration_seconds", "histogram", NULL, "_count", NULL,
                    (double)m->durations);
    tpc_metrics_add(w, "twopc_last_checkpoint_size_bytes", "gauge",
                    "Size of the last completed checkpoint's file (0 before the first).", "", NULL,
                    (double)m->checkpoint_bytes);
    uint64_t since = m->last_completed_us ? m->last_completed_us : m->started_us;
    tpc_metrics_add(w, "twopc_last_checkpoint_age_seconds", "gauge",
                    "Seconds since the last completed checkpoint (since the start before the "
                    "first).",
                    "", NULL, (double)(tpc__now_us() - since) / 1e6);
    tpc_metrics_add(w, "twopc_last_checkpoint_id", "gauge", "Id of the last completed checkpoint.",
                    "", NULL, (double)st->last_checkpoint_id);
    tpc_metrics_add(w, "twopc_checkpoint_interval_seconds", "gauge",
                    "The job's checkpoint.interval.ms; 0 when checkpoints are off.", "", NULL,
                    tpc__job_durable(job) ? (double)job->conf.interval_ms / 1e3 : 0);
    tpc_metrics_add(w, "twopc_restarts_total", "counter", "Restarts of the job after failures.", "",
                    NULL, (double)st->restarts);
    pthread_mutex_unlock(&job->ctl_mu);
}

/* Readiness wants a checkpoint completed within this many checkpoint intervals (at least
 * READY_MIN_MS): a job that cannot commit is running but not doing its work. */
#define READY_INTERVALS 3
#define READY_MIN_MS    10000

static const char *result_name(tpc_job_result_t r, const char *failure)
{
    if (failure)
        return "failed";
    return r == TPC_JOB_STOPPED ? "stopped" : r == TPC_JOB_CANCELED ? "canceled" : "finished";
}

/* /healthz: 200 while the process holds a job that has not failed: created and not started yet,
 * running, waiting to restart, or ended without an error; 503 once its run failed (restarts ran
 * out, or an error no restart mends): only a new process helps then. /readyz: 200 once an attempt
 * runs and, with checkpoints on, a checkpoint completed in this run within the bound; 503 with the
 * reason otherwise (not started, waiting to restart, checkpoints late, ended). The body is one
 * line of text. */
static unsigned health(tpc_job_t *job, bool ready, char *msg, size_t cap)
{
    struct tpc__metrics *m = job->metrics;
    pthread_mutex_lock(&job->ctl_mu);
    phase_t phase = m->phase;
    bool attempt = job->attempt != NULL;
    uint64_t restarts = job->stats.restarts, id = job->stats.last_checkpoint_id;
    uint64_t last = m->last_completed_us, started = m->started_us;
    bool checkpointing = tpc__job_durable(job) && job->conf.interval_ms > 0;
    int64_t bound_ms = job->conf.interval_ms * READY_INTERVALS;
    const char *ended = result_name(m->result, m->failure);
    char failure[256] = "";
    if (m->failure)
        snprintf(failure, sizeof failure, "%s", m->failure);
    pthread_mutex_unlock(&job->ctl_mu);
    if (bound_ms < READY_MIN_MS)
        bound_ms = READY_MIN_MS;
    uint64_t now = tpc__now_us();
    const char *state = attempt ? "running" : "restarting";
    if (phase == PHASE_CREATED) {
        snprintf(msg, cap, "%s: job \"%s\" created, not started\n", ready ? "not ready" : "ok",
                 job->name);
        return ready ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK;
    }
    if (phase == PHASE_ENDED) {
        if (failure[0] && !ready) {
            snprintf(msg, cap, "not ok: job \"%s\" failed: %s\n", job->name, failure);
            return MHD_HTTP_SERVICE_UNAVAILABLE;
        }
        snprintf(msg, cap, "%s: job \"%s\" %s\n", ready ? "not ready" : "ok", job->name, ended);
        return ready ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK;
    }
    if (!ready) {
        snprintf(msg, cap, "ok: job \"%s\" %s, %" PRIu64 " restarts\n", job->name, state, restarts);
        return MHD_HTTP_OK;
    }
    if (!attempt) {
        snprintf(msg, cap, "not ready: job \"%s\" waits to restart after a failure\n", job->name);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (!checkpointing) {
        snprintf(msg, cap, "ready: job \"%s\" running, checkpoints off\n", job->name);
        return MHD_HTTP_OK;
    }
    if (!last) {
        snprintf(msg, cap,
                 "not ready: job \"%s\" has completed no checkpoint since it started %.1f s "
                 "ago\n",
                 job->name, (double)(now - started) / 1e6);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    double age_s = (double)(now - last) / 1e6;
    if (age_s * 1000 > (double)bound_ms) {
        snprintf(msg, cap,
                 "not ready: job \"%s\" completed its last checkpoint (%" PRIu64
                 ") %.1f s ago, more than %.1f s\n",
                 job->name, id, age_s, (double)bound_ms / 1000);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    snprintf(msg, cap, "ready: job \"%s\" running, checkpoint %" PRIu64 " completed %.1f s ago\n",
             job->name, id, age_s);
    return MHD_HTTP_OK;
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload,
                             size_t *upload_len, void **state)
{
    (void)version, (void)upload, (void)upload_len, (void)state;
    tpc_job_t *job = cls;
    struct MHD_Response *resp;
    unsigned code = MHD_HTTP_OK;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        static const char msg[] = "only GET\n";
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        resp = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
    } else if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0) {
        char msg[512];
        code = health(job, url[1] == 'r', msg, sizeof msg);
        resp = MHD_create_response_from_buffer(strlen(msg), msg, MHD_RESPMEM_MUST_COPY);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    } else if (strcmp(url, "/metrics") != 0) {
        static const char msg[] = "twopc serves /metrics, /healthz and /readyz\n";
        code = MHD_HTTP_NOT_FOUND;
        resp = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
    } else {
        struct tpc__metrics *m = job->metrics;
        tpc_metrics_writer_t w = {0};
        char msg[512];
        bool ready = health(job, true, msg, sizeof msg) == MHD_HTTP_OK;
        tpc_metrics_add(&w, "twopc_ready", "gauge",
                        "1 when /readyz answers 200 (an attempt runs and checkpoints complete in "
                        "time), else 0.",
                        "", NULL, ready);
        runtime_metrics(job, &w);
        pthread_mutex_lock(&m->collectors_mu);
        for (int i = 0; i < m->ncollectors; i++)
            m->collectors[i].fn(m->collectors[i].opaque, &w);
        pthread_mutex_unlock(&m->collectors_mu);
        build_info(&w);
        tpc__buf_t text = finish(&w);
        resp = MHD_create_response_from_buffer(text.len, text.data ? text.data : (void *)"",
                                               text.data ? MHD_RESPMEM_MUST_FREE
                                                         : MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8");
    }
    enum MHD_Result r = MHD_queue_response(conn, code, resp);
    MHD_destroy_response(resp);
    return r;
}

/* libmicrohttpd's own messages go to the job's logger. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    tpc_job_t *job = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = 0;
    tpc__logf(&job->log, TPC_LOG_WARN, "metrics server: %s", msg);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

void tpc__metrics_new(tpc_job_t *job)
{
    struct tpc__metrics *m = tpc__xcalloc(1, sizeof *m);
    pthread_mutex_init(&m->collectors_mu, NULL);
    m->started_us = tpc__now_us();
    job->metrics = m;
}

tpc_err_t tpc_job_add_metrics(tpc_job_t *job, tpc_metrics_fn fn, void *opaque)
{
    if (!job || !fn)
        return TPC_ERR_INVALID_ARG;
    pthread_mutex_lock(&job->ctl_mu);
    bool running = job->running;
    pthread_mutex_unlock(&job->ctl_mu);
    if (running)
        return TPC_ERR_STATE;
    struct tpc__metrics *m = job->metrics;
    pthread_mutex_lock(&m->collectors_mu);
    m->collectors =
        tpc__xrealloc(m->collectors, (size_t)(m->ncollectors + 1) * sizeof *m->collectors);
    m->collectors[m->ncollectors++] = (collector_t){fn, opaque};
    pthread_mutex_unlock(&m->collectors_mu);
    return TPC_OK;
}

int tpc_job_metrics_port(tpc_job_t *job)
{
    if (!job)
        return 0;
    pthread_mutex_lock(&job->ctl_mu);
    int port = job->metrics->daemon ? job->metrics->port : 0;
    pthread_mutex_unlock(&job->ctl_mu);
    return port;
}

static tpc_error_t *bad_listen(const char *value)
{
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_CONFIG, 0, "invalid value \"%s\" for \"metrics.listen\"", value),
        "give a port (\"9464\", listens on 127.0.0.1) or an IPv4 address and a "
        "port (\"127.0.0.1:9464\")");
}

static void stop_server(tpc_job_t *job)
{
    struct tpc__metrics *m = job->metrics;
    pthread_mutex_lock(&job->ctl_mu);
    struct MHD_Daemon *d = m->daemon;
    m->daemon = NULL;
    m->port = 0;
    pthread_mutex_unlock(&job->ctl_mu);
    /* Waits for a scrape in progress (it takes ctl_mu: not held here). */
    if (d)
        MHD_stop_daemon(d);
    free(m->listening);
    m->listening = NULL;
}

tpc_error_t *tpc__metrics_listen(tpc_job_t *job)
{
    struct tpc__metrics *m = job->metrics;
    pthread_mutex_lock(&job->ctl_mu);
    char *listen = job->conf.metrics_listen ? tpc__xstrdup(job->conf.metrics_listen) : NULL;
    pthread_mutex_unlock(&job->ctl_mu);
    if (m->daemon && listen && strcmp(listen, m->listening) == 0) {
        free(listen);
        return NULL; /* already there */
    }
    /* Another address: the old one is given up first, as the new one may be the same port. */
    stop_server(job);
    if (!listen)
        return NULL;

    struct sockaddr_in addr = {.sin_family = AF_INET};
    const char *colon = strrchr(listen, ':');
    char host[64] = "127.0.0.1";
    if (colon && (size_t)(colon - listen) < sizeof host)
        snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
    int64_t port;
    if ((colon && (size_t)(colon - listen) >= sizeof host) ||
        !tpc_parse_int(colon ? colon + 1 : listen, 0, 65535, &port) ||
        inet_pton(AF_INET, strcmp(host, "localhost") == 0 ? "127.0.0.1" : host, &addr.sin_addr) !=
            1) {
        tpc_error_t *err = bad_listen(listen);
        free(listen);
        return err;
    }
    addr.sin_port = htons((uint16_t)port);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL, serve, job,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, job, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    if (!d) {
        free(listen);
        return tpc_error_hint(
            tpc_error_new(TPC_ERR_CONFIG, 0, "could not serve metrics on %s:%d", host, (int)port),
            "choose a free port for \"metrics.listen\" (the log above says why)");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    pthread_mutex_lock(&job->ctl_mu);
    m->daemon = d;
    m->port = info ? info->port : (int)port;
    m->listening = listen;
    pthread_mutex_unlock(&job->ctl_mu);
    tpc__logf(&job->log, TPC_LOG_INFO, "job \"%s\" serves metrics at http://%s:%d/metrics",
              job->name, host, m->port);
    return NULL;
}

void tpc__metrics_run_start(tpc_job_t *job)
{
    struct tpc__metrics *m = job->metrics;
    pthread_mutex_lock(&job->ctl_mu);
    free(m->first_task);
    free(m->totals);
    m->first_task = tpc__xcalloc((size_t)job->nvertices + 1, sizeof *m->first_task);
    int n = 0;
    for (int v = 0; v < job->nvertices; v++) {
        m->first_task[v] = n;
        n += job->vertices[v].parallelism;
    }
    m->nfirst = job->nvertices;
    m->totals = tpc__xcalloc((size_t)n + 1, sizeof *m->totals);
    memset(m->buckets, 0, sizeof m->buckets);
    m->declined = m->timed_out = m->write_failed = m->durations = m->last_completed_us = 0;
    m->checkpoint_bytes = 0;
    m->duration_sum = 0;
    m->started_us = tpc__now_us();
    m->phase = PHASE_RUNNING;
    free(m->failure);
    m->failure = NULL;
    pthread_mutex_unlock(&job->ctl_mu);
}

void tpc__metrics_run_end(tpc_job_t *job, tpc_job_result_t result, const tpc_error_t *err)
{
    struct tpc__metrics *m = job->metrics;
    pthread_mutex_lock(&job->ctl_mu);
    m->phase = PHASE_ENDED;
    m->result = result;
    free(m->failure);
    m->failure = err ? tpc__xstrdup(tpc_error_message(err)) : NULL;
    pthread_mutex_unlock(&job->ctl_mu);
}

void tpc__metrics_free(tpc_job_t *job)
{
    struct tpc__metrics *m = job->metrics;
    if (!m)
        return;
    stop_server(job);
    free(m->collectors);
    pthread_mutex_destroy(&m->collectors_mu);
    free(m->first_task);
    free(m->totals);
    free(m->failure);
    free(m);
    job->metrics = NULL;
}

void tpc__metrics_note_checkpoint(tpc_job_t *job, bool completed, uint64_t duration_us,
                                  uint64_t bytes)
{
    struct tpc__metrics *m = job->metrics;
    if (!completed)
        return;
    double s = (double)duration_us / 1e6;
    size_t b = 0;
    while (b < NBOUNDS && s > duration_bounds[b])
        b++;
    pthread_mutex_lock(&job->ctl_mu);
    m->buckets[b]++;
    m->duration_sum += s;
    m->durations++;
    m->last_completed_us = tpc__now_us();
    m->checkpoint_bytes = bytes;
    pthread_mutex_unlock(&job->ctl_mu);
}

void tpc__metrics_note_declined(tpc_job_t *job)
{
    pthread_mutex_lock(&job->ctl_mu);
    job->metrics->declined++;
    pthread_mutex_unlock(&job->ctl_mu);
}

void tpc__metrics_note_failed(tpc_job_t *job, tpc__failure_cause_t cause)
{
    pthread_mutex_lock(&job->ctl_mu);
    if (cause == TPC__FAILED_TIMEOUT)
        job->metrics->timed_out++;
    else
        job->metrics->write_failed++;
    pthread_mutex_unlock(&job->ctl_mu);
}

void tpc__metrics_note_attempt(tpc_job_t *job, const tpc__attempt_t *a)
{
    struct tpc__metrics *m = job->metrics;
    if (!m->totals)
        return;
    for (int i = 0; i < a->ntasks; i++) {
        const tpc__task_t *t = &a->tasks[i];
        subtask_totals_t *tot = &m->totals[m->first_task[t->vertex] + t->subtask];
        tot->records_in += atomic_load_explicit(&t->records_in, memory_order_relaxed);
        tot->records_out += atomic_load_explicit(&t->records_out, memory_order_relaxed);
        tot->backpressure_us += atomic_load_explicit(&t->backpressure_us, memory_order_relaxed);
    }
}
