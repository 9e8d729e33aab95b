/*
 * Keeping the Kafka source's fetchers busy with a bounded read-ahead.
 *
 * librdkafka reads ahead into a local queue and stops fetching a partition once that queue holds
 * queued.min.messages records (or queued.max.messages.kbytes). librdkafka 2.0.2 then looks at the
 * partition again only when its broker thread wakes up: on network traffic or a request of its
 * own, at the latest after one second (newer versions have fetch.queue.backoff.ms for that
 * wait). Whenever the job is slower than the broker — any job whose sink does real work — the
 * queue fills, the fetcher parks, the source empties the queue and then waits for the rest of
 * that second: with the default 100,000-record queue, stalls of 0.5-1 s about once a second.
 * A queue that holds more than a second of records hides the wait at the price of hundreds of
 * megabytes.
 *
 * Instead the source keeps the queue bounded and wakes the fetchers itself: once the queue was
 * full enough for a fetcher to park and has drained to half of that, it sends one ListOffsets
 * request for its partitions (rd_kafka_offsets_for_times with the latest offset, whose answer
 * is dropped). The request goes to each partition's leader, whose broker thread then looks at
 * its partitions again and fetches. That is at most one round trip per half a queue of records.
 *
 * librdkafka 2.2 and later park a fetcher on a full queue for fetch.queue.backoff.ms, a timer of
 * its own (1 s by default) that no request cuts short: with the bounded queue the source would
 * read 20,000 records a second per partition. Where the library knows that setting, the source
 * sets it to 10 ms unless the user chose a value: a parked fetcher looks again that soon, which
 * costs a timer, not a request. There no request wakes a parked fetcher, so the source sends none.
 */
#include "kafka_source_internal.h"

#include <stdlib.h>

/* The source's read-ahead when the user does not choose one (kafka.queued.min.messages,
 * kafka.queued.max.messages.kbytes): enough for a few fetches, far below librdkafka's defaults
 * of 100,000 records and 64 MB per partition. */
#define DEFAULT_QUEUED_MIN_MESSAGES "20000"
#define DEFAULT_QUEUED_MAX_KBYTES   "16384"
/* How soon a fetcher parked on a full queue looks again (librdkafka 2.2 and later). */
#define DEFAULT_FETCH_QUEUE_BACKOFF_MS "10"
/* How long a wake-up request may hold up the source's poll. */
#define WAKE_TIMEOUT_MS 100

static const char *const defaults[] = {"queued.min.messages", DEFAULT_QUEUED_MIN_MESSAGES,
                                       "queued.max.messages.kbytes", DEFAULT_QUEUED_MAX_KBYTES};

tpc_error_t *tpc__kafka_fetch_defaults(rd_kafka_conf_t *rc)
{
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i += 2) {
        tpc_error_t *err = tpc__kafka_conf_set(rc, defaults[i], defaults[i + 1], "");
        if (err)
            return err;
    }
    /* Older versions do not know the key: nothing to set there. */
    char errstr[256];
    rd_kafka_conf_set(rc, "fetch.queue.backoff.ms", DEFAULT_FETCH_QUEUE_BACKOFF_MS, errstr,
                      sizeof errstr);
    return NULL;
}

void tpc__kafka_fetch_init(tpc__kafka_fetch_t *f, rd_kafka_t *rk, const rd_kafka_conf_t *rc)
{
    char buf[32];
    size_t len = sizeof buf;
    *f = (tpc__kafka_fetch_t){.queue = rd_kafka_queue_get_consumer(rk)};
    f->min_messages = rd_kafka_conf_get(rc, "queued.min.messages", buf, &len) == RD_KAFKA_CONF_OK
                          ? atol(buf)
                          : atol(DEFAULT_QUEUED_MIN_MESSAGES);
    len = sizeof buf;
    f->max_bytes =
        rd_kafka_conf_get(rc, "queued.max.messages.kbytes", buf, &len) == RD_KAFKA_CONF_OK
            ? atol(buf) * 1024
            : atol(DEFAULT_QUEUED_MAX_KBYTES) * 1024;
    len = sizeof buf;
    f->timer = rd_kafka_conf_get(rc, "fetch.queue.backoff.ms", buf, &len) == RD_KAFKA_CONF_OK;
}

void tpc__kafka_fetch_destroy(tpc__kafka_fetch_t *f)
{
    if (f->queue)
        rd_kafka_queue_destroy(f->queue);
    f->queue = NULL;
}

void tpc__kafka_fetch_taken(tpc__kafka_fetch_t *f, size_t bytes)
{
    f->taken++;
    f->taken_bytes += bytes;
}

/* The queue length at which a fetcher may have parked: queued.min.messages, or fewer records
 * when queued.max.messages.kbytes comes first for records of the size seen so far. */
static long parking_length(const tpc__kafka_fetch_t *f)
{
    long limit = f->min_messages;
    if (f->taken > 0 && f->taken_bytes > 0) {
        double avg = (double)f->taken_bytes / (double)f->taken;
        double by_bytes = (double)f->max_bytes / avg;
        if (by_bytes < (double)limit)
            limit = (long)by_bytes;
    }
    return limit;
}

bool tpc__kafka_fetch_needs_wake(tpc__kafka_fetch_t *f)
{
    if (f->timer)
        return false;
    long len = rd_kafka_queue_length(f->queue);
    /* 90 %: the last fetch before parking may stop a little short of the limit by bytes. */
    long park = parking_length(f) * 9 / 10;
    if (len >= park && park > 0) {
        f->full = true;
        return false;
    }
    if (!f->full || len > park / 2)
        return false;
    f->full = false;
    return true;
}

void tpc__kafka_fetch_wake(tpc__kafka_fetch_t *f, rd_kafka_t *rk,
                           rd_kafka_topic_partition_list_t *parts)
{
    if (parts->cnt == 0)
        return;
    for (int i = 0; i < parts->cnt; i++)
        parts->elems[i].offset = RD_KAFKA_OFFSET_END; /* as a timestamp: the latest offset */
    /* The answer does not matter: the request itself wakes the leaders' broker threads. A
     * timeout only means a slow answer; the request went out all the same. */
    (void)rd_kafka_offsets_for_times(rk, parts, WAKE_TIMEOUT_MS);
    f->wakes++;
}
