/*
 * libFuzzer harness: configuration files and the environment (runtime/config.c, config_env.c). The
 * input is read as a file; the part after its first NUL byte, split at '\n', is an environment.
 * Whatever was read is then given to a test component with a table of every row type and to a job,
 * looked up and checked for keys nobody took: no input may crash, leak or read out of bounds, and a
 * refused text must leave the configuration as it was.
 */
#include "tpc_props.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t n;
    bool b;
    int choice;
    char *s;
} comp_t;

static const char *const choices[] = {"one", "two", NULL};

static tpc_error_t *take_any(void *conf, const tpc_prop_t *p, const char *key, const char *value)
{
    (void)conf;
    (void)p;
    (void)key;
    (void)value;
    return NULL;
}

static const tpc_prop_t props[] = {
    {.name = "a.n", .type = TPC_PROP_INT, .field = TPC_PROP_FIELD(comp_t, n), .max = 99},
    {.name = "a.b", .type = TPC_PROP_BOOL, .field = TPC_PROP_FIELD(comp_t, b)},
    {.name = "c-hoice",
     .type = TPC_PROP_ENUM,
     .field = TPC_PROP_FIELD(comp_t, choice),
     .choices = choices},
    {.name = "s", .type = TPC_PROP_STRING, .field = TPC_PROP_FIELD(comp_t, s), .secret = true},
    {.name = "x.*", .type = TPC_PROP_CUSTOM, .set = take_any},
};
static const tpc_props_t table = {"fuzz component", "set()", props, sizeof props / sizeof *props};

static tpc_error_t *set(void *c, const char *key, const char *value)
{
    return tpc_props_set(&table, c, key, value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nul = memchr(text, '\0', size);
    size_t len = nul ? (size_t)(nul - text) : size;
    tpc_config_t *cfg = tpc_config_new();
    if (!cfg)
        return 0;
    /* A refused text leaves the configuration as it was: reading it again is refused the same
     * way, not at an earlier line for a key the first read left behind. */
    tpc_error_t *first = tpc_config_read_text(cfg, "fuzz.conf", text, len);
    tpc_error_t *second = tpc_config_read_text(cfg, "fuzz.conf", text, len);
    if (first && (!second || strcmp(tpc_error_message(first), tpc_error_message(second)) != 0))
        abort();
    tpc_error_destroy(first);
    tpc_error_destroy(second);

    char *env_text = NULL, *envp[33] = {NULL};
    if (nul) {
        size_t elen = size - len - 1;
        env_text = malloc(elen + 1);
        if (env_text) {
            memcpy(env_text, nul + 1, elen);
            env_text[elen] = '\0';
            size_t n = 0;
            for (char *line = strtok(env_text, "\n"); line && n < 32; line = strtok(NULL, "\n"))
                envp[n++] = line;
        }
    }
    tpc_error_destroy(tpc_config_read_env(cfg, envp));

    const tpc_props_t *tables[] = {&table};
    comp_t a = {0}, b = {0}, c = {0};
    tpc_error_destroy(tpc_config_apply(cfg, "a", tables, 1, set, &a));
    tpc_error_destroy(tpc_config_apply(cfg, "B-1", tables, 1, set, &b));
    /* "b.1" is B_1 in the environment too: refused when a variable names B_1. */
    tpc_error_destroy(tpc_config_apply(cfg, "b.1", tables, 1, set, &c));
    tpc_job_t *job = tpc_job_new("fuzz");
    tpc_error_destroy(tpc_job_configure(job, cfg));
    tpc_job_destroy(job);
    (void)tpc_config_get(cfg, "a", "a.n", NULL);
    (void)tpc_config_get(cfg, NULL, "checkpoint.dir", NULL);
    tpc_error_destroy(tpc_config_check_used(cfg));
    tpc_props_free(&table, &a);
    tpc_props_free(&table, &b);
    tpc_props_free(&table, &c);
    tpc_config_destroy(cfg);
    free(env_text);
    return 0;
}
