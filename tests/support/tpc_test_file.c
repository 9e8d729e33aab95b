/*
 * The file-sink output reader of tpc_test_file.h.
 */
#include "tpc_test_file.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool tpc_test_file_read(const char *dir, const char *prefix, tpc_test_file_out_t *out, char *why,
                        size_t why_len)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, why_len, "cannot open %s", dir);
        return false;
    }
    char **names = NULL;
    size_t n = 0, cap = 0, plen = strlen(prefix);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        size_t len = strlen(name);
        if (name[0] == '.' && strncmp(name + 1, prefix, plen) == 0 && name[plen + 1] == '-' &&
            len > 11 && strcmp(name + len - 11, ".inprogress") == 0) {
            out->inprogress++;
        } else if (strncmp(name, prefix, plen) == 0 && name[plen] == '-') {
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                names = realloc(names, cap * sizeof *names);
            }
            names[n++] = strdup(name);
        } else {
            out->others++;
        }
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name);
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        if (!f) {
            snprintf(why, why_len, "cannot open %s", path);
            ok = false;
        } else {
            fseek(f, 0, SEEK_END);
            size_t size = (size_t)ftell(f);
            fseek(f, 0, SEEK_SET);
            out->data = realloc(out->data, out->len + size + 1);
            if (fread(out->data + out->len, 1, size, f) != size) {
                snprintf(why, why_len, "short read of %s", path);
                ok = false;
            }
            out->len += size;
            if (size > out->largest)
                out->largest = size;
            out->files++;
            fclose(f);
        }
        free(names[i]);
    }
    free(names);
    return ok;
}

void tpc_test_file_out_free(tpc_test_file_out_t *out)
{
    free(out->data);
    memset(out, 0, sizeof *out);
}

bool tpc_test_file_check(const tpc_test_file_out_t *out, uint32_t value_pad, int nsub,
                         const uint64_t *count, bool in_order, char *why, size_t why_len)
{
    size_t rec = 8 + (size_t)value_pad + 1;
    if (out->len % rec) {
        snprintf(why, why_len, "%zu bytes are not a whole number of %zu-byte records", out->len,
                 rec);
        return false;
    }
    uint8_t *seen[16] = {NULL};
    uint64_t next[16] = {0};
    bool ok = true;
    for (int s = 0; s < nsub; s++)
        seen[s] = calloc(count[s] ? count[s] : 1, 1);
    for (size_t off = 0; ok && off < out->len; off += rec) {
        const unsigned char *p = out->data + off;
        uint64_t key = 0;
        for (int b = 0; b < 8; b++)
            key = key << 8 | p[b];
        uint64_t sub = key >> 40, seq = key & ((1ull << 40) - 1);
        bool pad_ok = p[rec - 1] == '\n';
        for (size_t b = 8; b < 8 + value_pad; b++)
            pad_ok &= p[b] == 0;
        if (!pad_ok || sub >= (uint64_t)nsub || seq >= count[sub]) {
            snprintf(why, why_len, "garbage record at byte %zu", off);
            ok = false;
        } else if (seen[sub][seq]++) {
            snprintf(why, why_len, "record %llu of subtask %llu twice (byte %zu)",
                     (unsigned long long)seq, (unsigned long long)sub, off);
            ok = false;
        } else if (in_order && seq != next[sub]) {
            snprintf(why, why_len, "record %llu of subtask %llu where %llu was due (byte %zu)",
                     (unsigned long long)seq, (unsigned long long)sub,
                     (unsigned long long)next[sub], off);
            ok = false;
        }
        next[sub] = seq + 1;
    }
    for (int s = 0; ok && s < nsub; s++)
        for (uint64_t i = 0; ok && i < count[s]; i++)
            if (!seen[s][i]) {
                snprintf(why, why_len, "record %llu of subtask %d is missing",
                         (unsigned long long)i, s);
                ok = false;
            }
    for (int s = 0; s < nsub; s++)
        free(seen[s]);
    return ok;
}
