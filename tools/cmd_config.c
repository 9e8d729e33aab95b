/*
 * docs/configuration.md from the property tables (tpc_props.h): every key of the job, the
 * transactional sink and each connector, with what it takes, its default and what it does.
 *
 *   twopc config                 print the page
 *   twopc config --check FILE    exit 1 (and say how to fix it) when FILE is not the page
 *
 * `make docs` writes the page; the unit test check_config_doc runs --check, so the documentation
 * cannot drift from the code.
 */
#include "tpc_file.h"
#include "tpc_kafka.h"
#include "tpc_pg.h"
#include "twopc_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    const tpc_props_t *tables[] = {
        tpc_job_properties(),     tpc_txn_sink_properties(),   tpc_file_sink_properties(),
        tpc_pg_sink_properties(), tpc_kafka_sink_properties(), tpc_kafka_source_properties(),
    };
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
        tpc_props_markdown(tables[i], out);
}

int twopc_cmd_config(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        puts("usage: twopc config [--check FILE]\n"
             "  every configuration key (job, sinks, source) as Markdown: what it takes, its\n"
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
