/*
 * Private to connectors/postgres: the sink's configuration, a subtask's instance with its two
 * connections, the transaction handle, and the row builder. Split over pg_sink.c (configuration and
 * the ops table), pg_conn.c (connections, errors, the checks at open), pg_row.c (binary encoding of
 * values and the row's operation and table), pg_write.c (the rows of a transaction: COPY streams,
 * staging and merge), pg_insert.c (insert batches), pg_txn.c (a transaction's life and
 * its prepare) and pg_commit.c (commit, recovery and cleanup, which work from a handle alone,
 * possibly written by another process); pg_staged.c holds the write-ahead commit, for servers
 * without prepared transactions.
 */
#ifndef TPC_PG_INTERNAL_H
#define TPC_PG_INTERNAL_H

#include "tpc_pg.h"

#include <libpq-fe.h>

#define TPC__PG_PREFIX_MAX 128

typedef enum {
    TPC__PG_COPY = 0,
    TPC__PG_INSERT = 1,
    TPC__PG_UPSERT = 2,
    TPC__PG_CHANGELOG = 3
} tpc__pg_mode_t;

/* pg.commit, in the order of its choices. */
typedef enum {
    TPC__PG_COMMIT_AUTO = 0,
    TPC__PG_COMMIT_PREPARED = 1,
    TPC__PG_COMMIT_WRITE_AHEAD = 2
} tpc__pg_commit_t;

/* How a transaction becomes visible: PREPARE / COMMIT PREPARED (exactly-once), staged rows moved
 * by one local transaction on notify (exactly-once, pg_staged.c), or a plain COMMIT at the
 * checkpoint (at-least-once and none, which need neither). */
typedef enum {
    TPC__PG_TXN_PREPARED = 0,
    TPC__PG_TXN_STAGED = 1,
    TPC__PG_TXN_DIRECT = 2
} tpc__pg_txn_kind_t;

/* pg.tombstone */
enum { TPC__PG_TOMBSTONE_NULL = 0, TPC__PG_TOMBSTONE_DELETE = 1 };

/* Largest part written ahead, whatever pg.copy-buffer says: a bytea value and a field libpq
 * reads back are limited to 1 GiB, and the move holds a part twice. */
#define TPC__PG_PART_MAX ((size_t)256 << 20)

/* Most tables one sink writes (pg.table's list). */
#define TPC__PG_TABLES_MAX 16

typedef struct {
    char *conninfo;
    char *conninfo_safe; /* without passwords: the only form that goes into messages */
    char *table;         /* comma-separated list of tables */
    char *columns;       /* comma-separated, one list per table apart by ';', NULL = every column */
    char *key_columns;   /* comma-separated, one list per table apart by ';' */
    char *marker_table;
    char *write_ahead_table;
    char gid_prefix[TPC__PG_PREFIX_MAX + 1]; /* empty = derived from job and sink names */
    tpc__pg_mode_t mode;
    tpc__pg_commit_t commit;
    int tombstone; /* TPC__PG_TOMBSTONE_* */
    size_t batch_size;
    size_t copy_buffer;
    uint64_t connect_deadline_ms;
    uint64_t connect_backoff_ms;
    uint64_t lock_timeout_ms; /* 0: wait for a lock as long as it takes */
    tpc_pg_encoder_t encode;  /* NULL: key → first column, value → second */
    void *encode_opaque;
} tpc__pg_conf_t;

typedef struct {
    char *name;
    Oid type; /* base type for domains */
    char *type_name;
    int attnum;
    bool key; /* upsert conflict column */
} tpc__pg_col_t;

/* A send buffer: binary COPY tuples (field count, then each field as a length and its bytes). */
typedef struct {
    unsigned char *buf;
    size_t len;
    size_t cap;
} tpc__pg_buf_t;

/* One target table of a sink and the rows of the current transaction that are not sent yet. */
typedef struct {
    char *name;    /* as configured */
    char *table_q; /* quoted, schema-qualified if given so */
    tpc__pg_col_t *cols;
    int ncols;
    int nkeys;
    bool value_is_text;  /* default mapping: second column is text-like */
    char *copy_sql;      /* copy: COPY into the table */
    char *insert_sql;    /* insert: a full batch, prepared as "tpc_batch_<index>" */
    char *cols_sql;      /* the written columns, quoted, apart by commas */
    char *keys_sql;      /* upsert, changelog: the key columns, quoted, apart by commas */
    char *match_sql;     /* changelog: " AND twopc_target.k = twopc_last.k" for each key */
    char *conflict_sql;  /* upsert, changelog: " ON CONFLICT (keys) DO ..." */
    char *schema_q;      /* upsert, changelog: the table's schema, quoted */
    char stage[48];      /* upsert, changelog: the transaction's staging table, "" before one */
    int insert_rows;     /* rows per full batch */
    tpc__pg_buf_t out;   /* tuples not sent yet */
    size_t rows;         /* tuples in out (insert); of the transaction (copy, upsert, changelog) */
    const char **values; /* parameters of one batch: insert_rows * ncols each */
    int *lengths;
    int *formats;
    Oid *types;
} tpc__pg_table_t;

/* The row an encoder builds: appended to the chosen table's buffer. A staged tuple (upsert,
 * changelog) starts with two fields of its own, the operation and its sequence number in the
 * transaction. */
struct tpc_pg_row {
    tpc__pg_table_t *tables;
    int ntables;
    tpc__pg_table_t *table; /* where the row goes */
    tpc__pg_buf_t *out;     /* table->out */
    size_t start;           /* where the row being built starts */
    int nfields;
    const tpc__pg_col_t *cols;
    int ncols;
    int op;       /* tpc_pg_op_t; TPC_PG_OP_DEFAULT until the encoder says */
    int first_op; /* op of every row of the record before the encoder says */
    int done;     /* rows of this record finished (several tables) */
    bool staged;  /* upsert, changelog: tuples go to staging tables */
    bool deletes; /* changelog: the transaction holds a delete */
    uint64_t seq; /* upsert, changelog: next sequence number in the transaction */
    tpc__pg_mode_t mode;
    char why[256]; /* first mistake in this record, "" if none */
};

typedef struct {
    const tpc__pg_conf_t *conf;
    const tpc_txn_subtask_t *st;
    PGconn *data;    /* BEGIN .. PREPARE TRANSACTION */
    PGconn *control; /* COMMIT / ROLLBACK PREPARED and lookups, never inside a transaction */
    char prefix[TPC__PG_PREFIX_MAX + 1];
    tpc__pg_table_t *tables;
    int ntables;
    tpc_pg_row_t row;        /* the encoder's builder */
    char *marker_q;          /* quoted marker table */
    uint64_t stage_id;       /* names the staging tables of the current transaction */
    int copying;             /* table whose COPY is open on the data connection, -1 none */
    bool in_txn;             /* BEGIN was sent on the data connection */
    int prepared_here;       /* prepared by this instance and not yet committed */
    uint64_t committed_ckpt; /* highest checkpoint committed by this instance */
    uint64_t marker_floor;   /* markers up to this checkpoint can no longer be asked for */
    uint64_t marker_swept;   /* the floor the last cleanup used */
    tpc__pg_txn_kind_t kind; /* how this instance's transactions commit (chosen at open) */
    bool own_locks;          /* keyed statements may meet a lock of this subtask (pg_txn.c) */
    /* write-ahead (pg_staged.c) */
    char *staging_q;                      /* quoted staging table */
    bool staging_open;                    /* the control connection is in a staging txn */
    char staging_gid[TPC_PG_GID_MAX + 1]; /* the current transaction's */
    uint32_t staged_parts;                /* of the current transaction */
    uint64_t staged_rows;                 /* of the current transaction */
    bool stage_sent;                      /* a part's INSERT is sent, its result not read */
    tpc_error_t *stage_err;               /* the first failed part's, until the next stage call */
    tpc__pg_buf_t move;                   /* the move's send buffer, kept between moves */
    uint64_t layout;                      /* hash of the mode, tables, columns and their types */
    /* owners (st->owner_epoch > 0): the cleanup at start is done, and the last checkpoint whose
     * commit rolled back the prepared gids of older owner epochs (pg_commit.c) */
    bool lingering_done;
    uint64_t older_swept;
} tpc__pg_conn_t;

typedef struct {
    int subtask;         /* of the subtask that began it */
    int parallelism;     /* of the run that began it */
    uint64_t begin_ckpt; /* lowest checkpoint it can be pre-committed in; named in the gid */
    uint64_t ckpt;       /* checkpoint it was pre-committed in; 0 before */
    uint64_t floor;      /* committed_ckpt at its pre-commit (marker cleanup) */
    bool written;
    bool local; /* prepared by this instance (not restored): counts in prepared_here */
    tpc__pg_txn_kind_t kind;
    uint32_t parts;       /* staged: parts in the staging table */
    uint64_t staged_rows; /* staged: rows over all parts */
    bool has_layout;      /* staged: handles before version 3 do not have it */
    int layout_mode;      /* staged: pg.mode its parts were written with */
    uint64_t layout;      /* staged: the writer's tpc__pg_conn_t.layout */
    char gid[TPC_PG_GID_MAX + 1];
} tpc__pg_txn_t;

extern const tpc_txn_connector_ops_t tpc__pg_ops;

/* pg_conn.c */
tpc_error_t *tpc__pg_connect(const tpc__pg_conf_t *conf, const tpc_txn_subtask_t *st,
                             const char *role, PGconn **out);
/* The session settings of a new (or reset) connection: pg.lock-timeout.ms. */
tpc_error_t *tpc__pg_session(const tpc__pg_conf_t *conf, PGconn *pg);
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
/* Read table @t's columns (@columns / @keys: its part of pg.columns / pg.key-columns, NULL for
 * none) and check them against the mode. */
tpc_error_t *tpc__pg_load_columns(tpc__pg_conn_t *c, tpc__pg_table_t *t, const char *columns,
                                  const char *keys);
/* Changelog: find table @t's schema, where its staging tables go, and check that the role may
 * create tables there. */
tpc_error_t *tpc__pg_check_stage_schema(tpc__pg_conn_t *c, tpc__pg_table_t *t);
tpc_error_t *tpc__pg_ensure_marker_table(tpc__pg_conn_t *c);
/* Make sure the sink's @what ("marker table") @name (key @key) exists and may be used, creating it
 * as "CREATE TABLE <name> @columns" and then @after (one %s for the name; NULL: none); *@quoted
 * gets its quoted name. */
tpc_error_t *tpc__pg_ensure_table(tpc__pg_conn_t *c, const char *key, const char *what,
                                  const char *name, const char *columns, const char *after,
                                  char **quoted);
/* Make sure the control connection is usable, reconnecting once if it was lost. */
tpc_error_t *tpc__pg_control_ready(tpc__pg_conn_t *c);
void tpc__pg_free_cols(tpc__pg_col_t *cols, int n);

/* pg_row.c */
/* Start the rows of record @record: into the first table, with the operation the record implies. */
void tpc__pg_row_begin(tpc_pg_row_t *row, const tpc_record_t *record, int tombstone);
/* Finish the record's rows: @returns NULL, or the reason they are invalid (then they are dropped
 * from the buffers, also the rows for other tables). */
tpc_error_t *tpc__pg_row_end(tpc_pg_row_t *row);
bool tpc__pg_buf_reserve(tpc__pg_buf_t *b, size_t more);
tpc_error_t *tpc__pg_default_encoder(void *opaque, const tpc_record_t *record, tpc_pg_row_t *row);
/* Encode a decimal string as numeric's binary form into @out (at least 16 + 2 * strlen bytes).
 * @returns the length, or -1 if it is not a number. */
long tpc__pg_numeric_binary(const char *s, unsigned char *out);

/* pg_write.c */
/* Tables, statements and buffers of a subtask whose connections are open. */
tpc_error_t *tpc__pg_open_tables(tpc__pg_conn_t *c);
void tpc__pg_close_tables(tpc__pg_conn_t *c);
/* Changelog: name the staging tables that the rows sent from now on go to after the transaction
 * @gid (the current one, or one that the write-ahead move applies). */
void tpc__pg_stage_name(tpc__pg_conn_t *c, const char *gid);
/* A new transaction named @gid, without rows. */
void tpc__pg_new_rows(tpc__pg_conn_t *c, const char *gid);
/* Forget the rows not sent (an aborted transaction). */
void tpc__pg_drop_rows(tpc__pg_conn_t *c);
/* Encode and buffer @records, sending full buffers; @returns whether any row was made. */
tpc_error_t *tpc__pg_write_rows(tpc__pg_conn_t *c, const tpc_record_t *records, size_t count,
                                bool *wrote);
tpc_error_t *tpc__pg_flush_rows(tpc__pg_conn_t *c);
/* Send every row and apply the staged changes: the transaction holds all its rows. */
tpc_error_t *tpc__pg_end_rows(tpc__pg_conn_t *c);
/* End an open COPY without its rows (abort). */
void tpc__pg_cancel_copy(tpc__pg_conn_t *c);
/* Send table @t's buffered rows now with the mode's statement: into its COPY (of the table, or of
 * its changelog staging table) or as INSERT batches. The write-ahead move sends each part read
 * back through it, then ends with tpc__pg_end_rows(). */
tpc_error_t *tpc__pg_send_rows(tpc__pg_conn_t *c, tpc__pg_table_t *t);

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
/* "a", "b" quoted; @qualifier ("t.") goes before each. malloc'd, NULL on failure. */
char *tpc__pg_column_list(tpc__pg_conn_t *c, const tpc__pg_table_t *t, const char *qualifier,
                          bool keys_only);
char *tpc__pg_insert_sql(const tpc__pg_table_t *t, const char *cols, int rows);
/* For each key column (@keys) or each other column of @t, quoted as q: @first (then @sep before
 * the next ones), q, @mid, q. "" for none; malloc'd, NULL on failure. */
char *tpc__pg_column_pairs(tpc__pg_conn_t *c, const tpc__pg_table_t *t, bool keys,
                           const char *first, const char *sep, const char *mid);
/* "ON CONFLICT (keys) DO UPDATE SET ..." (or DO NOTHING) after an INSERT into @t. */
char *tpc__pg_conflict_sql(tpc__pg_conn_t *c, const tpc__pg_table_t *t);
/* Prepare every table's full-batch statement on the data connection (again after a reconnect). */
tpc_error_t *tpc__pg_prepare_batches(tpc__pg_conn_t *c);
tpc_error_t *tpc__pg_exec_buffered(tpc__pg_conn_t *c, tpc__pg_table_t *t);
/* BEGIN on the data connection unless a transaction is open (pg_txn.c). */
tpc_error_t *tpc__pg_ensure_txn(tpc__pg_conn_t *c);

/* pg_secret.c: tpc_pg_hide_secrets() (tpc_pg.h). */

/* pg_commit.c */
tpc_error_t *tpc__pg_commit(void *conn, void *txn);
tpc_error_t *tpc__pg_recover_and_abort(void *conn, void *txn);
tpc_error_t *tpc__pg_abort_lingering(void *conn, const tpc_txn_lingering_t *lingering);
/* @returns true when @gid is one of the restored handles of @l. */
bool tpc__pg_known(const tpc_txn_lingering_t *l, const char *gid);
/* With owners: roll back the prepared gids of older owner epochs of the subtasks this one owns,
 * once per checkpoint @ckpt, after the cleanup at start (pg_commit.c). */
tpc_error_t *tpc__pg_sweep_older(tpc__pg_conn_t *c, uint64_t ckpt);
/* pg_commit.c also holds tpc_pg_parse_gid() (tpc_pg.h). */

/* pg_staged.c: the write-ahead commit. */
/* Quote the staging table; in write-ahead mode make sure it exists and may be used. */
tpc_error_t *tpc__pg_stage_open(tpc__pg_conn_t *c);
/* A new transaction @t: its parts are staged under its gid. */
void tpc__pg_stage_begin(tpc__pg_conn_t *c, const tpc__pg_txn_t *t);
/* Write table @t's buffered rows as the next part of the current transaction. */
tpc_error_t *tpc__pg_stage_table(tpc__pg_conn_t *c, tpc__pg_table_t *t);
/* Read the result of the part INSERT in flight, if any, keeping a failure for the next stage
 * call; every other use of the control connection does this first. */
void tpc__pg_stage_settle(tpc__pg_conn_t *c);
tpc_error_t *tpc__pg_stage_pre_commit(tpc__pg_conn_t *c, tpc__pg_txn_t *t, uint64_t checkpoint_id);
void tpc__pg_stage_abort(tpc__pg_conn_t *c);
/* Commit of a staged transaction: move its rows into the tables, exactly once. */
tpc_error_t *tpc__pg_stage_move(tpc__pg_conn_t *c, tpc__pg_txn_t *t);
/* Drop the staged rows of @t (a restored current transaction). */
tpc_error_t *tpc__pg_stage_drop(tpc__pg_conn_t *c, tpc__pg_txn_t *t);
/* Drop staged rows of the subtasks this one owns that no restored handle lists. */
tpc_error_t *tpc__pg_stage_lingering(tpc__pg_conn_t *c, const tpc_txn_lingering_t *l);

#endif /* TPC_PG_INTERNAL_H */
