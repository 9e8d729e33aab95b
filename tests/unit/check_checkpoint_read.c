/*
 * A checkpoint folder read from outside a job, as the `twopc` command reads it: the files with
 * their ids, kinds and standing (the one a restart restores, older ones, ones newer than the
 * completion record, damaged ones), one checkpoint's vertices, subtasks and state, and the sinks'
 * transaction handles in it with the connector their envelope names. Handles written before
 * envelopes named their connector (version 1) are listed without a name, described by the
 * connector a caller picks, and restored by a sink exactly as handles that name it.
 */
#include "pg_internal.h"
#include "runtime_internal.h"
#include "tpc_file.h"
#include "tpc_kafka.h"
#include "tpc_test_check.h"
#include "tpc_test_ops.h"
#include "tpc_test_txn_drive.h"
#include "txn_internal.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The bytes of a PostgreSQL sink's handle for @gid. */
static void pg_handle(const char *gid, tpc_txn_buf_t *out)
{
    tpc__pg_txn_t t = {.subtask = 0, .parallelism = 2, .begin_ckpt = 1, .ckpt = 2};
    snprintf(t.gid, sizeof t.gid, "%s", gid);
    TPC_TEST_OK(tpc__pg_ops.serialize(NULL, &t, out));
}

/* A transaction entry around @handle as this version writes it (naming @connector). */
static void entry_v2(const tpc__txn_entry_t *e, const tpc_txn_buf_t *handle, tpc_txn_buf_t *out)
{
    TPC_TEST_OK(tpc__txn_entry_begin(e, out));
    TPC_TEST_OK(tpc_txn_buf_append(out, handle->data, handle->len));
    tpc__txn_entry_seal(out);
}

/* The same entry as version 1 wrote it: no connector's name between the fixed part and the
 * handle. */
static void to_v1(const void *v2, size_t len, tpc_txn_buf_t *out)
{
    const unsigned char *p = v2;
    size_t name = 1 + (size_t)p[TPC__TXN_ENTRY_HEADER];
    unsigned char head[TPC__TXN_ENTRY_HEADER];
    memcpy(head, p, sizeof head);
    head[4] = 1;
    out->len = 0;
    TPC_TEST_OK(tpc_txn_buf_append(out, head, sizeof head));
    TPC_TEST_OK(tpc_txn_buf_append(out, p + TPC__TXN_ENTRY_HEADER + name,
                                   len - TPC__TXN_ENTRY_HEADER - name));
}

/* Checkpoint @id of job "j": a source that wrote one list entry and finished, and a sink of two
 * subtasks holding a pending PostgreSQL transaction in a new envelope (subtask 0) and a current
 * one in an envelope of version 1 (subtask 1). */
static void write_checkpoint(const char *dir, uint64_t id)
{
    tpc__checkpoint_t c = {.id = id,
                           .timestamp_ms = 1000 * id,
                           .max_parallelism = 128,
                           .job_name = "j",
                           .nvertices = 2};
    tpc__vertex_snapshot_t v[2] = {{.name = "src", .parallelism = 1},
                                   {.name = "out", .parallelism = 2}};
    tpc__subtask_snapshot_t src[1] = {{.operator_finished = true}}, out[2] = {{0}};
    v[0].subtasks = src;
    v[1].subtasks = out;
    c.vertices = v;
    TPC_TEST_OK(tpc_state_add(&src[0].state, TPC_STATE_LIST, "hello", 5));

    tpc_txn_buf_t handle = {0}, entry = {0}, old = {0};
    pg_handle("j.out:0:2:1", &handle);
    tpc__txn_entry_t e = {.kind = TPC__TXN_PENDING,
                          .checkpoint_id = id,
                          .start_ms = 77,
                          .origin = 0,
                          .connector = "postgres"};
    entry_v2(&e, &handle, &entry);
    TPC_TEST_OK(tpc_state_add(&out[0].state, TPC_STATE_OWNED, entry.data, entry.len));
    e = (tpc__txn_entry_t){.kind = TPC__TXN_CURRENT,
                           .checkpoint_id = id + 1,
                           .start_ms = 78,
                           .origin = 1,
                           .connector = "postgres"};
    entry_v2(&e, &handle, &entry);
    to_v1(entry.data, entry.len, &old);
    TPC_TEST_OK(tpc_state_add(&out[1].state, TPC_STATE_OWNED, old.data, old.len));

    char *path;
    TPC_TEST_OK(tpc__checkpoint_write(dir, &c, &path));
    free(path);
    tpc__state_writer_free(&src[0].state);
    tpc__state_writer_free(&out[0].state);
    tpc__state_writer_free(&out[1].state);
    tpc__txn_buf_free(&handle);
    tpc__txn_buf_free(&entry);
    tpc__txn_buf_free(&old);
}

START_TEST(test_folder_listing_and_one_checkpoint)
{
    char *dir = tpc_test_tmpdir("read");
    for (uint64_t id = 1; id <= 3; id++)
        write_checkpoint(dir, id);
    tpc__record_t rec = {.job_name = "j", .newest = 2};
    TPC_TEST_OK(tpc__record_write(dir, &rec));
    char damaged[4200];
    snprintf(damaged, sizeof damaged, "%s/chk-%020d", dir, 5);
    FILE *f = fopen(damaged, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a checkpoint", f);
    fclose(f);

    tpc_checkpoint_folder_t folder;
    TPC_TEST_OK(tpc_checkpoint_folder_read(dir, true, &folder));
    ck_assert(folder.record_found);
    ck_assert_uint_eq(folder.record_newest, 2);
    ck_assert_str_eq(folder.record_job, "j");
    ck_assert_ptr_null(folder.record_error);
    ck_assert_uint_eq(folder.nfiles, 4);
    static const uint64_t ids[] = {5, 3, 2, 1};
    /* As the job decides: 3 is newer than the record, but complete, so a restart restores it (the
     * newest valid file at or above the record); 5 is damaged and skipped. */
    static const char *const status[] = {"damaged", "restore", "older", "older"};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_uint_eq(folder.files[i].id, ids[i]);
        ck_assert(!folder.files[i].savepoint);
        ck_assert_str_eq(tpc_checkpoint_status_name(folder.files[i].status), status[i]);
        ck_assert(folder.files[i].size > 0);
        ck_assert_int_eq(folder.files[i].checkpoint == NULL, i == 0);
    }
    ck_assert_ptr_nonnull(folder.files[0].error);
    ck_assert_int_eq(folder.restore_index, 1);
    ck_assert_ptr_null(folder.restore_refusal);

    const tpc_checkpoint_t *c = folder.files[2].checkpoint;
    ck_assert_str_eq(tpc_checkpoint_job(c), "j");
    ck_assert_int_eq(tpc_checkpoint_time_ms(c), 2000);
    ck_assert_int_eq(tpc_checkpoint_max_parallelism(c), 128);
    ck_assert_int_eq(tpc_checkpoint_vertex_count(c), 2);
    int par;
    ck_assert_str_eq(tpc_checkpoint_vertex(c, 0, &par), "src");
    ck_assert_int_eq(par, 1);
    ck_assert_str_eq(tpc_checkpoint_vertex(c, 1, &par), "out");
    ck_assert_int_eq(par, 2);
    tpc_checkpoint_subtask_t st;
    tpc_checkpoint_subtask(c, 0, 0, &st);
    ck_assert(st.finished && !st.closed);
    ck_assert_uint_eq(st.state_entries, 1);
    ck_assert_uint_eq(st.state_bytes, 4 + 5);
    const tpc_state_reader_t *r = tpc_checkpoint_state(c, 0, 0);
    ck_assert_uint_eq(tpc_state_count(r, TPC_STATE_LIST), 1);
    const void *bytes;
    size_t len;
    tpc_state_get(r, TPC_STATE_LIST, 0, &bytes, &len);
    ck_assert_uint_eq(len, 5);
    ck_assert_int_eq(memcmp(bytes, "hello", 5), 0);

    tpc_txn_checkpoint_handle_t *h;
    size_t n;
    TPC_TEST_OK(tpc_txn_checkpoint_handles(c, &h, &n));
    ck_assert_uint_eq(n, 2); /* the source's entry is not a transaction */
    tpc_txn_buf_t handle = {0};
    pg_handle("j.out:0:2:1", &handle);
    ck_assert_str_eq(h[0].sink, "out");
    ck_assert_int_eq(h[0].subtask, 0);
    ck_assert_int_eq(h[0].origin, 0);
    ck_assert(h[0].pending);
    ck_assert_uint_eq(h[0].checkpoint, 2);
    ck_assert_int_eq(h[0].start_ms, 77);
    ck_assert_str_eq(h[0].connector, "postgres");
    ck_assert_int_eq(h[1].subtask, 1);
    ck_assert_int_eq(h[1].origin, 1);
    ck_assert(!h[1].pending);
    ck_assert_uint_eq(h[1].checkpoint, 3);
    ck_assert_ptr_null(h[1].connector); /* version 1 did not say */
    for (size_t i = 0; i < 2; i++) {
        ck_assert_uint_eq(h[i].handle_len, handle.len);
        ck_assert_int_eq(memcmp(h[i].handle, handle.data, handle.len), 0);
    }
    tpc_txn_checkpoint_handles_free(h, n);
    tpc__txn_buf_free(&handle);
    tpc_checkpoint_folder_free(&folder);

    /* Without load_all only the one a restart restores is decoded; a later load adds another. */
    TPC_TEST_OK(tpc_checkpoint_folder_read(dir, false, &folder));
    ck_assert_ptr_nonnull(folder.files[1].checkpoint);
    ck_assert_ptr_null(folder.files[2].checkpoint);
    ck_assert_ptr_null(folder.files[0].checkpoint);
    ck_assert_ptr_null(folder.files[0].error);
    ck_assert_str_eq(tpc_checkpoint_status_name(folder.files[0].status), "not-completed");
    tpc_checkpoint_folder_load(&folder, 0);
    ck_assert_str_eq(tpc_checkpoint_status_name(folder.files[0].status), "damaged");
    tpc_checkpoint_folder_free(&folder);

    tpc_error_t *err = tpc_checkpoint_folder_read(damaged, false, &folder);
    ck_assert_int_eq(tpc_error_code(err), TPC_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(tpc_error_hint_text(err));
    tpc_error_destroy(err);
    tpc_checkpoint_folder_free(&folder);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

/* Where the job would refuse, the folder says so with the job's message, and names no checkpoint
 * to restore; checkpoints from before a start over (the record's first id) are not restored. */
START_TEST(test_folder_decides_as_the_job)
{
    char *dir = tpc_test_tmpdir("read-refuse");
    for (uint64_t id = 1; id <= 2; id++)
        write_checkpoint(dir, id);
    tpc__record_t rec = {.job_name = "j", .newest = 2};
    TPC_TEST_OK(tpc__record_write(dir, &rec));
    char path[4200];
    snprintf(path, sizeof path, "%s/chk-%020d", dir, 2);
    ck_assert_int_eq(truncate(path, 40), 0);
    tpc_checkpoint_folder_t folder;
    TPC_TEST_OK(tpc_checkpoint_folder_read(dir, false, &folder));
    ck_assert_int_eq(folder.restore_index, -1);
    ck_assert_ptr_nonnull(folder.restore_refusal);
    ck_assert_msg(strstr(folder.restore_refusal, "job \"j\" refuses to restore") &&
                      strstr(folder.restore_refusal, "checkpoint 2 completed") &&
                      strstr(folder.restore_refusal, "damaged"),
                  "%s", folder.restore_refusal);
    ck_assert_ptr_nonnull(folder.restore_hint);
    tpc_checkpoint_folder_free(&folder);

    /* The record's file gone: refused as missing, not the older one restored. */
    ck_assert_int_eq(unlink(path), 0);
    TPC_TEST_OK(tpc_checkpoint_folder_read(dir, false, &folder));
    ck_assert_int_eq(folder.restore_index, -1);
    ck_assert_msg(folder.restore_refusal && strstr(folder.restore_refusal, "missing"), "%s",
                  folder.restore_refusal ? folder.restore_refusal : "no refusal");
    tpc_checkpoint_folder_free(&folder);

    /* Started over at 3: checkpoint 1 is not this job's state any more; a fresh start. */
    rec = (tpc__record_t){.job_name = "j", .newest = 0, .first = 3};
    TPC_TEST_OK(tpc__record_write(dir, &rec));
    TPC_TEST_OK(tpc_checkpoint_folder_read(dir, false, &folder));
    ck_assert_int_eq(folder.restore_index, -1);
    ck_assert_ptr_null(folder.restore_refusal);
    tpc_checkpoint_folder_free(&folder);
    tpc_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_describe_handle)
{
    tpc_txn_buf_t handle = {0};
    pg_handle("orders:1:2:41", &handle);
    tpc_txn_handle_view_t v;
    tpc_txn_describe_handle(tpc_pg_sink_ops(), handle.data, handle.len, &v);
    ck_assert_str_eq(v.line, "orders:1:2:41");
    ck_assert_int_eq(v.nfields, 1);
    ck_assert_str_eq(v.fields[0].name, "gid");
    ck_assert(!v.fields[0].is_number);
    ck_assert_str_eq(v.fields[0].text, "orders:1:2:41");

    /* A connector this program does not know, or one without describe_handle: name and size. */
    tpc_txn_describe_handle(NULL, handle.data, handle.len, &v);
    ck_assert_str_eq(v.line, "handle of 39 bytes");
    ck_assert_int_eq(v.nfields, 0);
    tpc_txn_connector_ops_t older = *tpc_pg_sink_ops();
    older.version = 3; /* built before describe_handle: the field is not there to read */
    tpc_txn_describe_handle(&older, handle.data, handle.len, &v);
    ck_assert_str_eq(v.line, "handle of 39 bytes");

    /* Another connector's bytes are not read as its own. */
    tpc_txn_describe_handle(tpc_kafka_sink_ops(), handle.data, handle.len, &v);
    ck_assert_msg(strncmp(v.line, "unreadable handle of 39 bytes: ", 31) == 0, "%s", v.line);
    ck_assert_int_eq(v.nfields, 0);
    tpc_txn_describe_handle(tpc_file_sink_ops(), handle.data, handle.len, &v);
    ck_assert_msg(strncmp(v.line, "unreadable handle of 39 bytes: ", 31) == 0, "%s", v.line);
    tpc__txn_buf_free(&handle);

    /* Values beyond the room are dropped, not written past it. */
    tpc_txn_handle_view_t full = {0};
    for (int i = 0; i < TPC_TXN_HANDLE_FIELDS_MAX + 2; i++)
        tpc_txn_handle_number(&full, "n", i);
    ck_assert_int_eq(full.nfields, TPC_TXN_HANDLE_FIELDS_MAX);
}
END_TEST

/* A sink restores the entries of version 1, which name no connector, as it restores those of
 * this version: the same calls, in the same order. */
START_TEST(test_old_envelope_restores_alike)
{
    tpc_test_txn_rec_t rec;
    tpc_txn_sink_t *sink = tpc_test_txn_rec_sink_new(&rec, 4096);
    ck_assert_ptr_nonnull(sink);
    tpc_test_txn_sub_t sub;
    tpc_test_txn_state_t st = {.count = 0};
    TPC_TEST_OK(tpc_test_txn_sub_start(&sub, sink, 0, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 0, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 1, NULL));
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 10, 10));
    TPC_TEST_OK(tpc_test_txn_sub_snapshot(&sub, 2, &st)); /* pending 1 and 2, current 3 */
    TPC_TEST_OK(tpc_test_txn_sub_write(&sub, 20, 10));
    tpc_test_txn_sub_close(&sub);
    ck_assert_uint_eq(st.count, 3);

    tpc_txn_buf_t old[3] = {{0}};
    tpc__txn_bytes_t old_entries[3];
    for (size_t i = 0; i < st.count; i++) {
        tpc__txn_entry_t e;
        TPC_TEST_OK(tpc__txn_entry_decode(st.entries[i].bytes, st.entries[i].len, &e));
        ck_assert_uint_eq(e.connector_len, strlen(tpc_txn_sink_connector_ops(sink)->name));
        to_v1(st.entries[i].bytes, st.entries[i].len, &old[i]);
        TPC_TEST_OK(tpc__txn_entry_decode(old[i].data, old[i].len, &e));
        ck_assert_ptr_null(e.connector);
        old_entries[i] = (tpc__txn_bytes_t){old[i].data, old[i].len};
    }

    char *traces[2];
    for (int round = 0; round < 2; round++) {
        size_t before = rec.nevents;
        TPC_TEST_OK(tpc_test_txn_sub_open(&sub, sink, 0, 1, 2));
        TPC_TEST_OK(tpc__txn_task_initialize(sub.task, round ? old_entries : st.entries, 3));
        tpc_test_txn_sub_close(&sub);
        char *trace = tpc_test_txn_trace(&rec, -1);
        size_t skip = 0;
        for (size_t i = 0, words = 0; trace[i] && words < before; i++)
            if (trace[i] == ' ' && ++words == before)
                skip = i + 1;
        traces[round] = strdup(trace + skip);
        free(trace);
    }
    ck_assert_str_eq(traces[0], "open recover_commit:1 recover_commit:2 recover_abort:3 "
                                "lingering@2 begin:4@3 close");
    /* The second restore commits and aborts the same transactions again (idempotent calls). */
    ck_assert_str_eq(traces[1], "open recover_commit:1 recover_commit:2 recover_abort:3 "
                                "lingering@2 begin:5@3 close");
    ck_assert_msg(rec.violations == 0, "%s", rec.first_violation);
    for (int i = 0; i < 2; i++)
        free(traces[i]);
    for (size_t i = 0; i < 3; i++)
        tpc__txn_buf_free(&old[i]);
    tpc_test_txn_state_free(&st);
    tpc_test_txn_rec_sink_free(&rec, sink);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint_read");
    TCase *tc = tcase_create("read");
    tcase_add_test(tc, test_folder_listing_and_one_checkpoint);
    tcase_add_test(tc, test_folder_decides_as_the_job);
    tcase_add_test(tc, test_describe_handle);
    tcase_add_test(tc, test_old_envelope_restores_alike);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
