/*
 * `twopc kafka transactions`, `twopc kafka abort`, `twopc kafka commit`, `twopc kafka producers`:
 * the transactions the coordinators of a cluster hold open (ListTransactions and
 * DescribeTransactions over the recovery client's connection, TLS and SASL included), judged by
 * the checkpoint a restart restores, the ending of one of them with EndTxn, as the sink's
 * recovery does it, and the active producers of one partition as its leader knows them
 * (DescribeProducers), with the open transactions that hold its last stable offset.
 */
#include "kafka_wire.h"
#include "tpc_kafka.h"
#include "tpc_kit.h"
#include "twopc_cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char kafka_help[] =
    "usage: twopc kafka transactions --bootstrap B [--prefix P] [--checkpoint-dir DIR] [--all]\n"
    "                                [--kafka NAME=VALUE]... [--json] [--check]\n"
    "       twopc kafka abort  --bootstrap B --transactional-id ID (--checkpoint-dir DIR | "
    "--force)\n"
    "                          [--producer-id N --epoch N]\n"
    "       twopc kafka abort  --bootstrap B --topic T --partition P --producer-id N --epoch N\n"
    "                          [--coordinator-epoch N] (--checkpoint-dir DIR | --force)\n"
    "       twopc kafka commit --bootstrap B --transactional-id ID (--checkpoint-dir DIR | "
    "--force)\n"
    "                          [--producer-id N --epoch N [--start-ms N]]\n"
    "       twopc kafka producers --bootstrap B --topic T --partition P [--checkpoint-dir DIR]\n"
    "                             [--json]\n"
    "       twopc kafka hanging --bootstrap B --topic T [--checkpoint-dir DIR] [--json] [--check]\n"
    "\n"
    "transactions lists the open transactions of the cluster, or of the transactional ids that\n"
    "start with --prefix (a sink's transactional.id.prefix): id, state, producer id and epoch,\n"
    "age, start time, partitions. With --checkpoint-dir each is classified as a restart would\n"
    "judge it:\n"
    "  pending    the newest completed checkpoint lists it (same id, producer id, epoch and\n"
    "             start time): commit\n"
    "  lingering  no completed checkpoint promised it: abort\n"
    "--all also lists ids with no open transaction. --check exits with 3 when one is open.\n"
    "\n"
    "abort and commit end one open transaction by sending EndTxn to its coordinator, with the\n"
    "producer id and epoch given or, without them, those DescribeTransactions reports. A commit\n"
    "succeeds only when the coordinator then describes that very transaction as committed: it is\n"
    "named by its start time (START MS of transactions, --start-ms; without --producer-id, that "
    "of\n"
    "the open transaction). A transaction that is no longer open, named by producer id and epoch\n"
    "alone, cannot be told from a later one of the same producer and is refused. A commit of a\n"
    "transaction the coordinator aborted, or replaced by another, fails with data loss.\n"
    "Each is judged first against --checkpoint-dir as a restart would judge it: a commit of a\n"
    "lingering transaction (it would duplicate its records) and an abort of a pending one (it\n"
    "would lose them) are refused. --force ends it anyway, unjudged or against the verdict, and\n"
    "says what that may cost.\n"
    "\n"
    "producers describes the active producers of one partition as its leader knows them\n"
    "(DescribeProducers): producer id and epoch, last sequence and write, the coordinator epoch\n"
    "of its last transaction marker there, and the first offset of its open transaction, which\n"
    "holds the partition's last stable offset (read_committed readers wait behind it). With\n"
    "--checkpoint-dir an open one is classified: pending when the checkpoint a restart restores\n"
    "promised a transaction of that producer id and epoch, else unknown to the checkpoint.\n"
    "\n"
    "hanging lists every partition of --topic whose last stable offset an open transaction\n"
    "holds: producer, first offset, and the transactional id its coordinator knows it by. Class:\n"
    "  pending    the checkpoint a restart restores promised it (--checkpoint-dir): commit\n"
    "  lingering  no checkpoint promised it: abort it (twopc kafka abort --transactional-id)\n"
    "  orphaned   no coordinator holds a transaction of the producer: no EndTxn ends it\n"
    "  unknown    open, and no --checkpoint-dir to judge it by\n"
    "--check exits with 3 when one is not pending.\n"
    "\n"
    "abort --topic --partition writes the abort marker for one producer's open transaction to\n"
    "that partition (WriteTxnMarkers at its leader, as kafka-transactions.sh abort does), for\n"
    "one hanging says holds it; the coordinator epoch defaults to the producer's last one there.\n"
    "It is judged like abort by id: refused when the producer's transaction at its coordinator\n"
    "is one the checkpoint promised (a restart commits it), unless --force.\n"
    "\n"
    "--kafka NAME=VALUE sets a librdkafka property of the connection: security.protocol,\n"
    "ssl.ca.location, ssl.certificate.location, ssl.key.location, sasl.mechanism (PLAIN,\n"
    "SCRAM-SHA-256, SCRAM-SHA-512), sasl.username, sasl.password, ...\n"
    "--timeout-ms N bounds the whole command (default 30000).\n";

static tpc__kafka_wire_conf_t wire_of(const twopc_kafka_conf_t *k)
{
    return (tpc__kafka_wire_conf_t){
        .bootstrap = k->bootstrap,
        .client_id = "twopc-command",
        .props = k->props,
        .nprops = k->nprops,
    };
}

/* A pending Kafka transaction of the restored checkpoint, as its handle names it. */
typedef struct {
    char id[256];
    int64_t producer_id, producer_epoch, start_ms; /* start_ms -1: the handle does not name it */
} promise_t;

/* The checkpoint's promises, sorted by id: each listed transaction is looked up by bisection, so
 * matching n listed ids against m promises costs O((n + m) log m), whatever the ids are. */
typedef struct {
    promise_t *items;
    size_t n;
} promises_t;

static int by_promise_id(const void *a, const void *b)
{
    return strcmp(((const promise_t *)a)->id, ((const promise_t *)b)->id);
}

/* The pending Kafka transactions of @c (NULL: none), each handle described once. */
static tpc_error_t *promises_of(const twopc_checkpoint_t *c, promises_t *out)
{
    *out = (promises_t){0};
    size_t cap = 0;
    for (size_t i = 0; c && i < c->ntxns; i++) {
        const twopc_txn_t *x = &c->txns[i];
        tpc_txn_handle_view_t v;
        if (x->kind != TWOPC_TXN_PENDING || !twopc_txn_of(x, tpc_kafka_sink_ops(), &v))
            continue;
        const char *id = twopc_view_text(&v, "transactional_id");
        if (!id || strlen(id) >= sizeof out->items->id)
            continue; /* no id of the cluster's can be it (listed ids over 255 bytes are cut) */
        if (!tpc_array_grow(&out->items, &cap, out->n + 1, sizeof *out->items)) {
            free(out->items);
            *out = (promises_t){0};
            return tpc_error_nomem();
        }
        promise_t *p = &out->items[out->n++];
        snprintf(p->id, sizeof p->id, "%s", id);
        p->producer_id = twopc_view_number(&v, "producer_id", -1);
        p->producer_epoch = twopc_view_number(&v, "producer_epoch", -1);
        p->start_ms = twopc_view_number(&v, "transaction_start_ms", -1);
    }
    if (out->n)
        qsort(out->items, out->n, sizeof *out->items, by_promise_id);
    return NULL;
}

/* Whether the checkpoint promised @t: a pending transaction of the same id, producer id, epoch
 * and (when the handle names it) start time. */
static bool promised(const promises_t *ps, const tpc__kafka_txn_info_t *t)
{
    if (t->id_cut || !ps->n)
        return false;
    /* The first promise of the id: several may share it (other producer ids or epochs). */
    size_t lo = 0, hi = ps->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(ps->items[mid].id, t->id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < ps->n && strcmp(ps->items[i].id, t->id) == 0; i++) {
        const promise_t *p = &ps->items[i];
        if (p->producer_id == t->producer_id && p->producer_epoch == t->producer_epoch &&
            (p->start_ms < 0 || p->start_ms == t->start_ms))
            return true;
    }
    return false;
}

/* The checkpoint of @dir that a restart restores into *@ckpt (NULL: none, a fresh start). */
static tpc_error_t *restored(const char *dir, twopc_folder_t *folder,
                             const twopc_checkpoint_t **ckpt)
{
    *ckpt = NULL;
    tpc_error_t *err = twopc_folder_read(dir, false, folder);
    if (!err && (err = twopc_folder_refusal(folder)) != NULL)
        twopc_folder_free(folder);
    if (err)
        return err;
    if (folder->restore_index >= 0)
        *ckpt = &folder->files[folder->restore_index];
    if (*ckpt && !(*ckpt)->valid) {
        err = tpc_error_new(TPC_ERR_CORRUPT, 0,
                            "checkpoint %" PRIu64 ", the newest completed one, is damaged: %s",
                            (*ckpt)->id, (*ckpt)->error);
        twopc_folder_free(folder);
        *ckpt = NULL;
    }
    return err;
}

static int list(const twopc_args_t *a, const twopc_kafka_conf_t *k, int timeout_ms)
{
    const char *cmd = "kafka transactions";
    const char *prefix = twopc_arg(a, "prefix"), *dir = twopc_arg(a, "checkpoint-dir");
    bool json = twopc_flag(a, "json");
    twopc_folder_t folder = {0};
    const twopc_checkpoint_t *ckpt = NULL;
    promises_t promises = {0};
    tpc_error_t *err = dir ? restored(dir, &folder, &ckpt) : NULL;
    if (!err && (err = promises_of(ckpt, &promises)) != NULL)
        twopc_folder_free(&folder);
    if (err)
        return twopc_fail(cmd, err);
    tpc__kafka_wire_conf_t wire = wire_of(k);
    tpc__kafka_txn_info_t *txns = NULL;
    size_t n = 0;
    err = tpc__kafka_list_transactions(&wire, prefix, !twopc_flag(a, "all"), timeout_ms, &txns, &n);
    if (err) {
        free(promises.items);
        twopc_folder_free(&folder);
        return twopc_fail(cmd, tpc_error_hint(err, "%s",
                                              tpc_error_hint_text(err)
                                                  ? tpc_error_hint_text(err)
                                                  : "check --bootstrap and the --kafka security "
                                                    "settings"));
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    int open = 0;
    if (json) {
        printf("{\"checkpoint\":");
        if (ckpt)
            printf("%" PRIu64, ckpt->id);
        else
            printf("null");
        printf(",\"transactions\":[");
    } else {
        if (ckpt)
            printf("judged by checkpoint %" PRIu64 " (the one a restart restores)\n", ckpt->id);
        if (!n)
            printf("no %stransactions%s%s%s\n", twopc_flag(a, "all") ? "" : "open ",
                   prefix ? " of ids starting with \"" : "", prefix ? prefix : "",
                   prefix ? "\"" : "");
        else
            printf("%-40s %-14s %-12s %-6s %-9s %-10s %-9s %-14s %s\n", "TRANSACTIONAL ID", "STATE",
                   "PRODUCER ID", "EPOCH", "AGE (s)", "CLASS", "ACTION", "START MS", "PARTITIONS");
    }
    for (size_t i = 0; i < n; i++) {
        const tpc__kafka_txn_info_t *t = &txns[i];
        bool is_open = strcmp(t->state, "Empty") != 0 && strcmp(t->state, "CompleteCommit") != 0 &&
                       strcmp(t->state, "CompleteAbort") != 0 && strcmp(t->state, "Dead") != 0;
        open += is_open;
        const char *cls = "-", *action = "none";
        if (is_open && dir) {
            bool p = promised(&promises, t);
            cls = p ? "pending" : "lingering";
            action = p ? "commit" : "abort";
        } else if (is_open) {
            cls = "unknown";
            action = "?";
        }
        double age = t->start_ms > 0 ? (double)(wall - t->start_ms) / 1000.0 : 0;
        if (json) {
            printf("%s{\"transactional_id\":", i ? "," : "");
            twopc_json_str(stdout, t->id);
            if (t->id_cut)
                printf(",\"id_cut\":true");
            printf(",\"state\":");
            twopc_json_str(stdout, t->state);
            printf(",\"producer_id\":%" PRId64 ",\"producer_epoch\":%d,\"timeout_ms\":%d,"
                   "\"start_ms\":%" PRId64 ",\"class\":\"%s\",\"action\":\"%s\",\"partitions\":",
                   t->producer_id, t->producer_epoch, (int)t->timeout_ms, t->start_ms, cls, action);
            twopc_json_str(stdout, t->topics);
            printf("}");
        } else {
            /* An id over 255 bytes is shown cut, and marked so: two such never look like one. */
            char shown[sizeof t->id + 16];
            snprintf(shown, sizeof shown, "%s%s", t->id, t->id_cut ? "...(cut)" : "");
            printf("%-40s %-14s %-12" PRId64 " %-6d %-9.1f %-10s %-9s %-14" PRId64 " %s\n", shown,
                   t->state, t->producer_id, t->producer_epoch, age, cls, action, t->start_ms,
                   t->topics);
        }
    }
    if (json)
        printf("]}\n");
    free(txns);
    free(promises.items);
    twopc_folder_free(&folder);
    return twopc_flag(a, "check") && open ? TWOPC_EXIT_PENDING : TWOPC_EXIT_OK;
}

/* The restart's verdict on transaction @t, from --checkpoint-dir: pending (a completed checkpoint
 * promised it: commit) or lingering (abort). An end against it is refused unless --force, which
 * says in one line what it costs. */
static int judge(const twopc_args_t *a, const char *cmd, const tpc__kafka_txn_info_t *t,
                 bool commit)
{
    const char *dir = twopc_arg(a, "checkpoint-dir");
    bool force = twopc_flag(a, "force");
    char name[300];
    tpc__kafka_txn_name(name, sizeof name, t->id, t->producer_id, t->producer_epoch, t->start_ms);
    if (!dir && !force)
        return twopc_usage_error(cmd,
                                 "give --checkpoint-dir DIR (the job's checkpoint.dir), so that "
                                 "the transaction is judged as a restart would judge it, or "
                                 "--force to end it unjudged");
    twopc_folder_t folder = {0};
    const twopc_checkpoint_t *ckpt = NULL;
    promises_t promises = {0};
    tpc_error_t *err = dir ? restored(dir, &folder, &ckpt) : NULL;
    if (!err && (err = promises_of(ckpt, &promises)) != NULL)
        twopc_folder_free(&folder);
    if (err)
        return twopc_fail(cmd, err);
    bool p = promised(&promises, t);
    free(promises.items);
    char verdict[640] = "";
    if (dir && commit && !p)
        snprintf(verdict, sizeof verdict,
                 "no completed checkpoint promised transaction %s (%s%" PRIu64 " is the one a "
                 "restart restores): a restart aborts it and the job writes its records again, so "
                 "committing it duplicates them",
                 name, ckpt ? "checkpoint " : "none; ", ckpt ? ckpt->id : 0);
    else if (dir && !commit && p)
        snprintf(verdict, sizeof verdict,
                 "checkpoint %" PRIu64 " promised transaction %s: a restart commits it, so "
                 "aborting it loses its records",
                 ckpt->id, name);
    twopc_folder_free(&folder);
    if (verdict[0] && !force)
        return twopc_fail(cmd,
                          tpc_error_hint(tpc_error_new(TPC_ERR_STATE, 0, "refused: %s", verdict),
                                         "%s; --force does it anyway",
                                         commit ? "abort it (twopc kafka abort), or let a restart "
                                                  "or twopc resolve do that"
                                                : "let a restart or twopc resolve commit it"));
    if (force && (verdict[0] || !dir))
        fprintf(stderr, "twopc %s: --force: %s\n", cmd,
                verdict[0] ? verdict
                : commit   ? "committing unjudged: if no completed checkpoint promised it, the "
                             "restart writes its records again (duplicates)"
                           : "aborting unjudged: if a completed checkpoint promised it, its "
                             "records are lost");
    return TWOPC_EXIT_OK;
}

static int end_one(const twopc_args_t *a, const twopc_kafka_conf_t *k, bool commit, int timeout_ms)
{
    const char *cmd = commit ? "kafka commit" : "kafka abort";
    const char *id = twopc_arg_required(a, cmd, "transactional-id");
    if (!id)
        return TWOPC_EXIT_USAGE;
    if (twopc_arg(a, "coordinator-epoch"))
        return twopc_usage_error(cmd, "--coordinator-epoch goes with --topic and --partition");
    const char *spid = twopc_arg(a, "producer-id"), *sepoch = twopc_arg(a, "epoch");
    if (!spid != !sepoch)
        return twopc_usage_error(cmd, "give both --producer-id and --epoch, or neither");
    const char *sstart = twopc_arg(a, "start-ms");
    if (sstart && (!commit || !spid))
        return twopc_usage_error(cmd, "--start-ms names a transaction to commit, with "
                                      "--producer-id and --epoch");
    int64_t pid = -1, epoch = -1, start_ms = -1;
    if (spid &&
        (!tpc_parse_int(spid, 0, INT64_MAX, &pid) || !tpc_parse_int(sepoch, 0, INT16_MAX, &epoch)))
        return twopc_usage_error(cmd, "--producer-id and --epoch take numbers");
    if (sstart && !tpc_parse_int(sstart, 0, INT64_MAX, &start_ms))
        return twopc_usage_error(cmd, "--start-ms takes milliseconds since the epoch, as START MS "
                                      "of twopc kafka transactions shows them");
    tpc__kafka_wire_conf_t wire = wire_of(k);
    if (!spid) {
        tpc__kafka_txn_info_t t;
        tpc_error_t *err = tpc__kafka_describe_transaction(&wire, id, timeout_ms, &t);
        if (err)
            return twopc_fail(cmd, err);
        if (t.error)
            return twopc_fail(cmd,
                              tpc_error_new(TPC_ERR_NOT_FOUND, 0, "transactional id \"%s\": %s", id,
                                            tpc__kafka_code_name(t.error)));
        if (strcmp(t.state, "Ongoing") != 0)
            return twopc_fail(
                cmd, tpc_error_hint(tpc_error_new(TPC_ERR_STATE, 0,
                                                  "transactional id \"%s\" has no open "
                                                  "transaction (state %s)",
                                                  id, t.state),
                                    "nothing to do; list them with: twopc kafka transactions"));
        pid = t.producer_id;
        epoch = t.producer_epoch;
        start_ms = t.start_ms;
    }
    tpc__kafka_txn_info_t named = {
        .producer_id = pid, .producer_epoch = (int)epoch, .start_ms = start_ms};
    snprintf(named.id, sizeof named.id, "%s", id);
    /* Judged against the folder, and ended, while no job runs on it. */
    int rc = TWOPC_EXIT_OK;
    const char *dir = twopc_arg(a, "checkpoint-dir");
    tpc_dir_lease_t *lease = dir ? twopc_lease(cmd, dir, &rc) : NULL;
    if (rc == TWOPC_EXIT_OK)
        rc = judge(a, cmd, &named, commit);
    if (rc != TWOPC_EXIT_OK) {
        tpc_checkpoint_dir_release(lease);
        return rc;
    }
    /* The public calls, as the sink's recovery makes them: props NULL-terminated. */
    const char *const *props = (const char *const *)k->props;
    tpc_error_t *err = commit ? tpc_kafka_commit_transaction(k->bootstrap, props, id, pid,
                                                             (int16_t)epoch, start_ms, timeout_ms)
                              : tpc_kafka_end_transaction(k->bootstrap, props, id, pid,
                                                          (int16_t)epoch, false, timeout_ms);
    tpc_checkpoint_dir_release(lease);
    if (err)
        return twopc_fail(cmd, err);
    char name[300];
    tpc__kafka_txn_name(name, sizeof name, id, pid, (int)epoch, start_ms);
    printf("%s transaction %s\n", commit ? "committed" : "aborted", name);
    return TWOPC_EXIT_OK;
}

/* Whether the checkpoint promised a transaction of producer @pid at @epoch (any id). */
static bool promised_producer(const promises_t *ps, int64_t pid, int32_t epoch)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->items[i].producer_id == pid && ps->items[i].producer_epoch == epoch)
            return true;
    return false;
}

static int producers(const twopc_args_t *a, const twopc_kafka_conf_t *k, int timeout_ms)
{
    const char *cmd = "kafka producers";
    const char *topic = twopc_arg_required(a, cmd, "topic");
    const char *spart = topic ? twopc_arg_required(a, cmd, "partition") : NULL;
    if (!spart)
        return TWOPC_EXIT_USAGE;
    int64_t partition;
    if (!tpc_parse_int(spart, 0, INT32_MAX, &partition))
        return twopc_usage_error(cmd, "--partition takes a partition number, not \"%s\"", spart);
    const char *dir = twopc_arg(a, "checkpoint-dir");
    bool json = twopc_flag(a, "json");
    twopc_folder_t folder = {0};
    const twopc_checkpoint_t *ckpt = NULL;
    promises_t promises = {0};
    tpc_error_t *err = dir ? restored(dir, &folder, &ckpt) : NULL;
    if (!err && (err = promises_of(ckpt, &promises)) != NULL)
        twopc_folder_free(&folder);
    if (err)
        return twopc_fail(cmd, err);
    tpc__kafka_wire_conf_t wire = wire_of(k);
    tpc__kafka_producer_info_t *ps = NULL;
    size_t n = 0;
    err = tpc__kafka_describe_producers(&wire, topic, (int32_t)partition, timeout_ms, &ps, &n);
    if (err) {
        free(promises.items);
        twopc_folder_free(&folder);
        return twopc_fail(cmd, err);
    }
    if (json) {
        printf("{\"topic\":");
        twopc_json_str(stdout, topic);
        printf(",\"partition\":%d,\"checkpoint\":", (int)partition);
        if (ckpt)
            printf("%" PRIu64, ckpt->id);
        else
            printf("null");
        printf(",\"producers\":[");
    } else {
        if (ckpt)
            printf("judged by checkpoint %" PRIu64 " (the one a restart restores)\n", ckpt->id);
        if (!n)
            printf("no active producers\n");
        else
            printf("%-12s %-6s %-9s %-15s %-11s %-14s %s\n", "PRODUCER ID", "EPOCH", "LAST SEQ",
                   "LAST WRITE MS", "COORD EPOCH", "OPEN TXN FROM", "CLASS");
    }
    for (size_t i = 0; i < n; i++) {
        const tpc__kafka_producer_info_t *p = &ps[i];
        const char *cls = "-";
        if (p->txn_start_offset >= 0)
            cls = !dir ? "unknown"
                  : promised_producer(&promises, p->producer_id, p->producer_epoch)
                      ? "pending"
                      : "unknown-to-checkpoint";
        if (json)
            printf("%s{\"producer_id\":%" PRId64 ",\"producer_epoch\":%d,\"last_sequence\":%d,"
                   "\"last_timestamp\":%" PRId64 ",\"coordinator_epoch\":%d,"
                   "\"current_txn_start_offset\":%" PRId64 ",\"class\":\"%s\"}",
                   i ? "," : "", p->producer_id, (int)p->producer_epoch, (int)p->last_sequence,
                   p->last_timestamp, (int)p->coordinator_epoch, p->txn_start_offset, cls);
        else
            printf("%-12" PRId64 " %-6d %-9d %-15" PRId64 " %-11d %-14" PRId64 " %s\n",
                   p->producer_id, (int)p->producer_epoch, (int)p->last_sequence, p->last_timestamp,
                   (int)p->coordinator_epoch, p->txn_start_offset, cls);
    }
    if (json)
        printf("]}\n");
    free(ps);
    free(promises.items);
    twopc_folder_free(&folder);
    return TWOPC_EXIT_OK;
}

/* The open transaction the coordinators hold for producer @pid (NULL: none). */
static const tpc__kafka_txn_info_t *txn_of_producer(const tpc__kafka_txn_info_t *txns, size_t n,
                                                    int64_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (txns[i].producer_id == pid)
            return &txns[i];
    return NULL;
}

/* Every partition of --topic whose last stable offset an open transaction holds, with the
 * producer, its transactional id (from the coordinators) and the restart's verdict. */
static int hanging(const twopc_args_t *a, const twopc_kafka_conf_t *k, int timeout_ms)
{
    const char *cmd = "kafka hanging";
    const char *topic = twopc_arg_required(a, cmd, "topic");
    if (!topic)
        return TWOPC_EXIT_USAGE;
    const char *dir = twopc_arg(a, "checkpoint-dir");
    bool json = twopc_flag(a, "json");
    twopc_folder_t folder = {0};
    const twopc_checkpoint_t *ckpt = NULL;
    promises_t promises = {0};
    tpc_error_t *err = dir ? restored(dir, &folder, &ckpt) : NULL;
    if (!err && (err = promises_of(ckpt, &promises)) != NULL)
        twopc_folder_free(&folder);
    if (err)
        return twopc_fail(cmd, err);
    tpc__kafka_wire_conf_t wire = wire_of(k);
    int32_t parts = 0;
    tpc__kafka_txn_info_t *txns = NULL;
    size_t ntxns = 0;
    err = tpc__kafka_partition_count(&wire, topic, timeout_ms, &parts);
    if (!err)
        err = tpc__kafka_list_transactions(&wire, NULL, true, timeout_ms, &txns, &ntxns);
    if (json && !err) {
        printf("{\"topic\":");
        twopc_json_str(stdout, topic);
        printf(",\"checkpoint\":");
        if (ckpt)
            printf("%" PRIu64, ckpt->id);
        else
            printf("null");
        printf(",\"held\":[");
    } else if (!err && ckpt) {
        printf("judged by checkpoint %" PRIu64 " (the one a restart restores)\n", ckpt->id);
    }
    int shown = 0, unpromised = 0;
    for (int32_t p = 0; !err && p < parts; p++) {
        tpc__kafka_producer_info_t *ps = NULL;
        size_t n = 0;
        err = tpc__kafka_describe_producers(&wire, topic, p, timeout_ms, &ps, &n);
        for (size_t i = 0; !err && i < n; i++) {
            if (ps[i].txn_start_offset < 0)
                continue;
            const tpc__kafka_txn_info_t *t = txn_of_producer(txns, ntxns, ps[i].producer_id);
            /* orphaned: no coordinator holds a transaction of the producer, so no EndTxn can end
             * it; only a marker written to the partition does (Kafka's kafka-transactions.sh
             * abort --topic --partition). */
            const char *cls = !t                       ? "orphaned"
                              : !dir                   ? "unknown"
                              : promised(&promises, t) ? "pending"
                                                       : "lingering";
            unpromised += strcmp(cls, "pending") != 0;
            if (json) {
                printf("%s{\"partition\":%d,\"producer_id\":%" PRId64 ",\"producer_epoch\":%d,"
                       "\"coordinator_epoch\":%d,\"current_txn_start_offset\":%" PRId64
                       ",\"transactional_id\":",
                       shown ? "," : "", (int)p, ps[i].producer_id, (int)ps[i].producer_epoch,
                       (int)ps[i].coordinator_epoch, ps[i].txn_start_offset);
                if (t)
                    twopc_json_str(stdout, t->id);
                else
                    printf("null");
                printf(",\"class\":\"%s\"}", cls);
            } else {
                if (!shown)
                    printf("%-10s %-12s %-6s %-11s %-14s %-40s %s\n", "PARTITION", "PRODUCER ID",
                           "EPOCH", "COORD EPOCH", "OPEN TXN FROM", "TRANSACTIONAL ID", "CLASS");
                printf("%-10d %-12" PRId64 " %-6d %-11d %-14" PRId64 " %-40s %s\n", (int)p,
                       ps[i].producer_id, (int)ps[i].producer_epoch, (int)ps[i].coordinator_epoch,
                       ps[i].txn_start_offset, t ? t->id : "-", cls);
            }
            shown++;
        }
        free(ps);
    }
    free(txns);
    free(promises.items);
    twopc_folder_free(&folder);
    if (err)
        return twopc_fail(cmd, err);
    if (json)
        printf("]}\n");
    else if (!shown)
        printf("no open transaction holds a partition of \"%s\"\n", topic);
    return twopc_flag(a, "check") && unpromised ? TWOPC_EXIT_PENDING : TWOPC_EXIT_OK;
}

/* `kafka abort --topic T --partition P --producer-id N --epoch N [--coordinator-epoch N]`: the
 * abort marker written to one partition (WriteTxnMarkers), for a transaction that holds it. Judged
 * first: the producer's transaction at its coordinator (matched by producer id) must not be one
 * the checkpoint a restart restores promised, unless --force. */
static int abort_on_partition(const twopc_args_t *a, const twopc_kafka_conf_t *k, int timeout_ms)
{
    const char *cmd = "kafka abort";
    const char *topic = twopc_arg(a, "topic"), *spart = twopc_arg_required(a, cmd, "partition");
    const char *spid = spart ? twopc_arg_required(a, cmd, "producer-id") : NULL;
    const char *sepoch = spid ? twopc_arg_required(a, cmd, "epoch") : NULL;
    if (!sepoch)
        return TWOPC_EXIT_USAGE;
    if (twopc_arg(a, "transactional-id"))
        return twopc_usage_error(cmd, "give --transactional-id or --topic, not both");
    const char *scoord = twopc_arg(a, "coordinator-epoch");
    int64_t partition, pid, epoch, coord = -1;
    if (!tpc_parse_int(spart, 0, INT32_MAX, &partition) ||
        !tpc_parse_int(spid, 0, INT64_MAX, &pid) || !tpc_parse_int(sepoch, 0, INT16_MAX, &epoch) ||
        (scoord && !tpc_parse_int(scoord, 0, INT32_MAX, &coord)))
        return twopc_usage_error(cmd, "--partition, --producer-id, --epoch and "
                                      "--coordinator-epoch take numbers");
    const char *dir = twopc_arg(a, "checkpoint-dir");
    bool force = twopc_flag(a, "force");
    if (!dir && !force)
        return twopc_usage_error(cmd, "give --checkpoint-dir DIR (the job's checkpoint.dir), so "
                                      "that the transaction is judged as a restart would judge "
                                      "it, or --force to abort it unjudged");
    tpc__kafka_wire_conf_t wire = wire_of(k);
    /* The partition must be held by that producer at that epoch. */
    tpc__kafka_producer_info_t *ps = NULL;
    size_t n = 0;
    tpc_error_t *err =
        tpc__kafka_describe_producers(&wire, topic, (int32_t)partition, timeout_ms, &ps, &n);
    if (err)
        return twopc_fail(cmd, err);
    const tpc__kafka_producer_info_t *held = NULL;
    for (size_t i = 0; i < n && !held; i++)
        if (ps[i].producer_id == pid && ps[i].txn_start_offset >= 0)
            held = &ps[i];
    if (!held || held->producer_epoch != epoch) {
        err = tpc_error_hint(
            tpc_error_new(TPC_ERR_STATE, 0,
                          "producer %" PRId64 " at epoch %d holds no open transaction on kafka "
                          "topic \"%s\" partition %d%s",
                          pid, (int)epoch, topic, (int)partition,
                          held ? " (its epoch there is another)" : ""),
            "list what holds the topic with: twopc kafka hanging --topic %s", topic);
        free(ps);
        return twopc_fail(cmd, err);
    }
    if (coord < 0)
        coord = held->coordinator_epoch > 0 ? held->coordinator_epoch : 0;
    int64_t from = held->txn_start_offset;
    free(ps);
    /* Its transaction at the coordinators, judged as a restart would judge it. */
    tpc__kafka_txn_info_t *txns = NULL;
    size_t ntxns = 0;
    err = tpc__kafka_list_transactions(&wire, NULL, true, timeout_ms, &txns, &ntxns);
    if (err)
        return twopc_fail(cmd, err);
    const tpc__kafka_txn_info_t *t = txn_of_producer(txns, ntxns, pid);
    int rc = TWOPC_EXIT_OK;
    tpc_dir_lease_t *lease = dir ? twopc_lease(cmd, dir, &rc) : NULL;
    if (rc == TWOPC_EXIT_OK && t)
        rc = judge(a, cmd, t, false);
    else if (rc == TWOPC_EXIT_OK && force)
        fprintf(stderr,
                "twopc %s: --force: no coordinator holds a transaction of producer %" PRId64
                "; aborting on the partition what nothing else can end\n",
                cmd, pid);
    free(txns);
    if (rc != TWOPC_EXIT_OK) {
        tpc_checkpoint_dir_release(lease);
        return rc;
    }
    err = tpc__kafka_abort_on_partition(&wire, topic, (int32_t)partition, pid, (int16_t)epoch,
                                        (int32_t)coord, timeout_ms);
    tpc_checkpoint_dir_release(lease);
    if (err)
        return twopc_fail(cmd, err);
    printf("aborted the transaction of producer %" PRId64 " (epoch %d) on kafka topic %s "
           "partition %d, open from offset %" PRId64 "\n",
           pid, (int)epoch, topic, (int)partition, from);
    return TWOPC_EXIT_OK;
}

/* Options that do something only for some subcommands are refused elsewhere. */
static bool options_fit(const twopc_args_t *a, const char *sub)
{
    static const struct {
        const char *opt, *subs;
    } only[] = {
        {"topic", " producers hanging abort "},
        {"partition", " producers abort "},
        {"prefix", " transactions "},
        {"all", " transactions "},
        {"check", " transactions hanging "},
        {"transactional-id", " abort commit "},
        {"producer-id", " abort commit "},
        {"epoch", " abort commit "},
        {"start-ms", " commit "},
        {"force", " abort commit "},
        {"json", " transactions producers hanging "},
        {"coordinator-epoch", " abort "},
    };
    char word[64];
    snprintf(word, sizeof word, " %s ", sub);
    for (size_t i = 0; i < sizeof only / sizeof *only; i++)
        if (twopc_arg(a, only[i].opt) && !strstr(only[i].subs, word)) {
            twopc_usage_error("kafka", "--%s does nothing for \"kafka %s\"", only[i].opt, sub);
            return false;
        }
    return true;
}

int twopc_cmd_kafka(int argc, char **argv)
{
    static const twopc_opt_t spec[] = {
        TWOPC_KAFKA_OPTS,
        {"prefix", true, false},
        {"checkpoint-dir", true, false},
        {"all", false, false},
        {"json", false, false},
        {"check", false, false},
        {"transactional-id", true, false},
        {"producer-id", true, false},
        {"epoch", true, false},
        {"start-ms", true, false},
        {"force", false, false},
        {"topic", true, false},
        {"partition", true, false},
        {"coordinator-epoch", true, false},
        {"help", false, false},
        {NULL},
    };
    twopc_args_t a;
    if (!twopc_args_parse("kafka", argc, argv, spec, &a))
        return TWOPC_EXIT_USAGE;
    if (twopc_flag(&a, "help") || a.npos == 0) {
        bool help = twopc_flag(&a, "help");
        fputs(kafka_help, help ? stdout : stderr);
        twopc_args_free(&a);
        return help ? TWOPC_EXIT_OK : TWOPC_EXIT_USAGE;
    }
    const char *sub = a.pos[0];
    int rc;
    twopc_kafka_conf_t k;
    int64_t timeout = 30000;
    const char *t = twopc_arg(&a, "timeout-ms");
    if (a.npos != 1 || (strcmp(sub, "transactions") != 0 && strcmp(sub, "abort") != 0 &&
                        strcmp(sub, "commit") != 0 && strcmp(sub, "producers") != 0 &&
                        strcmp(sub, "hanging") != 0))
        rc = twopc_usage_error(
            "kafka", "unknown subcommand \"%s\" (transactions, abort, commit, producers, hanging)",
            sub);
    else if (!options_fit(&a, sub))
        rc = TWOPC_EXIT_USAGE;
    else if (t && !tpc_parse_int(t, 1, 3600000, &timeout))
        rc = twopc_usage_error("kafka", "--timeout-ms takes milliseconds, not \"%s\"", t);
    else if (!twopc_kafka_conf("kafka", &a, &k))
        rc = TWOPC_EXIT_USAGE;
    else {
        if (strcmp(sub, "transactions") == 0)
            rc = list(&a, &k, (int)timeout);
        else if (strcmp(sub, "producers") == 0)
            rc = producers(&a, &k, (int)timeout);
        else if (strcmp(sub, "hanging") == 0)
            rc = hanging(&a, &k, (int)timeout);
        else if (strcmp(sub, "abort") == 0 && twopc_arg(&a, "topic"))
            rc = abort_on_partition(&a, &k, (int)timeout);
        else
            rc = end_one(&a, &k, strcmp(sub, "commit") == 0, (int)timeout);
        twopc_kafka_conf_free(&k);
    }
    twopc_args_free(&a);
    return rc;
}
