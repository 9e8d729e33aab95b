/*
 * libFuzzer harness: the Kafka source's state entries
 * (connectors/kafka/source/kafka_source_state.c), one per partition in every checkpoint (and one
 * per topic for the partitions known without an entry), decoded on restore, in both formats (1,
 * written before partition discovery, and 2). An entry that decodes must name a topic Kafka could
 * have, with offsets the source can use, and what the source writes for it must read back the same;
 * the subtask rule must give every partition one owner.
 */
#include "kafka_source_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tpc__kafka_source_entry_t e;
    tpc_error_t *err = tpc__kafka_source_decode(data, size, &e);
    if (err) {
        tpc_error_destroy(err);
        return 0;
    }
    if (e.topic_len == 0 || e.topic_len > TPC__KAFKA_TOPIC_MAX || e.partition < 0 ||
        (e.next < 0 && !(e.version == 2 && e.next == TPC__KAFKA_FROM_BEGINNING)) ||
        (e.floor && (e.next != 0 || e.end != -1)))
        abort();
    for (int p = 1; p <= 7; p++) {
        int owner = tpc__kafka_source_owner(e.topic, e.topic_len, e.partition, p);
        if (owner < 0 || owner >= p)
            abort();
    }
    /* What is written back reads as the same position. */
    unsigned char buf[TPC__KAFKA_SOURCE_ENTRY_MAX];
    char topic[TPC__KAFKA_TOPIC_MAX];
    memcpy(topic, e.topic, e.topic_len);
    tpc__kafka_source_entry_t out = e;
    out.topic = topic;
    size_t n = tpc__kafka_source_encode(&out, buf);
    tpc__kafka_source_entry_t again;
    err = tpc__kafka_source_decode(buf, n, &again);
    if (err || again.version != 2 || again.topic_len != e.topic_len ||
        memcmp(again.topic, topic, e.topic_len) != 0 || again.partition != e.partition ||
        again.next != e.next || again.end != e.end || again.floor != e.floor)
        abort();
    return 0;
}
