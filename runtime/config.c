/*
 * Configuration from outside the code (tpc_props.h): `key = value` files and TWOPC_ environment
 * variables, held as entries until a component takes its section through its own setter. The
 * reader only splits lines; what a key means and whether it exists is the component's property
 * table's to say, so a file and the environment are checked exactly as tpc_job_set() and the
 * others check a call in code. Every entry remembers where it came from (file and line, or the
 * variable's name) for the messages, and whether a component took it, so that nothing written
 * is silently ignored.
 */
#include "config_internal.h"
#include "runtime_internal.h"
#include "runtime_task.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef tpc__config_entry_t entry_t;
typedef tpc__config_section_t section_t;

tpc_config_t *tpc_config_new(void)
{
    return calloc(1, sizeof(tpc_config_t));
}

void tpc__config_entry_free(entry_t *e)
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
        tpc__config_entry_free(&cfg->entries[i]);
    for (size_t i = 0; i < cfg->nsections; i++) {
        free(cfg->sections[i].name);
        free(cfg->sections[i].origin);
    }
    for (size_t i = 0; i < cfg->napplied; i++)
        free(cfg->applied[i]);
    tpc__config_index_free(&cfg->written);
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

tpc_error_t *tpc__config_add(tpc_config_t *cfg, const char *section, size_t section_len,
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
        tpc__config_entry_free(&e);
        return tpc_error_nomem();
    }
    cfg->entries[cfg->n++] = e;
    return NULL;
}

/* ---- an index of names ------------------------------------------------------------------- */

/* A name of the index: a key of a section, or a [section] line (key NULL). Finding a repeated key
 * is a lookup, not a walk over every line before it, which a large file made quadratic. */
typedef struct {
    tpc_hash_node_t node;
    const char *section, *key, *origin;
} name_t;

typedef struct {
    const char *section, *key;
    size_t slen, klen;
} probe_t;

/* Whether the string @a is the @n bytes at @b (both NULL counts as the same). */
static bool same(const char *a, const char *b, size_t n)
{
    return a ? b && strnlen(a, n + 1) == n && memcmp(a, b, n) == 0 : !b;
}

static bool same_name(const tpc_hash_node_t *node, const void *arg)
{
    const name_t *x = (const name_t *)node;
    const probe_t *p = arg;
    return !x->key == !p->key && same(x->section, p->section, p->slen) &&
           (!p->key || same(x->key, p->key, p->klen));
}

static uint64_t name_hash(const probe_t *p)
{
    uint64_t h = p->section ? tpc__key_hash(p->section, p->slen) : 1;
    return p->key ? (h * 0x100000001b3ull) ^ tpc__key_hash(p->key, p->klen) : h;
}

static tpc_hash_node_t **index_link(const tpc_hash_t *t, const probe_t *p)
{
    return tpc_hash_find(t, name_hash(p), same_name, p);
}

const char *tpc__config_index_find(const tpc_hash_t *t, const char *section, size_t slen,
                                   const char *key, size_t klen)
{
    probe_t p = {section, key, slen, klen};
    tpc_hash_node_t **link = index_link(t, &p);
    return link && *link ? ((const name_t *)*link)->origin : NULL;
}

bool tpc__config_index_add(tpc_hash_t *t, const char *section, const char *key, const char *origin)
{
    probe_t p = {section, key, section ? strlen(section) : 0, key ? strlen(key) : 0};
    name_t *x = malloc(sizeof *x);
    if (!x || !tpc_hash_reserve(t, 1)) {
        free(x);
        return false;
    }
    *x = (name_t){.node.hash = name_hash(&p), .section = section, .key = key, .origin = origin};
    tpc_hash_insert(t, index_link(t, &p), &x->node);
    return true;
}

void tpc__config_index_remove(tpc_hash_t *t, const char *section, const char *key)
{
    probe_t p = {section, key, section ? strlen(section) : 0, key ? strlen(key) : 0};
    tpc_hash_node_t **link = index_link(t, &p);
    if (link && *link)
        free(tpc_hash_remove(t, link));
}

void tpc__config_index_free(tpc_hash_t *t)
{
    tpc_hash_iter_t it;
    for (tpc_hash_node_t *x = tpc_hash_first(t, &it); x; x = tpc_hash_next(&it))
        free(x);
    tpc_hash_free(t);
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
    const char *prev = tpc__config_index_find(&cfg->written, name, len, NULL, 0);
    if (prev) {
        tpc_error_t *err = at(origin, lineno, "put all the keys of a component under one [name]",
                              "section [%s] appears twice (first at %s)", copy, prev);
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
    if (!sec.origin || !tpc__config_index_add(&cfg->written, sec.name, NULL, sec.origin)) {
        free(sec.origin);
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
    const char *prev = tpc__config_index_find(&cfg->written, section, slen, key, klen);
    if (prev)
        return at(origin, lineno, "keep one of them", "\"%.*s\" is set twice (first at %s)",
                  (int)klen, key, prev);
    char where[4200];
    snprintf(where, sizeof where, "%s:%zu", origin, lineno);
    tpc_error_t *err = tpc__config_add(cfg, section, slen, key, klen, value, vlen, where, false);
    if (err)
        return err;
    const entry_t *e = &cfg->entries[cfg->n - 1];
    /* On failure the caller's truncate_to() takes the entry back. */
    return tpc__config_index_add(&cfg->written, e->section, e->key, e->origin) ? NULL
                                                                               : tpc_error_nomem();
}

/* Undo what a failed read added, so that a refused file leaves @cfg as it was. */
static void truncate_to(tpc_config_t *cfg, size_t n, size_t nsections)
{
    while (cfg->n > n) {
        entry_t *e = &cfg->entries[--cfg->n];
        tpc__config_index_remove(&cfg->written, e->section, e->key);
        tpc__config_entry_free(e);
    }
    while (cfg->nsections > nsections) {
        cfg->nsections--;
        tpc__config_index_remove(&cfg->written, cfg->sections[cfg->nsections].name, NULL);
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

/* Two vertices of one environment name (@name and one configured before, "a-b" and "a.b"): the
 * environment cannot tell which one a variable means, so one that names them is refused. */
static tpc_error_t *refuse_same_env_name(const tpc_config_t *cfg, const char *name,
                                         const char *env_name)
{
    const entry_t *var = NULL;
    for (size_t i = 0; i < cfg->n && !var; i++)
        if (cfg->entries[i].env && cfg->entries[i].section &&
            strcmp(cfg->entries[i].section, env_name) == 0)
            var = &cfg->entries[i];
    for (size_t a = 0; var && a < cfg->napplied; a++) {
        const char *other = cfg->applied[a];
        char form[512];
        tpc__config_env_form(other, form, sizeof form);
        /* "job" in the list is the job itself, which takes no TWOPC_<NAME>__ variable. */
        if (strcmp(other, "job") != 0 && strcmp(other, name) != 0 && strcmp(form, env_name) == 0)
            return tpc_error_hint(
                tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                              "vertices \"%s\" and \"%s\" are one name in the environment "
                              "(TWOPC_%s__), which %s sets a key of",
                              other, name, env_name, var->origin),
                "rename one of the vertices so that their names differ in more than case, '-' "
                "and '.', or configure them from a file");
    }
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
    char env_name[512] = "";
    if (name)
        tpc__config_env_form(name, env_name, sizeof env_name);
    tpc_error_t *err = name ? refuse_same_env_name(cfg, name, env_name) : NULL;
    if (!err)
        err = note_applied(cfg, name ? name : "job");
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
        const char *key = tpc__config_env_key(tables, ntables, e->key, buf, sizeof buf);
        if (!key && name)
            key = tpc__config_key_of_env(e->key, buf, sizeof buf);
        if (key)
            err = set_entry(e, key, tables, ntables, set, component);
        else if (tpc__config_looks_like_job_key(tables, ntables, e->key))
            err = unknown(tables, ntables, tpc__config_key_of_env(e->key, buf, sizeof buf),
                          e->origin);
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
        tpc__config_env_form(name, env_name, sizeof env_name);
    tpc__config_env_form(key, env_key_name, sizeof env_key_name);
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
        if (e->used ||
            (e->env && !e->section &&
             (was_applied(cfg, "job") || !tpc__config_looks_like_job_key(job, 1, e->key))))
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
    const tpc_props_t *tables[] = {tpc_job_properties(), tpc__job_backend_props(job)};
    return tpc_config_apply(cfg, NULL, tables, tables[1] ? 2 : 1, job_set, job);
}
