/*
 * Reading what the file sink committed, as a user would: the final files of one prefix in name
 * order, concatenated, and checked record by record against the sequence source's output (each
 * record = its 8 + value_pad value bytes and a newline). In-progress files are counted apart.
 */
#ifndef TPC_TEST_FILE_H
#define TPC_TEST_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    unsigned char *data; /* final files of the prefix, concatenated in name order */
    size_t len;
    int files;
    int inprogress; /* hidden in-progress files of the prefix */
    int others;     /* any other entry in the folder */
    size_t largest; /* largest final file */
} tpc_test_file_out_t;

/* @returns false (and a reason in @why) if the folder cannot be read. */
bool tpc_test_file_read(const char *dir, const char *prefix, tpc_test_file_out_t *out, char *why,
                        size_t why_len);
void tpc_test_file_out_free(tpc_test_file_out_t *out);

/* Check that @out holds exactly records 0 .. count[s]-1 of each source subtask s < @nsub, each
 * once; with @in_order also that each subtask's records appear in sequence order.
 * @returns false with a reason in @why. */
bool tpc_test_file_check(const tpc_test_file_out_t *out, uint32_t value_pad, int nsub,
                         const uint64_t *count, bool in_order, char *why, size_t why_len);

#endif
