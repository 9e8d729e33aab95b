/*
 * The `twopc` command: what an operator of a twopc pipeline asks on a bad day. Which transactions
 * are still open in Kafka and PostgreSQL, and which of them a restart would commit or abort; what
 * the checkpoints in a folder hold; and, for a job that is retired, doing to the external systems
 * exactly what a restart would do, without running the job. One subcommand per file; this file
 * only dispatches and prints the help. docs/twopc-command.md is the manual.
 */
#include "twopc_cli.h"

#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <string.h>

static const char help[] =
    "usage: twopc COMMAND [OPTIONS]\n"
    "\n"
    "Checkpoints (read only):\n"
    "  twopc checkpoints DIR [--json]            the checkpoints in a checkpoint.dir, newest "
    "first\n"
    "  twopc checkpoint DIR [ID] [--json]        one checkpoint (default: the one a restart "
    "restores):\n"
    "                                            job, vertices, finished subtasks, and per sink "
    "the\n"
    "                                            pending transactions (ids, producer ids and "
    "epochs,\n"
    "                                            gids)\n"
    "\n"
    "PostgreSQL:\n"
    "  twopc pg transactions --conninfo C [--prefix P] [--checkpoint-dir DIR] [--marker-table T]\n"
    "                        [--json] [--check]\n"
    "                                            prepared transactions and marker rows, each\n"
    "                                            classified: pending (the newest completed "
    "checkpoint\n"
    "                                            promised it: commit), lingering (no checkpoint "
    "will\n"
    "                                            commit it: roll back), committed (marker row "
    "left);\n"
    "                                            also the rows written ahead, pending or "
    "lingering\n"
    "  twopc pg resolve --conninfo C --checkpoint-dir DIR [--prefix P] [--dry-run]\n"
    "                                            commit the pending ones, roll back the lingering "
    "ones\n"
    "  twopc pg drop-staged --conninfo C --checkpoint-dir DIR [--prefix P] [--gid G] [--dry-run]\n"
    "                                            drop the rows written ahead "
    "(pg.commit=write-ahead)\n"
    "                                            that no completed checkpoint will move; refuses "
    "pending ones\n"
    "\n"
    "Kafka (TLS and SASL with --kafka security.protocol=..., --kafka sasl.mechanism=..., ...):\n"
    "  twopc kafka transactions --bootstrap B [--prefix P] [--checkpoint-dir DIR] [--all] "
    "[--json]\n"
    "                           [--check]\n"
    "                                            open transactions of the cluster or of one "
    "sink's\n"
    "                                            transactional id prefix (ListTransactions,\n"
    "                                            DescribeTransactions), classified as for pg\n"
    "  twopc kafka abort  --bootstrap B --transactional-id ID (--checkpoint-dir DIR | --force)\n"
    "  twopc kafka commit --bootstrap B --transactional-id ID (--checkpoint-dir DIR | --force)\n"
    "                                            end one transaction (EndTxn to its coordinator),\n"
    "                                            refused against the checkpoint's verdict\n"
    "\n"
    "Everything at once:\n"
    "  twopc resolve --checkpoint-dir DIR --sink NAME=postgres|kafka|file [--set "
    "NAME.KEY=VALUE]...\n"
    "                [--dry-run]\n"
    "                                            what a restart would do to the external systems:\n"
    "                                            commit what the newest completed checkpoint "
    "promised,\n"
    "                                            abort the rest, with the sinks' own recovery "
    "code;\n"
    "                                            the checkpoint folder is left as it is\n"
    "\n"
    "This build:\n"
    "  twopc version                             twopc's version and those of the librdkafka and\n"
    "                                            libpq it runs with (loaded now, not built "
    "against)\n"
    "\n"
    "Configuration:\n"
    "  twopc config [--check FILE]               every configuration key as Markdown (what it "
    "takes,\n"
    "                                            its default, what it does): "
    "docs/configuration.md\n"
    "\n"
    "Exit status: 0 done, 1 failed (the message says what to do), 2 usage, 3 --check found\n"
    "transactions that need a decision. Every command takes --help. Manual: "
    "docs/twopc-command.md\n";

int main(int argc, char **argv)
{
    twopc_filter_output();
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(help, argc < 2 ? stderr : stdout);
        return argc < 2 ? TWOPC_EXIT_USAGE : TWOPC_EXIT_OK;
    }
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        int pq = PQlibVersion();
        printf("twopc %s\nlibrdkafka %s\nlibpq %d.%d\n", tpc_version_string(),
               rd_kafka_version_str(), pq / 10000, pq % 10000);
        return TWOPC_EXIT_OK;
    }
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } commands[] = {
        {"checkpoints", twopc_cmd_checkpoints},
        {"checkpoint", twopc_cmd_checkpoint},
        {"pg", twopc_cmd_pg},
        {"kafka", twopc_cmd_kafka},
        {"resolve", twopc_cmd_resolve},
        {"config", twopc_cmd_config},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "twopc: unknown command \"%s\"\nsee: twopc --help\n", argv[1]);
    return TWOPC_EXIT_USAGE;
}
