/*
 * Private to tools/: what the subcommands of the `twopc` command share. Each subcommand lives in a
 * file of its own (cmd_checkpoint.c, cmd_pg.c, cmd_kafka.c, cmd_resolve.c) and reads the library's
 * formats and speaks the servers' protocols with the library's own code, through its public
 * headers and the Kafka wire client's; this header holds the argument parser, the JSON writer, the
 * exit codes and the reading of a checkpoint folder (checkpoint_view.c) that several of them need.
 */
#ifndef TWOPC_CLI_H
#define TWOPC_CLI_H

#include "tpc_runtime.h"
#include "tpc_txn.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes, the same for every subcommand (docs/twopc-command.md). */
enum {
    TWOPC_EXIT_OK = 0,      /* done; for listings: the listing was printed */
    TWOPC_EXIT_FAILED = 1,  /* an external system or a file said no; the message says what to do */
    TWOPC_EXIT_USAGE = 2,   /* wrong arguments */
    TWOPC_EXIT_PENDING = 3, /* --check: transactions are left open that need a decision */
};

/* ---- arguments ---------------------------------------------------------------------------- */

/* Options of one subcommand: "--name value", "--name=value" or a flag "--name". Positional
 * arguments are kept in order. Repeated options keep every value. */
typedef struct {
    const char *name;
    bool takes_value;
    bool repeat; /* may be given more than once */
} twopc_opt_t;

typedef struct {
    const char *name;
    const char *value; /* "" for flags */
} twopc_arg_t;

typedef struct {
    twopc_arg_t *opts;
    size_t nopts;
    const char **pos;
    size_t npos;
} twopc_args_t;

/* Parse @argv against @spec (ends with a {NULL} entry). On a wrong argument, prints the problem
 * and "see: twopc @cmd --help" to stderr and returns false. */
bool twopc_args_parse(const char *cmd, int argc, char **argv, const twopc_opt_t *spec,
                      twopc_args_t *out);
void twopc_args_free(twopc_args_t *a);
/* The last value of option @name, or NULL. */
const char *twopc_arg(const twopc_args_t *a, const char *name);
bool twopc_flag(const twopc_args_t *a, const char *name);
/* The @i-th value of a repeated option, or NULL after the last. */
const char *twopc_arg_nth(const twopc_args_t *a, const char *name, size_t i);
/* A required option: prints what is missing and returns NULL when it is. */
const char *twopc_arg_required(const twopc_args_t *a, const char *cmd, const char *name);

/* ---- output ------------------------------------------------------------------------------- */

/* Print @err to stderr as "twopc @cmd: message" and "hint: ..." and free it. */
int twopc_fail(const char *cmd, tpc_error_t *err);
/* Take the checkpoint folder's lease alone for a command that changes what a restart finds (a
 * commit, an abort, a resolve): NULL, or prints why not (a job runs on it) and returns NULL with
 * *rc set. */
tpc_dir_lease_t *twopc_lease(const char *cmd, const char *dir, int *rc);
int twopc_usage_error(const char *cmd, const char *fmt, ...) TPC_PRINTF(2, 3);
/* A JSON string literal of @s (escaped) on @f. */
void twopc_json_str(FILE *f, const char *s);
/* escape.c: from here on, stdout and stderr show control bytes (but newline and tab) and bytes
 * that are not UTF-8 as \xNN, so that no name the command prints can act on a terminal. */
void twopc_filter_output(void);
/* The length of the valid UTF-8 character at @p (1 to 4), 0 when it is not one, SIZE_MAX when
 * the @n bytes end inside one. */
size_t twopc_utf8_len(const unsigned char *p, size_t n);
/* "2026-12-03T10:40:00.123Z" for milliseconds since the epoch. */
void twopc_format_time(int64_t ms, char *buf, size_t cap);

/* The Kafka client settings every Kafka subcommand takes: --bootstrap and --kafka NAME=VALUE
 * (librdkafka property names: security.protocol, sasl.*, ssl.*). props is NULL-terminated,
 * name, value, name, value, ... */
typedef struct {
    const char *bootstrap;
    const char **props;
    size_t nprops;
} twopc_kafka_conf_t;
#define TWOPC_KAFKA_OPTS                                                                           \
    {"bootstrap", true, false}, {"kafka", true, true},                                             \
    {                                                                                              \
        "timeout-ms", true, false                                                                  \
    }
bool twopc_kafka_conf(const char *cmd, const twopc_args_t *a, twopc_kafka_conf_t *out);
void twopc_kafka_conf_free(twopc_kafka_conf_t *k);

/* ---- a checkpoint folder, read as a restart reads it ----------------------------------------- */

typedef enum { TWOPC_TXN_PENDING, TWOPC_TXN_CURRENT } twopc_txn_kind_t;

/* One transaction handle found in a checkpoint. */
typedef struct {
    const char *sink;      /* vertex name */
    int subtask;           /* holding subtask in the checkpoint */
    int origin;            /* the subtask that wrote it, -1 when unknown */
    twopc_txn_kind_t kind; /* pending: a completed checkpoint promised it; current: never */
    uint64_t checkpoint;   /* pending: pre-committed in; current: lowest it could be */
    int64_t start_ms;
    /* The connector its envelope names ("kafka", "postgres", "file", a third party's), or
     * "unknown" for a handle of an earlier version, which named none (then named is false). */
    const char *connector;
    bool named;
    const void *handle; /* the connector's bytes */
    size_t handle_len;
    /* As its connector describes it: line is the transactional id, gid, ...; the named values
     * follow the name in --json. */
    tpc_txn_handle_view_t view;
} twopc_txn_t;

typedef struct {
    const char *path;
    uint64_t id;
    bool savepoint;
    int64_t size;
    bool valid;
    const char *error;                  /* when not valid */
    const char *status;                 /* restore, older, not-completed, damaged */
    const tpc_checkpoint_t *checkpoint; /* when valid and loaded */
    twopc_txn_t *txns;
    size_t ntxns;
    tpc_txn_checkpoint_handle_t *handles; /* what txns point into */
} twopc_checkpoint_t;

typedef struct {
    tpc_checkpoint_folder_t dir; /* the library's reading of the folder */
    twopc_checkpoint_t *files;   /* newest first, one per dir.files */
    size_t nfiles;
    bool record_found;
    uint64_t record_newest; /* the completion record's newest completed checkpoint */
    const char *record_job;
    const char *record_error; /* a damaged record */
    /* The checkpoint a restart restores: the newest completed one (by the record, or the newest
     * file without a record); -1 when none. */
    long restore_index;
} twopc_folder_t;

/* Read @dir: list its checkpoint files and the completion record; @load_all decodes every file
 * (listing), otherwise only the one a restart restores. */
tpc_error_t *twopc_folder_read(const char *dir, bool load_all, twopc_folder_t *out);
void twopc_folder_free(twopc_folder_t *f);
/* The refusal a restart of the job would give on this folder (the job's own rule and message),
 * as an error for a command that must refuse where the job would; NULL when it would restore. */
tpc_error_t *twopc_folder_refusal(const twopc_folder_t *f);
/* Decode the file at @index (transactions included) if it is not yet. */
void twopc_folder_load(twopc_folder_t *f, size_t index);
/* True when @t is a transaction of the connector of @ops, with *@view as that connector describes
 * it: a handle that names its connector must name that one; one of an earlier version, which
 * names none, is asked of that connector alone (the command knows which system it looks at). */
bool twopc_txn_of(const twopc_txn_t *t, const tpc_txn_connector_ops_t *ops,
                  tpc_txn_handle_view_t *view);
/* The text value @name of @view, or NULL; the number @name, or @dflt. */
const char *twopc_view_text(const tpc_txn_handle_view_t *view, const char *name);
int64_t twopc_view_number(const tpc_txn_handle_view_t *view, const char *name, int64_t dflt);

/* ---- subcommands -------------------------------------------------------------------------- */

int twopc_cmd_checkpoints(int argc, char **argv);
int twopc_cmd_checkpoint(int argc, char **argv);
int twopc_cmd_pg(int argc, char **argv);
int twopc_cmd_kafka(int argc, char **argv);
int twopc_cmd_resolve(int argc, char **argv);
int twopc_cmd_config(int argc, char **argv);

#endif /* TWOPC_CLI_H */
