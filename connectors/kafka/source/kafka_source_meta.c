/*
 * What the cluster says of the Kafka source's topics: their partition counts, read at open and
 * then every partition.discovery.interval.ms by a thread of each subtask's own, so that a poll
 * never waits for a metadata round trip (a slow or restarting broker would hold barriers up). The
 * subtask takes the newest answer between two polls and decides there what it means
 * (kafka_source_task.c).
 */
#include "kafka_source_internal.h"
#include "tpc_kit.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The longest a discovery waits for an answer: a failed one is asked again next interval. */
#define DISCOVERY_TIMEOUT_MS 3000

/* glibc's matcher keeps the states it built in the compiled pattern, for ever: over many names,
 * a pattern such as "^(a|b)*a(a|b){20}" makes the cache grow by hundreds of states a name and
 * every match slower (about 180 ms a 249-byte name and 1.3 GB after 2,000 names), where a fresh
 * copy takes a few ms and MB. So the pattern is compiled afresh every MATCHER_NAMES names. */
#define MATCHER_NAMES 16

void tpc__kafka_matcher_init(tpc__kafka_matcher_t *m, const tpc_kafka_source_t *conf)
{
    *m = (tpc__kafka_matcher_t){.conf = conf};
}

void tpc__kafka_matcher_free(tpc__kafka_matcher_t *m)
{
    if (m->compiled)
        regfree(&m->re);
    m->compiled = false;
}

bool tpc__kafka_matcher_test(tpc__kafka_matcher_t *m, const char *topic, size_t len)
{
    const tpc_kafka_source_t *conf = m->conf;
    if (!conf->is_pattern) {
        for (size_t t = 0; t < conf->ntopics; t++)
            if (strlen(conf->topics[t]) == len && memcmp(conf->topics[t], topic, len) == 0)
                return true;
        return false;
    }
    char name[TPC__KAFKA_TOPIC_MAX + 1];
    if (len > TPC__KAFKA_TOPIC_MAX || (len >= 2 && topic[0] == '_' && topic[1] == '_'))
        return false;
    memcpy(name, topic, len);
    name[len] = '\0';
    if (m->compiled && m->names >= MATCHER_NAMES)
        tpc__kafka_matcher_free(m);
    if (!m->compiled) {
        /* As tpc_kafka_source_new() compiled it: only out of memory fails here. */
        if (regcomp(&m->re, conf->topic, REG_EXTENDED) != 0)
            return false;
        m->compiled = true;
        m->names = 0;
    }
    m->names++;
    /* The whole name: POSIX takes the leftmost match and, of those, the longest, so a match of
     * the whole name, when there is one, is the one found. */
    regmatch_t pm[1];
    return regexec(&m->re, name, 1, pm, 0) == 0 && pm[0].rm_so == 0 && pm[0].rm_eo == (regoff_t)len;
}

bool tpc__kafka_source_matches(const tpc_kafka_source_t *conf, const char *topic, size_t len)
{
    tpc__kafka_matcher_t m;
    tpc__kafka_matcher_init(&m, conf);
    bool yes = tpc__kafka_matcher_test(&m, topic, len);
    tpc__kafka_matcher_free(&m);
    return yes;
}

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(((const tpc__kafka_topic_meta_t *)a)->name,
                  ((const tpc__kafka_topic_meta_t *)b)->name);
}

static void add(tpc__kafka_meta_t *out, const struct rd_kafka_metadata_topic *t, size_t cap)
{
    if (!out->topics)
        out->topics = calloc(cap ? cap : 1, sizeof *out->topics);
    char *name = out->topics ? strdup(t->topic) : NULL;
    if (!name) {
        out->err = RD_KAFKA_RESP_ERR__FAIL;
        return;
    }
    out->topics[out->ntopics++] =
        (tpc__kafka_topic_meta_t){.name = name, .partitions = t->partition_cnt, .err = t->err};
}

void tpc__kafka_meta_pick(const tpc_kafka_source_t *conf, const struct rd_kafka_metadata *md,
                          tpc_canceled_fn canceled, void *arg, tpc__kafka_meta_t *out)
{
    tpc__kafka_matcher_t m;
    tpc__kafka_matcher_init(&m, conf);
    for (int i = 0; !out->err && i < md->topic_cnt; i++) {
        if (i % TPC__KAFKA_META_CANCEL_EVERY == 0 && canceled && canceled(arg)) {
            tpc__kafka_meta_free(out);
            out->err = RD_KAFKA_RESP_ERR__DESTROY;
            out->canceled = true;
            break;
        }
        if (tpc__kafka_matcher_test(&m, md->topics[i].topic, strlen(md->topics[i].topic)))
            add(out, &md->topics[i], (size_t)md->topic_cnt);
    }
    tpc__kafka_matcher_free(&m);
}

void tpc__kafka_meta_read(rd_kafka_t *rk, const tpc_kafka_source_t *conf, int timeout_ms,
                          tpc_canceled_fn canceled, void *arg, tpc__kafka_meta_t *out)
{
    *out = (tpc__kafka_meta_t){0};
    const struct rd_kafka_metadata *md = NULL;
    if (conf->is_pattern) {
        out->err = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
        if (!out->err)
            tpc__kafka_meta_pick(conf, md, canceled, arg, out);
        if (md)
            rd_kafka_metadata_destroy(md);
        if (out->canceled)
            return;
    } else {
        for (size_t t = 0; !out->err && t < conf->ntopics; t++) {
            if (canceled && canceled(arg)) {
                tpc__kafka_meta_free(out);
                out->err = RD_KAFKA_RESP_ERR__DESTROY;
                out->canceled = true;
                return;
            }
            rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, conf->topics[t], NULL);
            out->err =
                rkt ? rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms) : RD_KAFKA_RESP_ERR__FAIL;
            if (!out->err && md->topic_cnt == 1)
                add(out, &md->topics[0], conf->ntopics);
            else if (!out->err)
                out->err = RD_KAFKA_RESP_ERR__BAD_MSG;
            if (md)
                rd_kafka_metadata_destroy(md);
            md = NULL;
            if (rkt)
                rd_kafka_topic_destroy(rkt);
        }
    }
    if (out->err) {
        tpc__kafka_meta_free(out);
        out->err = out->err ? out->err : RD_KAFKA_RESP_ERR__FAIL;
    } else if (out->ntopics > 1) {
        qsort(out->topics, out->ntopics, sizeof *out->topics, cmp_meta);
    }
}

void tpc__kafka_meta_free(tpc__kafka_meta_t *m)
{
    for (size_t i = 0; i < m->ntopics; i++)
        free(m->topics[i].name);
    free(m->topics);
    rd_kafka_resp_err_t err = m->err;
    bool canceled = m->canceled;
    *m = (tpc__kafka_meta_t){.err = err, .canceled = canceled};
}

struct tpc__kafka_discovery_s {
    rd_kafka_t *rk;
    const tpc_kafka_source_t *conf;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop, soon, fresh;
    tpc__kafka_meta_t latest;
};

/* Whether the discovery is being stopped: a long match of many names ends early. */
static bool stopping(void *arg)
{
    tpc__kafka_discovery_t *d = arg;
    pthread_mutex_lock(&d->lock);
    bool stop = d->stop;
    pthread_mutex_unlock(&d->lock);
    return stop;
}

static void *discover_main(void *arg)
{
    tpc__kafka_discovery_t *d = arg;
    int timeout = d->conf->open_timeout_ms < DISCOVERY_TIMEOUT_MS ? d->conf->open_timeout_ms
                                                                  : DISCOVERY_TIMEOUT_MS;
    pthread_mutex_lock(&d->lock);
    while (!d->stop) {
        struct timespec until = tpc_deadline_us((int64_t)d->conf->discovery_interval_ms * 1000);
        while (!d->stop && !d->soon && pthread_cond_timedwait(&d->wake, &d->lock, &until) == 0)
            ;
        if (d->stop)
            break;
        d->soon = false;
        pthread_mutex_unlock(&d->lock);
        tpc__kafka_meta_t m;
        tpc__kafka_meta_read(d->rk, d->conf, timeout, stopping, d, &m);
        pthread_mutex_lock(&d->lock);
        tpc__kafka_meta_free(&d->latest);
        d->latest = m;
        d->fresh = true;
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

tpc_error_t *tpc__kafka_discovery_start(rd_kafka_t *rk, const tpc_kafka_source_t *conf,
                                        tpc__kafka_discovery_t **out)
{
    tpc__kafka_discovery_t *d = calloc(1, sizeof *d);
    if (!d)
        return tpc_error_nomem();
    d->rk = rk;
    d->conf = conf;
    tpc_cond_init(&d->wake);
    pthread_mutex_init(&d->lock, NULL);
    if (pthread_create(&d->thread, NULL, discover_main, d) != 0) {
        pthread_cond_destroy(&d->wake);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_RETRIABLE,
                             "could not start the kafka source's discovery thread");
    }
    *out = d;
    return NULL;
}

bool tpc__kafka_discovery_take(tpc__kafka_discovery_t *d, tpc__kafka_meta_t *out)
{
    pthread_mutex_lock(&d->lock);
    bool fresh = d->fresh;
    if (fresh) {
        *out = d->latest;
        d->latest = (tpc__kafka_meta_t){0};
        d->fresh = false;
    }
    pthread_mutex_unlock(&d->lock);
    return fresh;
}

void tpc__kafka_discovery_soon(tpc__kafka_discovery_t *d)
{
    pthread_mutex_lock(&d->lock);
    d->soon = true;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
}

void tpc__kafka_discovery_stop(tpc__kafka_discovery_t *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->lock);
    d->stop = true;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    tpc__kafka_meta_free(&d->latest);
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->lock);
    free(d);
}
