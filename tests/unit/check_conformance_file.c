/*
 * The file sink passes the connector conformance suite (tests/support/tpc_conformance.h): every
 * order of checkpoint events, crashes, restores at another parallelism and kill -9 in every phase,
 * with what is committed read back as a user reads it: the final files of its prefix listed in
 * the folder, concatenated in name order. Part files are small, so that every commit renames
 * several files and a kill can land between two renames.
 */
#include "tpc_conformance_check.h"
#include "tpc_file.h"
#include "tpc_test_ops.h"

#include <dirent.h>
#include <regex.h>

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

/* A name of this sink's prefix "part" alone: "part-<subtask>-<checkpoint>-<part>" final, and
 * ".part-<subtask>-<checkpoint>-<token>-<part>.inprogress" in progress; the other sink's
 * "part-0-..." names have one field more and are not this sink's. */
static bool is_final(const char *name)
{
    regex_t re;
    regcomp(&re, "^part-[0-9]+-[0-9]{10,}-[0-9]{4,}$", REG_EXTENDED | REG_NOSUB);
    bool match = regexec(&re, name, 0, NULL, 0) == 0;
    regfree(&re);
    return match;
}

static bool is_inprogress(const char *name)
{
    regex_t re;
    regcomp(&re, "^\\.part-[0-9]+-[0-9]{10,}-[0-9a-f]{16}-[0-9]{4,}\\.inprogress$",
            REG_EXTENDED | REG_NOSUB);
    bool match = regexec(&re, name, 0, NULL, 0) == 0;
    regfree(&re);
    return match;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in @ns that @pick takes, sorted. @returns how many, or -1. */
static int list(const char *ns, bool (*pick)(const char *), char ***out)
{
    DIR *d = opendir(ns);
    if (!d)
        return -1;
    int n = 0;
    *out = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (pick(e->d_name)) {
            *out = realloc(*out, (size_t)(n + 1) * sizeof **out);
            (*out)[n++] = strdup(e->d_name);
        }
    closedir(d);
    if (n)
        qsort(*out, (size_t)n, sizeof **out, by_name);
    return n;
}

static void list_free(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The final files of this sink in name order, each record its 8-byte value and a newline. */
static bool read_back(const char *ns, tpc_conformance_keys_t *out, char *why, size_t why_len)
{
    char **names;
    int n = list(ns, is_final, &names);
    if (n < 0) {
        snprintf(why, why_len, "cannot list %s", ns);
        return false;
    }
    bool passed = true;
    for (int i = 0; i < n && passed; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", ns, names[i]);
        FILE *f = fopen(path, "rb");
        unsigned char rec[9];
        size_t got;
        while (f && (got = fread(rec, 1, sizeof rec, f)) > 0)
            tpc_conformance_keys_add(out, rec, got == 9 && rec[8] == '\n' ? 8 : got);
        if (!f) {
            snprintf(why, why_len, "cannot open %s", path);
            passed = false;
        } else {
            fclose(f);
        }
    }
    list_free(names, n);
    return passed;
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
    char **names;
    int n = list(ns, is_inprogress, &names);
    if (n < 0) {
        snprintf(why, why_len, "cannot list %s", ns);
        return false;
    }
    list_free(names, n);
    *out = n;
    return true;
}

/* Another sink in the same folder whose prefix starts with this one's. */
static tpc_error_t *other_sink_new(const char *ns, tpc_txn_sink_t **out)
{
    tpc_error_t *err = sink_new(ns, out);
    if (!err)
        err = tpc_txn_sink_set(*out, "file.prefix", "part-0");
    return err;
}

static const tpc_conformance_t file_connector = {
    .name = "file",
    .ns_new = ns_new,
    .ns_free = ns_free,
    .sink_new = sink_new,
    .read = read_back,
    .footprint = footprint,
    .leftovers = leftovers,
    .other_sink_new = other_sink_new,
    .other_visible = false,
    .crash_records = 1500,
    .crash_interval_ms = 30,
    .crash_run_ms = 60000,
};

int main(int argc, char **argv)
{
    return tpc_conformance_main(&file_connector, argc, argv);
}
