/**
 * Checkpoint storage on S3-compatible object storage (AWS S3, MinIO and others that support
 * conditional writes): a tpc_storage_t (tpc_storage.h) whose objects are "<prefix><name>" in one
 * bucket. Create-only is a PUT with "If-None-Match: *", the compare-and-set of the completion
 * record a PUT with "If-Match: <etag>"; the store answers 412 when the condition fails. Requests
 * are signed with AWS Signature Version 4 by libcurl. Credentials come from the config or from the
 * usual environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION or
 * AWS_DEFAULT_REGION, AWS_ENDPOINT_URL); a secret is never shown in a message.
 */
#ifndef TPC_S3_H
#define TPC_S3_H

#include "tpc_storage.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    /** "http://127.0.0.1:9000", "https://s3.eu-west-1.amazonaws.com"; NULL: AWS_ENDPOINT_URL, else
     * https://s3.<region>.amazonaws.com. Addressed path-style: <endpoint>/<bucket>/<key>. */
    const char *endpoint;
    const char *bucket; /**< required */
    const char *prefix; /**< prepended to every name, e.g. "jobs/totals/unit-3/"; NULL: none */
    const char *region; /**< NULL: AWS_REGION, AWS_DEFAULT_REGION, else "us-east-1" */
    const char *access_key_id, *secret_access_key, *session_token; /**< NULL: the AWS_* ones */
    int timeout_ms; /**< one request, connection included; 0: 30000 */
    int attempts;   /**< tries of a request that failed without an answer or with 5xx; 0: 4 */
} tpc_s3_config_t;

/** A store on @p c (copied). Refused without a bucket or credentials (TPC_ERR_CONFIG); nothing is
 * sent before the first operation. Free it with tpc_storage_destroy(). */
TPC_API tpc_error_t *tpc_s3_storage_new(const tpc_s3_config_t *c, tpc_storage_t **out);

/** The S3 backend of a job's checkpoint.storage: `tpc_job_use_storage(job,
 * tpc_s3_storage_backend())`, then "checkpoint.storage" = "s3" and its checkpoint.s3.* keys
 * (tpc_s3_properties()) through tpc_job_set() or a configuration. */
TPC_API const tpc_storage_backend_t *tpc_s3_storage_backend(void);
/** The keys of the S3 checkpoint storage (checkpoint.s3.bucket, ...), for the documentation. */
TPC_API const tpc_props_t *tpc_s3_properties(void);

#ifdef __cplusplus
}
#endif

#endif
