/**
 * @file tpc_file.h
 * @brief twopc exactly-once file sink: files in a folder that appear once their checkpoint is
 * complete, each record exactly once.
 *
 * Each subtask writes each transaction (the records between two checkpoints) into hidden
 * in-progress files in the target folder,
 * `.<prefix>-<subtask>-<checkpoint>-<token>-<part>.inprogress`. At the checkpoint they are flushed
 * and fsynced; once the checkpoint is complete they are renamed to their final names
 *
 *     <prefix>-<subtask>-<checkpoint>-<part><suffix>
 *
 * (checkpoint zero-padded to at least 10 digits, part to 4, so the files of one subtask sort in
 * the order they were committed) and the folder is fsynced. With the guarantees at-least-once and
 * none, final names also carry the token before the part number. A part file holds at most
 * `file.part-size` bytes, unless one record alone is larger. Readers should ignore names starting
 * with a dot. After a crash, the restored checkpoint's files are renamed if they were not yet, and
 * in-progress files of this sink that no checkpoint will commit are deleted. See docs/file-sink.md.
 *
 * By default a record's bytes in the file are its value followed by a newline ('\n'); the key and
 * the timestamp are not written. tpc_file_sink_set_encoder() changes that.
 *
 * Threads: configure on one thread, before tpc_txn_sink_add_to_job(); the sink's subtasks then run
 * on their own threads (see tpc_txn.h).
 */
#ifndef TPC_FILE_H
#define TPC_FILE_H

#include "tpc_txn.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Make a new file sink writing into folder @p dir, which must exist and be writable.
 *
 * The result is a tpc_txn_sink_t: configure it with tpc_txn_sink_set(), add it to a job with
 * tpc_txn_sink_add_to_job(), read its statistics with tpc_txn_sink_get_stats(), free it with
 * tpc_txn_sink_destroy() after the job. Besides the sink keys of tpc_txn_sink_set() it takes
 * file.prefix, file.suffix, file.part-size and file.buffer-size (docs/configuration.md, generated
 * from tpc_file_sink_properties()). Sinks sharing a folder need distinct prefixes.
 *
 * @param dir the folder, copied.
 * @param[out] out the new sink, owned by the caller.
 * @returns NULL, or TPC_ERR_CONFIG / TPC_ERR_IO naming the folder and what is wrong with it.
 */
TPC_API tpc_error_t *tpc_file_sink_new(const char *dir, tpc_txn_sink_t **out);

/** @returns the file sink's own keys. */
TPC_API const tpc_props_t *tpc_file_sink_properties(void);

/** @returns the file sink's connector table, to describe the handles of its transactions in a
 * checkpoint (tpc_txn_describe_handle(): subtask, part files and token, no values). Make sinks
 * with tpc_file_sink_new(), not from this table. */
TPC_API const tpc_txn_connector_ops_t *tpc_file_sink_ops(void);

/**
 * Turn a record into the bytes written for it. Write them into @p buf only if they fit in @p cap
 * bytes; always return how many bytes the record needs. When that is more than @p cap, the sink
 * calls again with a buffer of at least that size. Called on the subtasks' threads, several at
 * once: @p opaque must be safe to share. @p record is valid during the call only.
 */
typedef size_t (*tpc_file_encoder_t)(void *opaque, const tpc_record_t *record, void *buf,
                                     size_t cap);

/**
 * @brief Replace the default encoding (value + '\n'). Before tpc_txn_sink_add_to_job().
 * @param sink a sink made by tpc_file_sink_new().
 * @param encoder the encoder, or NULL for the default.
 * @param opaque passed to @p encoder; borrowed, must outlive the job.
 * @returns NULL, or TPC_ERR_INVALID_ARG when @p sink is not a file sink.
 */
TPC_API tpc_error_t *tpc_file_sink_set_encoder(tpc_txn_sink_t *sink, tpc_file_encoder_t encoder,
                                               void *opaque);

#ifdef __cplusplus
}
#endif
#endif /* TPC_FILE_H */
