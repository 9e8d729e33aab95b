/*
 * The file sink as a user makes it: the folder check, the file.* keys, the encoder, and the
 * connector ops table that ties the pieces of connectors/file to the transaction framework.
 */
#include "file_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void file_release(void *arg)
{
    tpc__file_conf_t *conf = arg;
    free(conf->dir);
    free(conf);
}

static bool name_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '.';
}

static tpc_error_t *set_name_part(char *dst, size_t max, const char *key, const char *value,
                                  bool prefix)
{
    size_t len = strlen(value);
    bool ok = len <= max && (!prefix || (len > 0 && value[0] != '.'));
    for (size_t i = 0; ok && i < len; i++)
        ok = name_char_ok(value[i]);
    if (!ok) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                         "invalid value \"%s\" for \"%s\"", value, key);
        return tpc_error_hint(err, "use at most %zu letters, digits, '_', '-' or '.'%s", max,
                              prefix ? ", at least one, not starting with '.'" : "");
    }
    memcpy(dst, value, len + 1);
    return NULL;
}

static tpc_error_t *set_size(uint64_t *dst, uint64_t min, const char *key, const char *value)
{
    int64_t v;
    if (!tpc_parse_int(value, (int64_t)min, (int64_t)1 << 48, &v)) {
        tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                         "invalid value \"%s\" for \"%s\"", value, key);
        return tpc_error_hint(err, "give a number of bytes from %llu to %llu",
                              (unsigned long long)min, 1ull << 48);
    }
    *dst = v;
    return NULL;
}

static tpc_error_t *file_configure(void *arg, const char *key, const char *value)
{
    tpc__file_conf_t *conf = arg;
    if (strcmp(key, "file.prefix") == 0)
        return set_name_part(conf->prefix, TPC__FILE_PREFIX_MAX, key, value, true);
    if (strcmp(key, "file.suffix") == 0)
        return set_name_part(conf->suffix, TPC__FILE_SUFFIX_MAX, key, value, false);
    if (strcmp(key, "file.part-size") == 0)
        return set_size(&conf->part_size, 1, key, value);
    if (strcmp(key, "file.buffer-size") == 0) {
        uint64_t v = conf->buffer_size;
        tpc_error_t *err = set_size(&v, 4096, key, value);
        conf->buffer_size = (size_t)v;
        return err;
    }
    return tpc_error_new(TPC_ERR_NOT_FOUND, 0, "unknown key \"%s\"", key);
}

const tpc_txn_connector_ops_t tpc__file_ops = {
    .version = TPC_TXN_CONNECTOR_OPS_VERSION,
    .name = "file",
    .configure = file_configure,
    .release = file_release,
    .open = tpc__file_open,
    .close = tpc__file_close,
    .begin = tpc__file_begin,
    .write = tpc__file_write,
    .flush = tpc__file_flush,
    .pre_commit = tpc__file_pre_commit,
    .commit = tpc__file_commit,
    .abort = tpc__file_abort,
    .recover_and_commit = tpc__file_commit,
    .recover_and_abort = tpc__file_recover_and_abort,
    .abort_lingering = tpc__file_abort_lingering,
    .serialize = tpc__file_serialize,
    .deserialize = tpc__file_deserialize,
    .is_empty = tpc__file_is_empty,
    .free_txn = tpc__file_free_txn,
    .describe = tpc__file_describe,
};

tpc_error_t *tpc_file_sink_new(const char *dir, tpc_txn_sink_t **out)
{
    if (out)
        *out = NULL;
    if (!dir || !*dir || !out)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "file sink needs a folder and an out pointer");
    struct stat st;
    if (stat(dir, &st) != 0) {
        tpc_error_t *err = tpc__file_errno(errno, "use folder", dir);
        return errno == ENOENT ? tpc_error_hint(err, "create the folder first") : err;
    }
    if (!S_ISDIR(st.st_mode))
        return tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "\"%s\" is not a folder", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return tpc_error_hint(tpc__file_errno(errno, "write into folder", dir),
                              "the sink creates, renames and deletes files there");
    tpc__file_conf_t *conf = calloc(1, sizeof *conf);
    char *copy = strdup(dir);
    if (!conf || !copy) {
        free(conf);
        free(copy);
        return tpc_error_new(TPC_ERR_NOMEM, TPC_ERROR_FATAL, "out of memory");
    }
    conf->dir = copy;
    strcpy(conf->prefix, "part");
    conf->part_size = 128u << 20;
    conf->buffer_size = 1u << 20;
    return tpc_txn_sink_new(&tpc__file_ops, conf, out);
}

tpc_error_t *tpc_file_sink_set_encoder(tpc_txn_sink_t *sink, tpc_file_encoder_t encoder,
                                       void *opaque)
{
    if (tpc_txn_sink_connector_ops(sink) != &tpc__file_ops)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "an encoder can only be set on a file sink");
    tpc__file_conf_t *conf = tpc_txn_sink_connector_arg(sink);
    conf->encode = encoder;
    conf->encode_opaque = opaque;
    return NULL;
}
