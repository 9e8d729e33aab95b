/*
 * Private to connectors/file: the sink's configuration, a subtask's instance, the transaction
 * handle, and the file names they use. Split over file_sink.c (configuration and the ops table),
 * file_names.c (names), file_txn.c (writing a transaction) and file_commit.c (commit, recovery and
 * cleanup, which work from a handle alone, possibly written by another process).
 */
#ifndef TPC_FILE_INTERNAL_H
#define TPC_FILE_INTERNAL_H

#include "tpc_file.h"

#define TPC__FILE_NAME_MAX   256
#define TPC__FILE_PREFIX_MAX 128
#define TPC__FILE_SUFFIX_MAX 64

typedef struct {
    char *dir;
    char prefix[TPC__FILE_PREFIX_MAX + 1];
    char suffix[TPC__FILE_SUFFIX_MAX + 1];
    uint64_t part_size;
    size_t buffer_size;
    tpc_file_encoder_t encode; /* NULL: value + '\n' */
    void *encode_opaque;
} tpc__file_conf_t;

typedef struct {
    const tpc__file_conf_t *conf;
    const tpc_txn_subtask_t *st;
    int dirfd;
    bool durable; /* fsync files and folder (not with guarantee "none") */
    /* Write buffer of the one transaction being written, flushed on roll, pre-commit, finish. */
    unsigned char *buf;
    size_t len;
    size_t cap;
} tpc__file_conn_t;

typedef struct {
    int subtask;         /* of the subtask that began it: names are derived from it */
    uint64_t begin_ckpt; /* lowest checkpoint it could be pre-committed in */
    uint64_t token;      /* random: tells apart transactions of different runs */
    uint64_t epoch;      /* owner epoch of the run that began it; 0 without owners */
    uint64_t ckpt;       /* checkpoint it was pre-committed in; 0 before */
    /* The final names carry the token too: without exactly-once, files are committed before
     * their checkpoint completes, and a new process may use that checkpoint id again. */
    bool token_in_name;
    uint32_t nparts;
    size_t sizes_cap;
    uint64_t *sizes; /* bytes of each part, buffered bytes included */
    int fd;          /* the part being written, or -1 */
} tpc__file_txn_t;

extern const tpc_txn_connector_ops_t tpc__file_ops;

/* Names. Each returns false if the name would not fit in TPC__FILE_NAME_MAX bytes. */
bool tpc__file_inprogress_name(char *buf, const char *prefix, const tpc__file_txn_t *t,
                               uint32_t part);
bool tpc__file_final_name(char *buf, const tpc__file_conf_t *conf, const tpc__file_txn_t *t,
                          uint32_t part);
/* Parse a final name of an exactly-once transaction, "<prefix>-<subtask>-<ckpt>-<part><suffix>". */
bool tpc__file_parse_final(const char *name, const tpc__file_conf_t *conf, int *subtask,
                           uint64_t *ckpt);

/* What an in-progress name says. */
typedef struct {
    int subtask;
    uint64_t begin_ckpt;
    uint64_t epoch; /* 0 in names without one: written without owners, or before names had it */
    uint64_t token;
    uint32_t part;
} tpc__file_inprogress_t;

/* Parse an in-progress name of sink @prefix; false if it is not one. */
bool tpc__file_parse_inprogress(const char *name, const char *prefix, tpc__file_inprogress_t *out);
uint64_t tpc__file_token(void);

tpc_error_t *tpc__file_errno(int errnum, const char *what, const char *name);

/* file_txn.c */
tpc_error_t *tpc__file_open(void *arg, const tpc_txn_subtask_t *st, void **conn);
void tpc__file_close(void *conn);
tpc_error_t *tpc__file_begin(void *conn, uint64_t checkpoint_id, void **txn);
tpc_error_t *tpc__file_write(void *conn, void *txn, const tpc_record_t *records, size_t count);
tpc_error_t *tpc__file_flush(void *conn, void *txn);
tpc_error_t *tpc__file_pre_commit(void *conn, void *txn, uint64_t checkpoint_id);
tpc_error_t *tpc__file_abort(void *conn, void *txn);
bool tpc__file_is_empty(void *conn, const void *txn);
void tpc__file_free_txn(void *conn, void *txn);
void tpc__file_describe(void *conn, const void *txn, char *buf, size_t cap);
tpc_error_t *tpc__file_describe_handle(const void *bytes, size_t len, tpc_txn_handle_view_t *out);
tpc_error_t *tpc__file_serialize(void *conn, const void *txn, tpc_txn_buf_t *out);
tpc_error_t *tpc__file_deserialize(void *conn, const void *bytes, size_t len, void **txn);

/* file_commit.c */
tpc_error_t *tpc__file_commit(void *conn, void *txn);
tpc_error_t *tpc__file_recover_and_abort(void *conn, void *txn);
tpc_error_t *tpc__file_abort_lingering(void *conn, const tpc_txn_lingering_t *lingering);
tpc_error_t *tpc__file_fsync_dir(tpc__file_conn_t *c);
/* Under owners, at each pre-commit (after the cleanup at start): delete the in-progress files of
 * older owner epochs of the subtasks this one owns (file_commit.c). */
tpc_error_t *tpc__file_sweep_older(tpc__file_conn_t *c);

#endif /* TPC_FILE_INTERNAL_H */
