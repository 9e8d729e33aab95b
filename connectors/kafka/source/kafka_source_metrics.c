/*
 * The Kafka source's figures for the job's metrics endpoint. The endpoint's thread must not touch
 * a subtask's consumer, which the subtask may close and open again at any time (restarts), so each
 * subtask publishes its figures into its own slot of atomics, from its poll loop and at most every
 * TPC__KAFKA_PUBLISH_MS: a few reads of what librdkafka keeps anyway, never a request, and nothing
 * per record. The slots belong to the source's configuration, which outlives the job; a subtask
 * that closes zeroes its gauges, and its wake-ups stay in the slot's counter, so the counter keeps
 * growing over restarts.
 *
 * Lag is counted in offsets to the high watermark that the partition's last fetch response
 * brought (rd_kafka_get_watermark_offsets()). A read_committed consumer reaches only the last
 * stable offset, which librdkafka does not hand out without a request or its statistics: records
 * of transactions still open count as lag, as do transaction markers and aborted records between
 * the next record and the watermark, which the source skips without emitting.
 */
#include "kafka_source_task.h"
#include "tpc_kit.h"

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
    int64_t lag = 0, queued = 0, partitions = 0;
    if (!closing && s->rk) {
        for (size_t i = 0; i < s->nparts; i++) {
            partitions += !s->parts[i].gone;
            lag += lag_of(s, &s->parts[i]);
        }
        queued = s->fetch.queue ? rd_kafka_queue_length(s->fetch.queue) : 0;
    }
    atomic_store_explicit(&slot->lag, lag, memory_order_relaxed);
    atomic_store_explicit(&slot->queued, queued, memory_order_relaxed);
    atomic_store_explicit(&slot->partitions, partitions, memory_order_relaxed);
    s->published_ms = tpc_clock_ms();
}

void tpc__kafka_source_metrics(void *arg, tpc_metrics_writer_t *w)
{
    const tpc__kafka_source_vertex_t *v = arg;
    int64_t lag = 0, queued = 0, partitions = 0;
    uint64_t wakes = 0;
    for (int i = 0; i < v->parallelism; i++) {
        lag += atomic_load_explicit(&v->slots[i].lag, memory_order_relaxed);
        queued += atomic_load_explicit(&v->slots[i].queued, memory_order_relaxed);
        partitions += atomic_load_explicit(&v->slots[i].partitions, memory_order_relaxed);
        wakes += atomic_load_explicit(&v->slots[i].wakes, memory_order_relaxed);
    }
    const char *labels[] = {"source", v->name, NULL};
    tpc_metrics_add(w, "twopc_kafka_source_lag_records", "gauge",
                    "Offsets the source's partitions are behind their high watermarks as the last "
                    "fetch saw them (open transactions, markers and aborted records included).",
                    "", labels, (double)lag);
    tpc_metrics_add(w, "twopc_kafka_source_queued_records", "gauge",
                    "Records librdkafka read ahead for the source, not yet taken.", "", labels,
                    (double)queued);
    tpc_metrics_add(w, "twopc_kafka_source_partitions", "gauge",
                    "Partitions assigned to the source's subtasks.", "", labels,
                    (double)partitions);
    tpc_metrics_add(w, "twopc_kafka_source_fetch_wakeups_total", "counter",
                    "Requests the source sent to wake fetchers parked on a full read-ahead queue.",
                    "", labels, (double)wakes);
}
