/*
 * Serving the queues of a subtask's producers while the subtask does not call them. librdkafka
 * hands a producer's delivery reports, errors and statistics to the application only inside poll
 * or flush; until then they wait in the producer's queue. A transactional producer publishes
 * statistics ten times a second (their "eos" object gives its producer id and epoch), so a producer
 * the subtask leaves alone — a free id of the pool, one held until a later checkpoint, one whose
 * transaction waits for its checkpoint, or all of them in an idle job — gathers them without end:
 * some kilobytes each, about a megabyte a second for two subtasks with six ids each. So a thread
 * of the subtask polls every producer once a second. The callbacks write the producer's fields,
 * so that thread and the subtask's calls into the connector take turns under the subtask's lock.
 */
#include "kafka_sink_internal.h"
#include "tpc_kit.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define SERVE_INTERVAL_MS 1000

static void serve_all(tpc__kafka_sub_t *c)
{
    for (int n = 0; n < c->conf->pool_size; n++)
        if (c->slots[n].prod.rk)
            rd_kafka_poll(c->slots[n].prod.rk, 0);
    if (c->plain.rk)
        rd_kafka_poll(c->plain.rk, 0);
}

static void *serve(void *arg)
{
    tpc__kafka_sub_t *c = arg;
    pthread_mutex_lock(&c->lock);
    while (!c->serve_stop) {
        serve_all(c);
        tpc_cond_wait_us(&c->serve_wake, &c->lock, (int64_t)SERVE_INTERVAL_MS * 1000);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

tpc_error_t *tpc__kafka_serve_start(tpc__kafka_sub_t *c)
{
    int rc = pthread_mutex_init(&c->lock, NULL);
    if (rc == 0 && (rc = tpc_cond_init(&c->serve_wake)) != 0)
        pthread_mutex_destroy(&c->lock);
    if (rc == 0) {
        /* Signals are the application's business: its handlers run on its own threads. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        rc = pthread_create(&c->server, NULL, serve, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc) {
            pthread_cond_destroy(&c->serve_wake);
            pthread_mutex_destroy(&c->lock);
        }
    }
    if (rc)
        return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL,
                             "could not start the thread that serves the kafka producers of "
                             "subtask %d: %s",
                             c->st->subtask, strerror(rc));
    c->serving = true;
    return NULL;
}

void tpc__kafka_serve_stop(tpc__kafka_sub_t *c)
{
    if (!c->serving)
        return;
    pthread_mutex_lock(&c->lock);
    c->serve_stop = true;
    pthread_cond_signal(&c->serve_wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->server, NULL);
    pthread_cond_destroy(&c->serve_wake);
    pthread_mutex_destroy(&c->lock);
    c->serving = false;
}
