/**
 * @file tpc_kafka.h
 * @brief twopc Kafka connector: an exactly-once Kafka sink on the two-phase-commit framework, a
 * way to end the transaction of a crashed producer, and a replayable Kafka source.
 *
 * The sink writes each subtask's records of one checkpoint into one Kafka transaction, flushes it
 * at the checkpoint (every delivery report must be a success) and commits it once the checkpoint
 * is complete. After a crash between a checkpoint's completion and the commit, the restored
 * transaction is committed by sending EndTxn straight to the transaction coordinator with the
 * stored transactional id, producer id and epoch, before any producer touches that id; librdkafka
 * itself cannot, since initialising a producer with the id aborts the transaction. See
 * docs/kafka.md for broker settings, transaction timeouts and how transactional ids are reused.
 *
 * Threads: configure on one thread before tpc_txn_sink_add_to_job(); the subtasks then run on
 * their own threads (see tpc_txn.h). tpc_kafka_end_transaction() may be called from any thread.
 */
#ifndef TPC_KAFKA_H
#define TPC_KAFKA_H

#include "tpc_txn.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Make a new Kafka sink.
 *
 * The result is a tpc_txn_sink_t: configure it with tpc_txn_sink_set(), add it to a job with
 * tpc_txn_sink_add_to_job(), free it with tpc_txn_sink_destroy() after the job. Besides the sink
 * keys of tpc_txn_sink_set() (`guarantee` among them) it takes kafka.<property> (any librdkafka
 * producer property), topic, transactional.id.prefix (required for exactly-once),
 * transactional.id.pool-size, checkpoint.interval.ms, open.timeout.ms and recovery.timeout.ms:
 * docs/configuration.md, generated from tpc_kafka_sink_properties().
 *
 * Set the sink key `transaction.timeout.ms` to the same value as kafka.transaction.timeout.ms so
 * that the framework can tell an expired transaction apart in its messages.
 *
 * @param bootstrap bootstrap servers ("host:port,..."), copied; the same as
 * kafka.bootstrap.servers.
 * @param topic the topic of every record, copied; may be NULL when a mapper names the topics.
 * @param[out] out the new sink, owned by the caller.
 * @returns NULL, or TPC_ERR_INVALID_ARG / TPC_ERR_NOMEM.
 */
TPC_API tpc_error_t *tpc_kafka_sink_new(const char *bootstrap, const char *topic,
                                        tpc_txn_sink_t **out);

/** @returns the Kafka sink's own keys. */
TPC_API const tpc_props_t *tpc_kafka_sink_properties(void);

/** @returns the Kafka sink's connector table, to describe the handles of its transactions in a
 * checkpoint (tpc_txn_describe_handle()): the line names the transaction as messages do, the
 * values are transactional_id, producer_id, producer_epoch and transaction_start_ms (the
 * coordinator's start time naming it, -1 in handles of earlier versions). Make sinks with
 * tpc_kafka_sink_new(), not from this table. */
TPC_API const tpc_txn_connector_ops_t *tpc_kafka_sink_ops(void);

/** A message header: the runtime's record header (name and name_len, value and value_len, a NULL
 * value for a null one). Bytes are borrowed. */
typedef tpc_header_t tpc_kafka_header_t;

/** What the sink produces for one record. Everything is borrowed and must stay valid until the
 * mapper is called again on the same subtask, or the write call returns. */
typedef struct {
    const char *topic; /**< NULL: the sink's topic */
    int32_t partition; /**< -1 (preset): the partitioner decides (murmur2_random by default) */
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    int64_t timestamp; /**< milliseconds since the epoch; 0: now */
    const tpc_kafka_header_t *headers;
    size_t header_count;
} tpc_kafka_message_t;

/**
 * Turn a record into a Kafka message. @p out comes filled from the record (key, value,
 * timestamp, headers, no topic, partition -1); change what is needed. Called on the subtasks'
 * threads, several at once: @p opaque must be safe to share.
 * @returns NULL, or an error that fails the subtask.
 */
typedef tpc_error_t *(*tpc_kafka_mapper_t)(void *opaque, const tpc_record_t *record,
                                           tpc_kafka_message_t *out);

/**
 * @brief Set how records become messages. Before tpc_txn_sink_add_to_job().
 * @param opaque borrowed, must outlive the job.
 * @returns NULL, or TPC_ERR_INVALID_ARG when @p sink is not a Kafka sink.
 */
TPC_API tpc_error_t *tpc_kafka_sink_set_mapper(tpc_txn_sink_t *sink, tpc_kafka_mapper_t mapper,
                                               void *opaque);

/**
 * @brief End the open transaction of @p transactional_id, begun by a producer that is gone, by
 * sending EndTxn to its transaction coordinator. For transactions left behind by a program that
 * cannot restore its checkpoint; docs/kafka.md says how to find the ids, producer ids and epochs.
 *
 * TLS (OpenSSL) and SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512 are used as @p props say, with
 * librdkafka's property names, exactly as the sink's recovery commits use its `kafka.` properties
 * (docs/kafka.md, "TLS and SASL").
 *
 * @param bootstrap "host:port,..." of the cluster.
 * @param props librdkafka properties without the `kafka.` prefix, as name, value, name, value, ...,
 * NULL (e.g. "security.protocol", "sasl_ssl", "sasl.mechanism", "SCRAM-SHA-512", ..., NULL);
 * NULL for plaintext. Borrowed.
 * @param producer_id, producer_epoch those of the transaction as the coordinator knows it.
 * @param commit true to commit, false to abort.
 * @param timeout_ms how long to retry coordinator moves, loading and network errors.
 * @returns for an abort: NULL when the transaction is now aborted, also when it already was;
 * TPC_ERR_STATE when it is committed. For a commit: NULL only when the coordinator describes this
 * very transaction as committed — the open transaction of @p producer_id / @p producer_epoch is
 * sent EndTxn and described again. A transaction that is no longer open cannot be told apart, by
 * producer id and epoch, from a later one of the same producer: then TPC_ERR_STATE when the id's
 * last transaction is committed (name the transaction with tpc_kafka_commit_transaction()), and
 * TPC_ERR_DATA_LOSS when the coordinator aborted it or no longer knows it. TPC_ERR_TIMEOUT,
 * TPC_ERR_CONNECT, TPC_ERR_EXTERNAL or TPC_ERR_UNSUPPORTED when the coordinator never gave a
 * definite answer.
 */
TPC_API tpc_error_t *tpc_kafka_end_transaction(const char *bootstrap, const char *const *props,
                                               const char *transactional_id, int64_t producer_id,
                                               int16_t producer_epoch, bool commit, int timeout_ms);

/**
 * @brief Commit one transaction named by its coordinator's start time, and prove it.
 *
 * A transaction is named by its transactional id, producer id, epoch and @p start_ms, the
 * coordinator's transactionStartTimeMs (DescribeTransactions; `twopc kafka transactions` shows it
 * as START MS): only this transaction has it. An open one is sent EndTxn(commit); then, and for
 * one already ended, what the coordinator describes decides.
 *
 * @param start_ms the transaction's start time in ms since the epoch, or -1 as in
 * tpc_kafka_end_transaction().
 * @returns NULL when the coordinator shows this transaction committed (by this call or before);
 * TPC_ERR_DATA_LOSS when it shows it aborted, or shows another transaction on the id (whether this
 * one committed can no longer be told), or no longer knows the id; the errors of
 * tpc_kafka_end_transaction() when it gave no definite answer.
 */
TPC_API tpc_error_t *tpc_kafka_commit_transaction(const char *bootstrap, const char *const *props,
                                                  const char *transactional_id, int64_t producer_id,
                                                  int16_t producer_epoch, int64_t start_ms,
                                                  int timeout_ms);

/* ------------------------------------------------------------------------------------------ */
/** @name Kafka source
 * A replayable source: each subtask reads the partitions it owns with
 * `isolation.level=read_committed` (so records of aborted or still open transactions are never
 * seen) and keeps, in its checkpoint state, the next offset to read of every partition. A restore
 * resumes right after the last record the restored checkpoint includes, so a job whose sinks are
 * exactly-once sees every committed input record exactly once. Partitions are assigned by the
 * source itself (no consumer group rebalancing): partition p of topic t belongs to subtask
 * (FNV-1a-32(t) + p) mod parallelism, on a fresh start, after a restore at any parallelism, and
 * for partitions discovered later. An unbounded source looks at its topics every
 * partition.discovery.interval.ms and reads partitions that appeared, and topics that match a
 * pattern (a topic beginning with '^' is a POSIX extended regular expression), from their first
 * offsets (docs/kafka.md).
 *
 * Records carry the message's key, value, timestamp (milliseconds since the epoch; 0 when the
 * message has none) and headers.
 *
 * Threads: configure on one thread before tpc_kafka_source_add_to_job(); the subtasks then read
 * the configuration from their own threads, so it must not change, and must outlive the job.
 * @{ */

/** A Kafka source's configuration. Opaque. */
typedef struct tpc_kafka_source_s tpc_kafka_source_t;

/**
 * @brief Make a new Kafka source reading @p topic.
 * @param bootstrap bootstrap servers ("host:port,..."), copied; the same as
 * kafka.bootstrap.servers.
 * @param topic the topic to read, or several separated by commas ("orders,refunds"), or, when
 * it begins with '^', a POSIX extended regular expression that whole topic names must match
 * ("^orders-.*"; names beginning with "__" never match); copied.
 * @param[out] out the new source, owned by the caller (tpc_kafka_source_destroy() after the job).
 * @returns NULL, or TPC_ERR_INVALID_ARG (also for an empty name in the list, or an invalid
 * pattern) / TPC_ERR_NOMEM.
 */
TPC_API tpc_error_t *tpc_kafka_source_new(const char *bootstrap, const char *topic,
                                          tpc_kafka_source_t **out);

/**
 * @brief Set a configuration key, on the configuring thread, before tpc_kafka_source_add_to_job().
 * @p key and @p value are copied or parsed, not kept. The keys (kafka.<property>, bounded, start,
 * start.fallback, max.batch, poll.timeout.ms, open.timeout.ms) are in docs/configuration.md,
 * generated from tpc_kafka_source_properties(). isolation.level, enable.auto.commit,
 * enable.auto.offset.store and enable.partition.eof are the source's and are refused; with
 * kafka.group.id set, the offsets of each completed checkpoint are committed to that group
 * (monitoring only). A restore always resumes at the checkpoint's offsets, whatever start says.
 *
 * @returns NULL, or TPC_ERR_CONFIG for a bad value or an unknown key.
 */
TPC_API tpc_error_t *tpc_kafka_source_set(tpc_kafka_source_t *src, const char *key,
                                          const char *value);

/**
 * @brief Set the keys that @p cfg holds for the component named @p name (its section [name] of
 * a file, its `TWOPC_<NAME>__<KEY>` environment variables; tpc_props.h) through
 * tpc_kafka_source_set(), before tpc_kafka_source_add_to_job(). Give the name the source's
 * vertex will have.
 * @returns NULL, or TPC_ERR_CONFIG starting with the file and line or the variable's name.
 */
TPC_API tpc_error_t *tpc_kafka_source_configure(tpc_kafka_source_t *src, tpc_config_t *cfg,
                                                const char *name);

/** @returns the Kafka source's keys (tpc_kafka_source_set()). */
TPC_API const tpc_props_t *tpc_kafka_source_properties(void);

/**
 * @brief Add the source to @p job as a vertex named @p name with @p parallelism subtasks.
 * The source is borrowed: it must outlive the job and stay unchanged while it runs. The vertex
 * name identifies the source's state on restore; keep it stable. The source's figures (lag,
 * read-ahead queue, partitions, fetcher wake-ups) go to the job's metrics endpoint, labelled
 * source="<name>" (docs/metrics.md); the source keeps their storage until it is destroyed.
 * @param[out] vertex_id the new vertex's id, for tpc_job_connect().
 * @returns NULL, or the error of tpc_job_add_vertex().
 */
TPC_API tpc_error_t *tpc_kafka_source_add_to_job(tpc_kafka_source_t *src, tpc_job_t *job,
                                                 const char *name, int parallelism, int *vertex_id);

/** @brief Free a source whose jobs are done (job thread). NULL is fine. */
TPC_API void tpc_kafka_source_destroy(tpc_kafka_source_t *src);

/** @} */

#ifdef __cplusplus
}
#endif
#endif /* TPC_KAFKA_H */
