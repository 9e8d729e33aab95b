/*
 * librdkafka's statistics for the job's metrics endpoint. Each producer of a Kafka sink gets
 * librdkafka's statistics document (every second, or ten times a second for a transactional
 * producer, which also needs its "eos" object); its top-level counters and gauges are added to the
 * sink's totals as changes since the producer's last document, so the totals keep counting when a
 * producer of the pool is replaced, and a producer that is closed takes its gauges along.
 */
#include "kafka_sink_internal.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    const char *key;  /* in librdkafka's statistics JSON, top level */
    const char *name; /* the metric family */
    const char *help;
    bool gauge;
} stats[TPC__KAFKA_NSTATS] = {
    [TPC__KAFKA_STAT_TX] = {"\"tx\":", "twopc_kafka_requests_sent_total",
                            "Requests the sink's producers sent to brokers (librdkafka tx).",
                            false},
    [TPC__KAFKA_STAT_TX_BYTES] = {"\"tx_bytes\":", "twopc_kafka_sent_bytes_total",
                                  "Bytes the sink's producers sent to brokers.", false},
    [TPC__KAFKA_STAT_RX] = {"\"rx\":", "twopc_kafka_responses_received_total",
                            "Responses the sink's producers received from brokers.", false},
    [TPC__KAFKA_STAT_RX_BYTES] = {"\"rx_bytes\":", "twopc_kafka_received_bytes_total",
                                  "Bytes the sink's producers received from brokers.", false},
    [TPC__KAFKA_STAT_TXMSGS] = {"\"txmsgs\":", "twopc_kafka_messages_sent_total",
                                "Messages the sink's producers sent to brokers.", false},
    [TPC__KAFKA_STAT_TXMSG_BYTES] = {"\"txmsg_bytes\":", "twopc_kafka_message_bytes_sent_total",
                                     "Message bytes the sink's producers sent to brokers.", false},
    [TPC__KAFKA_STAT_MSG_CNT] = {"\"msg_cnt\":", "twopc_kafka_queued_messages",
                                 "Messages waiting in the sink's producers' queues.", true},
    [TPC__KAFKA_STAT_MSG_SIZE] = {"\"msg_size\":", "twopc_kafka_queued_bytes",
                                  "Bytes of the messages waiting in the producers' queues.", true},
    [TPC__KAFKA_STAT_REPLYQ] = {"\"replyq\":", "twopc_kafka_reply_queue",
                                "Operations (callbacks, events) waiting for the sink to serve "
                                "them.",
                                true},
};

/* The numbers of the top-level keys of librdkafka's statistics document (depth 1: "brokers",
 * "topics" and their partitions repeat the same names), into @vals; @found marks those seen. */
static void top_level(const char *json, int64_t vals[TPC__KAFKA_NSTATS],
                      bool found[TPC__KAFKA_NSTATS])
{
    int depth = 0;
    for (const char *p = json; *p; p++) {
        if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            depth--;
        } else if (*p == '"') {
            const char *q = p + 1;
            while (*q && *q != '"')
                q += q[0] == '\\' && q[1] ? 2 : 1;
            if (depth == 1 && q[0] == '"' && q[1] == ':')
                for (int i = 0; i < TPC__KAFKA_NSTATS; i++)
                    if (strncmp(p, stats[i].key, strlen(stats[i].key)) == 0) {
                        vals[i] = strtoll(p + strlen(stats[i].key), NULL, 10);
                        found[i] = true;
                    }
            if (!*q)
                return;
            p = q;
        }
    }
}

void tpc__kafka_stats_take(tpc__kafka_stats_t *s, int64_t last[TPC__KAFKA_NSTATS], const char *json)
{
    int64_t vals[TPC__KAFKA_NSTATS] = {0};
    bool found[TPC__KAFKA_NSTATS] = {false};
    top_level(json, vals, found);
    for (int i = 0; i < TPC__KAFKA_NSTATS; i++) {
        if (!found[i])
            continue;
        int64_t v = vals[i];
        /* Counters of one client only grow; a smaller value is another client's start. */
        int64_t delta = stats[i].gauge || v >= last[i] ? v - last[i] : v;
        atomic_fetch_add_explicit(&s->v[i], delta, memory_order_relaxed);
        last[i] = v;
    }
}

void tpc__kafka_stats_drop(tpc__kafka_stats_t *s, int64_t last[TPC__KAFKA_NSTATS])
{
    for (int i = 0; i < TPC__KAFKA_NSTATS; i++) {
        if (stats[i].gauge)
            atomic_fetch_sub_explicit(&s->v[i], last[i], memory_order_relaxed);
        last[i] = 0;
    }
}

void tpc__kafka_sink_metrics(void *arg, const char *sink, tpc_metrics_writer_t *w)
{
    const tpc__kafka_conf_t *conf = arg;
    const char *labels[] = {"sink", sink, NULL};
    for (int i = 0; i < TPC__KAFKA_NSTATS; i++)
        tpc_metrics_add(w, stats[i].name, stats[i].gauge ? "gauge" : "counter", stats[i].help, "",
                        labels,
                        (double)atomic_load_explicit(&conf->stats->v[i], memory_order_relaxed));
    tpc_metrics_add(w, "twopc_kafka_producers", "gauge",
                    "librdkafka producers the sink's subtasks hold (the transactional id pools).",
                    "", labels, (double)atomic_load(&conf->stats->producers));
    tpc_metrics_build_info(w, "librdkafka", rd_kafka_version_str());
}
