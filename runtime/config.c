/*
 * Configuration from outside the code (tpc_props.h): `key = value` files and TWOPC_ environment
 * variables, held as entries until a component takes its section through its own setter. The
 * reader only splits lines; what a key means and whether it exists is the component's property
 * table's to say, so a file and the environment are checked exactly as tpc_job_set() and the
 * others check a call in code. Every entry remembers where it came from (file and line, or the
 * variable's name) for the messages, and whether a component took it, so that nothing written
 * is silently ignored.
 */
#include "runtime_internal.h"
#include "tpc_props.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

typedef struct {
    char *section; /* file: as written, NULL for the job; environment: its NAME part, or NULL */
    char *key;     /* file: as written; environment: the KEY part */
    char *value;
    char *origin; /* "file:line" or "environment variable TWOPC_..." */
    bool env, used;
} entry_t;

typedef struct {
    char *name, *origin;
} section_t;

struct tpc_config {
    entry_t *entries;
    size_t n, cap;
    section_t *sections; /* the file's [name] lines, for duplicates */
    size_t nsections, cap_sections;
    char **applied; /* the names components configured, for the hint of check_used */
    size_t napplied, cap_applied;
};

tpc_config_t *tpc_config_new(void)
{
    return calloc(1, sizeof(tpc_config_t));
}

static void entry_free(entry_t *e)
{
    free(e->section);
    free(e->key);
    free(e->value);
    free(e->origin);
}

void tpc_config_destroy(tpc_config_t *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n; i++)
        entry_free(&cfg->entries[i]);
    for (size_t i = 0; i < cfg->nsections; i++) {
        free(cfg->sections[i].name);
        free(cfg->sections[i].origin);
    }
    for (size_t i = 0; i < cfg->napplied; i++)
        free(cfg->applied[i]);
    free(cfg->entries);
    free(cfg->sections);
    free(cfg->applied);
    free(cfg);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static tpc_error_t *add_entry(tpc_config_t *cfg, const char *section, size_t section_len,
                              const char *key, size_t key_len, const char *value, size_t value_len,
                              const char *origin, bool env)
{
    if (!tpc_array_grow(&cfg->entries, &cfg->cap, cfg->n + 1, sizeof *cfg->entries))
        return tpc_error_nomem();
    entry_t e = {.section = section ? dup_n(section, section_len) : NULL,
                 .key = dup_n(key, key_len),
                 .value = dup_n(value, value_len),
                 .origin = strdup(origin),
                 .env = env};
    if ((section && !e.section) || !e.key || !e.value || !e.origin) {
        entry_free(&e);
        return tpc_error_nomem();
    }
    cfg->entries[cfg->n++] = e;
    return NULL;
}

/* ---- files -------------------------------------------------------------------------------- */

/* An error of line @line of @origin: "origin:line: message", with @hint. */
static tpc_error_t *at(const char *origin, size_t line, const char *hint, const char *fmt, ...)
    TPC_PRINTF(4, 5);

static tpc_error_t *at(const char *origin, size_t line, const char *hint, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tpc_error_t *err =
        tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "%s:%zu: %s", origin, line, msg);
    return hint ? tpc_error_hint(err, "%s", hint) : err;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Whitespace trimmed from both ends of [*s, *s + *n). */
static void trim(const char **s, size_t *n)
{
    while (*n && blank(**s))
        (*s)++, (*n)--;
    while (*n && blank((*s)[*n - 1]))
        (*n)--;
}

static const section_t *find_section(const tpc_config_t *cfg, const char *name, size_t len)
{
    for (size_t i = 0; i < cfg->nsections; i++)
        if (strlen(cfg->sections[i].name) == len && memcmp(cfg->sections[i].name, name, len) == 0)
            return &cfg->sections[i];
    return NULL;
}

static const entry_t *find_file_entry(const tpc_config_t *cfg, const char *section, size_t slen,
                                      const char *key, size_t klen)
{
    for (size_t i = 0; i < cfg->n; i++) {
        const entry_t *e = &cfg->entries[i];
        bool same_section = section ? e->section && strlen(e->section) == slen &&
                                          memcmp(e->section, section, slen) == 0
                                    : !e->section;
        if (!e->env && same_section && strlen(e->key) == klen && memcmp(e->key, key, klen) == 0)
            return e;
    }
    return NULL;
}

static bool is_job_section(const char *s, size_t n)
{
    return n == 3 && memcmp(s, "job", 3) == 0;
}

/* "[name]": a new section. */
static tpc_error_t *read_section(tpc_config_t *cfg, const char *origin, size_t lineno,
                                 const char *s, size_t n, const char **section, size_t *slen)
{
    if (n < 2 || s[n - 1] != ']')
        return at(origin, lineno, "a section line is [name], alone on its line",
                  "a section line must end with ']'");
    const char *name = s + 1;
    size_t len = n - 2;
    trim(&name, &len);
    if (len == 0 || memchr(name, '[', len) || memchr(name, ']', len))
        return at(origin, lineno, "a section line is [name], the name of a vertex or \"job\"",
                  "a section names a component: not empty, no '[' or ']'");
    char *copy = dup_n(name, len);
    if (!copy)
        return tpc_error_nomem();
    const section_t *prev = find_section(cfg, name, len);
    if (prev) {
        tpc_error_t *err = at(origin, lineno, "put all the keys of a component under one [name]",
                              "section [%s] appears twice (first at %s)", copy, prev->origin);
        free(copy);
        return err;
    }
    char where[4200];
    snprintf(where, sizeof where, "%s:%zu", origin, lineno);
    if (!tpc_array_grow(&cfg->sections, &cfg->cap_sections, cfg->nsections + 1,
                        sizeof *cfg->sections)) {
        free(copy);
        return tpc_error_nomem();
    }
    section_t sec = {copy, strdup(where)};
    if (!sec.origin) {
        free(copy);
        return tpc_error_nomem();
    }
    cfg->sections[cfg->nsections++] = sec;
    *section = is_job_section(name, len) ? NULL : sec.name;
    *slen = is_job_section(name, len) ? 0 : len;
    return NULL;
}

/* "key = value" in @section. */
static tpc_error_t *read_pair(tpc_config_t *cfg, const char *origin, size_t lineno,
                              const char *section, size_t slen, const char *s, size_t n)
{
    const char *eq = memchr(s, '=', n);
    if (!eq)
        return at(origin, lineno,
                  "write key = value; a line may also be [name], a comment starting with '#', "
                  "or blank",
                  "the line has no '='");
    const char *key = s, *value = eq + 1;
    size_t klen = (size_t)(eq - s), vlen = n - klen - 1;
    trim(&key, &klen);
    trim(&value, &vlen);
    if (klen == 0)
        return at(origin, lineno, "write key = value", "no key before '='");
    /* "key = value # note" would make the note part of the value without a word. */
    for (size_t i = 1; i < vlen; i++)
        if (value[i] == '#' && blank(value[i - 1]))
            return at(origin, lineno,
                      "a comment takes a line of its own; a value with \" #\" in it can be given "
                      "in the environment",
                      "a '#' after a space in the value of \"%.*s\"", (int)klen, key);
    for (size_t i = 0; i < klen; i++)
        if (blank(key[i]))
            return at(origin, lineno,
                      "keys have no spaces (checkpoint.interval.ms); a '#' starts a comment only "
                      "at the start of a line",
                      "the key has a space in it");
    char *k = dup_n(key, klen);
    if (!k)
        return tpc_error_nomem();
    const entry_t *prev = find_file_entry(cfg, section, slen, key, klen);
    if (prev) {
        tpc_error_t *err = at(origin, lineno, "keep one of them",
                              "\"%s\" is set twice (first at %s)", k, prev->origin);
        free(k);
        return err;
    }
    free(k);
    char where[4200];
    snprintf(where, sizeof where, "%s:%zu", origin, lineno);
    return add_entry(cfg, section, slen, key, klen, value, vlen, where, false);
}

/* Undo what a failed read added, so that a refused file leaves @cfg as it was. */
static void truncate_to(tpc_config_t *cfg, size_t n, size_t nsections)
{
    while (cfg->n > n)
        entry_free(&cfg->entries[--cfg->n]);
    while (cfg->nsections > nsections) {
        cfg->nsections--;
        free(cfg->sections[cfg->nsections].name);
        free(cfg->sections[cfg->nsections].origin);
    }
}

tpc_error_t *tpc_config_read_text(tpc_config_t *cfg, const char *origin, const char *text,
                                  size_t len)
{
    if (!cfg || (!text && len) || !origin)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "reading a configuration needs one, a name and the text");
    if (len > TPC_CONFIG_FILE_MAX)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "%s: larger than %u bytes", origin,
                                            TPC_CONFIG_FILE_MAX),
                              "a configuration file holds keys, not data");
    size_t n0 = cfg->n, s0 = cfg->nsections, lineno = 0;
    const char *section = NULL;
    size_t slen = 0;
    tpc_error_t *err = NULL;
    for (size_t pos = 0; pos < len && !err;) {
        const char *line = text + pos, *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + 1;
        lineno++;
        if (n && line[n - 1] == '\r')
            n--;
        for (size_t i = 0; i < n && !err; i++)
            if (((unsigned char)line[i] < 0x20 && line[i] != '\t') || line[i] == 0x7f)
                err = at(origin, lineno, "a configuration file is text: one key = value a line",
                         "control character in the line");
        trim(&line, &n);
        if (err || n == 0 || line[0] == '#')
            continue;
        if (line[0] == '[')
            err = read_section(cfg, origin, lineno, line, n, &section, &slen);
        else
            err = read_pair(cfg, origin, lineno, section, slen, line, n);
    }
    if (err)
        truncate_to(cfg, n0, s0);
    return err;
}

tpc_error_t *tpc_config_read_file(tpc_config_t *cfg, const char *path)
{
    if (!cfg || !path)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "reading a configuration file needs one and a path");
    FILE *f = fopen(path, "rb");
    if (!f)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "could not open configuration file \"%s\": %s", path,
                                            strerror(errno)),
                              "check the path given for the configuration file");
    char *text = malloc(TPC_CONFIG_FILE_MAX + 1);
    size_t len = text ? fread(text, 1, TPC_CONFIG_FILE_MAX + 1, f) : 0;
    bool failed = ferror(f);
    fclose(f);
    if (!text)
        return tpc_error_nomem();
    tpc_error_t *err = failed ? tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                              "could not read configuration file \"%s\"", path)
                              : tpc_config_read_text(cfg, path, text, len);
    free(text);
    return err;
}

/* ---- the environment ---------------------------------------------------------------------- */

#define ENV_PREFIX "TWOPC_"

/* @s as an environment name: letters in upper case, anything but letters and digits '_'. */
static void env_form(const char *s, char *out, size_t size)
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

tpc_error_t *tpc_config_read_env(tpc_config_t *cfg, char *const *envp)
{
    if (!cfg)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "reading the environment needs a configuration");
    size_t kept = 0;
    for (size_t i = 0; i < cfg->n; i++) {
        if (cfg->entries[i].env)
            entry_free(&cfg->entries[i]);
        else
            cfg->entries[kept++] = cfg->entries[i];
    }
    cfg->n = kept;
    for (char *const *v = envp ? envp : environ; v && *v; v++) {
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
        env_form(name + plen, upper, sizeof upper);
        const char *sep = last_separator(upper);
        tpc_error_t *err = sep ? add_entry(cfg, upper, (size_t)(sep - upper), sep + 2,
                                           strlen(sep + 2), eq + 1, strlen(eq + 1), origin, true)
                               : add_entry(cfg, NULL, 0, upper, strlen(upper), eq + 1,
                                           strlen(eq + 1), origin, true);
        if (err)
            return err;
    }
    return NULL;
}

/* @env read back as a key: lower case, every '_' a '.' (what a "prefix.*" row, or a component
 * without a table, takes). */
static const char *key_of_env(const char *env, char *buf, size_t size)
{
    size_t j = 0;
    for (; env[j] && j + 1 < size; j++)
        buf[j] = env[j] == '_'                    ? '.'
                 : env[j] >= 'A' && env[j] <= 'Z' ? (char)(env[j] + 32)
                                                  : env[j];
    buf[j] = '\0';
    return buf;
}

/* The key of @tables whose environment name is @env, into @buf; NULL when none is. A row
 * "prefix.*" takes "PREFIX_REST" as "prefix." and REST read back by key_of_env(). */
static const char *env_key(const tpc_props_t *const *tables, size_t ntables, const char *env,
                           char *buf, size_t size)
{
    for (size_t t = 0; t < ntables; t++)
        for (size_t i = 0; i < tables[t]->count; i++) {
            const char *name = tables[t]->props[i].name;
            size_t n = strlen(name);
            char form[256];
            env_form(name, form, sizeof form);
            bool prefix = n >= 2 && strcmp(name + n - 2, ".*") == 0;
            if (!prefix && strcmp(form, env) == 0)
                return name;
            size_t fl = strlen(form) - 1; /* "KAFKA__" less the '_' of '*': "KAFKA_" */
            if (!prefix || strncmp(env, form, fl) != 0 || !env[fl] || n >= size)
                continue;
            memcpy(buf, name, n - 1);
            key_of_env(env + fl, buf + n - 1, size - (n - 1));
            return buf;
        }
    return NULL;
}

/* A job-level variable that starts like a job key (TWOPC_CHECKPOINT_...): a misspelt key, not
 * another program's variable. */
static bool looks_like_job_key(const tpc_props_t *const *tables, size_t ntables, const char *env)
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
            env_form(word, form, sizeof form);
            size_t fl = strlen(form);
            if (strncmp(env, form, fl) == 0 && (env[fl] == '\0' || env[fl] == '_'))
                return true;
        }
    return false;
}

/* ---- handing keys to components ------------------------------------------------------------ */

/* @key is none of @tables' keys: TPC_ERR_CONFIG listing them, after @origin. */
static tpc_error_t *unknown(const tpc_props_t *const *tables, size_t ntables, const char *key,
                            const char *origin)
{
    tpc_error_t *err = ntables ? tpc_props_unknown(tables, ntables, key)
                               : tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                               "unknown configuration key \"%s\"", key);
    return tpc_error_prefix(err, "%s", origin);
}

static tpc_error_t *set_entry(entry_t *e, const char *key, const tpc_props_t *const *tables,
                              size_t ntables, tpc_config_set_fn set, void *component)
{
    tpc_error_t *err = set(component, key, e->value);
    if (err && tpc_error_code(err) == TPC_ERR_NOT_FOUND) {
        tpc_error_destroy(err);
        return unknown(tables, ntables, key, e->origin);
    }
    if (err)
        return tpc_error_prefix(err, "%s", e->origin);
    e->used = true;
    return NULL;
}

static tpc_error_t *note_applied(tpc_config_t *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->napplied; i++)
        if (strcmp(cfg->applied[i], name) == 0)
            return NULL;
    char *copy = strdup(name);
    if (!copy || !tpc_array_grow(&cfg->applied, &cfg->cap_applied, cfg->napplied + 1,
                                 sizeof *cfg->applied)) {
        free(copy);
        return tpc_error_nomem();
    }
    cfg->applied[cfg->napplied++] = copy;
    return NULL;
}

tpc_error_t *tpc_config_apply(tpc_config_t *cfg, const char *name, const tpc_props_t *const *tables,
                              size_t ntables, tpc_config_set_fn set, void *component)
{
    if (!cfg || !set)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "applying a configuration needs one and a setter");
    if (name && strcmp(name, "job") == 0)
        return tpc_error_hint(tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                            "a component named \"job\" cannot be configured "
                                            "from a file: [job] is the job's section"),
                              "give the vertex another name");
    tpc_error_t *err = note_applied(cfg, name ? name : "job");
    char env_name[512] = "";
    if (name)
        env_form(name, env_name, sizeof env_name);
    for (size_t i = 0; i < cfg->n && !err; i++) {
        entry_t *e = &cfg->entries[i];
        if (!e->env && (name ? e->section && strcmp(e->section, name) == 0 : !e->section))
            err = set_entry(e, e->key, tables, ntables, set, component);
    }
    for (size_t i = 0; i < cfg->n && !err; i++) {
        entry_t *e = &cfg->entries[i];
        if (!e->env || (name ? !e->section || strcmp(e->section, env_name) != 0 : !!e->section))
            continue;
        char buf[512];
        const char *key = env_key(tables, ntables, e->key, buf, sizeof buf);
        if (!key && name)
            key = key_of_env(e->key, buf, sizeof buf);
        if (key)
            err = set_entry(e, key, tables, ntables, set, component);
        else if (looks_like_job_key(tables, ntables, e->key))
            err = unknown(tables, ntables, key_of_env(e->key, buf, sizeof buf), e->origin);
    }
    return err;
}

const char *tpc_config_get(const tpc_config_t *cfg, const char *name, const char *key,
                           const char **origin)
{
    if (!cfg || !key)
        return NULL;
    if (name && strcmp(name, "job") == 0)
        name = NULL;
    char env_name[512] = "", env_key_name[512];
    if (name)
        env_form(name, env_name, sizeof env_name);
    env_form(key, env_key_name, sizeof env_key_name);
    const entry_t *found = NULL;
    for (size_t i = 0; i < cfg->n; i++) {
        const entry_t *e = &cfg->entries[i];
        bool env_match = e->env &&
                         (name ? e->section && strcmp(e->section, env_name) == 0 : !e->section) &&
                         strcmp(e->key, env_key_name) == 0;
        bool file_match = !e->env &&
                          (name ? e->section && strcmp(e->section, name) == 0 : !e->section) &&
                          strcmp(e->key, key) == 0;
        if (env_match || (file_match && !found))
            found = e;
    }
    if (found && origin)
        *origin = found->origin;
    return found ? found->value : NULL;
}

static bool was_applied(const tpc_config_t *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->napplied; i++)
        if (strcmp(cfg->applied[i], name) == 0)
            return true;
    return false;
}

tpc_error_t *tpc_config_check_used(const tpc_config_t *cfg)
{
    if (!cfg)
        return NULL;
    for (size_t i = 0; i < cfg->n; i++) {
        const entry_t *e = &cfg->entries[i];
        /* A job-level variable is another program's unless it reads like a job key. */
        const tpc_props_t *job[] = {tpc_job_properties()};
        if (e->used || (e->env && !e->section &&
                        (was_applied(cfg, "job") || !looks_like_job_key(job, 1, e->key))))
            continue;
        char names[1024];
        size_t len = 0;
        names[0] = '\0';
        for (size_t a = 0; a < cfg->napplied && len < sizeof names; a++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s\"%s\"", a ? ", " : "",
                                    cfg->applied[a]);
        if (e->section && !e->env && was_applied(cfg, e->section))
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "%s: \"%s\" of [%s] was not taken",
                              e->origin, e->key, e->section),
                "configuring \"%s\" stopped at an error before this key", e->section);
        tpc_error_t *err =
            e->env && !e->section
                ? tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                "%s: the program configures no job from the environment", e->origin)
            : e->env ? tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                     "%s: no component of the program is named \"%s\" in "
                                     "the environment's upper case",
                                     e->origin, e->section)
            : e->section
                ? tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                "%s: \"%s\" of [%s]: no component of the program is named \"%s\"",
                                e->origin, e->key, e->section, e->section)
                : tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                "%s: \"%s\": the program configures no job from this file",
                                e->origin, e->key);
        return tpc_error_hint(err,
                              "a section is named after a vertex of the program; this one "
                              "configured %s",
                              len ? names : "none");
    }
    return NULL;
}

static tpc_error_t *job_set(void *job, const char *key, const char *value)
{
    return tpc_job_set(job, key, value);
}

tpc_error_t *tpc_job_configure(tpc_job_t *job, tpc_config_t *cfg)
{
    if (!job || !cfg)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "configuring a job needs a job and a configuration");
    const tpc_props_t *tables[] = {tpc_job_properties()};
    return tpc_config_apply(cfg, NULL, tables, 1, job_set, job);
}
