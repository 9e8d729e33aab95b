/**
 * @file tpc_pg.h
 * @brief twopc exactly-once PostgreSQL sink: rows that appear in a table once their checkpoint is
 * complete, each record exactly once.
 *
 * Each sink subtask holds two connections. On the data connection it writes the records between
 * two checkpoints in one transaction: `BEGIN`, the rows (binary `COPY`, batched `INSERT`, or for
 * upserts and changelogs `COPY` into a staging table merged at the checkpoint), a marker row naming
 * the transaction in a marker table, and at the checkpoint `PREPARE TRANSACTION '<gid>'`, which
 * makes the rows durable but invisible. Once the checkpoint is complete, the control connection
 * runs `COMMIT PREPARED '<gid>'`. A transaction into which nothing was written costs no statement
 * at all. The gid is
 *
 *     <prefix>:<subtask>:<parallelism>:<checkpoint>
 *
 * (and ":e<owner epoch>" after it when the job runs with checkpoint.owner=claim)
 * (at most TPC_PG_GID_MAX bytes), where checkpoint is the first checkpoint the transaction could
 * belong to. After a crash, pending transactions of the restored checkpoint are committed (a gid
 * already committed is recognised by its marker row; one that is gone without a marker is reported
 * as data loss), and prepared transactions of this sink that no checkpoint will commit are rolled
 * back; gids of other prefixes are never touched.
 *
 * Servers without prepared transactions (max_prepared_transactions = 0, the default) get the
 * write-ahead commit (pg.commit=write-ahead, or auto): at the checkpoint the rows are committed
 * into a write-ahead table, and once the checkpoint is complete one local transaction moves them
 * into their tables and writes the marker row, whose key makes the move happen once. at-least-once
 * needs neither: it commits at each checkpoint. See docs/postgres.md.
 *
 * By default a record's key goes to the first column (bytea) and its value to the second (bytea
 * or text). tpc_pg_sink_set_encoder() maps records to rows of any shape, and, with
 * tpc_pg_row_op() and tpc_pg_row_table(), to deletes and upserts (pg.mode=changelog), to rows of
 * several tables committed together (pg.table lists them), or to nothing.
 *
 * Threads: configure on one thread, before tpc_txn_sink_add_to_job(); the sink's subtasks then run
 * on their own threads (see tpc_txn.h). Encoders run on those threads, several at once.
 */
#ifndef TPC_PG_H
#define TPC_PG_H

#include "tpc_txn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Longest gid PostgreSQL accepts, in bytes. */
#define TPC_PG_GID_MAX 199

/**
 * @brief Make a new PostgreSQL sink. Nothing is contacted until the job opens it.
 *
 * The result is a tpc_txn_sink_t: configure it with tpc_txn_sink_set(), add it to a job with
 * tpc_txn_sink_add_to_job(), free it with tpc_txn_sink_destroy() after the job. Besides the sink
 * keys of tpc_txn_sink_set() it takes pg.conninfo and pg.table (both required), pg.columns,
 * pg.mode, pg.commit, pg.key-columns, pg.tombstone, pg.gid-prefix, pg.batch-size, pg.copy-buffer,
 * pg.marker-table, pg.write-ahead-table, pg.connect.deadline.ms and pg.connect.backoff.ms:
 * docs/configuration.md, generated from tpc_pg_sink_properties().
 *
 * Commits that fail because the connection was lost are retried per the sink's commit.retry.* keys.
 *
 * @param[out] out the new sink, owned by the caller.
 * @returns NULL, or TPC_ERR_INVALID_ARG / TPC_ERR_NOMEM.
 */
TPC_API tpc_error_t *tpc_pg_sink_new(tpc_txn_sink_t **out);

/** @returns the PostgreSQL sink's own keys. */
TPC_API const tpc_props_t *tpc_pg_sink_properties(void);

/**
 * A row under construction. An encoder appends one value per target column, in column order, with
 * the tpc_pg_row_*() functions. Each value must suit its column's type (checked: a mismatch fails
 * the write with an error naming the column). The builder writes PostgreSQL's binary format
 * directly into the COPY stream or the statement's parameters.
 */
typedef struct tpc_pg_row tpc_pg_row_t;

/**
 * Turn @p record into one row of @p row (or several, of several tables: tpc_pg_row_table(); or
 * none: tpc_pg_row_op() with TPC_PG_OP_SKIP). Called on the subtasks' threads, several at once:
 * @p opaque must be safe to share. @p record is valid during the call only.
 * @returns NULL, or an error that fails the write (the encoder's to give away).
 */
typedef tpc_error_t *(*tpc_pg_encoder_t)(void *opaque, const tpc_record_t *record,
                                         tpc_pg_row_t *row);

/**
 * @brief Replace the default mapping (key → first column, value → second). Before
 * tpc_txn_sink_add_to_job().
 * @param sink a sink made by tpc_pg_sink_new().
 * @param encoder the encoder, or NULL for the default.
 * @param opaque passed to @p encoder; borrowed, must outlive the job.
 * @returns NULL, or TPC_ERR_INVALID_ARG when @p sink is not a PostgreSQL sink.
 */
TPC_API tpc_error_t *tpc_pg_sink_set_encoder(tpc_txn_sink_t *sink, tpc_pg_encoder_t encoder,
                                             void *opaque);

/** @name Reading what a PostgreSQL sink left behind
 * For tools that look at a sink's transactions from outside a job (the `twopc` command).
 * @{ */

/**
 * @brief Parse the gid @p gid of a sink whose gid prefix is @p prefix:
 * "<prefix>:<subtask>:<parallelism>:<checkpoint>". A gid of a sink whose prefix merely starts the
 * same way is not taken. Any thread.
 * @returns true, with the three numbers set, when @p gid is one of that sink's gids.
 */
TPC_API bool tpc_pg_parse_gid(const char *gid, const char *prefix, int *subtask, int *parallelism,
                              uint64_t *checkpoint);
/**
 * @brief As tpc_pg_parse_gid(), and the owner epoch: a job with checkpoint.owner=claim ends its
 * gids with ":e<epoch>" ("<prefix>:<subtask>:<parallelism>:<checkpoint>:e<epoch>"); *epoch is 0
 * for a gid without one.
 */
TPC_API bool tpc_pg_parse_gid_epoch(const char *gid, const char *prefix, int *subtask,
                                    int *parallelism, uint64_t *checkpoint, uint64_t *epoch);

/** @brief Mask in @p msg (in place; it never grows) every password that @p conninfo holds or
 * seems to hold, as the sink does in each message that quotes libpq. Any thread. */
TPC_API void tpc_pg_hide_secrets(const char *conninfo, char *msg);

/** @returns the PostgreSQL sink's connector table, to describe the handles of its transactions
 * in a checkpoint (tpc_txn_describe_handle(): the line is the gid, the value "gid" too). Make
 * sinks with tpc_pg_sink_new(), not from this table. */
TPC_API const tpc_txn_connector_ops_t *tpc_pg_sink_ops(void);

/** @} */

/** @name Operations and tables
 * What a row does, and where it goes. Call them from an encoder, before the row's values.
 * @{ */

/** What a row does to its table. */
typedef enum {
    TPC_PG_OP_DEFAULT = 0, /**< the mode's: insert (copy, insert), upsert (upsert, changelog) */
    TPC_PG_OP_INSERT = 1,  /**< a new row (applied as an upsert in upsert and changelog modes) */
    TPC_PG_OP_UPSERT = 2,  /**< the row of its key is now this one (upsert, changelog) */
    TPC_PG_OP_DELETE = 3,  /**< the row of its key goes (changelog); only the key columns count,
                                the other values may be NULL */
    TPC_PG_OP_SKIP = 4     /**< no row: the record is dropped (every mode) */
} tpc_pg_op_t;

/**
 * @brief Set what the record's row does (the current row; with several tables, each row of the
 * record its own). A delete or upsert in a mode that cannot apply it fails the write, naming
 * pg.mode. A record whose value is null (a Kafka tombstone) starts as TPC_PG_OP_DELETE when
 * pg.tombstone=delete.
 */
TPC_API void tpc_pg_row_op(tpc_pg_row_t *row, tpc_pg_op_t op);

/**
 * @brief Send the row to table @p table of pg.table's list (0 = the first, which a record starts
 * with). Called after values, it finishes that row and starts another one, of the same record, for
 * @p table: one record may give a row to each of several tables. An index outside the list fails
 * the write with a message naming the tables.
 */
TPC_API void tpc_pg_row_table(tpc_pg_row_t *row, int table);

/** @} */

/** @name Row values
 * Append the next column's value. A wrong type, or more values than columns, makes the row
 * invalid: the write then fails with a message naming the column and both types.
 * @{ */
TPC_API void tpc_pg_row_null(tpc_pg_row_t *row);
/** smallint */
TPC_API void tpc_pg_row_int2(tpc_pg_row_t *row, int16_t v);
/** integer */
TPC_API void tpc_pg_row_int4(tpc_pg_row_t *row, int32_t v);
/** bigint */
TPC_API void tpc_pg_row_int8(tpc_pg_row_t *row, int64_t v);
/** real */
TPC_API void tpc_pg_row_float4(tpc_pg_row_t *row, float v);
/** double precision */
TPC_API void tpc_pg_row_float8(tpc_pg_row_t *row, double v);
/** numeric, from its decimal text: `-12.340`, `1e-5`, `NaN` (NUL-terminated) */
TPC_API void tpc_pg_row_numeric(tpc_pg_row_t *row, const char *decimal);
/** text, varchar, char, json or jsonb: @p len bytes of UTF-8 (or the database encoding) */
TPC_API void tpc_pg_row_text(tpc_pg_row_t *row, const char *s, size_t len);
/** bytea */
TPC_API void tpc_pg_row_bytea(tpc_pg_row_t *row, const void *bytes, size_t len);
/** boolean */
TPC_API void tpc_pg_row_bool(tpc_pg_row_t *row, bool v);
/** timestamptz: microseconds since 1970-01-01 00:00:00 UTC */
TPC_API void tpc_pg_row_timestamptz(tpc_pg_row_t *row, int64_t unix_us);
/** jsonb or json: the JSON document's text */
TPC_API void tpc_pg_row_jsonb(tpc_pg_row_t *row, const char *json, size_t len);
/** @} */

#ifdef __cplusplus
}
#endif
#endif /* TPC_PG_H */
