/*
 * The file sink passes the connector conformance suite (tests/support/tpc_conformance.h): every
 * order of checkpoint events, crashes, restores at another parallelism and kill -9 in every phase,
 * with what is committed read back as a user reads it: the final files listed in the folder,
 * concatenated in name order. Part files are small, so that every commit renames several files and
 * a kill can land between two renames.
 */
#include "tpc_conformance_check.h"
#include "tpc_file.h"
#include "tpc_test_file.h"
#include "tpc_test_ops.h"

#include <dirent.h>

static bool ns_new(char *ns, size_t cap, char *why, size_t why_len)
{
    char *dir = tpc_test_tmpdir("conformance-file");
    if (!dir || strlen(dir) >= cap) {
        snprintf(why, why_len, "could not make a folder");
        free(dir);
        return false;
    }
    snprintf(ns, cap, "%s", dir);
    free(dir);
    return true;
}

static void ns_free(const char *ns)
{
    tpc_test_rmdir(ns);
}

static tpc_error_t *sink_new(const char *ns, tpc_txn_sink_t **out)
{
    tpc_error_t *err = tpc_file_sink_new(ns, out);
    if (!err)
        err = tpc_txn_sink_set(*out, "file.part-size", "256");
    return err;
}

/* Records are their 8-byte value and a newline. */
static bool read_back(const char *ns, tpc_conformance_keys_t *out, char *why, size_t why_len)
{
    tpc_test_file_out_t files;
    if (!tpc_test_file_read(ns, "part", &files, why, why_len))
        return false;
    size_t i = 0;
    for (; i + 9 <= files.len; i += 9)
        tpc_conformance_keys_add(out, files.data + i, files.data[i + 8] == '\n' ? 8 : 9);
    if (i != files.len)
        tpc_conformance_keys_add(out, files.data + i, files.len - i);
    tpc_test_file_out_free(&files);
    return true;
}

/* Every entry of the folder, hidden ones too. */
static bool footprint(const char *ns, long long *out, char *why, size_t why_len)
{
    DIR *d = opendir(ns);
    if (!d) {
        snprintf(why, why_len, "cannot list %s", ns);
        return false;
    }
    *out = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        *out += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return true;
}

static bool leftovers(const char *ns, long long *out, char *why, size_t why_len)
{
    tpc_test_file_out_t files;
    if (!tpc_test_file_read(ns, "part", &files, why, why_len))
        return false;
    *out = files.inprogress;
    tpc_test_file_out_free(&files);
    return true;
}

static const tpc_conformance_t file_connector = {
    .name = "file",
    .ns_new = ns_new,
    .ns_free = ns_free,
    .sink_new = sink_new,
    .read = read_back,
    .footprint = footprint,
    .leftovers = leftovers,
    .crash_records = 1500,
    .crash_interval_ms = 30,
    .crash_run_ms = 60000,
};

int main(int argc, char **argv)
{
    return tpc_conformance_main(&file_connector, argc, argv);
}
