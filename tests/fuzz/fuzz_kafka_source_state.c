/*
 * libFuzzer harness: the Kafka source's state entries (connectors/kafka/kafka_source_state.c), one
 * per partition in every checkpoint, decoded on restore for a source that reads the topics
 * "orders" and "refunds". An entry that decodes must name one of them with offsets the source can
 * use, and what the source writes for that position must read back the same.
 */
#include "kafka_internal.h"

#include <stdlib.h>
#include <string.h>

static tpc_kafka_source_t *source;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!source) {
        tpc_error_t *err = tpc_kafka_source_new("127.0.0.1:9092", "orders,refunds", &source);
        if (err)
            abort();
    }
    tpc__kafka_source_part_t part;
    tpc_error_t *err = tpc__kafka_source_decode(data, size, source, &part);
    if (err) {
        tpc_error_destroy(err);
        return 0;
    }
    if (part.topic < 0 || part.topic > 1 || part.partition < 0 || part.next < 0)
        abort();
    /* What is written back reads as the same position. */
    unsigned char buf[TPC__KAFKA_SOURCE_ENTRY_MAX];
    const char *topic = part.topic ? "refunds" : "orders";
    size_t n = tpc__kafka_source_encode(topic, &part, buf);
    tpc__kafka_source_part_t again;
    err = tpc__kafka_source_decode(buf, n, source, &again);
    if (err || again.topic != part.topic || again.partition != part.partition ||
        again.next != part.next || again.end != part.end)
        abort();
    return 0;
}
