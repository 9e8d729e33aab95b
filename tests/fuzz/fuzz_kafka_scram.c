/*
 * libFuzzer harness: the SCRAM-SHA-256 / -512 login of the recovery client
 * (connectors/kafka/wire/kafka_scram.c), where a broker, or anything that answers on its address,
 * sends the server-first and server-final messages. The first input byte chooses the hash (bit 0);
 * the rest is the server-first message, a NUL byte, and the server-final message. The client-first
 * message uses a fixed nonce, which the seeds' server nonces extend. Messages that ask for more
 * than 4096 PBKDF2 iterations are parsed but not answered, so that one input stays well inside the
 * time limit (the client accepts up to TPC__KAFKA_SCRAM_MAX_ITERS). Every message the client builds
 * must fit the buffer it reports.
 */
#include "kafka_wire.h"

#include <stdlib.h>
#include <string.h>

#define MAX_FUZZ_ITERS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool sha512 = data[0] & 1;
    char *text = malloc(size + 1); /* both messages, NUL-terminated */
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    const char *server_first = text;
    size_t first_len = strlen(server_first);
    const char *server_final = first_len + 1 < size ? text + first_len + 1 : "";

    static const unsigned char nonce[24] = "twopc-fuzz-client-nonce";
    tpc__kafka_scram_t s;
    char msg[4096];
    size_t len = 0;
    tpc_error_t *err = tpc__kafka_scram_first(&s, sha512, "app", nonce, msg, sizeof msg, &len);
    if (err || len >= sizeof msg)
        abort();
    tpc__kafka_scram_server_t sf;
    err = tpc__kafka_scram_parse_first(&s, "broker:9092", server_first, &sf);
    if (!err && sf.iters <= MAX_FUZZ_ITERS) {
        err = tpc__kafka_scram_final(&s, "broker:9092", "secret", server_first, msg, sizeof msg,
                                     &len);
        if (!err && (len >= sizeof msg || strlen(msg) != len))
            abort();
        if (!err)
            err = tpc__kafka_scram_check(&s, "broker:9092", server_final);
    }
    tpc_error_destroy(err);
    tpc__kafka_scram_wipe(&s);
    free(text);
    return 0;
}
