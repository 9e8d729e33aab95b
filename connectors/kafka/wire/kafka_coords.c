/*
 * Connections to transaction coordinators, kept between calls. A sink subtask describes its
 * transaction at every pre-commit and again when it proves the commit; a call made afresh opens a
 * connection to a bootstrap server, asks it for the coordinator and connects to that, each
 * connection with its API versions and any TLS and SASL handshakes: several round trips on the path
 * from a checkpoint's barrier to its completion, where one DescribeTransactions on a kept
 * connection needs one. What is kept is only a shortcut: a call on a kept connection that fails in
 * any way (the broker closed an idle connection or restarted, the coordinator moved) forgets it and
 * is made afresh, as without the cache, so the answers and errors are those of a fresh call.
 */
#include "kafka_wire.h"
#include "tpc_kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *id;
    char host[256];
    int port;
} coord_of_t;

typedef struct {
    char host[256];
    int port;
    tpc__kafka_conn_t *conn;
} kept_t;

struct tpc__kafka_coords {
    coord_of_t *ids; /* the coordinator of each transactional id asked for */
    size_t nids, ids_cap;
    kept_t *kept; /* one connection per coordinator */
    size_t nkept, kept_cap;
    uint64_t opened;
};

tpc__kafka_coords_t *tpc__kafka_coords_new(void)
{
    return calloc(1, sizeof(tpc__kafka_coords_t));
}

void tpc__kafka_coords_free(tpc__kafka_coords_t *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->nids; i++)
        free(k->ids[i].id);
    for (size_t i = 0; i < k->nkept; i++)
        tpc__kafka_conn_close(k->kept[i].conn);
    free(k->ids);
    free(k->kept);
    free(k);
}

static coord_of_t *coord_of(tpc__kafka_coords_t *k, const char *id)
{
    for (size_t i = 0; i < k->nids; i++)
        if (strcmp(k->ids[i].id, id) == 0)
            return &k->ids[i];
    return NULL;
}

static kept_t *kept_at(tpc__kafka_coords_t *k, const char *host, int port)
{
    for (size_t i = 0; i < k->nkept; i++)
        if (k->kept[i].port == port && strcmp(k->kept[i].host, host) == 0)
            return &k->kept[i];
    return NULL;
}

tpc__kafka_conn_t *tpc__kafka_coords_get(tpc__kafka_coords_t *k, const char *id)
{
    const coord_of_t *c = k ? coord_of(k, id) : NULL;
    const kept_t *at = c ? kept_at(k, c->host, c->port) : NULL;
    return at ? at->conn : NULL;
}

bool tpc__kafka_coords_keep(tpc__kafka_coords_t *k, const char *id, const char *host, int port,
                            tpc__kafka_conn_t *conn)
{
    if (!k)
        return false;
    coord_of_t *c = coord_of(k, id);
    if (!c) {
        char *copy = strdup(id);
        if (!copy || !tpc_array_grow(&k->ids, &k->ids_cap, k->nids + 1, sizeof *k->ids)) {
            free(copy);
            return false;
        }
        c = &k->ids[k->nids++];
        c->id = copy;
    }
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    kept_t *at = kept_at(k, host, port);
    if (at && at->conn)
        return false; /* the caller's is one more to the same broker: it closes it */
    if (!at) {
        if (!tpc_array_grow(&k->kept, &k->kept_cap, k->nkept + 1, sizeof *k->kept))
            return false;
        at = &k->kept[k->nkept++];
        snprintf(at->host, sizeof at->host, "%s", host);
        at->port = port;
    }
    at->conn = conn;
    k->opened++;
    return true;
}

void tpc__kafka_coords_drop(tpc__kafka_coords_t *k, const char *id)
{
    coord_of_t *c = k ? coord_of(k, id) : NULL;
    if (!c)
        return;
    kept_t *at = kept_at(k, c->host, c->port);
    if (at) {
        tpc__kafka_conn_close(at->conn);
        at->conn = NULL;
    }
    free(c->id);
    *c = k->ids[--k->nids];
}

uint64_t tpc__kafka_coords_opened(const tpc__kafka_coords_t *k)
{
    return k ? k->opened : 0;
}
