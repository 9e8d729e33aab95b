/*
 * Internal structures of the runtime, shared by its files and by its own tests. Nothing here is
 * part of the public API. The pieces: batches (batch.c), bounded channels (channel.c), state
 * buffers and the checkpoint file format (state.c, storage.c), subtasks (task.c, alignment.c),
 * the checkpoint coordinator (coordinator.c) and the job with its restarts (job.c).
 */
#ifndef TPC_RUNTIME_INTERNAL_H
#define TPC_RUNTIME_INTERNAL_H

#include "tpc_kit.h"
#include "tpc_runtime.h"
#include "tpc_storage.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- small helpers ------------------------------------------------------------------------ */

/* The runtime's clock: the kit's monotonic one, unsigned as the runtime's figures are. */
static inline uint64_t tpc__now_us(void)
{
    return (uint64_t)tpc_clock_us();
}
/* Sleeps the whole time (no cancel): tests and the runtime's own short pauses. */
void tpc__sleep_us(uint64_t us);
void *tpc__xmalloc(size_t n);
void *tpc__xcalloc(size_t n, size_t size);
void *tpc__xrealloc(void *p, size_t n);
/** tpc_array_grow() (tpc_kit.h) that aborts when memory runs out: @p items holds @p need elements
 * of @p size bytes after it. */
void tpc__xgrow(void *items, size_t *cap, size_t need, size_t size);
/** Abort with a message: allocating @p n bytes failed. */
void tpc__out_of_memory(size_t n);
char *tpc__xstrdup(const char *s);

/* A growable byte buffer. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
} tpc__buf_t;
void tpc__buf_reserve(tpc__buf_t *b, size_t extra);
void tpc__buf_put(tpc__buf_t *b, const void *p, size_t n);
void tpc__buf_put_u8(tpc__buf_t *b, uint8_t v);
void tpc__buf_put_u32(tpc__buf_t *b, uint32_t v);
void tpc__buf_put_u64(tpc__buf_t *b, uint64_t v);
void tpc__buf_put_bytes(tpc__buf_t *b, const void *p, size_t n); /* u32 length + bytes */
void tpc__buf_free(tpc__buf_t *b);

/* A bounds-checked reader over bytes; every getter fails once the input is short. */
typedef struct {
    const uint8_t *p;
    size_t len, off;
    bool bad;
} tpc__rd_t;
uint8_t tpc__rd_u8(tpc__rd_t *r);
uint32_t tpc__rd_u32(tpc__rd_t *r);
uint64_t tpc__rd_u64(tpc__rd_t *r);
const uint8_t *tpc__rd_bytes(tpc__rd_t *r, size_t *len); /* u32 length + bytes */

/* ---- batches ------------------------------------------------------------------------------ */

typedef struct {
    uint32_t key_off, key_len, value_off, value_len;
    uint32_t hdr_first, hdr_count; /* the record's headers in hdrs */
    uint32_t flags;                /* tpc_record_t.flags */
    int64_t timestamp;
} tpc__rec_t;

/* Headers' descriptors point into bytes; the arena's growth moves them along. Records without
 * headers cost nothing here. */
struct tpc_batch_s {
    tpc__rec_t *recs;
    size_t count, cap;
    uint8_t *bytes;
    size_t used, bytes_cap;
    tpc_header_t *hdrs;
    size_t nhdrs, hdrs_cap;
};

tpc_batch_t *tpc__batch_new(size_t cap);
void tpc__batch_destroy(tpc_batch_t *b);
void tpc__batch_reset(tpc_batch_t *b);
void tpc__batch_append(tpc_batch_t *b, const tpc_record_t *rec);

/* ---- channels ----------------------------------------------------------------------------- */

typedef enum {
    TPC__ITEM_BATCH = 0,
    TPC__ITEM_BARRIER,
    TPC__ITEM_END_OF_DATA,
    TPC__ITEM_END_OF_PARTITION,
} tpc__item_kind_t;

typedef struct {
    tpc__item_kind_t kind;
    uint64_t id; /* barrier: checkpoint id */
    tpc_batch_t *batch;
} tpc__item_t;

typedef struct tpc__task tpc__task_t;

/* A bounded single-producer single-consumer queue of items between two subtasks. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t not_full;
    tpc__item_t *ring;
    size_t cap, head, count;
    /* The bound in time (channel.capacity.ms): batches wait while the records queued would take
     * the consumer longer than limit_us to get through, at the pace it took them lately. */
    uint64_t limit_us;
    uint64_t records;      /* in the queued batches */
    uint64_t last_take_us; /* when the consumer last took a batch with more queued behind it */
    uint64_t last_take_records;
    double ns_per_record; /* the consumer's recent pace while backlogged; 0: not known yet */
    int empty_takes;      /* takes that left the ring empty, while the pace is not known */
    tpc_batch_t **spare;  /* recycled batches */
    size_t nspare, spare_cap;
    tpc__task_t *producer, *consumer;
    bool producer_waits_drain;
    const atomic_bool *canceled;
} tpc__channel_t;

tpc__channel_t *tpc__channel_new(size_t cap, uint64_t limit_us, const atomic_bool *canceled);
void tpc__channel_destroy(tpc__channel_t *ch);
/* Blocks while full. Returns TPC_ERR_CANCELED (and drops the item's batch) once canceled or once
 * the producer was told to stop without drain. */
tpc_err_t tpc__channel_push(tpc__channel_t *ch, tpc__item_t item, uint64_t *blocked_us);
bool tpc__channel_try_take(tpc__channel_t *ch, tpc__item_t *out);
tpc_batch_t *tpc__channel_spare(tpc__channel_t *ch, size_t batch_cap);
void tpc__channel_recycle(tpc__channel_t *ch, tpc_batch_t *b);
bool tpc__channel_is_empty(tpc__channel_t *ch);
void tpc__channel_wake_all(tpc__channel_t *ch);

/* ---- state -------------------------------------------------------------------------------- */

/* Entries written by one subtask for one checkpoint. */
struct tpc_state_writer_s {
    tpc__buf_t list;  /* u32 len + bytes, repeated */
    tpc__buf_t uni;   /* same for union entries */
    tpc__buf_t owned; /* owned state entries, same framing */
    tpc__buf_t keyed; /* keyed state entries (keyed_snapshot.c), same framing */
    uint32_t nlist, nunion, nowned, nkeyed;
    /* An incremental snapshot of keyed state: the checkpoints whose keyed entries come before
     * these ones, oldest first (the first holds a full snapshot); none: the entries are the whole
     * keyed state. */
    uint64_t *links;
    uint32_t nlinks;
};

typedef struct {
    const uint8_t *p;
    size_t len;
} tpc__slice_t;

struct tpc_state_reader_s {
    tpc__slice_t *list, *uni, *owned, *keyed;
    size_t nlist, nunion, nowned, nkeyed;
    size_t cap_list, cap_union, cap_owned, cap_keyed; /* as restore fills them (tpc__xgrow) */
};

/* Add the @count entries framed in @b (u32 length + bytes each) to @r's list of @kind. */
void tpc__state_reader_add(tpc_state_reader_t *r, tpc_state_kind_t kind, const tpc__buf_t *b,
                           uint32_t count);

void tpc__state_writer_init(tpc_state_writer_t *w);
void tpc__state_writer_free(tpc_state_writer_t *w);
void tpc__state_reader_free(tpc_state_reader_t *r);

/* ---- checkpoint storage (store.c) ------------------------------------------------------------ */

/* The local folder backend: objects are files in @dir (which outlives the store). put_new writes a
 * temporary file of its own, fsyncs it and links it into place, never over an existing file, then
 * fsyncs the folder; swap writes a temporary file and renames it over, under an flock on
 * ".<name>.lock" when it compares; a version is the hex SHA-256 of the contents. */
typedef struct {
    tpc_storage_t base;
    const char *dir;
} tpc__store_folder_t;
void tpc__store_folder_init(tpc__store_folder_t *f, const char *dir);
/* The path of object @name in folder @dir (free it). */
char *tpc__store_folder_path(const char *dir, const char *name);
void tpc_storage_names_free(char **names, size_t n);

/* ---- checkpoint files --------------------------------------------------------------------- */

/* What one subtask contributed to a checkpoint. */
typedef struct {
    bool closed;            /* FINISHED (closed) before the trigger: no state, not run again */
    bool operator_finished; /* its operator had finished; its state is its final state */
    tpc_state_writer_t state;
} tpc__subtask_snapshot_t;

typedef struct {
    char *name;
    int parallelism;
    tpc__subtask_snapshot_t *subtasks;
} tpc__vertex_snapshot_t;

typedef struct {
    uint64_t id;
    uint64_t timestamp_ms;
    bool savepoint;
    uint32_t max_parallelism; /* key groups; 0 in files of format 1 */
    /* The other checkpoints whose files this one needs (the links of its subtasks' keyed state),
     * ascending; set by the encoder from the links, read back from the header. */
    uint64_t *refs;
    uint32_t nrefs;
    uint64_t owner_epoch; /* of the owner that wrote it (format 4); 0: no owners */
    char *job_name;
    int nvertices;
    tpc__vertex_snapshot_t *vertices;
} tpc__checkpoint_t;

void tpc__checkpoint_free(tpc__checkpoint_t *c);
bool tpc__vertex_fully_closed(const tpc__vertex_snapshot_t *v);
bool tpc__vertex_partly_closed(const tpc__vertex_snapshot_t *v);

/* Create @p dir (and its parents) and check that it is writable. */
tpc_error_t *tpc__checkpoint_dir_prepare(const char *dir);
/* Remove the temporary files of checkpoint writes that a crash interrupted. */
void tpc__checkpoint_dir_clean(const char *dir);
/* The error for a checkpoint.dir that another instance of the job writes into (prefix the detail).
 */
tpc_error_t *tpc__checkpoint_other_writer(void);
/* Serialise, checksum and put into @st create-only (an existing object of its name is
 * tpc__checkpoint_other_writer()). *path (may be NULL) names it (a folder: the file's path),
 * *size (may be NULL) is its size in bytes. */
tpc_error_t *tpc__checkpoint_write_at(tpc_storage_t *st, const tpc__checkpoint_t *c, char **path,
                                      uint64_t *size);
/* tpc__checkpoint_write_at() into the folder @dir. */
tpc_error_t *tpc__checkpoint_write(const char *dir, const tpc__checkpoint_t *c, char **path);
/* Read and decode the checkpoint file at @path. */
tpc_error_t *tpc__checkpoint_read(const char *path, tpc__checkpoint_t *out);
/* Parse bytes (with trailing checksum). */
tpc_error_t *tpc__checkpoint_decode(const uint8_t *p, size_t len, tpc__checkpoint_t *out);

typedef struct {
    uint64_t id;
    bool savepoint;
    char *path; /* for messages: a folder's file path, else where the store is and the name */
    char *name; /* the object's name in its store */
} tpc__checkpoint_file_t;
/* Checkpoint files in @st (in the folder @dir), newest first. */
tpc_error_t *tpc__checkpoint_list_at(tpc_storage_t *st, tpc__checkpoint_file_t **files, size_t *n);
tpc_error_t *tpc__checkpoint_list(const char *dir, tpc__checkpoint_file_t **files, size_t *n);
/* Read and decode @file of @st. */
tpc_error_t *tpc__checkpoint_read_at(tpc_storage_t *st, const tpc__checkpoint_file_t *file,
                                     tpc__checkpoint_t *out);
void tpc__checkpoint_files_free(tpc__checkpoint_file_t *files, size_t n);
/* Keep the newest @p retained checkpoints (savepoints are never deleted), and every checkpoint that
 * a kept one needs for its keyed state (its refs). */
void tpc__checkpoint_retain_at(tpc_storage_t *st, int retained);
void tpc__checkpoint_retain(const char *dir, int retained);
/* The refs of the checkpoint file at @p path, read from its header alone (not checked against its
 * checksum: for retention, which keeps more on an error). */
tpc_error_t *tpc__checkpoint_read_refs(const char *path, uint64_t **refs, uint32_t *n);
/* The ascending union of the links of @p c's subtasks (into c->refs). */
void tpc__checkpoint_collect_refs(tpc__checkpoint_t *c);
/* Where @st keeps its objects, for messages: a folder's path, "s3://bucket/prefix", else its kind.
 */
const char *tpc__storage_where(tpc_storage_t *st);

void tpc__sha256(const uint8_t *p, size_t len, uint8_t out[32]);
/* A u32-length string as a new NUL-terminated copy, NULL when the reader ran out. */
char *tpc__rd_string(tpc__rd_t *r);
/* Read a whole file into a new buffer (*data, free it). An error is TPC_ERR_IO naming the file;
 * *errnum then holds the errno (ENOENT: no such file). */
tpc_error_t *tpc__file_read(const char *path, uint8_t **data, size_t *len, int *errnum);

/* ---- keyed state entries in a checkpoint (keyed_snapshot.c) -------------------------------- */

/* DELETE: the key's value, or its whole map, is gone; MAP_DELETE: one map entry is (both only in
 * incremental snapshots, with an empty value). */
enum {
    TPC__KEYED_VALUE = 0,
    TPC__KEYED_MAP = 1,
    TPC__KEYED_TIMER = 2,
    TPC__KEYED_DELETE = 3,
    TPC__KEYED_MAP_DELETE = 4
};

typedef struct {
    int group, kind;                             /* kind: TPC__KEYED_* */
    const uint8_t *name, *key, *map_key, *value; /* point into the entry */
    size_t name_len, key_len, map_key_len, value_len;
    int64_t at_ms; /* a timer's time */
} tpc__keyed_entry_t;
/* Parse one keyed entry: u32 key group | kind << 24, then as `bytes` the state's name, the key,
 * a map entry's map key, and the value (a timer: no name, its time as u64). */
bool tpc__keyed_parse(const uint8_t *p, size_t len, tpc__keyed_entry_t *e);

/* ---- the completion record (record.c) ----------------------------------------------------- */

/* What checkpoint.dir remembers besides the checkpoint files: the newest checkpoint that was
 * complete, written before any sink is told so (and may commit), the first checkpoint id after the
 * job last started over there, and the highest parallelism each vertex has run with. */
typedef struct {
    char *job_name;
    uint64_t newest; /* 0: none completed yet */
    uint64_t first; /* the job last started over here: checkpoints below this id are not restored */
    int nvertices;
    char **names;
    int *highest;
    /* The owner epoch of the process that holds the job's checkpoints (a unit's owner); 0: no
     * owners, one process as before, and the record is written in its version 2 layout. It
     * changes only by compare-and-set (tpc__record_claim()). */
    uint64_t owner_epoch;
    char *version; /* the storage's version of the record as read (tpc__record_read()), or NULL */
} tpc__record_t;

/* Read "<dir>/completed". A missing file gives *found = false and no error; a damaged one is
 * TPC_ERR_CORRUPT. */
tpc_error_t *tpc__record_read(const char *dir, tpc__record_t *out, bool *found);
tpc_error_t *tpc__record_write(const char *dir, const tpc__record_t *rec);
/* Write @rec only if the record in @dir is still at version @expected (TPC_STORAGE_ABSENT: there
 * is none): a compare-and-set. Refused, the error is TPC_ERR_FENCED: another owner changed the
 * record since @expected was read. The new version goes to *version (free it) when asked for. */
tpc_error_t *tpc__record_swap(const char *dir, const tpc__record_t *rec, const char *expected,
                              char **version);
/* Take the job's checkpoints in @dir over as owner @epoch (> 0): read the record, refuse with
 * TPC_ERR_FENCED if it carries an epoch at or above @epoch, else compare-and-set it to @epoch
 * against the version read, reading again when another writer came first. A missing record is
 * created for job @job. *out is the record as written, with its new version. */
tpc_error_t *tpc__record_claim(const char *dir, const char *job, uint64_t epoch,
                               tpc__record_t *out);
/* NULL when the record in @st still carries owner epoch @epoch; else TPC_ERR_FENCED (fatal), or
 * the error reading it. */
tpc_error_t *tpc__record_owned_at(tpc_storage_t *st, uint64_t epoch);
/* The same in the store @st (the functions above work on the folder @dir). */
tpc_error_t *tpc__record_read_at(tpc_storage_t *st, tpc__record_t *out, bool *found);
tpc_error_t *tpc__record_swap_at(tpc_storage_t *st, const tpc__record_t *rec, const char *expected,
                                 char **version);
tpc_error_t *tpc__record_claim_at(tpc_storage_t *st, const char *job, uint64_t epoch,
                                  tpc__record_t *out);

/* The restore rule of tpc__restore_load() without a job: which of @files (newest first, from
 * tpc__checkpoint_list()) a new process of job @job (NULL: the record's) restores from @dir with
 * restore.mode=auto and no fallback, given the completion record @rec (NULL: none). *picked is the
 * index, n for none (a fresh start); or the refusal the job would give. For the twopc command and
 * tpc_checkpoint_folder_read(): one rule, no second copy. */
tpc_error_t *tpc__restore_pick(const char *dir, const char *job, tpc__checkpoint_file_t *files,
                               size_t n, const tpc__record_t *rec, size_t *picked);
/* Parse the bytes of a record file (digest included); @path only names it in errors. */
tpc_error_t *tpc__record_decode(const char *path, const uint8_t *p, size_t len, tpc__record_t *out);
void tpc__record_free(tpc__record_t *rec);
/* Raise the highest parallelism of @p name to at least @p parallelism; true when it changed. */
bool tpc__record_note_parallelism(tpc__record_t *rec, const char *name, int parallelism);
int tpc__record_highest(const tpc__record_t *rec, const char *name);

/* Test hook: when set, called before each checkpoint write; an error makes the write fail. */
extern tpc_error_t *(*tpc__checkpoint_write_fault)(uint64_t id);
/* Tests: called with each checkpoint about to be put into storage (crash tests kill there). */
extern void (*tpc__checkpoint_write_probe)(const tpc__checkpoint_t *c);

/* ---- logging ------------------------------------------------------------------------------ */

typedef struct {
    tpc_log_cb cb;
    void *opaque;
    tpc_log_level_t max_level;
} tpc__logger_t;
void tpc__logf(const tpc__logger_t *lg, tpc_log_level_t level, const char *fmt, ...)
    TPC_PRINTF(3, 4);

#endif
