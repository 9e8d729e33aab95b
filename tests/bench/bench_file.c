/*
 * File sink throughput against a plain write() loop, in the same run on the same disk.
 *
 *   sink: sequence source -> exactly-once file sink, checkpoints every second (each one an fsync
 *         of the part files and the folder, then renames and another folder fsync)
 *   raw:  one loop producing the same bytes into a buffer of the sink's size, write() when it
 *         is full, fsync once a second
 *
 * Records are 100-byte values plus the newline. Each side runs three times, alternating, and its
 * best run counts, so that a burst of other disk or CPU traffic does not decide the ratio. Prints
 *   bench file <metric> <value> <unit>
 * Environment: TWOPC_BENCH_RECORDS (default 4000000), TMPDIR (where the files go).
 */
#include "tpc_file.h"
#include "tpc_test_bench.h"
#include "tpc_test_env.h"
#include "tpc_test_ops.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VALUE_BYTES  100
#define RECORD_BYTES (VALUE_BYTES + 1)
#define BUFFER_BYTES (1u << 20)

static double run_sink(uint64_t records)
{
    char *ckpt = tpc_test_tmpdir("bench-file-ckpt");
    char *out = tpc_test_tmpdir("bench-file-out");
    if (!ckpt || !out)
        tpc_test_bench_die("temporary folder", NULL);
    tpc_test_seq_conf_t src = {
        .count_default = records, .per_poll = 256, .value_pad = VALUE_BYTES - 8};
    tpc_txn_sink_t *sink = NULL;
    tpc_error_t *err = tpc_file_sink_new(out, &sink);
    if (err)
        tpc_test_bench_die("job setup", err);
    double secs = tpc_test_bench_run_sink("bench-file", ckpt, &src, sink, "files");
    tpc_txn_sink_destroy(sink);
    tpc_test_rmdir(ckpt);
    tpc_test_rmdir(out);
    free(ckpt);
    free(out);
    return secs;
}

static void write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            tpc_test_bench_die("write", NULL);
        p += w;
        n -= (size_t)w;
    }
}

static double run_raw(uint64_t records)
{
    char *dir = tpc_test_tmpdir("bench-file-raw");
    char path[4200];
    snprintf(path, sizeof path, "%s/raw", dir);
    unsigned char *buf = malloc(BUFFER_BYTES);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!buf || fd < 0)
        tpc_test_bench_die("raw file", NULL);
    double t0 = tpc_test_now_s(), next_sync = t0 + 1.0;
    size_t len = 0;
    for (uint64_t i = 0; i < records; i++) {
        if (len + RECORD_BYTES > BUFFER_BYTES) {
            write_all(fd, buf, len);
            len = 0;
            if (tpc_test_now_s() >= next_sync) {
                fsync(fd);
                next_sync += 1.0;
            }
        }
        unsigned char *p = buf + len;
        for (int b = 7; b >= 0; b--)
            p[7 - b] = (unsigned char)(i >> (8 * b));
        memset(p + 8, 0, VALUE_BYTES - 8);
        p[VALUE_BYTES] = '\n';
        len += RECORD_BYTES;
    }
    write_all(fd, buf, len);
    fsync(fd);
    close(fd);
    double secs = tpc_test_now_s() - t0;
    free(buf);
    tpc_test_rmdir(dir);
    free(dir);
    return secs;
}

int main(void)
{
    const char *env = getenv("TWOPC_BENCH_RECORDS");
    uint64_t records = env ? strtoull(env, NULL, 10) : 4000000;
    if (!records)
        records = 4000000;
    double sink = 1e30, raw = 1e30;
    for (int round = 0; round < 3; round++) {
        double r = run_raw(records), s = run_sink(records);
        raw = r < raw ? r : raw;
        sink = s < sink ? s : sink;
    }
    double mb = (double)records * RECORD_BYTES / 1e6;
    printf("bench file sink_rec_per_s %.0f rec/s\n", (double)records / sink);
    printf("bench file raw_rec_per_s %.0f rec/s\n", (double)records / raw);
    printf("bench file ratio %.3f ratio\n", raw / sink);
    printf("bench file sink_mb_per_s %.1f MB/s\n", mb / sink);
    printf("bench file raw_mb_per_s %.1f MB/s\n", mb / raw);
    return 0;
}
