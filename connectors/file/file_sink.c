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

/* file.prefix and file.suffix: they become parts of file names, so only safe characters. */
static tpc_error_t *set_name_part(void *arg, const tpc_prop_t *p, const char *key,
                                  const char *value)
{
    tpc__file_conf_t *conf = arg;
    bool prefix = strcmp(key, "file.prefix") == 0;
    char *dst = prefix ? conf->prefix : conf->suffix;
    size_t max = prefix ? TPC__FILE_PREFIX_MAX : TPC__FILE_SUFFIX_MAX;
    size_t len = strlen(value);
    bool ok = len <= max && (!prefix || (len > 0 && value[0] != '.'));
    for (size_t i = 0; ok && i < len; i++)
        ok = name_char_ok(value[i]);
    if (!ok)
        return tpc_prop_invalid(p, key, value, NULL);
    memcpy(dst, value, len + 1);
    return NULL;
}

#define FILE_FIELD(member) TPC_PROP_FIELD(tpc__file_conf_t, member)
#define STR(x)             #x
#define XSTR(x)            STR(x)

static const tpc_prop_t file_props[] = {
    {.name = "file.prefix",
     .type = TPC_PROP_CUSTOM,
     .set = set_name_part,
     .def = "part",
     .accepts = "1 to " XSTR(TPC__FILE_PREFIX_MAX) " letters, digits, '_', '-' or '.', not "
                                                   "starting with '.'",
     .doc = "Start of every file name the sink writes; sinks sharing a folder need distinct "
            "prefixes."},
    {.name = "file.suffix",
     .type = TPC_PROP_CUSTOM,
     .set = set_name_part,
     .def = "",
     .accepts = "up to " XSTR(TPC__FILE_SUFFIX_MAX) " letters, digits, '_', '-' or '.'",
     .doc = "End of every final file name, such as \".log\"."},
    {.name = "file.part-size",
     .type = TPC_PROP_INT,
     .field = FILE_FIELD(part_size),
     .min = 1,
     .max = (int64_t)1 << 48,
     .def = "134217728",
     .unit = "bytes",
     .doc = "Roll to a new part before a part exceeds this many bytes."},
    {.name = "file.buffer-size",
     .type = TPC_PROP_INT,
     .field = FILE_FIELD(buffer_size),
     .min = 4096,
     .max = (int64_t)1 << 48,
     .def = "1048576",
     .unit = "bytes",
     .doc = "Bytes buffered per subtask between write() calls."},
};

static const tpc_props_t file_table = {"file sink", "tpc_txn_sink_set()", file_props,
                                       sizeof file_props / sizeof *file_props};

const tpc_props_t *tpc_file_sink_properties(void)
{
    return &file_table;
}

const tpc_txn_connector_ops_t tpc__file_ops = {
    .version = TPC_TXN_CONNECTOR_OPS_VERSION,
    .name = "file",
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
    .props = &file_table,
    .describe_handle = tpc__file_describe_handle,
};

const tpc_txn_connector_ops_t *tpc_file_sink_ops(void)
{
    return &tpc__file_ops;
}

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
        return tpc_error_nomem();
    }
    conf->dir = copy;
    tpc_error_t *err = tpc_props_init(&file_table, conf);
    if (err) {
        file_release(conf);
        return err;
    }
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
