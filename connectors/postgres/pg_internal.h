/*
 * Private to connectors/postgres: the sink's configuration, a subtask's instance with its two
 * connections, the transaction handle, and the row builder. Split over pg_sink.c (configuration and
 * the ops table), pg_conn.c (connections, errors, the checks at open), pg_row.c (binary encoding of
 * values), pg_txn.c (writing and preparing a transaction), pg_insert.c (insert and upsert batches)
 * and pg_commit.c (commit, recovery and cleanup, which work from a handle alone, possibly written
 * by another process).
 */
#ifndef TPC_PG_INTERNAL_H
#define TPC_PG_INTERNAL_H

#include "tpc_pg.h"

#include <libpq-fe.h>

#define TPC__PG_PREFIX_MAX 128

typedef enum { TPC__PG_COPY = 0, TPC__PG_INSERT = 1, TPC__PG_UPSERT = 2 } tpc__pg_mode_t;

typedef struct {
    char *conninfo;
    char *conninfo_safe; /* without passwords: the only form that goes into messages */
    char *table;
    char *columns;     /* comma-separated, NULL = every column */
    char *key_columns; /* comma-separated */
    char *marker_table;
    char gid_prefix[TPC__PG_PREFIX_MAX + 1]; /* empty = derived from job and sink names */
    tpc__pg_mode_t mode;
    size_t batch_size;
    size_t copy_buffer;
    uint64_t connect_deadline_ms;
    uint64_t connect_backoff_ms;
    tpc_pg_encoder_t encode; /* NULL: key → first column, value → second */
    void *encode_opaque;
} tpc__pg_conf_t;

typedef struct {
    char *name;
    Oid type; /* base type for domains */
    char *type_name;
    int attnum;
    bool key; /* upsert conflict column */
} tpc__pg_col_t;

struct tpc_pg_row {
    unsigned char *buf; /* the connection's send buffer; the row is appended at its end */
    size_t len;
    size_t cap;
    size_t start; /* where the row being built starts */
    int nfields;
    const tpc__pg_col_t *cols;
    int ncols;
    char why[256]; /* first mistake in this row, "" if none */
};

typedef struct {
    const tpc__pg_conf_t *conf;
    const tpc_txn_subtask_t *st;
    PGconn *data;    /* BEGIN .. PREPARE TRANSACTION */
    PGconn *control; /* COMMIT / ROLLBACK PREPARED and lookups, never inside a transaction */
    char prefix[TPC__PG_PREFIX_MAX + 1];
    tpc__pg_col_t *cols;
    int ncols;
    char *table_q;  /* quoted, schema-qualified if given so */
    char *marker_q; /* quoted marker table */
    char *copy_sql;
    char *insert_sql;    /* insert / upsert of a full batch, prepared as "tpc_batch" */
    int insert_rows;     /* rows per full batch */
    tpc_pg_row_t row;    /* send buffer: COPY tuples, or the tuples of the next INSERT batch */
    const char **values; /* parameters of one batch: insert_rows * ncols each */
    int *lengths;
    int *formats;
    Oid *types;
    uint32_t *seen; /* upsert: hash slots of the batch's keys (2 * insert_rows, power of two) */
    size_t seen_cap;
    size_t rows; /* tuples in the buffer */
    bool in_txn; /* BEGIN was sent on the data connection */
    bool in_copy;
    int prepared_here;       /* prepared by this instance and not yet committed */
    uint64_t committed_ckpt; /* highest checkpoint committed by this instance */
    uint64_t marker_floor;   /* markers up to this checkpoint can no longer be asked for */
    uint64_t marker_swept;   /* the floor the last cleanup used */
    bool value_is_text;      /* default mapping: second column is text-like */
} tpc__pg_conn_t;

typedef struct {
    int subtask;         /* of the subtask that began it */
    int parallelism;     /* of the run that began it */
    uint64_t begin_ckpt; /* lowest checkpoint it can be pre-committed in; named in the gid */
    uint64_t ckpt;       /* checkpoint it was pre-committed in; 0 before */
    uint64_t floor;      /* committed_ckpt at its pre-commit (marker cleanup) */
    bool written;
    bool local; /* prepared by this instance (not restored): counts in prepared_here */
    char gid[TPC_PG_GID_MAX + 1];
} tpc__pg_txn_t;

extern const tpc_txn_connector_ops_t tpc__pg_ops;

/* pg_conn.c */
tpc_error_t *tpc__pg_connect(const tpc__pg_conf_t *conf, const tpc_txn_subtask_t *st,
                             const char *role, PGconn **out);
/* An error from a failed result (or a lost connection); @what says what was tried. Connection
 * failures are flagged retriable. Takes @res. */
tpc_error_t *tpc__pg_result_error(PGconn *pg, PGresult *res, const char *what);
/* Run @sql with text parameters; @returns the error, or NULL with *@res (may be NULL) set. */
tpc_error_t *tpc__pg_exec(PGconn *pg, const char *sql, int n, const char *const *params,
                          const char *what, PGresult **res);
bool tpc__pg_sqlstate_is(const PGresult *res, const char *state);
/* Quote a possibly schema-qualified name: a.b → "a"."b". malloc'd, NULL on a bad name. */
/* @returns true when @name is "table" or "schema.table" with non-empty parts. */
bool tpc__pg_name_ok(const char *name);
char *tpc__pg_quote_qualified(PGconn *pg, const char *name);
tpc_error_t *tpc__pg_check_server(tpc__pg_conn_t *c);
tpc_error_t *tpc__pg_load_columns(tpc__pg_conn_t *c);
tpc_error_t *tpc__pg_ensure_marker_table(tpc__pg_conn_t *c);
/* Make sure the control connection is usable, reconnecting once if it was lost. */
tpc_error_t *tpc__pg_control_ready(tpc__pg_conn_t *c);
void tpc__pg_free_cols(tpc__pg_col_t *cols, int n);

/* pg_row.c */
void tpc__pg_row_begin(tpc_pg_row_t *row);
/* Finish the row: @returns NULL, or the reason it is invalid (then the row is dropped). */
tpc_error_t *tpc__pg_row_end(tpc_pg_row_t *row);
bool tpc__pg_row_reserve(tpc_pg_row_t *row, size_t more);
tpc_error_t *tpc__pg_default_encoder(void *opaque, const tpc_record_t *record, tpc_pg_row_t *row);
/* Encode a decimal string as numeric's binary form into @out (at least 16 + 2 * strlen bytes).
 * @returns the length, or -1 if it is not a number. */
long tpc__pg_numeric_binary(const char *s, unsigned char *out);

/* pg_txn.c */
tpc_error_t *tpc__pg_open(void *arg, const tpc_txn_subtask_t *st, void **conn);
void tpc__pg_close(void *conn);
tpc_error_t *tpc__pg_begin(void *conn, uint64_t checkpoint_id, void **txn);
tpc_error_t *tpc__pg_write(void *conn, void *txn, const tpc_record_t *records, size_t count);
tpc_error_t *tpc__pg_flush(void *conn, void *txn);
tpc_error_t *tpc__pg_pre_commit(void *conn, void *txn, uint64_t checkpoint_id);
tpc_error_t *tpc__pg_abort(void *conn, void *txn);
bool tpc__pg_is_empty(void *conn, const void *txn);
void tpc__pg_free_txn(void *conn, void *txn);
void tpc__pg_describe(void *conn, const void *txn, char *buf, size_t cap);
tpc_error_t *tpc__pg_describe_handle(const void *bytes, size_t len, tpc_txn_handle_view_t *out);
tpc_error_t *tpc__pg_serialize(void *conn, const void *txn, tpc_txn_buf_t *out);
tpc_error_t *tpc__pg_deserialize(void *conn, const void *bytes, size_t len, void **txn);

/* pg_insert.c */
char *tpc__pg_column_list(tpc__pg_conn_t *c);
char *tpc__pg_insert_sql(tpc__pg_conn_t *c, const char *cols, int rows);
tpc_error_t *tpc__pg_prepare_batch(tpc__pg_conn_t *c);
tpc_error_t *tpc__pg_exec_buffered(tpc__pg_conn_t *c);
/* BEGIN on the data connection unless a transaction is open (pg_txn.c). */
tpc_error_t *tpc__pg_ensure_txn(tpc__pg_conn_t *c);

/* pg_secret.c: tpc_pg_hide_secrets() (tpc_pg.h). */

/* pg_commit.c */
tpc_error_t *tpc__pg_commit(void *conn, void *txn);
tpc_error_t *tpc__pg_recover_and_abort(void *conn, void *txn);
tpc_error_t *tpc__pg_abort_lingering(void *conn, const tpc_txn_lingering_t *lingering);
/* pg_commit.c also holds tpc_pg_parse_gid() (tpc_pg.h). */

#endif /* TPC_PG_INTERNAL_H */
