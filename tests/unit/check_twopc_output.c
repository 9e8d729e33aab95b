/*
 * The `twopc` command's output cannot be forged by the names it prints: a checkpoint whose job name
 * holds a terminal escape sequence, a bell and bytes that are not UTF-8 is listed with those bytes
 * shown as \xNN, on stdout and in an error on stderr, and its JSON listing stays valid UTF-8 with
 * them escaped; valid UTF-8 (an accented letter) passes unchanged.
 */
#include "runtime_internal.h"
#include "tpc_test_check.h"
#include "tpc_test_crash.h"
#include "tpc_test_ops.h"

#include <check.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char twopc_bin[4200];
static const char evil[] = "job\033[2J\a-\xff\xc3-caf\xc3\xa9";

static void write_checkpoint(const char *dir)
{
    tpc__checkpoint_t c = {.id = 1, .timestamp_ms = 1000, .job_name = (char *)evil, .nvertices = 1};
    tpc__vertex_snapshot_t v = {.name = (char *)evil, .parallelism = 1};
    tpc__subtask_snapshot_t s = {0};
    v.subtasks = &s;
    c.vertices = &v;
    char *path;
    TPC_TEST_OK(tpc__checkpoint_write(dir, &c, &path));
    free(path);
}

/* Run twopc with @args; its stdout and stderr into @out. */
static void run(const char *args, char *out, size_t cap)
{
    char line[9000];
    snprintf(line, sizeof line, "'%s' %s 2>&1", twopc_bin, args);
    FILE *p = popen(line, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    pclose(p);
}

static void no_raw_bytes(const char *out)
{
    for (const unsigned char *p = (const unsigned char *)out; *p; p++)
        ck_assert_msg(*p >= 0x20 || *p == '\n' || *p == '\t', "raw byte 0x%02x in:\n%s", *p, out);
    ck_assert_msg(!strstr(out, "\xff") && !strstr(out, "\xc3-"), "invalid UTF-8 in:\n%s", out);
}

START_TEST(test_names_cannot_act_on_a_terminal)
{
    char *dir = tpc_test_tmpdir("twopc-output");
    write_checkpoint(dir);
    char out[16384], args[4300];

    snprintf(args, sizeof args, "checkpoints '%s'", dir);
    run(args, out, sizeof out);
    no_raw_bytes(out);
    ck_assert_msg(strstr(out, "job\\x1b[2J\\x07-\\xff\\xc3-caf\xc3\xa9"), "%s", out);

    snprintf(args, sizeof args, "checkpoints '%s' --json", dir);
    run(args, out, sizeof out);
    no_raw_bytes(out);
    /* control bytes as JSON escapes, bytes that are not UTF-8 as the text \xNN */
    ck_assert_msg(strstr(out, "\"job\\u001b[2J\\u0007-\\\\xff\\\\xc3-caf\xc3\xa9\""), "%s", out);

    /* An error naming a folder: on stderr, filtered too. */
    snprintf(args, sizeof args, "checkpoints '%s/\033]0;title\a'", dir);
    run(args, out, sizeof out);
    no_raw_bytes(out);
    ck_assert_msg(strstr(out, "\\x1b]0;title\\x07"), "%s", out);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

int main(void)
{
    char self[4096];
    if (!tpc_test_self_path(self, sizeof self))
        return 2;
    snprintf(twopc_bin, sizeof twopc_bin, "%s/../bin/twopc", dirname(self));
    Suite *s = suite_create("twopc_output");
    TCase *tc = tcase_create("escape");
    tcase_add_test(tc, test_names_cannot_act_on_a_terminal);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
