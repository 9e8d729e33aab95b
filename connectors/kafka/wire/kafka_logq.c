/*
 * librdkafka's log lines, made fit for an operator. In a broker outage every producer of every
 * sink subtask, and every consumer, says the same thing again and again ("Connect to ... failed:
 * Connection refused", "Disconnected", "all brokers are down"): hundreds of lines for half a
 * minute, each event twice (as a log line and as an error event). Here a line that says what
 * another said within the last WINDOW_MS is counted instead of logged, and the next one logged
 * after the window says how many were held back. "The same" is the text without librdkafka's thread
 * tag
 * ("[thrd:...]: "), without its "(after 0ms in state CONNECT, 1 identical error(s) suppressed)"
 * tail, and without digits (ports, counts and milliseconds differ); the facility does not count,
 * since the log line says FAIL where the error event says _TRANSPORT. librdkafka's guess on a
 * plaintext connection that drops during the handshake, "might be caused by incorrect
 * security.protocol configuration (connecting to a SSL listener?)", is left out when the client is
 * known to speak plaintext: it was wrong, and sent operators looking at their TLS settings during
 * outages.
 */
#include "kafka_wire.h"
#include "tpc_kit.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define WINDOW_MS 10000
#define SLOTS     64

typedef struct {
    uint64_t key;     /* hash of facility and the text without digits, 0 = free */
    int64_t since_ms; /* the window began with the line logged then */
    unsigned held;    /* lines like it held back since */
} slot_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static slot_t slots[SLOTS];

static uint64_t key_of(const char *line)
{
    if (strncmp(line, "[thrd:", 6) == 0 && strstr(line, "]: "))
        line = strstr(line, "]: ") + 3;
    const char *end = strstr(line, " (after ");
    if (!end)
        end = line + strlen(line);
    uint64_t h = 1469598103934665603u; /* FNV-1a, digits skipped */
    for (const char *s = line; s < end; s++)
        if (!isdigit((unsigned char)*s))
            h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h ? h : 1;
}

bool tpc__kafka_log_quiet(const char *facility, const char *line, const char *security_protocol,
                          char *out, size_t cap)
{
    static const char ssl_guess[] =
        ": might be caused by incorrect security.protocol configuration (connecting to a SSL "
        "listener?)";
    snprintf(out, cap, "%s", line);
    bool plaintext = !security_protocol || strcasecmp(security_protocol, "plaintext") == 0;
    char *guess = plaintext ? strstr(out, ssl_guess) : NULL;
    if (guess)
        memmove(guess, guess + sizeof ssl_guess - 1, strlen(guess + sizeof ssl_guess - 1) + 1);

    (void)facility;
    uint64_t key = key_of(out);
    int64_t now = tpc_clock_ms();
    pthread_mutex_lock(&mu);
    slot_t *s = NULL, *oldest = &slots[0];
    for (size_t i = 0; i < SLOTS && !s; i++) {
        if (slots[i].key == key)
            s = &slots[i];
        else if (slots[i].since_ms < oldest->since_ms)
            oldest = &slots[i];
    }
    bool quiet = false;
    unsigned held = 0;
    if (s && now - s->since_ms < WINDOW_MS) {
        s->held++;
        quiet = true;
    } else {
        if (!s) {
            s = oldest; /* the least recent line's place; what it held back is not said */
            s->held = 0;
        }
        held = s->held;
        *s = (slot_t){.key = key, .since_ms = now};
    }
    pthread_mutex_unlock(&mu);
    size_t len = strlen(out);
    if (!quiet && held && len < cap)
        snprintf(out + len, cap - len, " (%u more like it since the last one shown)", held);
    return quiet;
}
