/*
 * The environment's half of a configuration (tpc_props.h): TWOPC_<NAME>__<KEY> for a component,
 * TWOPC_<KEY> for the job, and how a key or a vertex name reads in the environment's upper case.
 * Folding loses case, '-' and '.', so two variables may spell one key: they are refused together
 * rather than one silently winning by its place in environ.
 */
#include "config_internal.h"
#include "runtime_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define ENV_PREFIX "TWOPC_"

void tpc__config_env_form(const char *s, char *out, size_t size)
{
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++) {
        char c = s[i];
        out[i] = c >= 'a' && c <= 'z'                               ? (char)(c - 'a' + 'A')
                 : (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c
                                                                    : '_';
    }
    out[i] = '\0';
}

/* The last "__" of @s, or NULL. */
static const char *last_separator(const char *s)
{
    const char *found = NULL;
    for (const char *p = strstr(s, "__"); p; p = strstr(p + 1, "__"))
        found = p;
    return found;
}

/* Drop the entries of the environment, so that a reading replaces the one before it. */
static void drop_env(tpc_config_t *cfg)
{
    size_t kept = 0;
    for (size_t i = 0; i < cfg->n; i++) {
        if (cfg->entries[i].env)
            tpc__config_entry_free(&cfg->entries[i]);
        else
            cfg->entries[kept++] = cfg->entries[i];
    }
    cfg->n = kept;
}

/* The entry just added, unless another variable spelt the same key: a job-level variable counts
 * only when it reads like a job key (others belong to other programs). */
static tpc_error_t *refuse_second_spelling(tpc_hash_t *seen, const tpc__config_entry_t *e)
{
    const tpc_props_t *job[] = {tpc_job_properties()};
    if (!e->section && !tpc__config_looks_like_job_key(job, 1, e->key))
        return NULL;
    const char *first = tpc__config_index_find(
        seen, e->section, e->section ? strlen(e->section) : 0, e->key, strlen(e->key));
    if (first)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "%s and %s set the same key (%s%s%s in upper case)",
                                            first, e->origin, e->section ? e->section : "",
                                            e->section ? "__" : "", e->key),
                              "the environment ignores case, '-' and '.': keep one of them");
    return tpc__config_index_add(seen, e->section, e->key, e->origin) ? NULL : tpc_error_nomem();
}

tpc_error_t *tpc_config_read_env(tpc_config_t *cfg, char *const *envp)
{
    if (!cfg)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "reading the environment needs a configuration");
    drop_env(cfg);
    tpc_hash_t seen = {0};
    tpc_error_t *err = NULL;
    for (char *const *v = envp ? envp : environ; v && *v && !err; v++) {
        const char *eq = strchr(*v, '=');
        size_t plen = strlen(ENV_PREFIX);
        if (!eq || strncmp(*v, ENV_PREFIX, plen) != 0 || (size_t)(eq - *v) == plen)
            continue;
        char name[512], origin[600];
        size_t nlen = (size_t)(eq - *v);
        if (nlen >= sizeof name)
            nlen = sizeof name - 1;
        memcpy(name, *v, nlen);
        name[nlen] = '\0';
        snprintf(origin, sizeof origin, "environment variable %s", name);
        char upper[512];
        tpc__config_env_form(name + plen, upper, sizeof upper);
        const char *sep = last_separator(upper);
        err = sep ? tpc__config_add(cfg, upper, (size_t)(sep - upper), sep + 2, strlen(sep + 2),
                                    eq + 1, strlen(eq + 1), origin, true)
                  : tpc__config_add(cfg, NULL, 0, upper, strlen(upper), eq + 1, strlen(eq + 1),
                                    origin, true);
        if (!err)
            err = refuse_second_spelling(&seen, &cfg->entries[cfg->n - 1]);
    }
    tpc__config_index_free(&seen);
    if (err)
        drop_env(cfg);
    return err;
}

const char *tpc__config_key_of_env(const char *env, char *buf, size_t size)
{
    size_t j = 0;
    for (; env[j] && j + 1 < size; j++)
        buf[j] = env[j] == '_'                    ? '.'
                 : env[j] >= 'A' && env[j] <= 'Z' ? (char)(env[j] + 32)
                                                  : env[j];
    buf[j] = '\0';
    return buf;
}

/* A row "prefix.*" takes "PREFIX_REST" as "prefix." and REST read back by key_of_env(). */
const char *tpc__config_env_key(const tpc_props_t *const *tables, size_t ntables, const char *env,
                                char *buf, size_t size)
{
    for (size_t t = 0; t < ntables; t++)
        for (size_t i = 0; i < tables[t]->count; i++) {
            const char *name = tables[t]->props[i].name;
            size_t n = strlen(name);
            char form[256];
            tpc__config_env_form(name, form, sizeof form);
            bool prefix = n >= 2 && strcmp(name + n - 2, ".*") == 0;
            if (!prefix && strcmp(form, env) == 0)
                return name;
            size_t fl = strlen(form) - 1; /* "KAFKA__" less the '_' of '*': "KAFKA_" */
            if (!prefix || strncmp(env, form, fl) != 0 || !env[fl] || n >= size)
                continue;
            memcpy(buf, name, n - 1);
            tpc__config_key_of_env(env + fl, buf + n - 1, size - (n - 1));
            return buf;
        }
    return NULL;
}

/* TWOPC_CHECKPOINT_... starts like a job key: a misspelt key, not another program's variable. */
bool tpc__config_looks_like_job_key(const tpc_props_t *const *tables, size_t ntables,
                                    const char *env)
{
    for (size_t t = 0; t < ntables; t++)
        for (size_t i = 0; i < tables[t]->count; i++) {
            const char *name = tables[t]->props[i].name, *dot = strchr(name, '.');
            char word[128], form[128];
            size_t n = dot ? (size_t)(dot - name) : strlen(name);
            if (n >= sizeof word)
                continue;
            memcpy(word, name, n);
            word[n] = '\0';
            tpc__config_env_form(word, form, sizeof form);
            size_t fl = strlen(form);
            if (strncmp(env, form, fl) == 0 && (env[fl] == '\0' || env[fl] == '_'))
                return true;
        }
    return false;
}
