/*
 * Everything a run says, in one text: the job's log lines (give tpc_test_capture_log to
 * tpc_job_set_logger()), errors with their hints, and whatever reached stderr meanwhile (stderr
 * goes to a file between start and stop). Tests search it, for a secret that must not be there,
 * say. One capture at a time per process.
 *
 * No Check calls here: failures to set up print to stderr and make tpc_test_capture_start()
 * return false.
 */
#ifndef TPC_TEST_CAPTURE_H
#define TPC_TEST_CAPTURE_H

#include "tpc_runtime.h"

#include <stdbool.h>
#include <stddef.h>

/** Start: forget what was said before, send stderr to a file. */
bool tpc_test_capture_start(void);
/** A tpc_log_cb that adds the line ("log: ..."). Thread-safe. */
void tpc_test_capture_log(void *opaque, tpc_log_level_t level, const char *message);
/** Add an error's message and hint ("error: ...", "hint: ..."). NULL is fine. */
void tpc_test_capture_error(const tpc_error_t *err);
/** Stop: stderr back, its lines added ("stderr: ..."). @returns everything said, owned by the
 * capture until the next start; @p lines (may be NULL) gets the number of lines. */
const char *tpc_test_capture_stop(size_t *lines);

#endif
