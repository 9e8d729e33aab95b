/* Everything a run says, in one text (tpc_test_capture.h). */
#include "tpc_test_capture.h"
#include "tpc_test_ops.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *said, *dir, path[1024];
static size_t said_len, said_lines;
static int saved_stderr = -1;

static void add(const char *what, const char *text)
{
    if (!text)
        return;
    pthread_mutex_lock(&mu);
    size_t n = strlen(what) + strlen(text) + 3;
    char *grown = realloc(said, said_len + n + 1);
    if (grown) {
        said = grown;
        said_len += (size_t)snprintf(said + said_len, n + 1, "%s: %s\n", what, text);
        said_lines++;
    }
    pthread_mutex_unlock(&mu);
}

bool tpc_test_capture_start(void)
{
    free(said);
    said = calloc(1, 1);
    said_len = said_lines = 0;
    dir = tpc_test_tmpdir("capture");
    snprintf(path, sizeof path, "%s/stderr", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror("capture: stderr file");
        return false;
    }
    fflush(stderr);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
    return saved_stderr >= 0;
}

void tpc_test_capture_log(void *opaque, tpc_log_level_t level, const char *message)
{
    (void)opaque, (void)level;
    add("log", message);
}

void tpc_test_capture_error(const tpc_error_t *err)
{
    if (!err)
        return;
    add("error", tpc_error_message(err));
    add("hint", tpc_error_hint_text(err));
}

const char *tpc_test_capture_stop(size_t *lines)
{
    fflush(stderr);
    if (saved_stderr >= 0) {
        dup2(saved_stderr, 2);
        close(saved_stderr);
        saved_stderr = -1;
    }
    FILE *f = fopen(path, "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        add("stderr", line);
    }
    if (f)
        fclose(f);
    unlink(path);
    if (dir) {
        tpc_test_rmdir(dir);
        free(dir);
        dir = NULL;
    }
    if (lines)
        *lines = said_lines;
    return said;
}
