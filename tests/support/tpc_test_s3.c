/*
 * Starting and stopping the local S3 server of the tests (see tpc_test_s3.h).
 */
#include "tpc_test_s3.h"

#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOT_STARTED "tests/services/s3.sh could not start moto; see its lines above"

void tpc_test_s3_start(tpc_test_s3_t *s3, const char *who, const char *bucket)
{
    const char *given = tpc_test_env(TPC_TEST_S3_ENDPOINT_ENV);
    if (!given) {
        tpc_test_s3_start_own(s3, who, bucket);
        return;
    }
    *s3 = (tpc_test_s3_t){.endpoint = strdup(given), .missing = "out of memory"};
    if (!s3->endpoint)
        fprintf(stderr, "%s: WITHOUT S3: %s\n", who, s3->missing);
}

/* The pid that tests/services/s3.sh wrote into DIR/pid, 0 if none. */
static pid_t read_pid(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/pid", dir);
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f && fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    if (f)
        fclose(f);
    return pid > 0 ? (pid_t)pid : 0;
}

void tpc_test_s3_start_own(tpc_test_s3_t *s3, const char *who, const char *bucket)
{
    *s3 = (tpc_test_s3_t){.missing = NOT_STARTED, .dir = tpc_test_tmpdir("s3")};
    if (!s3->dir) {
        s3->missing = "could not make a temporary folder for the server";
        fprintf(stderr, "%s: WITHOUT S3: %s\n", who, s3->missing);
        return;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "tests/services/s3.sh start '%s' %s", s3->dir, bucket);
    FILE *p = popen(cmd, "r");
    char line[256] = "";
    bool got = p && fgets(line, sizeof line, p);
    int rc = p ? pclose(p) : -1;
    pid_t pid = read_pid(s3->dir);
    if (got && rc == 0 && pid > 0 && strncmp(line, "http://127.0.0.1:", 17) == 0) {
        line[strcspn(line, "\n")] = 0;
        s3->pid = pid;
        s3->endpoint = strdup(line);
        if (!s3->endpoint)
            s3->missing = "out of memory";
    }
    if (!s3->endpoint)
        fprintf(stderr, "%s: WITHOUT S3: %s\n", who, s3->missing);
}

void tpc_test_s3_stop(tpc_test_s3_t *s3, const char *who)
{
    if (s3->pid > 0) {
        kill(s3->pid, SIGCONT); /* a case that failed while it was frozen */
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "tests/services/s3.sh stop '%s'", s3->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "%s: could not stop the S3 server in %s\n", who, s3->dir);
    } else {
        tpc_test_rmdir(s3->dir);
    }
    free(s3->dir);
    free(s3->endpoint);
    *s3 = (tpc_test_s3_t){.missing = "stopped"};
}
