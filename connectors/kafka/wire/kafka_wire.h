/*
 * Private to connectors/kafka/wire, included by the sink, the source, the tools and the tests: a
 * tiny client of the Kafka wire protocol, for what librdkafka cannot do (end a transaction that
 * another process began: FindCoordinator + EndTxn; the admin requests of the twopc command).
 * kafka_wire.c holds the byte encoding and one blocking connection to one broker; kafka_tls.c
 * wraps that connection in TLS (OpenSSL); kafka_sasl.c authenticates it with SASL PLAIN or SCRAM
 * (whose messages kafka_scram.c makes and checks); kafka_end_txn.c finds the transaction
 * coordinator and sends EndTxn with retries; kafka_admin.c lists and describes transactions;
 * kafka_producers.c describes the active producers of a partition at its leader;
 * kafka_proof.c decides, from DescribeTransactions, whether one named transaction committed.
 * kafka_props.c keeps librdkafka's properties as users give them, for the sink and the source.
 *
 * The security settings are librdkafka's property names, read from the same properties the sink
 * gives librdkafka, so that one configuration serves both. A setting this client cannot honour
 * (another SASL mechanism, a PKCS#12 keystore) is refused with TPC_ERR_UNSUPPORTED rather than
 * ignored.
 */
#ifndef TPC_KAFKA_WIRE_H
#define TPC_KAFKA_WIRE_H

#include "tpc_runtime.h"

#include <librdkafka/rdkafka.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kafka API keys and broker error codes used here. */
enum {
    TPC__KAFKA_API_METADATA = 3,
    TPC__KAFKA_API_FIND_COORDINATOR = 10,
    TPC__KAFKA_API_SASL_HANDSHAKE = 17,
    TPC__KAFKA_API_VERSIONS = 18,
    TPC__KAFKA_API_END_TXN = 26,
    TPC__KAFKA_API_WRITE_TXN_MARKERS = 27,
    TPC__KAFKA_API_SASL_AUTHENTICATE = 36,
    TPC__KAFKA_API_DESCRIBE_PRODUCERS = 61,
    TPC__KAFKA_API_DESCRIBE_TRANSACTIONS = 65,
    TPC__KAFKA_API_LIST_TRANSACTIONS = 66,
};
enum {
    TPC__KAFKA_E_NONE = 0,
    TPC__KAFKA_E_REQUEST_TIMED_OUT = 7,
    TPC__KAFKA_E_NOT_LEADER = 6,
    TPC__KAFKA_E_NETWORK = 13,
    TPC__KAFKA_E_COORDINATOR_LOADING = 14,
    TPC__KAFKA_E_COORDINATOR_NOT_AVAILABLE = 15,
    TPC__KAFKA_E_NOT_COORDINATOR = 16,
    TPC__KAFKA_E_INVALID_PRODUCER_EPOCH = 47,
    TPC__KAFKA_E_INVALID_TXN_STATE = 48,
    TPC__KAFKA_E_INVALID_PRODUCER_ID_MAPPING = 49,
    TPC__KAFKA_E_UNSUPPORTED_SASL_MECHANISM = 33,
    TPC__KAFKA_E_ILLEGAL_SASL_STATE = 34,
    TPC__KAFKA_E_CONCURRENT_TRANSACTIONS = 51,
    TPC__KAFKA_E_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53,
    TPC__KAFKA_E_SASL_AUTHENTICATION_FAILED = 58,
    TPC__KAFKA_E_PRODUCER_FENCED = 90,
    TPC__KAFKA_E_TRANSACTIONAL_ID_NOT_FOUND = 105,
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
/* Bytes: int32 length (classic) or uvarint length + 1 (compact). */
void tpc__kafka_w_bytes(tpc__kafka_wbuf_t *w, const void *p, size_t n, bool compact);
/* An empty set of tagged fields (flexible versions). */
void tpc__kafka_w_no_tags(tpc__kafka_wbuf_t *w);
/* Free (and wipe: a request can hold a password) the buffer. */
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
/* A (nullable) string into @buf (NUL-terminated, truncated to @cap - 1). @returns the string's
 * whole length, which may be cap or more (then @buf holds its first cap - 1 bytes); -1 for null. */
int64_t tpc__kafka_r_str(tpc__kafka_rbuf_t *r, bool compact, char *buf, size_t cap);
/* (Nullable) bytes: @p points into the response, @n is 0 for null. */
void tpc__kafka_r_bytes(tpc__kafka_rbuf_t *r, bool compact, const unsigned char **p, size_t *n);
void tpc__kafka_r_skip_tags(tpc__kafka_rbuf_t *r);

/* kafka_coords.c: connections to transaction coordinators kept between calls. */
typedef struct tpc__kafka_coords tpc__kafka_coords_t;

/* How to reach the cluster. Strings are borrowed. */
typedef struct {
    const char *bootstrap;         /* "host:port[,host:port...]" */
    const char *security_protocol; /* plaintext, ssl, sasl_plaintext, sasl_ssl; NULL: from props */
    const char *client_id;         /* NULL: "twopc" */
    /* librdkafka properties, name, value, name, value, ... (the last of a name counts): the
     * ssl.*, sasl.* and enable.ssl.certificate.verification settings are read from here. */
    const char *const *props;
    size_t nprops; /* pairs */
    /* Borrowed, NULL for none: tpc__kafka_describe_transaction() keeps its connection to each
     * coordinator here between calls. One thread at a time uses it. */
    tpc__kafka_coords_t *coords;
} tpc__kafka_wire_conf_t;

/* @returns the value of property @name in @conf, or NULL. */
/* kafka_props.c: the value of property @name in pairs name, value (the last one set), or NULL. */
const char *tpc__kafka_props_get(const char *const *props, size_t nprops, const char *name);
const char *tpc__kafka_wire_prop(const tpc__kafka_wire_conf_t *conf, const char *name);

/* One blocking connection to one broker, with the API versions it announced. */
typedef struct tpc__kafka_conn tpc__kafka_conn_t;

/* Connect to @host:@port (TLS and SASL as @conf says) and ask for its API versions, giving up at
 * @deadline_ms (monotonic). Errors that retrying cannot mend (configuration, certificate
 * verification, authentication) are fatal and not retriable. */
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

/* A broker of a Metadata answer. */
typedef struct {
    int32_t id;
    int port;
    char host[256];
} tpc__kafka_node_t;

/* Metadata version @v (4 to 8, from tpc__kafka_conn_version) for @topic (NULL: no topic) on @c:
 * the brokers it lists into *@nodes (allocated with one spare, *@count of them; free()), and @r
 * left after them, at the cluster id, for the caller to read the topics. */
tpc_error_t *tpc__kafka_metadata(tpc__kafka_conn_t *c, int v, const char *topic, int64_t deadline,
                                 tpc__kafka_rbuf_t *r, tpc__kafka_node_t **nodes, int32_t *count);

/* Wait until @fd is ready for @events; @name and @what ("receive from") go into the error. */
tpc_error_t *tpc__kafka_wait_fd(int fd, short events, int64_t deadline_ms, const char *name,
                                const char *what);

/* Name of a broker error code ("PRODUCER_FENCED"), from librdkafka's table. */
const char *tpc__kafka_code_name(int code);

/* kafka_tls.c: a TLS session on a connected socket. */
typedef struct tpc__kafka_tls tpc__kafka_tls_t;

/* Handshake over @fd with broker @host (@name "host:port" for messages), verifying its certificate
 * as @conf says. A failed verification is TPC_ERR_CONNECT, fatal, saying which check failed. */
tpc_error_t *tpc__kafka_tls_start(const tpc__kafka_wire_conf_t *conf, int fd, const char *host,
                                  const char *name, int64_t deadline_ms, tpc__kafka_tls_t **out);
tpc_error_t *tpc__kafka_tls_send(tpc__kafka_tls_t *t, const unsigned char *p, size_t n,
                                 int64_t deadline_ms);
tpc_error_t *tpc__kafka_tls_recv(tpc__kafka_tls_t *t, unsigned char *p, size_t n,
                                 int64_t deadline_ms);
/* Free the session (the socket stays open). NULL is fine. */
void tpc__kafka_tls_free(tpc__kafka_tls_t *t);

/* Check one property as it is set, as far as it alone can be judged: security.protocol, the TLS
 * flags and files (kafka_tls.c), the SASL credentials' lengths. */
tpc_error_t *tpc__kafka_wire_check_prop(const char *name, const char *value);
tpc_error_t *tpc__kafka_tls_check_prop(const char *name, const char *value);

/* kafka_sasl.c: check the SASL settings of @conf before connecting (mechanism, user, password). */
tpc_error_t *tpc__kafka_sasl_check(const tpc__kafka_wire_conf_t *conf);
/* Authenticate @c (ApiVersions already read) with SaslHandshake + SaslAuthenticate. A rejected
 * login is TPC_ERR_CONNECT, fatal, with the broker's message; secrets never appear in errors. */
tpc_error_t *tpc__kafka_sasl_login(tpc__kafka_conn_t *c, const tpc__kafka_wire_conf_t *conf,
                                   int64_t deadline_ms);

/* kafka_scram.c: the messages of a SCRAM-SHA-256 / -512 login (RFC 5802), without I/O. Bounds on
 * what the broker may send: a real server-first message is about a hundred bytes. */
#define TPC__KAFKA_SCRAM_USER_MAX  255 /* bytes of sasl.username, as tpc__kafka_sasl_check says */
#define TPC__KAFKA_SCRAM_MSG_MAX   1536
#define TPC__KAFKA_SCRAM_NONCE_MAX 512
#define TPC__KAFKA_SCRAM_MAX_ITERS 1000000

typedef struct {
    bool sha512;
    int hash_len;
    char nonce[33];                                      /* the client's part, base64 */
    char first_bare[TPC__KAFKA_SCRAM_USER_MAX * 3 + 40]; /* "n=user,r=nonce" */
    unsigned char server_sig[64];                        /* expected in server-final */
} tpc__kafka_scram_t;

/* What a server-first message says; nonce points into the message. */
typedef struct {
    const char *nonce;
    size_t nonce_len;
    unsigned char salt[256];
    size_t salt_len;
    int iters;
} tpc__kafka_scram_server_t;

/* Start a login as @user with the client nonce @nonce (random bytes): the client-first message
 * into @msg (@cap bytes), its length in @len. */
tpc_error_t *tpc__kafka_scram_first(tpc__kafka_scram_t *s, bool sha512, const char *user,
                                    const unsigned char nonce[24], char *msg, size_t cap,
                                    size_t *len);
/* Parse and bound-check the server-first message from @broker (NUL-terminated). */
tpc_error_t *tpc__kafka_scram_parse_first(const tpc__kafka_scram_t *s, const char *broker,
                                          const char *server_first, tpc__kafka_scram_server_t *out);
/* The client-final message for @server_first into @msg; refuses a message that does not fit. */
tpc_error_t *tpc__kafka_scram_final(tpc__kafka_scram_t *s, const char *broker, const char *password,
                                    const char *server_first, char *msg, size_t cap, size_t *len);
/* Check the server-final message: an error the broker reported, or a wrong signature. */
tpc_error_t *tpc__kafka_scram_check(const tpc__kafka_scram_t *s, const char *broker,
                                    const char *server_final);
/* Wipe @s (it holds a key derived from the password). */
void tpc__kafka_scram_wipe(tpc__kafka_scram_t *s);

/* Ask @boot where the transaction coordinator of @txn_id is: its @host (@cap bytes) and @port;
 * @code gets the broker's error code (kafka_end_txn.c). */
tpc_error_t *tpc__kafka_find_coordinator(tpc__kafka_conn_t *boot, const char *txn_id,
                                         int64_t deadline_ms, char *host, size_t cap, int *port,
                                         int *code);

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
 * error (TPC_ERR_TIMEOUT, TPC_ERR_CONNECT, TPC_ERR_EXTERNAL, TPC_ERR_UNSUPPORTED, TPC_ERR_CONFIG)
 * when it never did; @broker_code gets the last broker error code seen. */
tpc_error_t *tpc__kafka_end_txn(const tpc__kafka_wire_conf_t *conf, const char *txn_id, int64_t pid,
                                int16_t epoch, bool commit, int timeout_ms,
                                tpc__kafka_end_result_t *result, int *broker_code);

/* kafka_admin.c: what the transaction coordinators know, for the `twopc` command. */
typedef struct {
    char id[256]; /* transactional id; its first 255 bytes when id_cut */
    bool id_cut;  /* longer than 255 bytes (no id of twopc's: shown cut, never acted on) */
    int64_t producer_id;
    int producer_epoch; /* -1 until described */
    char state[32];     /* Ongoing, PrepareCommit, CompleteAbort, Empty, ... */
    int32_t timeout_ms;
    int64_t start_ms; /* -1 when no transaction is open */
    char topics[512]; /* "topic[0,1],other[3]" of an open transaction, truncated */
    int error;        /* broker error code of DescribeTransactions, 0 for none */
} tpc__kafka_txn_info_t;

/* ListTransactions on every broker of the cluster (each coordinates its share of the ids), then
 * DescribeTransactions at each id's coordinator. Only ids starting with @prefix (NULL: all);
 * @open_only drops those with no open transaction (Empty, CompleteCommit, CompleteAbort, Dead).
 * *out (sorted by id) is the caller's to free(). */
tpc_error_t *tpc__kafka_list_transactions(const tpc__kafka_wire_conf_t *conf, const char *prefix,
                                          bool open_only, int timeout_ms,
                                          tpc__kafka_txn_info_t **out, size_t *n);
/* kafka_producers.c: one active producer of a partition, as its leader describes it. */
typedef struct {
    int64_t producer_id;
    int32_t producer_epoch;
    int32_t last_sequence;
    int64_t last_timestamp;    /* ms since the epoch, -1 unknown */
    int32_t coordinator_epoch; /* of the last transaction marker it wrote there, -1 none */
    int64_t txn_start_offset;  /* first offset of its open transaction there, -1 none */
} tpc__kafka_producer_info_t;

/* DescribeProducers of @topic's @partition at its leader (found with Metadata), retried while the
 * leadership moves; *@out (malloc'd, @n entries, freed by the caller) the active producers. */
tpc_error_t *tpc__kafka_describe_producers(const tpc__kafka_wire_conf_t *conf, const char *topic,
                                           int32_t partition, int timeout_ms,
                                           tpc__kafka_producer_info_t **out, size_t *n);
/* Abort producer @pid's open transaction on @topic's @partition by writing the abort marker at
 * the partition's leader (WriteTxnMarkers, as Kafka's kafka-transactions.sh abort does), with the
 * producer's @epoch and a @coordinator_epoch not below the last one the partition saw for it. */
tpc_error_t *tpc__kafka_abort_on_partition(const tpc__kafka_wire_conf_t *conf, const char *topic,
                                           int32_t partition, int64_t pid, int16_t epoch,
                                           int32_t coordinator_epoch, int timeout_ms);
/* The number of partitions of @topic, from Metadata. */
tpc_error_t *tpc__kafka_partition_count(const tpc__kafka_wire_conf_t *conf, const char *topic,
                                        int timeout_ms, int32_t *count);
/* DescribeTransactions for one id at its coordinator; with @conf->coords on the connection kept
 * to it, which the call keeps there for the next one (kafka_coords.c). */
tpc_error_t *tpc__kafka_describe_transaction(const tpc__kafka_wire_conf_t *conf, const char *id,
                                             int timeout_ms, tpc__kafka_txn_info_t *out);

/* kafka_coords.c. new: NULL when out of memory (a NULL cache keeps nothing); free closes every
 * kept connection. */
tpc__kafka_coords_t *tpc__kafka_coords_new(void);
void tpc__kafka_coords_free(tpc__kafka_coords_t *k);
/* The kept connection to the coordinator of @id, or NULL (none kept, or @k NULL). */
tpc__kafka_conn_t *tpc__kafka_coords_get(tpc__kafka_coords_t *k, const char *id);
/* Note @host:@port as the coordinator of @id and keep @conn, a connection to it: @returns true
 * when @k took @conn, false when the caller still owns it (a connection to that broker is kept
 * already, @k is NULL, or memory ran out). */
bool tpc__kafka_coords_keep(tpc__kafka_coords_t *k, const char *id, const char *host, int port,
                            tpc__kafka_conn_t *conn);
/* Forget the coordinator of @id and close the connection kept to it. */
void tpc__kafka_coords_drop(tpc__kafka_coords_t *k, const char *id);
/* Connections @k has taken so far. */
uint64_t tpc__kafka_coords_opened(const tpc__kafka_coords_t *k);

/* kafka_proof.c: what became of one transaction, named by its id, producer id, epoch and the
 * coordinator's start time (-1: unnamed, as in handles of earlier versions), judged from what
 * DescribeTransactions says of the id now. */
typedef enum {
    TPC__KAFKA_FATE_OPEN,      /* that transaction, Ongoing */
    TPC__KAFKA_FATE_COMMITTED, /* that transaction, PrepareCommit or CompleteCommit */
    TPC__KAFKA_FATE_ABORTED,   /* that transaction, PrepareAbort, CompleteAbort or being fenced */
    TPC__KAFKA_FATE_GONE,      /* the id carries another transaction now, or none the coordinator
                                  knows: what became of this one cannot be told */
} tpc__kafka_fate_t;
tpc__kafka_fate_t tpc__kafka_txn_fate(const tpc__kafka_txn_info_t *now, int64_t pid, int16_t epoch,
                                      int64_t start_ms);
/* "ID (producer id P, epoch E, begun 2026-12-04T10:00:00.123Z)" into @buf. */
void tpc__kafka_txn_name(char *buf, size_t cap, const char *id, int64_t pid, int epoch,
                         int64_t start_ms);
/* The TPC_ERR_DATA_LOSS error for a transaction whose commit cannot be shown, with what the
 * coordinator holds (@now) and, when not NULL, @what the transaction was for. */
tpc_error_t *tpc__kafka_txn_lost(const tpc__kafka_txn_info_t *now, int64_t pid, int16_t epoch,
                                 int64_t start_ms, const char *what);
/* Commit the named transaction and prove it: NULL only when DescribeTransactions shows this very
 * transaction PrepareCommit or CompleteCommit. An Ongoing one is sent EndTxn(commit) (at most a
 * few times) and described again; @ended_here says whether that happened. An unnamed transaction
 * (*@start_ms < 0) is named by the start time of the open transaction of @pid / @epoch, and
 * *@start_ms set; an unnamed one that is no longer open cannot be proven. Anything else is
 * TPC_ERR_DATA_LOSS (tpc__kafka_txn_lost()); no answer within @timeout_ms an error of its own. */
tpc_error_t *tpc__kafka_prove_commit(const tpc__kafka_wire_conf_t *conf, const char *id,
                                     int64_t pid, int16_t epoch, int64_t *start_ms, int timeout_ms,
                                     const char *what, bool *ended_here);

/* kafka_props.c: librdkafka properties as users give them, shared by the sink and the source.
 * The longest transactional id the sink and the tools handle. */
#define TPC__KAFKA_ID_MAX 200

/* kafka_props.c: set @name on @rc; a refusal is a configuration error with @hint. */
tpc_error_t *tpc__kafka_conf_set(rd_kafka_conf_t *rc, const char *name, const char *value,
                                 const char *hint);
/* Check a property as it is set: librdkafka takes it, and so does the recovery client. */
tpc_error_t *tpc__kafka_prop_check(const char *name, const char *value, const char *hint);
/* The librdkafka properties of a sink or a source: pairs name, value in one array. */
tpc_error_t *tpc__kafka_props_add(char ***props, size_t *nprops, const char *name,
                                  const char *value);
void tpc__kafka_props_free(char **props, size_t nprops);

/* kafka_logq.c: librdkafka's log line @line of @facility, as it should reach the job's log, into
 * @out: @returns true when it is to be held back (one like it was logged within the last 10 s; it
 * is counted, and the next one logged says how many); with @security_protocol plaintext (or NULL,
 * librdkafka's default) librdkafka's guess that a dropped connection is a TLS listener is left
 * out. Any thread. */
bool tpc__kafka_log_quiet(const char *facility, const char *line, const char *security_protocol,
                          char *out, size_t cap);

#endif /* TPC_KAFKA_WIRE_H */
