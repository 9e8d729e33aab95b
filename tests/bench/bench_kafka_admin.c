/*
 * What `twopc kafka transactions` costs on a cluster that knows many transactional ids: this
 * program makes N ids PREFIX-0 ... PREFIX-(N-1) known to the coordinator of a one-broker cluster
 * (InitProducerId for each, over 8 connections), then lists and describes them as the command does
 * (tpc__kafka_list_transactions) and prints the time. Measure the command itself with
 *
 *   bench_kafka_admin BOOTSTRAP PREFIX N
 *   /usr/bin/time -v twopc kafka transactions --bootstrap BOOTSTRAP --prefix PREFIX- --all --json
 *
 * The ids stay in the cluster's __transaction_state until transactional.id.expiration.ms: run it
 * against a broker of your own (tests/services/services.sh up), not a shared one.
 */
#include "kafka_wire.h"
#include "tpc_kit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONNS 8

static const char *bootstrap, *prefix;
static long total;

static void *make_ids(void *arg)
{
    long first = (long)(intptr_t)arg;
    tpc__kafka_wire_conf_t conf = {.bootstrap = bootstrap, .client_id = "bench-kafka-admin"};
    tpc__kafka_conn_t *c = NULL;
    tpc_error_t *err = tpc__kafka_conn_open_bootstrap(&conf, tpc_clock_ms() + 30000, &c);
    int tries = 0;
    /* The first FindCoordinator makes the cluster create __transaction_state. */
    for (int code = -1; !err && code != 0 && tries++ < 600;) {
        char host[256], id[128];
        int port;
        snprintf(id, sizeof id, "%s-%ld", prefix, first);
        err = tpc__kafka_find_coordinator(c, id, tpc_clock_ms() + 30000, host, sizeof host, &port,
                                          &code);
        if (!err && code)
            tpc_sleep_ms(100, NULL, NULL);
    }
    tries = 0;
    for (long i = first; !err && i < total; i += CONNS) {
        char id[128];
        snprintf(id, sizeof id, "%s-%ld", prefix, i);
        tpc__kafka_wbuf_t w = {0};
        tpc__kafka_w_str(&w, id, false);
        tpc__kafka_w_i32(&w, 60000);
        tpc__kafka_rbuf_t r;
        err = tpc__kafka_conn_call(c, 22 /* InitProducerId */, 0, false, &w, tpc_clock_ms() + 30000,
                                   &r);
        tpc__kafka_wbuf_free(&w);
        if (err)
            break;
        tpc__kafka_r_i32(&r);
        int code = tpc__kafka_r_i16(&r);
        if (code == TPC__KAFKA_E_COORDINATOR_LOADING || code == TPC__KAFKA_E_NOT_COORDINATOR ||
            code == TPC__KAFKA_E_COORDINATOR_NOT_AVAILABLE ||
            code == TPC__KAFKA_E_CONCURRENT_TRANSACTIONS) {
            if (++tries > 600) {
                err = tpc_error_new(TPC_ERR_TIMEOUT, 0, "no coordinator for \"%s\" in 60 s", id);
                break;
            }
            tpc_sleep_ms(100, NULL, NULL);
            i -= CONNS; /* again */
            continue;
        }
        if (code)
            err = tpc_error_new(TPC_ERR_EXTERNAL, 0, "InitProducerId for \"%s\": %s", id,
                                tpc__kafka_code_name(code));
    }
    tpc__kafka_conn_close(c);
    if (err) {
        fprintf(stderr, "bench_kafka_admin: %s\n", tpc_error_message(err));
        exit(1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_kafka_admin BOOTSTRAP PREFIX N\n");
        return 2;
    }
    bootstrap = argv[1];
    prefix = argv[2];
    total = atol(argv[3]);
    int64_t t0 = tpc_clock_ms();
    pthread_t t[CONNS];
    for (long i = 0; i < CONNS; i++)
        pthread_create(&t[i], NULL, make_ids, (void *)(intptr_t)i);
    for (int i = 0; i < CONNS; i++)
        pthread_join(t[i], NULL);
    printf("%ld ids made known in %.1f s\n", total, (tpc_clock_ms() - t0) / 1000.0);

    char want[128];
    snprintf(want, sizeof want, "%s-", prefix);
    tpc__kafka_wire_conf_t conf = {.bootstrap = bootstrap, .client_id = "bench-kafka-admin"};
    tpc__kafka_txn_info_t *txns = NULL;
    size_t n = 0;
    t0 = tpc_clock_ms();
    tpc_error_t *err = tpc__kafka_list_transactions(&conf, want, false, 60000, &txns, &n);
    if (err) {
        fprintf(stderr, "bench_kafka_admin: listing: %s\n", tpc_error_message(err));
        return 1;
    }
    printf("%zu ids listed and described in %lld ms\n", n, (long long)(tpc_clock_ms() - t0));
    free(txns);
    return n >= (size_t)total ? 0 : 1;
}
