/*
 * The `twopc` command's argument parser, error printing and JSON string writer. Deliberately
 * small: long options only, "--name value" or "--name=value", flags, positional arguments.
 */
#include "twopc_cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const twopc_opt_t *find_opt(const twopc_opt_t *spec, const char *name, size_t len)
{
    for (; spec->name; spec++)
        if (strlen(spec->name) == len && strncmp(spec->name, name, len) == 0)
            return spec;
    return NULL;
}

bool twopc_args_parse(const char *cmd, int argc, char **argv, const twopc_opt_t *spec,
                      twopc_args_t *out)
{
    *out = (twopc_args_t){0};
    out->opts = calloc((size_t)argc + 1, sizeof *out->opts);
    out->pos = calloc((size_t)argc + 1, sizeof *out->pos);
    if (!out->opts || !out->pos)
        abort();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || a[2] == 0) {
            out->pos[out->npos++] = a;
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const twopc_opt_t *o = find_opt(spec, name, len);
        if (!o) {
            fprintf(stderr, "twopc %s: unknown option \"%.*s\"\nsee: twopc %s --help\n", cmd,
                    (int)len + 2, a, cmd);
            twopc_args_free(out);
            return false;
        }
        const char *value = "";
        if (o->takes_value && eq) {
            value = eq + 1;
        } else if (o->takes_value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "twopc %s: option \"--%s\" needs a value\nsee: twopc %s --help\n",
                        cmd, o->name, cmd);
                twopc_args_free(out);
                return false;
            }
            value = argv[++i];
        } else if (eq) {
            fprintf(stderr, "twopc %s: option \"--%s\" takes no value\n", cmd, o->name);
            twopc_args_free(out);
            return false;
        }
        if (!o->repeat && twopc_arg(out, o->name)) {
            fprintf(stderr, "twopc %s: option \"--%s\" given twice\n", cmd, o->name);
            twopc_args_free(out);
            return false;
        }
        out->opts[out->nopts++] = (twopc_arg_t){o->name, value};
    }
    return true;
}

void twopc_args_free(twopc_args_t *a)
{
    free(a->opts);
    free(a->pos);
    *a = (twopc_args_t){0};
}

const char *twopc_arg(const twopc_args_t *a, const char *name)
{
    const char *v = NULL;
    for (size_t i = 0; i < a->nopts; i++)
        if (strcmp(a->opts[i].name, name) == 0)
            v = a->opts[i].value;
    return v;
}

bool twopc_flag(const twopc_args_t *a, const char *name)
{
    return twopc_arg(a, name) != NULL;
}

const char *twopc_arg_nth(const twopc_args_t *a, const char *name, size_t i)
{
    for (size_t k = 0; k < a->nopts; k++)
        if (strcmp(a->opts[k].name, name) == 0 && i-- == 0)
            return a->opts[k].value;
    return NULL;
}

const char *twopc_arg_required(const twopc_args_t *a, const char *cmd, const char *name)
{
    const char *v = twopc_arg(a, name);
    if (!v || !*v)
        fprintf(stderr, "twopc %s: option \"--%s\" is required\nsee: twopc %s --help\n", cmd, name,
                cmd);
    return v && *v ? v : NULL;
}

int twopc_fail(const char *cmd, tpc_error_t *err)
{
    fprintf(stderr, "twopc %s: %s\n", cmd, tpc_error_message(err));
    if (tpc_error_hint_text(err))
        fprintf(stderr, "hint: %s\n", tpc_error_hint_text(err));
    tpc_error_destroy(err);
    return TWOPC_EXIT_FAILED;
}

tpc_dir_lease_t *twopc_lease(const char *cmd, const char *dir, int *rc)
{
    tpc_dir_lease_t *l = NULL;
    tpc_error_t *err = tpc_checkpoint_dir_lease(dir, true, &l);
    if (err)
        *rc = twopc_fail(cmd, err);
    return l;
}

int twopc_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "twopc %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nsee: twopc %s --help\n", cmd);
    va_end(ap);
    return TWOPC_EXIT_USAGE;
}

void twopc_format_time(int64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%03dZ", day, (int)(ms % 1000));
}

bool twopc_kafka_conf(const char *cmd, const twopc_args_t *a, twopc_kafka_conf_t *out)
{
    *out = (twopc_kafka_conf_t){0};
    out->bootstrap = twopc_arg_required(a, cmd, "bootstrap");
    if (!out->bootstrap)
        return false;
    size_t n = 0;
    while (twopc_arg_nth(a, "kafka", n))
        n++;
    out->props = calloc(2 * n + 1, sizeof *out->props);
    if (!out->props)
        abort();
    for (size_t i = 0; i < n; i++) {
        const char *kv = twopc_arg_nth(a, "kafka", i), *eq = strchr(kv, '=');
        if (!eq || eq == kv) {
            twopc_usage_error(cmd, "--kafka takes NAME=VALUE (a librdkafka property), not \"%s\"",
                              kv);
            twopc_kafka_conf_free(out);
            return false;
        }
        char *name = strndup(kv, (size_t)(eq - kv));
        if (!name)
            abort();
        out->props[2 * i] = name;
        out->props[2 * i + 1] = eq + 1;
    }
    out->nprops = n;
    return true;
}

void twopc_kafka_conf_free(twopc_kafka_conf_t *k)
{
    for (size_t i = 0; k->props && i < k->nprops; i++)
        free((char *)k->props[2 * i]);
    free(k->props);
    *k = (twopc_kafka_conf_t){0};
}
