/*
 * The one configuration parser (tpc_props.h): every component's keys are rows of a table, read
 * here. What a key takes is said in one place, the row, and from it come the checks, the
 * defaults, the messages and the generated documentation.
 */
#include "tpc_props.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void *field_at(void *conf, const tpc_prop_t *p)
{
    return (char *)conf + p->field.offset;
}

static bool name_matches(const char *name, const char *key)
{
    size_t n = strlen(name);
    if (n >= 2 && strcmp(name + n - 2, ".*") == 0)
        return strncmp(key, name, n - 1) == 0 && key[n - 1] != '\0';
    return strcmp(name, key) == 0;
}

const tpc_prop_t *tpc_props_find(const tpc_props_t *table, const char *key)
{
    if (!table || !key)
        return NULL;
    for (size_t i = 0; i < table->count; i++)
        if (name_matches(table->props[i].name, key))
            return &table->props[i];
    return NULL;
}

void tpc_prop_describe(const tpc_prop_t *p, char *buf, size_t size)
{
    size_t len = 0;
    switch (p->type) {
    case TPC_PROP_INT:
        /* Limits that only guard against overflow are not worth reading. */
        if (p->max >= INT64_MAX / 1000)
            len = (size_t)snprintf(buf, size, "a whole number, %" PRId64 " or more", p->min);
        else
            len = (size_t)snprintf(buf, size, "a whole number from %" PRId64 " to %" PRId64, p->min,
                                   p->max);
        if (p->unit && len < size)
            snprintf(buf + len, size - len, " (%s)", p->unit);
        return;
    case TPC_PROP_BOOL:
        snprintf(buf, size, "true or false");
        return;
    case TPC_PROP_ENUM:
        buf[0] = '\0';
        for (size_t i = 0; p->choices && p->choices[i] && len < size; i++) {
            const char *sep = i == 0 ? "" : p->choices[i + 1] ? ", " : " or ";
            len += (size_t)snprintf(buf + len, size - len, "%s%s", sep, p->choices[i]);
        }
        return;
    case TPC_PROP_STRING:
    case TPC_PROP_CUSTOM:
        snprintf(buf, size, "%s", p->accepts ? p->accepts : "a non-empty value");
        return;
    }
    snprintf(buf, size, "a value");
}

tpc_error_t *tpc_prop_invalid(const tpc_prop_t *p, const char *key, const char *value,
                              const char *fmt, ...)
{
    tpc_error_t *err =
        p->secret ? tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL, "invalid value for \"%s\"", key)
                  : tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                  "invalid value \"%s\" for \"%s\"", value, key);
    char hint[512];
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(hint, sizeof hint, fmt, ap);
        va_end(ap);
    } else {
        tpc_prop_describe(p, hint, sizeof hint);
    }
    return tpc_error_hint(err, "\"%s\" takes %s", key, hint);
}

/* INT and ENUM rows fill fields of 1 (bool), 4 (int, enum) or 8 bytes (int64_t, size_t). */
static void store_int(void *at, size_t size, int64_t v)
{
    if (size == 1) {
        bool b = v != 0;
        memcpy(at, &b, 1);
    } else if (size == sizeof(int32_t)) {
        int32_t n = (int32_t)v;
        memcpy(at, &n, sizeof n);
    } else {
        memcpy(at, &v, sizeof v);
    }
}

tpc_error_t *tpc_props_set(const tpc_props_t *table, void *conf, const char *key, const char *value)
{
    if (!table || !conf || !key || !value)
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL,
                             "configuration needs a key and a value");
    const tpc_prop_t *p = tpc_props_find(table, key);
    if (!p)
        return tpc_error_new(TPC_ERR_NOT_FOUND, 0, "unknown configuration key \"%s\"", key);
    void *at = field_at(conf, p);
    switch (p->type) {
    case TPC_PROP_INT: {
        int64_t v;
        /* A 4-byte field never takes more than it can hold, whatever the row says. */
        int64_t max = p->field.size == sizeof(int32_t) && p->max > INT32_MAX ? INT32_MAX : p->max;
        if (!tpc_parse_int(value, p->min, max, &v))
            return tpc_prop_invalid(p, key, value, NULL);
        store_int(at, p->field.size, v);
        return NULL;
    }
    case TPC_PROP_BOOL: {
        bool b = strcmp(value, "true") == 0;
        if (!b && strcmp(value, "false") != 0)
            return tpc_prop_invalid(p, key, value, NULL);
        memcpy(at, &b, sizeof b);
        return NULL;
    }
    case TPC_PROP_ENUM:
        for (int i = 0; p->choices && p->choices[i]; i++)
            if (strcmp(value, p->choices[i]) == 0) {
                store_int(at, p->field.size, i);
                return NULL;
            }
        return tpc_prop_invalid(p, key, value, NULL);
    case TPC_PROP_STRING: {
        if (!*value)
            return tpc_prop_invalid(p, key, value, NULL);
        if (p->set) {
            tpc_error_t *err = p->set(conf, p, key, value);
            if (err)
                return err;
        }
        char *copy = strdup(value);
        if (!copy)
            return tpc_error_nomem();
        char *old;
        memcpy(&old, at, sizeof old);
        free(old);
        memcpy(at, &copy, sizeof copy);
        return NULL;
    }
    case TPC_PROP_CUSTOM:
        return p->set(conf, p, key, value);
    }
    return tpc_prop_invalid(p, key, value, NULL);
}

tpc_error_t *tpc_props_init(const tpc_props_t *table, void *conf)
{
    for (size_t i = 0; table && i < table->count; i++) {
        const tpc_prop_t *p = &table->props[i];
        if (!p->def)
            continue;
        tpc_error_t *err = tpc_props_set(table, conf, p->name, p->def);
        if (err)
            return err;
    }
    return NULL;
}

void tpc_props_free(const tpc_props_t *table, void *conf)
{
    for (size_t i = 0; table && conf && i < table->count; i++) {
        const tpc_prop_t *p = &table->props[i];
        if (p->type != TPC_PROP_STRING)
            continue;
        char *s;
        memcpy(&s, field_at(conf, p), sizeof s);
        free(s);
        s = NULL;
        memcpy(field_at(conf, p), &s, sizeof s);
    }
}

tpc_error_t *tpc_props_unknown(const tpc_props_t *const *tables, size_t ntables, const char *key)
{
    const char *what = ntables ? tables[0]->component : "component";
    tpc_error_t *err = tpc_error_new(TPC_ERR_CONFIG, TPC_ERROR_FATAL,
                                     "unknown configuration key \"%s\" for a %s", key, what);
    char list[2048];
    size_t len = 0;
    list[0] = '\0';
    for (size_t t = 0; t < ntables; t++)
        for (size_t i = 0; i < tables[t]->count && len < sizeof list; i++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
                                    tables[t]->props[i].name);
    return tpc_error_hint(err, "%s takes %s (docs/configuration.md)",
                          ntables ? tables[0]->setter : "it", list);
}

/* Markdown table cells must not contain '|' or line breaks. */
static void cell(FILE *out, const char *s)
{
    for (; s && *s; s++)
        fputs(*s == '|' ? "\\|" : *s == '\n' ? " " : (char[]){*s, '\0'}, out);
}

void tpc_props_markdown(const tpc_props_t *table, FILE *out)
{
    fprintf(out, "## %s\n\nKeys of `%s`.\n\n", table->component, table->setter);
    fputs("| key | takes | default | description |\n|---|---|---|---|\n", out);
    for (size_t i = 0; i < table->count; i++) {
        const tpc_prop_t *p = &table->props[i];
        char takes[512];
        tpc_prop_describe(p, takes, sizeof takes);
        fprintf(out, "| `%s` | ", p->name);
        cell(out, takes);
        fputs(" | ", out);
        if (p->def && *p->def) {
            fputc('`', out);
            cell(out, p->def);
            fputc('`', out);
        } else {
            fputs("(none)", out);
        }
        fputs(" | ", out);
        cell(out, p->doc);
        fputs(" |\n", out);
    }
    fputc('\n', out);
}
