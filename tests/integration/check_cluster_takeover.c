/*
 * Crash take-over against the real broker: two member processes, X1 and X2, share four units;
 * X1 is killed with kill -9, and once its session has run out X2 takes its units over; then X2 is
 * killed too and a new member (with X2's static identity under the classic protocol) takes every
 * unit. Each unit must resume from the checkpoints its dead owner completed (never from nothing),
 * and the committed output of every unit must hold each of its records exactly once.
 *
 * Classic protocol (cooperative-sticky, static membership) with any librdkafka; KIP-848's
 * (group.protocol=consumer) with librdkafka 2.12 or later, where the broker's
 * group.consumer.session.timeout.ms decides how long a dead member keeps its units.
 */
#include "check_cluster_common.h"

#include <librdkafka/rdkafka.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define UNITS            4
#define TAKEOVER_WAIT_MS 150000

/* A member process, and what its events said through its pipe. */
typedef struct {
    pid_t pid;
    int fd;
    int running; /* units assigned and not released or lost */
    int assigned;
} child_t;

static void child_start(child_t *ch, ct_world_t *w, const char *name, const char *app,
                        const char *dir, bool consumer_protocol)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        ct_member_t *m = calloc(1, sizeof *m);
        m->event_fd = fds[1];
        ct_member_start(m, w, name, app, dir, UNITS, consumer_protocol);
        for (;;)
            pause(); /* until kill -9 */
    }
    close(fds[1]);
    *ch = (child_t){.pid = pid, .fd = fds[0]};
}

/* Take in what the children's pipes hold, waiting at most @ms. */
static void children_read(child_t *ch, int n, int ms)
{
    struct pollfd p[4];
    for (int i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = ch[i].pid > 0 ? ch[i].fd : -1, .events = POLLIN};
    if (poll(p, (nfds_t)n, ms) <= 0)
        return;
    for (int i = 0; i < n; i++) {
        if (!(p[i].revents & POLLIN))
            continue;
        char buf[4096];
        ssize_t got = read(ch[i].fd, buf, sizeof buf - 1);
        if (got <= 0)
            continue;
        buf[got] = '\0';
        for (char *line = buf; *line;) {
            int kind = -1, unit = -1;
            sscanf(line, "%d %d", &kind, &unit);
            if (kind == TPC_CLUSTER_UNIT_ASSIGNED) {
                ch[i].assigned++;
                ch[i].running++;
            } else if (kind == TPC_CLUSTER_UNIT_RELEASED || kind == TPC_CLUSTER_UNIT_LOST) {
                ch[i].running--;
            }
            line += strcspn(line, "\n");
            line += *line == '\n';
        }
    }
}

#define CHILDREN_WAIT_FOR(ch, n, what)                                                             \
    do {                                                                                           \
        int64_t until_ = tpc_test_now_ms() + TAKEOVER_WAIT_MS;                                     \
        while (!(what) && tpc_test_now_ms() < until_)                                              \
            children_read((ch), (n), 100);                                                         \
        ck_assert_msg((what), "waited %d ms for: %s", TAKEOVER_WAIT_MS, #what);                    \
    } while (0)

static void child_kill(child_t *ch)
{
    ck_assert_int_eq(kill(ch->pid, SIGKILL), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(ch->pid, &status, 0), ch->pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(ch->fd);
    ch->pid = -1;
}

static void takeover(bool consumer_protocol)
{
    ct_world_t *w = calloc(1, sizeof *w);
    w->per_poll = 10;
    w->sleep_us = 10000;
    char *dir = tpc_test_tmpdir("cluster");
    char app[128];
    tpc_test_unique_name(app, sizeof app, "takeover", '-');
    snprintf(w->out_dir, sizeof w->out_dir, "%s/out", dir);
    ck_assert_int_eq(mkdir(w->out_dir, 0755), 0);
    char chk[512];
    snprintf(chk, sizeof chk, "%s/chk", dir);

    child_t ch[2];
    child_start(&ch[0], w, "x1", app, chk, consumer_protocol);
    CHILDREN_WAIT_FOR(ch, 1, ch[0].running == UNITS);
    child_start(&ch[1], w, "x2", app, chk, consumer_protocol);
    CHILDREN_WAIT_FOR(ch, 2, ch[1].running > 0 && ch[0].running + ch[1].running == UNITS);
    usleep((useconds_t)(1500 + rand() % 1000) * 1000); /* checkpoints on both */

    /* X1 dies: X2 takes its units once X1's session has run out. */
    int x2_before = ch[1].assigned, x1_units = ch[0].running;
    int64_t killed = tpc_test_now_ms();
    child_kill(&ch[0]);
    CHILDREN_WAIT_FOR(&ch[1], 1, ch[1].running == UNITS);
    int64_t first_takeover = tpc_test_now_ms() - killed;
    ck_assert_int_eq(ch[1].assigned - x2_before, x1_units);
    usleep((useconds_t)(1000 + rand() % 1000) * 1000);

    /* X2 dies too: a new member takes every unit (with X2's static identity, at once). */
    killed = tpc_test_now_ms();
    child_kill(&ch[1]);
    ct_member_t *p = calloc(1, sizeof *p);
    ct_member_start(p, w, "x2", app, chk, UNITS, consumer_protocol);
    int64_t until = tpc_test_now_ms() + TAKEOVER_WAIT_MS;
    while (atomic_load(&p->running) < UNITS && tpc_test_now_ms() < until)
        usleep(50 * 1000);
    ck_assert_int_eq(atomic_load(&p->running), UNITS);
    for (int u = 0; u < UNITS; u++)
        while (atomic_load(&w->opens[u]) == 0 && tpc_test_now_ms() < until)
            usleep(50 * 1000);
    int64_t second_takeover = tpc_test_now_ms() - killed;
    for (int u = 0; u < UNITS; u++)
        ck_assert_msg(atomic_load(&w->restored[u]) > 0,
                      "unit %d did not restore the checkpoints of its dead owner", u);

    atomic_store(&w->finish, true);
    CT_WAIT_FOR(atomic_load(&p->finished) >= UNITS);
    ct_member_end(p);
    ck_assert_int_eq(atomic_load(&p->failed) + atomic_load(&p->fenced), 0);
    for (int u = 0; u < UNITS; u++)
        ct_verify_unit(w, app, u);
    fprintf(
        stderr,
        "takeover (%s, librdkafka %s): %d units of X1 on X2 %lld ms after kill -9; all units "
        "on the new member %lld ms after kill -9 of X2; restored %llu %llu %llu %llu, ends "
        "%llu %llu %llu %llu\n",
        consumer_protocol ? "consumer" : "classic", rd_kafka_version_str(), x1_units,
        (long long)first_takeover, (long long)second_takeover,
        (unsigned long long)atomic_load(&w->restored[0]),
        (unsigned long long)atomic_load(&w->restored[1]),
        (unsigned long long)atomic_load(&w->restored[2]),
        (unsigned long long)atomic_load(&w->restored[3]),
        (unsigned long long)atomic_load(&w->end[0]), (unsigned long long)atomic_load(&w->end[1]),
        (unsigned long long)atomic_load(&w->end[2]), (unsigned long long)atomic_load(&w->end[3]));
    free(p);
    tpc_test_rmdir(dir);
    free(dir);
    free(w);
}

START_TEST(test_takeover_classic)
{
    srand((unsigned)getpid());
    takeover(false);
}
END_TEST

START_TEST(test_takeover_consumer_protocol)
{
    srand((unsigned)getpid());
    takeover(true);
}
END_TEST

/* A zombie: member A runs the unit, and another owner takes the unit's checkpoints over while A
 * still runs it (as a process that A's frozen member lost the unit to would). That owner's job
 * restores the unit, commits what A's checkpoints promised and ends its input. A's job must be
 * fenced at its next completion: released without a restart, committing nothing more, so that
 * the unit's files hold every number below where the new owner ended exactly once. */
static void zombie(void)
{
    ct_world_t *w = calloc(1, sizeof *w), *w2 = calloc(1, sizeof *w2);
    w->per_poll = 10;
    w->sleep_us = 10000;
    char *dir = tpc_test_tmpdir("cluster");
    char app[128];
    tpc_test_unique_name(app, sizeof app, "zombie", '-');
    snprintf(w->out_dir, sizeof w->out_dir, "%s/out", dir);
    ck_assert_int_eq(mkdir(w->out_dir, 0755), 0);
    memcpy(w2->out_dir, w->out_dir, sizeof w->out_dir);
    atomic_store(&w2->finish, true);
    char chk[512];
    snprintf(chk, sizeof chk, "%s/chk", dir);

    ct_member_t *a = calloc(1, sizeof *a);
    ct_member_start(a, w, "a", app, chk, 1, false);
    CT_WAIT_FOR(atomic_load(&a->running) == 1 && atomic_load(&w->opens[0]) == 1);
    usleep(1500 * 1000); /* checkpoints on A */

    /* The new owner: the unit's job as the runner builds it, on the unit's folder. */
    char job_name[256], unit_dir[640], prefix[256];
    snprintf(job_name, sizeof job_name, "%s-unit-0", app);
    snprintf(unit_dir, sizeof unit_dir, "%s/unit-0", chk);
    snprintf(prefix, sizeof prefix, "%s-u0", app);
    tpc_cluster_unit_t info = {.app = app,
                               .unit = 0,
                               .units = 1,
                               .job_name = job_name,
                               .checkpoint_dir = unit_dir,
                               .transactional_id_prefix = prefix,
                               .gid_prefix = prefix};
    tpc_job_t *job = tpc_job_new(job_name);
    void *resources = NULL;
    TPC_TEST_OK(ct_build(w2, &info, job, &resources));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.dir", unit_dir));
    TPC_TEST_OK(tpc_job_set(job, "checkpoint.owner", "claim"));
    tpc_job_result_t result;
    TPC_TEST_OK(tpc_job_run(job, &result));
    ck_assert_int_eq(result, TPC_JOB_FINISHED);
    tpc_job_destroy(job);
    ct_release(w2, &info, resources);
    ck_assert_msg(atomic_load(&w2->restored[0]) > 0, "the new owner restored no checkpoint of A");

    /* A's next completion is refused: its unit is released, and not run again at once. */
    CT_WAIT_FOR(atomic_load(&a->fenced) == 1);
    int opens = atomic_load(&w->opens[0]);
    usleep(1500 * 1000);
    ck_assert_int_eq(atomic_load(&w->opens[0]), opens);
    ck_assert_int_eq(atomic_load(&w->live[0]), 0);
    ct_verify_unit(w2, app, 0);

    /* The group still assigns the unit to A (the other owner is no member): after twice the
     * session timeout A runs it again, as a new owner, from the other owner's final checkpoint,
     * and finishes it there. Every number is still in the files exactly once. */
    atomic_store(&w->finish, true);
    CT_WAIT_FOR(atomic_load(&a->finished) == 1);
    ct_member_end(a);
    ck_assert_int_eq(atomic_load(&a->failed), 0);
    ct_verify_unit(w2, app, 0);
    free(a);
    tpc_test_rmdir(dir);
    free(dir);
    free(w2);
    free(w);
}

START_TEST(test_zombie_fenced)
{
    zombie();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_takeover");
    TCase *tc = tcase_create("takeover");
    tcase_set_timeout(tc, 400);
    tcase_add_test(tc, test_takeover_classic);
    tcase_add_test(tc, test_zombie_fenced);
    /* KIP-848's consumer needs librdkafka 2.12 (check_cluster_handoff checks the refusal). */
    if (rd_kafka_version() >= 0x020c0000)
        tcase_add_test(tc, test_takeover_consumer_protocol);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
