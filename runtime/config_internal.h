/*
 * What the two readers of a configuration share (config.c: the store, files, and handing keys to
 * components; config_env.c: the environment). An entry owns its strings, which never move when
 * the array of entries grows, so an index of names may point at them.
 */
#ifndef TWOPC_RUNTIME_CONFIG_INTERNAL_H
#define TWOPC_RUNTIME_CONFIG_INTERNAL_H

#include "tpc_kit.h"
#include "tpc_props.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *section; /* file: as written, NULL for the job; environment: its NAME part, or NULL */
    char *key;     /* file: as written; environment: the KEY part */
    char *value;
    char *origin; /* "file:line" or "environment variable TWOPC_..." */
    bool env, used;
} tpc__config_entry_t;

typedef struct {
    char *name, *origin;
} tpc__config_section_t;

struct tpc_config {
    tpc__config_entry_t *entries;
    size_t n, cap;
    tpc__config_section_t *sections; /* the file's [name] lines, for duplicates */
    size_t nsections, cap_sections;
    tpc_hash_t written; /* the files' keys and [name] lines by name (tpc__config_index_*) */
    char **applied;     /* the names components configured, for the hint of check_used */
    size_t napplied, cap_applied;
};

/* Append an entry with copies of its strings (@section NULL: none). Takes nothing. */
tpc_error_t *tpc__config_add(tpc_config_t *cfg, const char *section, size_t section_len,
                             const char *key, size_t key_len, const char *value, size_t value_len,
                             const char *origin, bool env);
void tpc__config_entry_free(tpc__config_entry_t *e);

/* An index of (section, key) names, a key NULL standing for a [section] line; the strings and
 * the origin are borrowed from the entry or section they name, which must outlive their node. */
const char *tpc__config_index_find(const tpc_hash_t *t, const char *section, size_t slen,
                                   const char *key, size_t klen);
bool tpc__config_index_add(tpc_hash_t *t, const char *section, const char *key, const char *origin);
void tpc__config_index_remove(tpc_hash_t *t, const char *section, const char *key);
void tpc__config_index_free(tpc_hash_t *t);

/* @s as an environment name: letters in upper case, anything but letters and digits '_'. */
void tpc__config_env_form(const char *s, char *out, size_t size);
/* @env read back as a key: lower case, every '_' a '.'. */
const char *tpc__config_key_of_env(const char *env, char *buf, size_t size);
/* The key of @tables whose environment name is @env, into @buf; NULL when none is. */
const char *tpc__config_env_key(const tpc_props_t *const *tables, size_t ntables, const char *env,
                                char *buf, size_t size);
/* A job-level variable that starts like a key of @tables: a misspelt key. */
bool tpc__config_looks_like_job_key(const tpc_props_t *const *tables, size_t ntables,
                                    const char *env);

#endif
