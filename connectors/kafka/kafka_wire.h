/*
 * Private to connectors/kafka: a tiny client of the Kafka wire protocol, just enough to end a
 * transaction that another process began (FindCoordinator + EndTxn), which librdkafka cannot do.
 * kafka_wire.c holds the byte encoding and one blocking connection to one broker;
 * kafka_end_txn.c finds the transaction coordinator and sends EndTxn with retries.
 *
 * Only plaintext connections are implemented: a configuration asking for TLS or SASL is refused
 * with TPC_ERR_UNSUPPORTED rather than sent in the clear.
 */
#ifndef TPC_KAFKA_WIRE_H
#define TPC_KAFKA_WIRE_H

#include "tpc_runtime.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kafka API keys and broker error codes used here. */
enum {
    TPC__KAFKA_API_FIND_COORDINATOR = 10,
    TPC__KAFKA_API_VERSIONS = 18,
    TPC__KAFKA_API_END_TXN = 26,
};
enum {
    TPC__KAFKA_E_NONE = 0,
    TPC__KAFKA_E_REQUEST_TIMED_OUT = 7,
    TPC__KAFKA_E_NETWORK = 13,
    TPC__KAFKA_E_COORDINATOR_LOADING = 14,
    TPC__KAFKA_E_COORDINATOR_NOT_AVAILABLE = 15,
    TPC__KAFKA_E_NOT_COORDINATOR = 16,
    TPC__KAFKA_E_INVALID_PRODUCER_EPOCH = 47,
    TPC__KAFKA_E_INVALID_TXN_STATE = 48,
    TPC__KAFKA_E_INVALID_PRODUCER_ID_MAPPING = 49,
    TPC__KAFKA_E_CONCURRENT_TRANSACTIONS = 51,
    TPC__KAFKA_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53,
    TPC__KAFKA_E_PRODUCER_FENCED = 90,
};

/* Growable request body. A failed allocation sets oom and drops later writes. */
typedef struct {
    unsigned char *data;
    size_t len;
    size_t cap;
    bool oom;
} tpc__kafka_wbuf_t;

void tpc__kafka_w_i8(tpc__kafka_wbuf_t *w, int8_t v);
void tpc__kafka_w_i16(tpc__kafka_wbuf_t *w, int16_t v);
void tpc__kafka_w_i32(tpc__kafka_wbuf_t *w, int32_t v);
void tpc__kafka_w_i64(tpc__kafka_wbuf_t *w, int64_t v);
void tpc__kafka_w_uvarint(tpc__kafka_wbuf_t *w, uint64_t v);
/* A string: int16 length (classic) or uvarint length + 1 (compact, flexible versions). */
void tpc__kafka_w_str(tpc__kafka_wbuf_t *w, const char *s, bool compact);
/* An empty set of tagged fields (flexible versions). */
void tpc__kafka_w_no_tags(tpc__kafka_wbuf_t *w);
void tpc__kafka_wbuf_free(tpc__kafka_wbuf_t *w);

/* Response reader. Reading past the end sets bad and yields zeros. */
typedef struct {
    const unsigned char *p;
    size_t len;
    size_t pos;
    bool bad;
} tpc__kafka_rbuf_t;

int8_t tpc__kafka_r_i8(tpc__kafka_rbuf_t *r);
int16_t tpc__kafka_r_i16(tpc__kafka_rbuf_t *r);
int32_t tpc__kafka_r_i32(tpc__kafka_rbuf_t *r);
int64_t tpc__kafka_r_i64(tpc__kafka_rbuf_t *r);
uint64_t tpc__kafka_r_uvarint(tpc__kafka_rbuf_t *r);
/* A (nullable) string into @buf (NUL-terminated, truncated to @cap - 1). */
void tpc__kafka_r_str(tpc__kafka_rbuf_t *r, bool compact, char *buf, size_t cap);
void tpc__kafka_r_skip_tags(tpc__kafka_rbuf_t *r);

/* How to reach the cluster. Strings are borrowed. */
typedef struct {
    const char *bootstrap;         /* "host:port[,host:port...]" */
    const char *security_protocol; /* NULL or "plaintext" (others are refused) */
    const char *client_id;         /* NULL: "twopc" */
} tpc__kafka_wire_conf_t;

/* One blocking connection to one broker, with the API versions it announced. */
typedef struct tpc__kafka_conn tpc__kafka_conn_t;

/* Connect to @host:@port and ask for its API versions, giving up at @deadline_ms (monotonic). */
tpc_error_t *tpc__kafka_conn_open(const tpc__kafka_wire_conf_t *conf, const char *host, int port,
                                  int64_t deadline_ms, tpc__kafka_conn_t **out);
/* Connect to the first reachable bootstrap server. */
tpc_error_t *tpc__kafka_conn_open_bootstrap(const tpc__kafka_wire_conf_t *conf, int64_t deadline_ms,
                                            tpc__kafka_conn_t **out);
void tpc__kafka_conn_close(tpc__kafka_conn_t *c);
/* The highest version of @api in [@lo, @hi] the broker supports, or -1. */
int tpc__kafka_conn_version(const tpc__kafka_conn_t *c, int api, int lo, int hi);
/* "host:port" of the broker, for messages. */
const char *tpc__kafka_conn_name(const tpc__kafka_conn_t *c);
/* Send a request and read its response. @flexible selects request header v2 / response header
 * v1. On success @resp reads the response body; its bytes belong to @c until the next call. */
tpc_error_t *tpc__kafka_conn_call(tpc__kafka_conn_t *c, int api, int version, bool flexible,
                                  const tpc__kafka_wbuf_t *body, int64_t deadline_ms,
                                  tpc__kafka_rbuf_t *resp);

int64_t tpc__kafka_now_ms(void);
/* Name of a broker error code ("PRODUCER_FENCED"), from librdkafka's table. */
const char *tpc__kafka_code_name(int code);

/* What EndTxn said, once it said something definite. */
typedef enum {
    TPC__KAFKA_END_DONE = 0,   /* the transaction now has the asked-for outcome */
    TPC__KAFKA_END_FENCED,     /* epoch no longer current: the coordinator ended it itself */
    TPC__KAFKA_END_BAD_STATE,  /* already ended the other way */
    TPC__KAFKA_END_UNKNOWN_ID, /* no such transactional id / producer id pair */
} tpc__kafka_end_result_t;

/* Send EndTxn(@commit) for the transaction of @txn_id with producer @pid / @epoch to its
 * coordinator, retrying on coordinator moves, loading, concurrent transactions and network errors
 * until @timeout_ms. @returns NULL with @result set to what the coordinator said definitely, or an
 * error (TPC_ERR_TIMEOUT, TPC_ERR_CONNECT, TPC_ERR_EXTERNAL, TPC_ERR_UNSUPPORTED) when it never
 * did; @broker_code gets the last broker error code seen. */
tpc_error_t *tpc__kafka_end_txn(const tpc__kafka_wire_conf_t *conf, const char *txn_id, int64_t pid,
                                int16_t epoch, bool commit, int timeout_ms,
                                tpc__kafka_end_result_t *result, int *broker_code);

#endif /* TPC_KAFKA_WIRE_H */
