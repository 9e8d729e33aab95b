/*
 * The Kafka source's checkpoint entries: one list state entry per owned partition, so that the
 * runtime can hand partitions to other subtasks when the parallelism changes. Layout (integers
 * little-endian):
 *
 *   u8  format version (1)
 *   u8  flags: bit 0 bounded (the end offset is meaningful)
 *   u16 topic length, then the topic's bytes
 *   i32 partition
 *   i64 next offset to read
 *   i64 end offset (bounded: records from there on are not read), -1 otherwise
 */
#include "kafka_internal.h"

#include <string.h>

#define FORMAT_VERSION 1
#define FLAG_BOUNDED   0x01

static unsigned char *put(unsigned char *at, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *at++ = (unsigned char)(v >> (8 * i));
    return at;
}

static uint64_t get(const unsigned char *at, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)at[i] << (8 * i);
    return v;
}

size_t tpc__kafka_source_encode(const char *topic, const tpc__kafka_source_part_t *part,
                                unsigned char *buf)
{
    size_t len = strlen(topic); /* Kafka topics have at most 249 characters */
    unsigned char *at = buf;
    *at++ = FORMAT_VERSION;
    *at++ = part->end >= 0 ? FLAG_BOUNDED : 0;
    at = put(at, len, 2);
    memcpy(at, topic, len);
    at += len;
    at = put(at, (uint32_t)part->partition, 4);
    at = put(at, (uint64_t)part->next, 8);
    at = put(at, (uint64_t)part->end, 8);
    return (size_t)(at - buf);
}

static tpc_error_t *corrupt(const char *what)
{
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL, "invalid kafka source state: %s", what),
        "restore from another checkpoint, or start the job fresh");
}

tpc_error_t *tpc__kafka_source_decode(const void *bytes, size_t len, const tpc_kafka_source_t *conf,
                                      tpc__kafka_source_part_t *out)
{
    const unsigned char *b = bytes;
    if (len < 4)
        return corrupt("entry too short");
    if (b[0] != FORMAT_VERSION)
        return corrupt("unknown format version");
    size_t tlen = (size_t)get(b + 2, 2);
    if (len != 4 + tlen + 4 + 8 + 8)
        return corrupt("entry length does not match its topic");
    out->topic = -1;
    for (size_t t = 0; t < conf->ntopics; t++)
        if (tlen == strlen(conf->topics[t]) && memcmp(b + 4, conf->topics[t], tlen) == 0)
            out->topic = (int)t;
    if (out->topic < 0) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_STATE, TPC_ERROR_FATAL,
                                         "restored kafka source state is for topic \"%.*s\", "
                                         "which the source (\"%s\") does not read",
                                         (int)tlen, (const char *)(b + 4), conf->topic);
        return tpc_error_hint(err, "give the source reading other topics a new vertex name, or "
                                   "start the job with restore.mode=fresh");
    }
    const unsigned char *at = b + 4 + tlen;
    out->partition = (int32_t)(uint32_t)get(at, 4);
    out->next = (int64_t)get(at + 4, 8);
    out->end = (b[1] & FLAG_BOUNDED) ? (int64_t)get(at + 12, 8) : -1;
    out->done = false;
    if (out->partition < 0 || out->next < 0 || ((b[1] & FLAG_BOUNDED) && out->end < 0))
        return corrupt("negative partition or offset");
    return NULL;
}
