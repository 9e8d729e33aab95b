/*
 * The Kafka source's figures for the job's metrics endpoint. The endpoint's thread must not touch
 * a subtask's consumer, which the subtask may close and open again at any time (restarts), so each
 * subtask publishes its figures into its own slot, from its poll loop and at most every
 * TPC__KAFKA_PUBLISH_MS: a few reads of what librdkafka keeps anyway, never a request, and nothing
 * per record. The gauges are atomics; the lag of each partition is a small array under the slot's
 * mutex, which a scrape holds only while it copies the samples out. The slots belong to the
 * source's configuration, which outlives the job; a subtask that closes empties its gauges, and
 * its wake-ups stay in the slot's counter, so the counter keeps growing over restarts.
 *
 * Lag is counted in offsets to the high watermark that the partition's last fetch response
 * brought (rd_kafka_get_watermark_offsets()). A read_committed consumer reaches only the last
 * stable offset, which librdkafka does not hand out without a request or its statistics: records
 * of transactions still open count as lag, as do transaction markers and aborted records between
 * the next record and the watermark, which the source skips without emitting.
 */
#include "kafka_source_task.h"
#include "tpc_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tpc__kafka_source_slots_new(tpc__kafka_source_vertex_t *v, int parallelism)
{
    v->slots = calloc((size_t)parallelism, sizeof *v->slots);
    if (!v->slots)
        return false;
    v->nslots = parallelism;
    for (int i = 0; i < parallelism; i++)
        pthread_mutex_init(&v->slots[i].mu, NULL);
    return true;
}

void tpc__kafka_source_slots_free(tpc__kafka_source_vertex_t *v)
{
    for (int i = 0; v->slots && i < v->nslots; i++) {
        tpc__kafka_source_slot_t *slot = &v->slots[i];
        for (size_t j = 0; j < slot->lags_cap; j++)
            free(slot->lags[j].topic);
        free(slot->lags);
        pthread_mutex_destroy(&slot->mu);
    }
    free(v->slots);
    v->slots = NULL;
}

/* Offsets between @part's next record and the end it can read to; 0 while unknown. */
static int64_t lag_of(const source_t *s, const tpc__kafka_source_part_t *part)
{
    int64_t low, high;
    if (part->done || part->gone ||
        rd_kafka_get_watermark_offsets(s->rk, s->topics[part->topic].name, part->partition, &low,
                                       &high) ||
        high < 0)
        return 0;
    if (part->end >= 0 && part->end < high)
        high = part->end; /* bounded: records past the end are not read */
    int64_t next = part->next >= 0 ? part->next : low; /* nothing read yet: from the first */
    return next >= 0 && high > next ? high - next : 0;
}

void tpc__kafka_source_publish(source_t *s, bool closing)
{
    tpc__kafka_source_slot_t *slot = s->slot;
    if (!slot)
        return;
    atomic_fetch_add_explicit(&slot->wakes, s->fetch.wakes - s->wakes_published,
                              memory_order_relaxed);
    s->wakes_published = s->fetch.wakes;
    int64_t queued = 0, partitions = 0;
    size_t n = 0;
    pthread_mutex_lock(&slot->mu);
    for (size_t i = 0; !closing && s->rk && i < s->nparts; i++) {
        const tpc__kafka_source_part_t *part = &s->parts[i];
        if (part->gone)
            continue;
        partitions++;
        size_t had = slot->lags_cap;
        if (!tpc_array_grow(&slot->lags, &slot->lags_cap, n + 1, sizeof *slot->lags))
            break; /* out of memory: fewer partitions shown this time */
        memset(slot->lags + had, 0, (slot->lags_cap - had) * sizeof *slot->lags);
        tpc__kafka_source_lag_t *l = &slot->lags[n];
        const char *topic = s->topics[part->topic].name;
        if (!l->topic || strcmp(l->topic, topic) != 0) {
            free(l->topic);
            if (!(l->topic = strdup(topic)))
                continue;
        }
        l->partition = part->partition;
        l->lag = lag_of(s, part);
        n++;
    }
    slot->nlags = n;
    pthread_mutex_unlock(&slot->mu);
    if (!closing && s->rk)
        queued = s->fetch.queue ? rd_kafka_queue_length(s->fetch.queue) : 0;
    atomic_store_explicit(&slot->queued, queued, memory_order_relaxed);
    atomic_store_explicit(&slot->partitions, partitions, memory_order_relaxed);
    s->published_ms = tpc_clock_ms();
}

void tpc__kafka_source_metrics(void *arg, tpc_metrics_writer_t *w)
{
    tpc__kafka_source_vertex_t *v = arg;
    int64_t queued = 0, partitions = 0;
    uint64_t wakes = 0;
    for (int i = 0; i < v->parallelism; i++) {
        tpc__kafka_source_slot_t *slot = &v->slots[i];
        queued += atomic_load_explicit(&slot->queued, memory_order_relaxed);
        partitions += atomic_load_explicit(&slot->partitions, memory_order_relaxed);
        wakes += atomic_load_explicit(&slot->wakes, memory_order_relaxed);
        pthread_mutex_lock(&slot->mu);
        for (size_t j = 0; j < slot->nlags; j++) {
            char partition[16];
            snprintf(partition, sizeof partition, "%d", (int)slot->lags[j].partition);
            const char *labels[] = {"source",    v->name,   "topic", slot->lags[j].topic,
                                    "partition", partition, NULL};
            tpc_metrics_add(w, "twopc_kafka_source_lag_records", "gauge",
                            "Offsets a partition the source reads is behind its high watermark "
                            "as the last fetch saw it (open transactions, markers and aborted "
                            "records included).",
                            "", labels, (double)slot->lags[j].lag);
        }
        pthread_mutex_unlock(&slot->mu);
    }
    const char *labels[] = {"source", v->name, NULL};
    tpc_metrics_add(w, "twopc_kafka_source_queued_records", "gauge",
                    "Records librdkafka read ahead for the source, not yet taken.", "", labels,
                    (double)queued);
    tpc_metrics_add(w, "twopc_kafka_source_partitions", "gauge",
                    "Partitions assigned to the source's subtasks.", "", labels,
                    (double)partitions);
    tpc_metrics_add(w, "twopc_kafka_source_fetch_wakeups_total", "counter",
                    "Requests the source sent to wake fetchers parked on a full read-ahead queue.",
                    "", labels, (double)wakes);
    tpc_metrics_build_info(w, "librdkafka", rd_kafka_version_str());
}
