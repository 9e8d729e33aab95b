/*
 * Readiness probe for the test broker: exits 0 once the broker at BOOTSTRAP answers a metadata
 * request for a probe topic with a leader for its partition, which needs both the broker and the
 * controller (auto-creating the topic goes through the controller). Exits 1 after TIMEOUT seconds.
 *
 *   kafka_ready BOOTSTRAP TIMEOUT_SECONDS
 */
#include <librdkafka/rdkafka.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char probe_topic[] = "twopc-ready-probe";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Messages of a broker that is still starting are expected; keep the output to the final verdict.
 */
static void quiet_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    (void)level;
    (void)fac;
    (void)buf;
}

static int probe_once(rd_kafka_t *rk, rd_kafka_topic_t *topic, char *why, size_t why_len)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, topic, &md, 2000);
    int ok = 0;

    if (err) {
        snprintf(why, why_len, "metadata request: %s", rd_kafka_err2str(err));
        return 0;
    }
    if (md->broker_cnt < 1 || md->topic_cnt != 1) {
        snprintf(why, why_len, "metadata lists %d brokers, %d topics", md->broker_cnt,
                 md->topic_cnt);
    } else if (md->topics[0].err) {
        snprintf(why, why_len, "probe topic: %s", rd_kafka_err2str(md->topics[0].err));
    } else if (md->topics[0].partition_cnt < 1 || md->topics[0].partitions[0].leader < 0 ||
               md->topics[0].partitions[0].err) {
        snprintf(why, why_len, "probe topic has no partition leader yet");
    } else {
        ok = 1;
    }
    rd_kafka_metadata_destroy(md);
    return ok;
}

int main(int argc, char **argv)
{
    char errstr[512], why[512] = "no answer yet";
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    rd_kafka_topic_t *topic;
    double deadline;
    int ok = 0;

    if (argc != 3) {
        fprintf(stderr, "usage: kafka_ready BOOTSTRAP TIMEOUT_SECONDS\n");
        return 2;
    }
    deadline = now_s() + atof(argv[2]);

    conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "allow.auto.create.topics", "true", errstr, sizeof errstr) ||
        rd_kafka_conf_set(conf, "reconnect.backoff.max.ms", "200", errstr, sizeof errstr)) {
        fprintf(stderr, "kafka_ready: %s\n", errstr);
        return 2;
    }
    rd_kafka_conf_set_log_cb(conf, quiet_log);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!rk) {
        fprintf(stderr, "kafka_ready: %s\n", errstr);
        return 2;
    }
    topic = rd_kafka_topic_new(rk, probe_topic, NULL);

    while (!ok && now_s() < deadline) {
        ok = probe_once(rk, topic, why, sizeof why);
        if (!ok) {
            struct timespec pause = {0, 200 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
    }
    if (!ok)
        fprintf(stderr, "kafka_ready: broker at %s not ready after %s s: %s\n", argv[1], argv[2],
                why);

    rd_kafka_topic_destroy(topic);
    rd_kafka_destroy(rk);
    return ok ? 0 : 1;
}
