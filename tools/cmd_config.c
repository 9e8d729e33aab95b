/*
 * docs/configuration.md from the property tables (tpc_props.h): every key of the job, the
 * transactional sink and each connector, with what it takes, its default and what it does, after
 * how files and environment variables name them.
 *
 *   twopc config                 print the page
 *   twopc config --check FILE    exit 1 (and say how to fix it) when FILE is not the page
 *
 * `make docs` writes the page; the unit test check_config_doc runs --check, so the documentation
 * cannot drift from the code.
 */
#include "tpc_cluster.h"
#include "tpc_file.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "tpc_s3.h"
#include "twopc_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The format of configuration files and environment variables (runtime/config.c, tpc_props.h). */
static const char files_and_environment[] =
    "## Files and the environment\n\n"
    "A program can also take these keys from a file and from `TWOPC_` environment variables, so\n"
    "that an operator changes a setting without a rebuild (`tpc_config_t` in `tpc_props.h`). It\n"
    "reads them with `tpc_config_read_file()` and `tpc_config_read_env()`, hands them to each\n"
    "component with `tpc_job_configure()`, `tpc_txn_sink_configure()` and\n"
    "`tpc_kafka_source_configure()`, each under the name of its vertex, and ends with\n"
    "`tpc_config_check_used()`. Every key goes through the component's own setter: the keys,\n"
    "values and messages are those of the tables below.\n\n"
    "The file, one entry a line:\n\n"
    "```\n"
    "# the job's keys come first, or under [job]\n"
    "checkpoint.dir = /var/lib/orders/checkpoints\n"
    "checkpoint.interval.ms = 2000\n"
    "\n"
    "# the vertex named \"source\"\n"
    "[source]\n"
    "kafka.security.protocol = ssl\n"
    "\n"
    "[postgres]\n"
    "pg.mode = insert\n"
    "```\n\n"
    "- `key = value`: the key and the value with the spaces around them trimmed; the value is\n"
    "  the rest of the line after the first `=` (`=` included, no quotes, no escapes) and may be\n"
    "  empty. A comment takes a line of its own: `key = value # note` is refused rather than\n"
    "  read with the note in the value (a `#` right after another character, as in `a#b`, is\n"
    "  part of the value);\n"
    "- `[name]` starts the keys of the component whose vertex is named so; `[job]` (and the\n"
    "  lines before the first section) are the job's, so no vertex may be named `job`;\n"
    "- a line starting with `#` is a comment, blank lines are skipped; lines end with LF or "
    "CRLF.\n\n"
    "Refused, with the file and the line (`orders.conf:12: ...`) and a hint: a line of any\n"
    "other shape (no `=`, a key with a space, a section without `]`, a `#` after a space in a\n"
    "value), a key given twice in a section, a section started twice, a control character, a\n"
    "file over 1 MiB; when the component takes its section, a key it does not know or a value\n"
    "it refuses; and, after every component was configured, a key that none took (a misspelt\n"
    "section, a vertex the program does not have).\n\n"
    "The environment: `TWOPC_<KEY>` is a job key and `TWOPC_<NAME>__<KEY>` (two underscores) a\n"
    "key of the vertex NAME, where KEY and NAME are written in upper case with every character\n"
    "other than a letter or digit as `_`:\n\n"
    "| variable | key |\n"
    "|---|---|\n"
    "| `TWOPC_CHECKPOINT_INTERVAL_MS=500` | `checkpoint.interval.ms` of the job |\n"
    "| `TWOPC_CHECKPOINT_MAX_CONCURRENT=2` | `checkpoint.max-concurrent` of the job |\n"
    "| `TWOPC_POSTGRES__PG_MODE=insert` | `pg.mode` of the vertex `postgres` |\n"
    "| `TWOPC_KAFKA_OUT__KAFKA_LINGER_MS=5` | `kafka.linger.ms` of the vertex `kafka-out` |\n\n"
    "No two keys of a component share a name in the environment. Under a `kafka.*` row every `_`\n"
    "after `KAFKA_` becomes a `.` (librdkafka's names have only dots). Values are taken as they\n"
    "are, not trimmed. Since the environment's names lose case, `-` and `.`, two variables that\n"
    "spell one key (`TWOPC_sink__pg_table` and `TWOPC_SINK__PG_TABLE`) are refused, both named,\n"
    "rather than one winning by its place in the environment; and when a variable names\n"
    "`TWOPC_A_B__`, two vertices `a-b` and `a.b` are refused as the second is configured: give\n"
    "them names that differ in more than that. A variable for a vertex the program does not have "
    "is refused like a\n"
    "key of the file, and so is a job key's when the program configures no job from the\n"
    "environment. `TWOPC_` variables without `__` that name no job key belong to other\n"
    "programs and are left alone: `TWOPC_PG_CONNINFO` and `TWOPC_KAFKA_BOOTSTRAP` are not\n"
    "keys but the servers of the examples and the tests (the default of their `--pg` and\n"
    "`--bootstrap`), and `TWOPC_TEST_...` the tests' own; one that starts with the first word\n"
    "of a job key (`TWOPC_CHECKPOINT_...`, `TWOPC_RESTART_...`) is refused as a misspelt key.\n\n"
    "Which value wins, lowest first: the default below; what the program set before it\n"
    "configured the component; the file; the environment (so that a deployment overrides one\n"
    "key of a shared file); what the program sets after (the examples: options given on their\n"
    "command line). Values of secret keys (`pg.conninfo`, librdkafka's passwords) appear in no\n"
    "message; give them in the environment rather than in a file others can read.\n\n";

static void page(FILE *out)
{
    fputs(
        "# Configuration\n\n"
        "Every setting of twopc is a string key and a string value, checked when it is set: a bad\n"
        "value or an unknown key is refused at once with `TPC_ERR_CONFIG`, a message that names\n"
        "the key and a hint that says what it takes. Integers are decimal digits with an\n"
        "optional `-` (no spaces, no `+`); booleans are `true` or `false`.\n\n"
        "This page is generated from the tables in the code (`make docs`, which runs `twopc "
        "config`);\n"
        "a unit test fails when it differs from them.\n\n",
        out);
    fputs(files_and_environment, out);
    const tpc_props_t *tables[] = {
        tpc_job_properties(),          tpc_s3_properties(),      tpc_txn_sink_properties(),
        tpc_file_sink_properties(),    tpc_pg_sink_properties(), tpc_kafka_sink_properties(),
        tpc_kafka_source_properties(), tpc_cluster_properties(),
    };
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
        tpc_props_markdown(tables[i], out);
}

int twopc_cmd_config(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        puts("usage: twopc config [--check FILE]\n"
             "  every configuration key (job, sinks, source, cluster member) as Markdown: what it "
             "takes, its\n"
             "  default, what it does; --check: exit 1 when FILE differs from that page");
        return TWOPC_EXIT_OK;
    }
    if (argc == 1) {
        page(stdout);
        return ferror(stdout) ? TWOPC_EXIT_FAILED : TWOPC_EXIT_OK;
    }
    if (argc != 3 || strcmp(argv[1], "--check") != 0)
        return twopc_usage_error("config", "give no argument, or --check FILE");
    char *want = NULL;
    size_t want_len = 0;
    FILE *mem = open_memstream(&want, &want_len);
    if (!mem)
        return TWOPC_EXIT_FAILED;
    page(mem);
    fclose(mem);
    FILE *f = fopen(argv[2], "rb");
    char *have = calloc(1, want_len + 2);
    size_t have_len = f && have ? fread(have, 1, want_len + 1, f) : 0;
    int same = f && have && have_len == want_len && memcmp(have, want, want_len) == 0;
    if (f)
        fclose(f);
    if (!same)
        fprintf(stderr,
                "twopc config: %s does not match the property tables in the code; run `make "
                "docs` and commit the result\n",
                argv[2]);
    free(have);
    free(want);
    return same ? TWOPC_EXIT_OK : TWOPC_EXIT_FAILED;
}
