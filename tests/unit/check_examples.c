/*
 * The example programs work as documented: bounded_two_sources ends right after its final
 * checkpoint with both sources' records committed exactly once, and minimal writes its 1000
 * records once even when run a second time on the same checkpoint directory.
 */
#include "tpc_test_ops.h"

#include <check.h>
#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char examples_dir[4096];

/* Run an example; returns its exit status and its stdout in @p out. */
static int run_example(const char *cmd, char *out, size_t cap)
{
    char line[8192];
    snprintf(line, sizeof line, "%s/%s", examples_dir, cmd);
    FILE *p = popen(line, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    return pclose(p);
}

static uint64_t count_lines(const char *dir)
{
    uint64_t lines = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        int c;
        while ((c = fgetc(f)) != EOF)
            lines += c == '\n';
        fclose(f);
    }
    closedir(d);
    return lines;
}

START_TEST(test_bounded_two_sources)
{
    char *dir = tpc_test_tmpdir("ex-b2");
    char cmd[4096], out[65536];
    snprintf(cmd, sizeof cmd, "bounded_two_sources %s %s/ckpt 10 300000 50", dir, dir);
    int status = run_example(cmd, out, sizeof out);
    ck_assert_msg(status == 0, "exit %d:\n%s", status, out);
    ck_assert_ptr_nonnull(strstr(out, "short  records 10, committed 10: exactly once"));
    ck_assert_ptr_nonnull(strstr(out, "long   records 300000, committed 300000: exactly once"));
    ck_assert_ptr_nonnull(strstr(out, "completed"));
    ck_assert_uint_eq(count_lines(dir), 300010);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* --config FILE: its keys reach the job and the sink "files", and a section nobody takes is
 * refused with the file and the line. */
START_TEST(test_bounded_two_sources_config)
{
    char *dir = tpc_test_tmpdir("ex-b2-config");
    char path[2000], outdir[2100], cmd[7000], out[65536];
    snprintf(path, sizeof path, "%s/app.conf", dir);
    snprintf(outdir, sizeof outdir, "%s/out", dir);
    ck_assert_int_eq(mkdir(outdir, 0755), 0);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("checkpoint.interval.ms = 40\n[files]\nfile.suffix = .log\n[file]\nx = 1\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "bounded_two_sources --config %s %s %s/ckpt 10 1000 2>&1", path,
             outdir, dir);
    int status = run_example(cmd, out, sizeof out);
    ck_assert_msg(status != 0, "accepted:\n%s", out);
    ck_assert_msg(strstr(out, "app.conf:5: ") &&
                      strstr(out, "no component of the program is named \"file\""),
                  "%s", out);
    f = fopen(path, "w");
    fputs("checkpoint.interval.ms = 40\n[files]\nfile.suffix = .log\n", f);
    fclose(f);
    status = run_example(cmd, out, sizeof out);
    ck_assert_msg(status == 0, "exit %d:\n%s", status, out);
    ck_assert_ptr_nonnull(strstr(out, "long   records 1000, committed 1000: exactly once"));
    DIR *d = opendir(outdir);
    ck_assert_ptr_nonnull(d);
    size_t logs = 0, others = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        if (n > 4 && strcmp(e->d_name + n - 4, ".log") == 0)
            logs++;
        else
            others++;
    }
    closedir(d);
    ck_assert_uint_gt(logs, 0);
    ck_assert_uint_eq(others, 0);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_minimal_twice)
{
    char *dir = tpc_test_tmpdir("ex-min");
    char cmd[4096], out[4096];
    snprintf(cmd, sizeof cmd, "minimal %s %s/ckpt", dir, dir);
    ck_assert_int_eq(run_example(cmd, out, sizeof out), 0);
    ck_assert_uint_eq(count_lines(dir), 1000);
    /* The final checkpoint records everything as finished: a second run adds nothing. */
    ck_assert_int_eq(run_example(cmd, out, sizeof out), 0);
    ck_assert_uint_eq(count_lines(dir), 1000);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return EXIT_FAILURE;
    self[n] = 0;
    snprintf(examples_dir, sizeof examples_dir, "%s/../examples", dirname(self));
    Suite *s = suite_create("examples");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bounded_two_sources);
    tcase_add_test(tc, test_bounded_two_sources_config);
    tcase_add_test(tc, test_minimal_twice);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
