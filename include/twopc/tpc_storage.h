/**
 * Checkpoint storage: where a job's checkpoint files and its completion record live. A backend
 * holds named objects in one flat namespace ("chk-<id>", "savepoint-<id>", "completed") and keeps
 * these promises, on which the restore rule and the owner-epoch fence rest (docs/architecture.md,
 * "Checkpoint storage"):
 *
 * - put_new: the object appears whole and durable, or not at all, and only if no object of that
 *   name exists (create-only): an existing one gives *exists = true and is left alone.
 * - get: the whole object and its version (an opaque string that changes whenever the object
 *   does); a missing one gives *found = false and no error.
 * - list: the names that begin with a prefix, in no order; objects being written are not in it.
 * - remove: the object is gone; a missing one is no error.
 * - swap: replace the object whole and durably, but only if its version is still @p expected
 *   (TPC_STORAGE_ABSENT: only if there is none; TPC_STORAGE_ANY: whatever is there); otherwise
 *   *stale = true and nothing is written (compare-and-set). The new version is returned in
 *   *version (free it) when asked for.
 *
 * Errors name the object and the store; a failure that may pass (a store that does not answer)
 * is retriable. Backends: the local folder (inside the runtime) and S3-compatible object storage
 * (tpc_s3.h).
 */
#ifndef TPC_STORAGE_H
#define TPC_STORAGE_H

#include "tpc_props.h"
#include "tpc_runtime.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpc_storage_s tpc_storage_t;

/** swap() only if the object does not exist. */
#define TPC_STORAGE_ABSENT ((const char *)0)
/** swap() whatever is there. */
TPC_API extern const char tpc_storage_any[];
#define TPC_STORAGE_ANY tpc_storage_any

typedef struct {
    const char *kind; /**< "folder", "s3": for messages */
    tpc_error_t *(*put_new)(tpc_storage_t *s, const char *name, const uint8_t *p, size_t n,
                            bool *exists);
    tpc_error_t *(*get)(tpc_storage_t *s, const char *name, uint8_t **p, size_t *n, char **version,
                        bool *found);
    tpc_error_t *(*list)(tpc_storage_t *s, const char *prefix, char ***names, size_t *n);
    tpc_error_t *(*remove)(tpc_storage_t *s, const char *name);
    tpc_error_t *(*swap)(tpc_storage_t *s, const char *name, const char *expected, const uint8_t *p,
                         size_t n, bool *stale, char **version);
    void (*destroy)(tpc_storage_t *s); /**< NULL: nothing to free */
    /** Where the objects are, for messages ("s3://bucket/prefix/"): a name is appended to it;
     * never a secret. NULL: the kind. */
    const char *(*where)(tpc_storage_t *s);
} tpc_storage_ops_t;

struct tpc_storage_s {
    const tpc_storage_ops_t *ops;
};

/**
 * A storage backend a job can take its checkpoints to besides the local folder: the value of the
 * job's "checkpoint.storage" that selects it, its keys (a property table whose keys the job then
 * takes through tpc_job_set() and tpc_job_configure(), e.g. "checkpoint.s3.bucket") and how to
 * open a store from them. tpc_s3_storage_backend() (tpc_s3.h) is one.
 */
typedef struct {
    const char *kind;         /**< "s3" */
    const tpc_props_t *props; /**< its keys, parsed into a struct of conf_size bytes */
    size_t conf_size;
    /** A store on @p conf (the struct the keys were parsed into); refused: TPC_ERR_CONFIG naming
     * the key to fix. */
    tpc_error_t *(*open)(const void *conf, tpc_storage_t **out);
} tpc_storage_backend_t;

/**
 * @brief Let @p job keep its checkpoints on @p backend when "checkpoint.storage" names its kind,
 * and take its keys. Job thread, before the backend's keys are set and before tpc_job_run();
 * @p backend outlives the job. The store is opened at each tpc_job_run() and freed when it ends.
 * @returns NULL; TPC_ERR_INVALID_ARG; TPC_ERR_STATE when the job has a backend already.
 */
TPC_API tpc_error_t *tpc_job_use_storage(tpc_job_t *job, const tpc_storage_backend_t *backend);

/** Free a list of names from list(). */
TPC_API void tpc_storage_names_free(char **names, size_t n);
/** Free a store (NULL is fine). */
TPC_API void tpc_storage_destroy(tpc_storage_t *s);

#ifdef __cplusplus
}
#endif

#endif
