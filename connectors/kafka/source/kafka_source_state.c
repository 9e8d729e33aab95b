/*
 * The Kafka source's checkpoint entries, and the rule that says which subtask owns a partition
 * (both are part of the checkpoint format: a restore at any parallelism must agree with them).
 *
 * An unbounded source writes one union state entry per partition it reads, so that after a
 * restore every subtask knows every partition the job had started to read; a bounded one writes
 * list state, as its subtasks finish one by one (docs/kafka.md). Layout (integers little-endian):
 *
 *   u8  format version (2; version 1 is read too)
 *   u8  flags: bit 0 bounded (the end offset is meaningful), bit 1 floor entry (version 2)
 *   u16 topic length, then the topic's bytes
 *   i32 partition; of a floor entry: partitions below it count as known without entries
 *   i64 next offset to read; -2 (version 2): the partition's first offset, nothing read yet
 *   i64 end offset (bounded: records from there on are not read), -1 otherwise
 */
#include "kafka_source_internal.h"

#include <string.h>

#define FORMAT_VERSION 2
#define FLAG_BOUNDED   0x01
#define FLAG_FLOOR     0x02

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

/* FNV-1a, 32 bits, of the topic's name: spreads the topics' first partitions over the subtasks. */
int tpc__kafka_source_owner(const char *topic, size_t topic_len, int32_t partition, int parallelism)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < topic_len; i++)
        h = (h ^ (unsigned char)topic[i]) * 16777619u;
    return (int)(((uint64_t)h + (uint32_t)partition) % (uint32_t)parallelism);
}

size_t tpc__kafka_source_encode(const tpc__kafka_source_entry_t *e, unsigned char *buf)
{
    unsigned char *at = buf;
    *at++ = FORMAT_VERSION;
    *at++ = (unsigned char)((e->end >= 0 ? FLAG_BOUNDED : 0) | (e->floor ? FLAG_FLOOR : 0));
    at = put(at, e->topic_len, 2);
    memcpy(at, e->topic, e->topic_len);
    at += e->topic_len;
    at = put(at, (uint32_t)e->partition, 4);
    at = put(at, (uint64_t)e->next, 8);
    at = put(at, (uint64_t)e->end, 8);
    return (size_t)(at - buf);
}

static tpc_error_t *corrupt(const char *what)
{
    return tpc_error_hint(
        tpc_error_new(TPC_ERR_CORRUPT, TPC_ERROR_FATAL, "invalid kafka source state: %s", what),
        "restore from another checkpoint, or start the job fresh");
}

tpc_error_t *tpc__kafka_source_decode(const void *bytes, size_t len, tpc__kafka_source_entry_t *out)
{
    const unsigned char *b = bytes;
    if (len < 4)
        return corrupt("entry too short");
    if (b[0] != 1 && b[0] != FORMAT_VERSION)
        return corrupt("unknown format version");
    unsigned known = b[0] == 1 ? FLAG_BOUNDED : FLAG_BOUNDED | FLAG_FLOOR;
    if (b[1] & ~known)
        return corrupt("unknown flags");
    size_t tlen = (size_t)get(b + 2, 2);
    if (len != 4 + tlen + 4 + 8 + 8)
        return corrupt("entry length does not match its topic");
    if (tlen == 0 || tlen > TPC__KAFKA_TOPIC_MAX || memchr(b + 4, '\0', tlen))
        return corrupt("invalid topic name");
    const unsigned char *at = b + 4 + tlen;
    out->topic = (const char *)(b + 4);
    out->topic_len = tlen;
    out->version = b[0];
    out->floor = (b[1] & FLAG_FLOOR) != 0;
    out->partition = (int32_t)(uint32_t)get(at, 4);
    out->next = (int64_t)get(at + 4, 8);
    out->end = (b[1] & FLAG_BOUNDED) ? (int64_t)get(at + 12, 8) : -1;
    bool from_beginning = b[0] >= 2 && out->next == TPC__KAFKA_FROM_BEGINNING;
    if (out->partition < 0 || (out->next < 0 && !from_beginning) ||
        ((b[1] & FLAG_BOUNDED) && out->end < 0))
        return corrupt("negative partition or offset");
    if (out->floor && (out->end >= 0 || out->next != 0))
        return corrupt("floor entry with offsets");
    return NULL;
}
