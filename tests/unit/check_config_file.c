/*
 * Configuration from a file and the environment (tpc_props.h): keys reach the component their
 * section or variable names, with the precedence the documentation gives (default < the program
 * before configuring < file < environment < the program after); every malformed line, repeated
 * key or section, unknown key, bad value and key no component took is refused with its file and
 * line or its variable; secrets never appear; the environment names of every component's keys
 * are distinct and leave the examples' TWOPC_PG_CONNINFO / TWOPC_KAFKA_BOOTSTRAP alone.
 */
#include "tpc_file.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_props.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a component of the test's own, to read back what was set ------------------------------ */

typedef struct {
    int64_t interval_ms;
    int retries;
    char *name, *password;
    char last_extra[128]; /* the last extra.* key set */
    int extras;
} comp_t;

static tpc_error_t *set_extra(void *conf, const tpc_prop_t *p, const char *key, const char *value)
{
    (void)p;
    (void)value;
    comp_t *c = conf;
    snprintf(c->last_extra, sizeof c->last_extra, "%s", key);
    c->extras++;
    return NULL;
}

static const tpc_prop_t comp_props[] = {
    {.name = "poll.interval.ms",
     .type = TPC_PROP_INT,
     .field = TPC_PROP_FIELD(comp_t, interval_ms),
     .min = 0,
     .max = 100000,
     .def = "10",
     .unit = "ms",
     .doc = "test"},
    {.name = "max-retries",
     .type = TPC_PROP_INT,
     .field = TPC_PROP_FIELD(comp_t, retries),
     .min = 0,
     .max = 9,
     .def = "1",
     .doc = "test"},
    {.name = "name", .type = TPC_PROP_STRING, .field = TPC_PROP_FIELD(comp_t, name), .doc = "t"},
    {.name = "password",
     .type = TPC_PROP_STRING,
     .field = TPC_PROP_FIELD(comp_t, password),
     .secret = true,
     .accepts = "at least 8 characters",
     .set = NULL,
     .doc = "test"},
    {.name = "extra.*", .type = TPC_PROP_CUSTOM, .set = set_extra, .doc = "test"},
};
static const tpc_props_t comp_table = {"test component", "comp_set()", comp_props,
                                       sizeof comp_props / sizeof *comp_props};

static tpc_error_t *comp_set(void *c, const char *key, const char *value)
{
    if (strcmp(key, "password") == 0 && strlen(value) < 8)
        return tpc_prop_invalid(tpc_props_find(&comp_table, key), key, value, NULL);
    return tpc_props_set(&comp_table, c, key, value);
}

static tpc_error_t *comp_configure(tpc_config_t *cfg, const char *name, comp_t *c)
{
    const tpc_props_t *tables[] = {&comp_table};
    return tpc_config_apply(cfg, name, tables, 1, comp_set, c);
}

static void comp_init(comp_t *c)
{
    memset(c, 0, sizeof *c);
    ck_assert_ptr_null(tpc_props_init(&comp_table, c));
}

static tpc_config_t *config_of(const char *text, char **env)
{
    tpc_config_t *cfg = tpc_config_new();
    ck_assert_ptr_nonnull(cfg);
    tpc_error_t *err = tpc_config_read_text(cfg, "app.conf", text, strlen(text));
    ck_assert_msg(!err, "%s", err ? tpc_error_message(err) : "");
    char *none[] = {NULL};
    ck_assert_ptr_null(tpc_config_read_env(cfg, env ? env : none));
    return cfg;
}

/* @err is TPC_ERR_CONFIG whose message contains each of @needles (NULL-terminated), and has a
 * hint; it is freed. */
static void expect(tpc_error_t *err, const char *const *needles)
{
    ck_assert_msg(err != NULL, "accepted; wanted \"%s\"", needles[0]);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_CONFIG);
    for (size_t i = 0; needles[i]; i++)
        ck_assert_msg(strstr(tpc_error_message(err), needles[i]), "message \"%s\" lacks \"%s\"",
                      tpc_error_message(err), needles[i]);
    ck_assert_msg(tpc_error_hint_text(err), "no hint for \"%s\"", tpc_error_message(err));
    tpc_error_destroy(err);
}

#define EXPECT(err, ...) expect((err), (const char *const[]){__VA_ARGS__, NULL})

static tpc_error_t *read_text(const char *text)
{
    tpc_config_t *cfg = tpc_config_new();
    tpc_error_t *err = tpc_config_read_text(cfg, "app.conf", text, strlen(text));
    tpc_config_destroy(cfg);
    return err;
}

START_TEST(test_sections_reach_their_components)
{
    char *env[] = {"TWOPC_READER__MAX_RETRIES=7", "TWOPC_WRITER__EXTRA_LINGER_MS=5", NULL};
    tpc_config_t *cfg = config_of("# the job\n"
                                  "checkpoint.interval.ms = 250\n"
                                  "\n"
                                  "[reader]\n"
                                  "  poll.interval.ms=40  \r\n"
                                  "name = a=b#c\n"
                                  "\t# a comment\n"
                                  "[writer]\n"
                                  "name=\n"
                                  "poll.interval.ms = 41",
                                  env);
    comp_t reader, writer;
    comp_init(&reader);
    comp_init(&writer);
    ck_assert_ptr_null(comp_configure(cfg, "reader", &reader));
    ck_assert_int_eq(reader.interval_ms, 40);
    ck_assert_int_eq(reader.retries, 7);
    ck_assert_str_eq(reader.name, "a=b#c");
    /* "name =" is the empty value, which a STRING row refuses: at the line that says it. */
    EXPECT(comp_configure(cfg, "writer", &writer),
           "app.conf:9: ", "invalid value \"\" for \"name\"");
    tpc_job_t *job = tpc_job_new("conf");
    ck_assert_ptr_null(tpc_job_configure(job, cfg));
    tpc_job_destroy(job);
    /* The writer's keys were never taken: its configuration stopped at the first. */
    EXPECT(tpc_config_check_used(cfg), "app.conf:9: ", "\"name\" of [writer] was not taken");
    tpc_props_free(&comp_table, &reader);
    tpc_props_free(&comp_table, &writer);
    tpc_config_destroy(cfg);
}
END_TEST

/* The kafka.* of a table from the environment: KAFKA_LINGER_MS is kafka.linger.ms. */
START_TEST(test_env_prefix_rows)
{
    char *env[] = {"TWOPC_OUT__EXTRA_LINGER_MS=5", "TWOPC_OUT_1__EXTRA_A=1", NULL};
    tpc_config_t *cfg = config_of("", env);
    comp_t c, d;
    comp_init(&c);
    comp_init(&d);
    ck_assert_ptr_null(comp_configure(cfg, "out", &c));
    ck_assert_str_eq(c.last_extra, "extra.linger.ms");
    /* "out-1" and "out.1" are both OUT_1 in the environment. */
    ck_assert_ptr_null(comp_configure(cfg, "out-1", &d));
    ck_assert_str_eq(d.last_extra, "extra.a");
    ck_assert_ptr_null(tpc_config_check_used(cfg));
    tpc_config_destroy(cfg);
}
END_TEST

/* default < the program before configuring < file < environment < the program after. */
START_TEST(test_precedence)
{
    comp_t c;
    comp_init(&c);
    ck_assert_int_eq(c.interval_ms, 10); /* the table's default */
    tpc_config_t *cfg = config_of("[c]\npoll.interval.ms = 30\nmax-retries = 3\n", NULL);
    ck_assert_ptr_null(comp_set(&c, "poll.interval.ms", "20"));
    ck_assert_ptr_null(comp_set(&c, "name", "from-code"));
    ck_assert_ptr_null(comp_configure(cfg, "c", &c));
    ck_assert_int_eq(c.interval_ms, 30); /* the file over the program before */
    ck_assert_str_eq(c.name, "from-code");
    tpc_config_destroy(cfg);

    char *env[] = {"TWOPC_C__POLL_INTERVAL_MS=50", NULL};
    cfg = config_of("[c]\npoll.interval.ms = 30\nmax-retries = 3\n", env);
    ck_assert_ptr_null(comp_configure(cfg, "c", &c));
    ck_assert_int_eq(c.interval_ms, 50); /* the environment over the file */
    ck_assert_int_eq(c.retries, 3);
    const char *origin = NULL;
    ck_assert_str_eq(tpc_config_get(cfg, "c", "poll.interval.ms", &origin), "50");
    ck_assert_str_eq(origin, "environment variable TWOPC_C__POLL_INTERVAL_MS");
    ck_assert_str_eq(tpc_config_get(cfg, "c", "max-retries", &origin), "3");
    ck_assert_str_eq(origin, "app.conf:3");
    ck_assert_ptr_null(tpc_config_get(cfg, "c", "name", NULL));
    ck_assert_ptr_null(comp_set(&c, "poll.interval.ms", "60"));
    ck_assert_int_eq(c.interval_ms, 60); /* the program after, over everything */
    tpc_props_free(&comp_table, &c);
    tpc_config_destroy(cfg);
}
END_TEST

/* Each malformed line is refused with the file and the line, and a hint. */
START_TEST(test_malformed_lines)
{
    EXPECT(read_text("a = 1\nno equals sign\n"), "app.conf:2: ", "no '='");
    EXPECT(read_text("a = 1\n = 2\n"), "app.conf:2: ", "no key");
    EXPECT(read_text("check point = 2\n"), "app.conf:1: ", "space");
    EXPECT(read_text("a = 1\nb = /var/x # the folder\n"),
           "app.conf:2: ", "'#' after a space in the value of \"b\"");
    EXPECT(read_text("b = x\t#y\n"), "app.conf:1: ", "'#'");
    EXPECT(read_text("a = 1\n\n# c\na = 2\n"), "app.conf:4: ", "\"a\" is set twice",
           "first at app.conf:1");
    EXPECT(read_text("[x]\na = 1\n[y]\na = 1\n[x]\n"), "app.conf:5: ", "[x] appears twice",
           "app.conf:1");
    EXPECT(read_text("a = 1\n[job]\na = 2\n"), "app.conf:3: ", "\"a\" is set twice");
    EXPECT(read_text("[x\n"), "app.conf:1: ", "']'");
    EXPECT(read_text("[ ]\n"), "app.conf:1: ", "section");
    EXPECT(read_text("[a]b]\n"), "app.conf:1: ", "section");
    EXPECT(read_text("a = 1\nb = x\001y\n"), "app.conf:2: ", "control character");
    static const char nul[] = "a = 1\nb = x\0y\n";
    tpc_config_t *cfg = tpc_config_new();
    EXPECT(tpc_config_read_text(cfg, "app.conf", nul, sizeof nul - 1),
           "app.conf:2: ", "control character");
    tpc_config_destroy(cfg);
    char *big = malloc(TPC_CONFIG_FILE_MAX + 2);
    memset(big, '#', TPC_CONFIG_FILE_MAX + 1);
    big[TPC_CONFIG_FILE_MAX + 1] = '\0';
    EXPECT(read_text(big), "app.conf: larger than");
    free(big);
}
END_TEST

/* A refused text leaves the configuration as it was; a second file may not repeat a key. */
START_TEST(test_refused_text_changes_nothing)
{
    tpc_config_t *cfg = tpc_config_new();
    const char *bad = "[c]\nmax-retries = 2\n[d]\nbroken\n";
    ck_assert_ptr_nonnull(cfg);
    tpc_error_t *err = tpc_config_read_text(cfg, "one.conf", bad, strlen(bad));
    EXPECT(err, "one.conf:4: ");
    ck_assert_ptr_null(tpc_config_get(cfg, "c", "max-retries", NULL));
    const char *good = "[c]\nmax-retries = 2\n";
    ck_assert_ptr_null(tpc_config_read_text(cfg, "one.conf", good, strlen(good)));
    EXPECT(tpc_config_read_text(cfg, "two.conf", good, strlen(good)),
           "two.conf:1: ", "appears twice (first at one.conf:1)");
    const char *other = "[d]\nmax-retries = 4\n";
    ck_assert_ptr_null(tpc_config_read_text(cfg, "two.conf", other, strlen(other)));
    ck_assert_str_eq(tpc_config_get(cfg, "d", "max-retries", NULL), "4");
    tpc_config_destroy(cfg);
}
END_TEST

/* Unknown keys and bad values: refused when the component takes them, with their origin. */
START_TEST(test_unknown_keys_and_bad_values)
{
    char *env[] = {"TWOPC_C__MAX_RETRIES=99", NULL};
    tpc_config_t *cfg = config_of("[c]\n\nmax-retry = 2\n", NULL);
    comp_t c;
    comp_init(&c);
    EXPECT(comp_configure(cfg, "c", &c),
           "app.conf:3: ", "unknown configuration key \"max-retry\" for a test component");
    tpc_config_destroy(cfg);

    cfg = config_of("[c]\npoll.interval.ms = 10s\n", NULL);
    EXPECT(comp_configure(cfg, "c", &c), "app.conf:2: ", "invalid value \"10s\"");
    tpc_config_destroy(cfg);

    cfg = config_of("", env);
    EXPECT(comp_configure(cfg, "c", &c), "environment variable TWOPC_C__MAX_RETRIES: ",
           "invalid value \"99\" for \"max-retries\"");
    tpc_config_destroy(cfg);

    char *env2[] = {"TWOPC_C__MAX_RETRYS=1", NULL};
    cfg = config_of("", env2);
    EXPECT(comp_configure(cfg, "c", &c), "environment variable TWOPC_C__MAX_RETRYS: ",
           "unknown configuration key \"max.retrys\"");
    tpc_config_destroy(cfg);

    /* The job's keys: the file's first section, at their line. */
    cfg = config_of("checkpoint.interval.ms = 100\ncheckpoint.intervall.ms = 100\n", NULL);
    tpc_job_t *job = tpc_job_new("conf");
    EXPECT(tpc_job_configure(job, cfg),
           "app.conf:2: ", "unknown configuration key \"checkpoint.intervall.ms\" for a job");
    tpc_config_destroy(cfg);
    cfg = config_of("[job]\nrestore.mode = latest\n", NULL);
    EXPECT(tpc_job_configure(job, cfg), "app.conf:2: ", "\"restore.mode\"");
    tpc_config_destroy(cfg);
    tpc_job_destroy(job);
    tpc_props_free(&comp_table, &c);

    /* A component may not be called "job": that section is the job's. */
    cfg = config_of("", NULL);
    EXPECT(comp_configure(cfg, "job", &c), "\"job\"");
    tpc_config_destroy(cfg);
}
END_TEST

/* A key that no component took is refused after all were configured, with where it was. */
START_TEST(test_keys_nobody_took)
{
    char *env[] = {"TWOPC_WRITTER__MAX_RETRIES=2", NULL};
    tpc_config_t *cfg = config_of("[c]\nmax-retries = 2\n[writter]\nmax-retries = 2\n", NULL);
    comp_t c;
    comp_init(&c);
    ck_assert_ptr_null(comp_configure(cfg, "c", &c));
    tpc_error_t *err = tpc_config_check_used(cfg);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_nonnull(strstr(tpc_error_hint_text(err), "\"c\""));
    EXPECT(err, "app.conf:4: ", "[writter]", "no component of the program is named \"writter\"");
    tpc_config_destroy(cfg);

    cfg = config_of("", env);
    ck_assert_ptr_null(comp_configure(cfg, "c", &c));
    EXPECT(tpc_config_check_used(cfg),
           "environment variable TWOPC_WRITTER__MAX_RETRIES: ", "WRITTER");
    tpc_config_destroy(cfg);

    /* The job's keys of a program that configures no job, from the file and the environment;
     * other programs' variables stay allowed. */
    cfg = config_of("checkpoint.interval.ms = 100\n[c]\nmax-retries = 2\n", NULL);
    ck_assert_ptr_null(comp_configure(cfg, "c", &c));
    EXPECT(tpc_config_check_used(cfg), "app.conf:1: ", "configures no job");
    tpc_config_destroy(cfg);
    char *job_env[] = {"TWOPC_PG_CONNINFO=host=x", "TWOPC_RESTART_ATTEMPTS=9", NULL};
    cfg = config_of("[c]\nmax-retries = 2\n", job_env);
    ck_assert_ptr_null(comp_configure(cfg, "c", &c));
    EXPECT(tpc_config_check_used(cfg), "environment variable TWOPC_RESTART_ATTEMPTS: ",
           "configures no job from the environment");
    tpc_config_destroy(cfg);
    char *foreign_env[] = {"TWOPC_PG_CONNINFO=host=x", "TWOPC_KAFKA_BOOTSTRAP=h:1", NULL};
    cfg = config_of("[c]\nmax-retries = 2\n", foreign_env);
    ck_assert_ptr_null(comp_configure(cfg, "c", &c));
    ck_assert_ptr_null(tpc_config_check_used(cfg));
    tpc_config_destroy(cfg);
    tpc_props_free(&comp_table, &c);
}
END_TEST

/* TWOPC_<KEY> of the job; other programs' TWOPC_ variables are left alone, a misspelt job key is
 * not. */
START_TEST(test_job_environment)
{
    char *env[] = {"PATH=/bin",
                   "TWOPC_PG_CONNINFO=host=127.0.0.1 password=hunter22",
                   "TWOPC_KAFKA_BOOTSTRAP=127.0.0.1:9092",
                   "TWOPC_TEST_PG_CONNINFO=host=x",
                   "TWOPC_CRASH_SEED=3",
                   "TWOPC_CHECKPOINT_MAX_CONCURRENT=2",
                   "TWOPC_RESTORE_MODE=fresh",
                   NULL};
    tpc_config_t *cfg = config_of("checkpoint.max-concurrent = 9\n", env);
    tpc_job_t *job = tpc_job_new("conf");
    ck_assert_ptr_null(tpc_job_configure(job, cfg));
    ck_assert_str_eq(tpc_config_get(cfg, NULL, "checkpoint.max-concurrent", NULL), "2");
    ck_assert_str_eq(tpc_config_get(cfg, "job", "restore.mode", NULL), "fresh");
    ck_assert_ptr_null(tpc_config_check_used(cfg));
    tpc_config_destroy(cfg);

    char *typo[] = {"TWOPC_CHECKPOINT_INTERVALL_MS=100", NULL};
    cfg = config_of("", typo);
    EXPECT(tpc_job_configure(job, cfg), "environment variable TWOPC_CHECKPOINT_INTERVALL_MS: ",
           "unknown configuration key \"checkpoint.intervall.ms\" for a job");
    tpc_config_destroy(cfg);
    char *bad[] = {"TWOPC_CHECKPOINT_INTERVAL_MS=soon", NULL};
    cfg = config_of("checkpoint.interval.ms = 100\n", bad);
    EXPECT(tpc_job_configure(job, cfg),
           "environment variable TWOPC_CHECKPOINT_INTERVAL_MS: ", "invalid value \"soon\"");
    tpc_config_destroy(cfg);
    tpc_job_destroy(job);
}
END_TEST

/* The value of a secret row appears in no message, from a file or from the environment. */
START_TEST(test_secrets_hidden)
{
    char *env[] = {"TWOPC_C__PASSWORD=short1", NULL};
    tpc_config_t *cfg = config_of("[c]\npassword = short2\n", env);
    comp_t c;
    comp_init(&c);
    tpc_error_t *err = comp_configure(cfg, "c", &c);
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_null(strstr(tpc_error_message(err), "short2"));
    ck_assert_ptr_null(strstr(tpc_error_hint_text(err), "short2"));
    EXPECT(err, "app.conf:2: ", "invalid value for \"password\"");
    tpc_config_destroy(cfg);

    cfg = config_of("", env);
    err = comp_configure(cfg, "c", &c);
    ck_assert_ptr_null(strstr(tpc_error_message(err), "short1"));
    EXPECT(err, "environment variable TWOPC_C__PASSWORD: ");
    tpc_config_destroy(cfg);

    /* The PostgreSQL sink's connection string, from a file. */
    cfg = config_of("[postgres]\npg.conninfo = host=x password='hunter22\n", NULL);
    tpc_txn_sink_t *sink = NULL;
    ck_assert_ptr_null(tpc_pg_sink_new(&sink));
    err = tpc_txn_sink_configure(sink, cfg, "postgres");
    ck_assert_ptr_nonnull(err);
    ck_assert_ptr_null(strstr(tpc_error_message(err), "hunter22"));
    EXPECT(err, "app.conf:2: ", "pg.conninfo");
    tpc_txn_sink_destroy(sink);
    tpc_config_destroy(cfg);
    tpc_props_free(&comp_table, &c);
}
END_TEST

/* The library's own components take their sections: the sinks (their keys and the
 * transactional sink's) and the Kafka source. */
START_TEST(test_library_components)
{
    char *env[] = {"TWOPC_KAFKA__KAFKA_LINGER_MS=7", "TWOPC_SOURCE__MAX_BATCH=100", NULL};
    tpc_config_t *cfg = config_of("[postgres]\n"
                                  "pg.conninfo = host=127.0.0.1 dbname=app\n"
                                  "pg.mode = upsert\n"
                                  "commit.retry.deadline.ms = 1000\n"
                                  "[kafka]\n"
                                  "transactional.id.prefix = orders\n"
                                  "[source]\n"
                                  "start = latest\n"
                                  "[files]\n"
                                  "file.prefix = out\n",
                                  env);
    tpc_txn_sink_t *pg = NULL, *kafka = NULL, *files = NULL;
    tpc_kafka_source_t *src = NULL;
    ck_assert_ptr_null(tpc_pg_sink_new(&pg));
    ck_assert_ptr_null(tpc_kafka_sink_new("127.0.0.1:9", "t", &kafka));
    ck_assert_ptr_null(tpc_kafka_source_new("127.0.0.1:9", "t", &src));
    char *dir = tpc_test_tmpdir("config-file");
    ck_assert_ptr_null(tpc_file_sink_new(dir, &files));
    ck_assert_ptr_null(tpc_txn_sink_configure(pg, cfg, "postgres"));
    ck_assert_ptr_null(tpc_txn_sink_configure(kafka, cfg, "kafka"));
    ck_assert_ptr_null(tpc_kafka_source_configure(src, cfg, "source"));
    EXPECT(tpc_config_check_used(cfg), "app.conf:10: ", "[files]");
    ck_assert_ptr_null(tpc_txn_sink_configure(files, cfg, "files"));
    ck_assert_ptr_null(tpc_config_check_used(cfg));
    tpc_config_destroy(cfg);

    char *bad[] = {"TWOPC_SOURCE__KAFKA_ISOLATION_LEVEL=read_uncommitted", NULL};
    cfg = config_of("", bad);
    EXPECT(tpc_kafka_source_configure(src, cfg, "source"),
           "environment variable TWOPC_SOURCE__KAFKA_ISOLATION_LEVEL: ", "isolation.level");
    tpc_config_destroy(cfg);
    tpc_txn_sink_destroy(pg);
    tpc_txn_sink_destroy(kafka);
    tpc_txn_sink_destroy(files);
    tpc_kafka_source_destroy(src);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* Within each component no two keys share an environment name, and none holds the "__" that
 * separates a component's name; no job key is named like the examples' server variables. */
static void env_name(const char *key, char *out, size_t size)
{
    size_t i = 0;
    for (; key[i] && i + 1 < size; i++)
        out[i] = key[i] >= 'a' && key[i] <= 'z' ? key[i] - 32
                 : (key[i] >= 'A' && key[i] <= 'Z') || (key[i] >= '0' && key[i] <= '9') ? key[i]
                                                                                        : '_';
    out[i] = '\0';
}

START_TEST(test_environment_names_distinct)
{
    const tpc_props_t *sink = tpc_txn_sink_properties();
    const tpc_props_t *components[][2] = {
        {tpc_job_properties(), NULL},          {sink, tpc_file_sink_properties()},
        {sink, tpc_pg_sink_properties()},      {sink, tpc_kafka_sink_properties()},
        {tpc_kafka_source_properties(), NULL},
    };
    for (size_t c = 0; c < sizeof components / sizeof *components; c++) {
        char names[128][128];
        size_t n = 0;
        for (size_t t = 0; t < 2 && components[c][t]; t++)
            for (size_t i = 0; i < components[c][t]->count; i++) {
                ck_assert_uint_lt(n, 128);
                env_name(components[c][t]->props[i].name, names[n], sizeof names[n]);
                const char *name = components[c][t]->props[i].name;
                size_t len = strlen(name);
                if (len < 2 || strcmp(name + len - 2, ".*") != 0)
                    ck_assert_msg(!strstr(names[n], "__"), "%s", names[n]);
                for (size_t j = 0; j < n; j++)
                    ck_assert_msg(strcmp(names[j], names[n]) != 0, "two keys are TWOPC_%s",
                                  names[n]);
                n++;
            }
    }
    for (size_t i = 0; i < tpc_job_properties()->count; i++) {
        char name[128];
        env_name(tpc_job_properties()->props[i].name, name, sizeof name);
        ck_assert_msg(strncmp(name, "PG_", 3) && strncmp(name, "KAFKA_", 6) &&
                          strncmp(name, "TEST_", 5),
                      "job key TWOPC_%s looks like the examples' variables", name);
    }
}
END_TEST

/* A real file: read from its path, CRLF lines; a missing one is named. */
START_TEST(test_read_file)
{
    char *dir = tpc_test_tmpdir("config-file");
    char path[4200];
    snprintf(path, sizeof path, "%s/app.conf", dir);
    FILE *f = fopen(path, "w");
    fputs("[c]\r\nmax-retries = 4\r\npoll.interval.ms\r\n", f);
    fclose(f);
    tpc_config_t *cfg = tpc_config_new();
    char where[4300];
    snprintf(where, sizeof where, "%s:3: ", path);
    EXPECT(tpc_config_read_file(cfg, path), where, "no '='");
    f = fopen(path, "w");
    fputs("[c]\r\nmax-retries = 4\r\n", f);
    fclose(f);
    ck_assert_ptr_null(tpc_config_read_file(cfg, path));
    ck_assert_str_eq(tpc_config_get(cfg, "c", "max-retries", NULL), "4");
    snprintf(path, sizeof path, "%s/missing.conf", dir);
    EXPECT(tpc_config_read_file(cfg, path), "missing.conf", "could not open");
    tpc_config_destroy(cfg);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* The example file of docs/configuration.md is read, and taken by the job and the components
 * it names, as the page says. */
START_TEST(test_documented_example)
{
    static char page[1 << 16];
    FILE *f = fopen("docs/configuration.md", "r");
    ck_assert_ptr_nonnull(f);
    page[fread(page, 1, sizeof page - 1, f)] = '\0';
    fclose(f);
    const char *section = strstr(page, "## Files and the environment");
    ck_assert_ptr_nonnull(section);
    const char *start = strstr(section, "```\n"), *end = start ? strstr(start + 4, "```") : NULL;
    ck_assert_ptr_nonnull(end);
    tpc_config_t *cfg = tpc_config_new();
    tpc_error_t *err =
        tpc_config_read_text(cfg, "configuration.md", start + 4, (size_t)(end - start - 4));
    ck_assert_msg(!err, "%s", err ? tpc_error_message(err) : "");
    tpc_job_t *job = tpc_job_new("doc");
    tpc_kafka_source_t *src = NULL;
    tpc_txn_sink_t *pg = NULL;
    ck_assert_ptr_null(tpc_kafka_source_new("127.0.0.1:9", "t", &src));
    ck_assert_ptr_null(tpc_pg_sink_new(&pg));
    ck_assert_ptr_null(tpc_job_configure(job, cfg));
    ck_assert_ptr_null(tpc_kafka_source_configure(src, cfg, "source"));
    ck_assert_ptr_null(tpc_txn_sink_configure(pg, cfg, "postgres"));
    ck_assert_ptr_null(tpc_config_check_used(cfg));
    ck_assert_str_eq(tpc_config_get(cfg, "source", "kafka.security.protocol", NULL), "ssl");
    tpc_job_destroy(job);
    tpc_kafka_source_destroy(src);
    tpc_txn_sink_destroy(pg);
    tpc_config_destroy(cfg);
}
END_TEST

/* A file of TPC_CONFIG_FILE_MAX bytes of short distinct keys (some 150 000 lines) is read in
 * well under the case's timeout, and a key repeated at its end is still found. */
START_TEST(test_large_file_of_distinct_keys)
{
    char *text = malloc(TPC_CONFIG_FILE_MAX + 1);
    ck_assert_ptr_nonnull(text);
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    size_t len = 0, lines = 0;
    while (len + 8 <= TPC_CONFIG_FILE_MAX) {
        size_t v = lines++;
        for (int d = 0; d < 4; d++, v /= 36)
            text[len++] = digits[v % 36];
        memcpy(text + len, "=1\n", 3);
        len += 3;
    }
    ck_assert_uint_gt(lines, 140000);
    tpc_config_t *cfg = tpc_config_new();
    tpc_error_t *err = tpc_config_read_text(cfg, "big.conf", text, len);
    ck_assert_msg(!err, "%s", err ? tpc_error_message(err) : "");
    ck_assert_str_eq(tpc_config_get(cfg, NULL, "0000", NULL), "1");
    memcpy(text + len - 7, "0000", 4); /* the last line repeats the first key */
    tpc_config_t *again = tpc_config_new();
    char where[64];
    snprintf(where, sizeof where, "big.conf:%zu: ", lines);
    EXPECT(tpc_config_read_text(again, "big.conf", text, len), where, "\"0000\" is set twice",
           "first at big.conf:1");
    tpc_config_destroy(again);
    tpc_config_destroy(cfg);
    free(text);
}
END_TEST

/* Two variables of one key in two spellings: refused, both named, not the later one winning. */
START_TEST(test_environment_spellings_refused)
{
    char *two[] = {"TWOPC_sink__pg_table=a", "TWOPC_SINK__PG_TABLE=b", NULL};
    tpc_config_t *cfg = tpc_config_new();
    EXPECT(tpc_config_read_env(cfg, two), "TWOPC_sink__pg_table", "TWOPC_SINK__PG_TABLE");
    ck_assert_ptr_null(tpc_config_get(cfg, "sink", "pg.table", NULL));
    char *job[] = {"TWOPC_checkpoint.interval-ms=5", "TWOPC_CHECKPOINT_INTERVAL_MS=6", NULL};
    EXPECT(tpc_config_read_env(cfg, job), "TWOPC_checkpoint.interval-ms",
           "TWOPC_CHECKPOINT_INTERVAL_MS");
    /* Other programs' variables of the job's level are theirs to spell. */
    char *other[] = {"TWOPC_test_pg=a", "TWOPC_TEST_PG=b", "TWOPC_C__MAX_RETRIES=2", NULL};
    ck_assert_ptr_null(tpc_config_read_env(cfg, other));
    ck_assert_str_eq(tpc_config_get(cfg, "c", "max-retries", NULL), "2");
    tpc_config_destroy(cfg);
}
END_TEST

/* Vertices "a-b" and "a.b" are both A_B in the environment: configuring the second is refused,
 * naming both, when the environment sets A_B; without such a variable both may be configured. */
START_TEST(test_vertices_of_one_environment_name)
{
    char *env[] = {"TWOPC_A_B__MAX_RETRIES=2", NULL};
    tpc_config_t *cfg = config_of("[a.b]\nmax-retries = 3\n", env);
    comp_t first, second;
    comp_init(&first);
    comp_init(&second);
    ck_assert_ptr_null(comp_configure(cfg, "a-b", &first));
    EXPECT(comp_configure(cfg, "a.b", &second), "\"a-b\"", "\"a.b\"", "TWOPC_A_B__");
    tpc_config_destroy(cfg);
    cfg = config_of("[a.b]\nmax-retries = 3\n", NULL);
    ck_assert_ptr_null(comp_configure(cfg, "a-b", &first));
    ck_assert_ptr_null(comp_configure(cfg, "a.b", &second));
    ck_assert_int_eq(second.retries, 3);
    ck_assert_ptr_null(tpc_config_check_used(cfg));
    tpc_config_destroy(cfg);
    tpc_props_free(&comp_table, &first);
    tpc_props_free(&comp_table, &second);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_file");
    TCase *tc = tcase_create("config_file");
    tcase_add_test(tc, test_sections_reach_their_components);
    tcase_add_test(tc, test_env_prefix_rows);
    tcase_add_test(tc, test_precedence);
    tcase_add_test(tc, test_malformed_lines);
    tcase_add_test(tc, test_refused_text_changes_nothing);
    tcase_add_test(tc, test_unknown_keys_and_bad_values);
    tcase_add_test(tc, test_keys_nobody_took);
    tcase_add_test(tc, test_job_environment);
    tcase_add_test(tc, test_secrets_hidden);
    tcase_add_test(tc, test_library_components);
    tcase_add_test(tc, test_environment_names_distinct);
    tcase_add_test(tc, test_read_file);
    tcase_add_test(tc, test_documented_example);
    tcase_add_test(tc, test_large_file_of_distinct_keys);
    tcase_add_test(tc, test_environment_spellings_refused);
    tcase_add_test(tc, test_vertices_of_one_environment_name);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
