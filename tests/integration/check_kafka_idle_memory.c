/*
 * An unbounded job that has (almost) nothing to do keeps its memory, file descriptors and threads
 * flat. The job is the sequence source, writing one record a second, into the exactly-once Kafka
 * sink with a pool of twelve transactional ids, checkpointing every 50 ms. Most producers of the
 * pool then sit idle while librdkafka publishes their statistics ten times a second; a producer
 * nobody polls gathers them in its queue, which made such a job grow by about a megabyte a second.
 * After a warm-up the test samples the child's /proc status for MEASURE_S seconds (hundreds of
 * checkpoints) and bounds the growth.
 */
#include "check_kafka_child.h"

#include <dirent.h>

#define MEASURE_S       30
#define RSS_GROWTH_KB   4096 /* without polling idle producers: ~28 MB over MEASURE_S */
#define WARM_UP_LIMIT_S 60

typedef struct {
    long rss_kb;
    int fds;
    int threads;
} proc_sample_t;

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static bool sample(pid_t pid, proc_sample_t *out)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    out->rss_kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            out->rss_kb = atol(line + 6);
    fclose(f);
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    out->fds = count_entries(path);
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    out->threads = count_entries(path);
    return out->rss_kb > 0;
}

/* AddressSanitizer keeps freed memory in a quarantine of up to 256 MB, which the child's RSS would
 * show as growth: without it, the child's RSS is comparable with a plain build's. */
static void no_quarantine_in_child(void)
{
#ifdef __SANITIZE_ADDRESS__
    char options[1024];
    const char *given = getenv("ASAN_OPTIONS");
    snprintf(options, sizeof options, "%s%squarantine_size_mb=0", given ? given : "",
             given && *given ? ":" : "");
    setenv("ASAN_OPTIONS", options, 1);
#endif
}

static bool has_checkpoint(const char *dir)
{
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        found = strncmp(e->d_name, "chk-", 4) == 0;
    if (d)
        closedir(d);
    return found;
}

START_TEST(test_idle_job_keeps_memory_flat)
{
    kc_scenario_t sc;
    kc_scenario_init(&sc, "twopc-idle");
    const char *const options[] = {"records=1000000", "per_poll=1", "sleep_us=999999",
                                   "sink.transactional.id.pool-size=12", NULL};
    no_quarantine_in_child();
    pid_t child = kc_spawn(&sc, options);

    /* Warm-up: every producer of the pool started (at open) and checkpoints complete. */
    int64_t t0 = tpc_test_now_ms();
    while (!has_checkpoint(sc.ckpt) && tpc_test_now_ms() - t0 < WARM_UP_LIMIT_S * 1000)
        usleep(100 * 1000);
    bool started = has_checkpoint(sc.ckpt);
    sleep(3);
    proc_sample_t first, last, now;
    bool alive = started && sample(child, &first);
    long peak_kb = alive ? first.rss_kb : 0;
    last = first;
    for (int s = 0; alive && s < MEASURE_S; s++) {
        sleep(1);
        alive = sample(child, &now);
        if (alive) {
            last = now;
            peak_kb = now.rss_kb > peak_kb ? now.rss_kb : peak_kb;
        }
    }
    bool checkpointing = has_checkpoint(sc.ckpt);
    tpc_test_kill(child);
    if (!alive || !started || !checkpointing)
        tpc_test_dump_log(sc.log);
    ck_assert_msg(started, "the job completed no checkpoint within %d s", WARM_UP_LIMIT_S);
    ck_assert_msg(alive, "the job ended while it was watched");
    printf("kafka idle job over %d s: rss %ld -> %ld kB (peak %ld), fds %d -> %d, threads %d -> "
           "%d\n",
           MEASURE_S, first.rss_kb, last.rss_kb, peak_kb, first.fds, last.fds, first.threads,
           last.threads);
    fflush(stdout);
    ck_assert_msg(peak_kb - first.rss_kb < RSS_GROWTH_KB,
                  "resident memory grew by %ld kB in %d s of an idle job (bound %d kB)",
                  peak_kb - first.rss_kb, MEASURE_S, RSS_GROWTH_KB);
    ck_assert_msg(last.fds <= first.fds && last.threads <= first.threads,
                  "file descriptors %d -> %d, threads %d -> %d", first.fds, last.fds, first.threads,
                  last.threads);
    kc_scenario_clean(&sc);
}
END_TEST

int main(int argc, char **argv)
{
    if (kc_is_child(argc, argv))
        return kc_child_main(argc, argv);
    Suite *s = suite_create("kafka_idle_memory");
    TCase *tc = tcase_create("idle");
    tcase_set_timeout(tc, WARM_UP_LIMIT_S + MEASURE_S + 60);
    tcase_add_test(tc, test_idle_job_keeps_memory_flat);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
