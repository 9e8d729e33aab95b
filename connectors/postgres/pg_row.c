/*
 * The row builder: values in PostgreSQL's binary wire format, appended straight to the
 * connection's send buffer as one tuple of binary COPY (field count, then each field as a length
 * and its bytes, -1 for NULL). Insert and upsert reuse the same tuples as parameter arrays, so
 * there is one encoding for every mode. Each value is checked against its column's type when it
 * is appended, because binary COPY would otherwise fail late with "incorrect binary data format"
 * or, worse, read the bytes as another type. Also what a row does (insert, upsert, delete, skip:
 * checked against the mode), which table it goes to (a record may give rows to several), and the
 * default record mapping.
 */
#include "pg_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Type oids (pg_type.h). */
enum {
    OID_BOOL = 16,
    OID_BYTEA = 17,
    OID_INT8 = 20,
    OID_INT2 = 21,
    OID_INT4 = 23,
    OID_TEXT = 25,
    OID_JSON = 114,
    OID_FLOAT4 = 700,
    OID_FLOAT8 = 701,
    OID_BPCHAR = 1042,
    OID_VARCHAR = 1043,
    OID_TIMESTAMPTZ = 1184,
    OID_NUMERIC = 1700,
    OID_JSONB = 3802,
};

/* Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch. */
#define PG_EPOCH_US 946684800000000LL

bool tpc__pg_buf_reserve(tpc__pg_buf_t *b, size_t more)
{
    return b->len + more <= b->cap || tpc_array_grow(&b->buf, &b->cap, b->len + more, 1);
}

/* A changelog tuple's own leading fields: the operation (int2) and the sequence number (int8). */
#define STAGE_FIELDS 2
#define STAGE_BYTES  (4 + 2 + 4 + 8)

static const char *op_name(int op)
{
    static const char *const names[] = {"default", "insert", "upsert", "delete", "skip"};
    return op >= 0 && op <= TPC_PG_OP_SKIP ? names[op] : "unknown operation";
}

static const char *mode_name(tpc__pg_mode_t mode)
{
    static const char *const names[] = {"copy", "insert", "upsert", "changelog"};
    return names[mode];
}

/* Start a row of the record in table @i, doing @op. */
static void start_row(tpc_pg_row_t *row, int i, int op)
{
    row->table = &row->tables[i];
    row->out = &row->table->out;
    row->cols = row->table->cols;
    row->ncols = row->table->ncols;
    row->start = row->out->len;
    row->nfields = 0;
    row->op = op;
    size_t head = 2 + (row->staged ? STAGE_BYTES : 0); /* field count, written at the end */
    if (tpc__pg_buf_reserve(row->out, head))
        row->out->len += head;
    else
        snprintf(row->why, sizeof row->why, "out of memory");
}

void tpc__pg_row_begin(tpc_pg_row_t *row, const tpc_record_t *record, int tombstone)
{
    row->why[0] = '\0';
    row->done = 0;
    row->first_op = tombstone == TPC__PG_TOMBSTONE_DELETE &&
                            (!record->value || (record->flags & TPC_RECORD_NULL_VALUE))
                        ? TPC_PG_OP_DELETE
                        : TPC_PG_OP_DEFAULT;
    start_row(row, 0, row->first_op);
}

/* The operation @op comes to in the mode; -1 (and why) when the mode cannot apply it. */
static int resolve_op(tpc_pg_row_t *row, int op)
{
    bool keyed = row->mode == TPC__PG_UPSERT || row->mode == TPC__PG_CHANGELOG;
    if (op == TPC_PG_OP_DEFAULT || op == TPC_PG_OP_INSERT)
        return keyed ? TPC_PG_OP_UPSERT : TPC_PG_OP_INSERT;
    if (op == TPC_PG_OP_SKIP || (op == TPC_PG_OP_UPSERT && keyed) ||
        (op == TPC_PG_OP_DELETE && row->mode == TPC__PG_CHANGELOG))
        return op;
    snprintf(row->why, sizeof row->why, "%s %s a row of table \"%s\", but pg.mode is %s%s",
             op == TPC_PG_OP_DELETE ? "a delete" : "an upsert",
             op == TPC_PG_OP_DELETE ? "of" : "of", row->table->name, mode_name(row->mode),
             op == TPC_PG_OP_DELETE ? " (deletes need pg.mode=changelog and pg.key-columns)"
                                    : " (upserts need pg.mode=upsert or changelog)");
    return -1;
}

/* Finish the current row: @returns false (and why) when it is invalid. */
static bool finish_row(tpc_pg_row_t *row)
{
    int op = row->why[0] ? -1 : resolve_op(row, row->op);
    if (op == TPC_PG_OP_SKIP) {
        row->out->len = row->start;
        return true;
    }
    if (op >= 0 && row->nfields != row->ncols)
        snprintf(row->why, sizeof row->why,
                 "the %s row of table \"%s\" has %d values for %d columns", op_name(op),
                 row->table->name, row->nfields, row->ncols);
    if (row->why[0]) {
        row->out->len = row->start;
        return false;
    }
    unsigned char *p = row->out->buf + row->start;
    tpc_store_be(p, (uint64_t)(row->nfields + (row->staged ? STAGE_FIELDS : 0)), 2);
    if (row->staged) {
        tpc_store_be(p + 2, 2, 4);
        tpc_store_be(p + 6, op == TPC_PG_OP_DELETE ? 2 : 1, 2);
        tpc_store_be(p + 8, 8, 4);
        tpc_store_be(p + 12, row->seq++, 8);
        row->deletes = row->deletes || op == TPC_PG_OP_DELETE;
    }
    row->table->rows++;
    row->done++;
    return true;
}

tpc_error_t *tpc__pg_row_end(tpc_pg_row_t *row)
{
    if (finish_row(row))
        return NULL;
    return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "invalid row: %s", row->why);
}

void tpc_pg_row_op(tpc_pg_row_t *row, tpc_pg_op_t op)
{
    if (row->why[0])
        return;
    if ((int)op < TPC_PG_OP_DEFAULT || op > TPC_PG_OP_SKIP)
        snprintf(row->why, sizeof row->why, "operation %d is not a tpc_pg_op_t", (int)op);
    else
        row->op = (int)op;
}

void tpc_pg_row_table(tpc_pg_row_t *row, int table)
{
    if (row->why[0])
        return;
    if (table < 0 || table >= row->ntables) {
        size_t n = (size_t)snprintf(row->why, sizeof row->why,
                                    "table %d is not one of the %d tables of pg.table (", table,
                                    row->ntables);
        for (int i = 0; i < row->ntables && n < sizeof row->why; i++)
            n += (size_t)snprintf(row->why + n, sizeof row->why - n, "%s%d: %s", i ? ", " : "", i,
                                  row->tables[i].name);
        if (n < sizeof row->why)
            snprintf(row->why + n, sizeof row->why - n, ")");
        return;
    }
    int op = row->op;
    if (row->nfields == 0) {
        row->out->len = row->start; /* nothing yet: the row moves, with its operation */
    } else {
        if (!finish_row(row))
            return;
        op = row->first_op;
    }
    start_row(row, table, op);
}

/* Start the next field of @len bytes (-1: NULL) for a value of @what, which may go into columns
 * of the types in @oks; @returns where its bytes go, or NULL (the row is then invalid). */
static unsigned char *field(tpc_pg_row_t *row, long len, const char *what, const Oid *oks,
                            size_t nok)
{
    if (row->why[0])
        return NULL;
    if (row->nfields >= row->ncols) {
        snprintf(row->why, sizeof row->why, "more values than the %d columns", row->ncols);
        return NULL;
    }
    const tpc__pg_col_t *col = &row->cols[row->nfields];
    bool ok = nok == 0;
    for (size_t i = 0; i < nok && !ok; i++)
        ok = oks[i] == col->type;
    if (!ok) {
        snprintf(row->why, sizeof row->why, "column \"%s\" has type %s, not %s", col->name,
                 col->type_name, what);
        return NULL;
    }
    if (len > 0x3fffffff) {
        snprintf(row->why, sizeof row->why, "value for column \"%s\" is too long", col->name);
        return NULL;
    }
    if (!tpc__pg_buf_reserve(row->out, 4 + (len > 0 ? (size_t)len : 0))) {
        snprintf(row->why, sizeof row->why, "out of memory");
        return NULL;
    }
    tpc_store_be(row->out->buf + row->out->len, (uint64_t)(int64_t)(int32_t)len, 4);
    unsigned char *p = row->out->buf + row->out->len + 4;
    row->out->len += 4 + (len > 0 ? (size_t)len : 0);
    row->nfields++;
    return p;
}

#define ONE(oid) (const Oid[]){oid}, 1

void tpc_pg_row_null(tpc_pg_row_t *row)
{
    field(row, -1, "NULL", NULL, 0);
}

void tpc_pg_row_int2(tpc_pg_row_t *row, int16_t v)
{
    unsigned char *p = field(row, 2, "smallint", ONE(OID_INT2));
    if (p)
        tpc_store_be(p, (uint16_t)v, 2);
}

void tpc_pg_row_int4(tpc_pg_row_t *row, int32_t v)
{
    unsigned char *p = field(row, 4, "integer", ONE(OID_INT4));
    if (p)
        tpc_store_be(p, (uint32_t)v, 4);
}

void tpc_pg_row_int8(tpc_pg_row_t *row, int64_t v)
{
    unsigned char *p = field(row, 8, "bigint", ONE(OID_INT8));
    if (p)
        tpc_store_be(p, (uint64_t)v, 8);
}

void tpc_pg_row_float4(tpc_pg_row_t *row, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    unsigned char *p = field(row, 4, "real", ONE(OID_FLOAT4));
    if (p)
        tpc_store_be(p, bits, 4);
}

void tpc_pg_row_float8(tpc_pg_row_t *row, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    unsigned char *p = field(row, 8, "double precision", ONE(OID_FLOAT8));
    if (p)
        tpc_store_be(p, bits, 8);
}

void tpc_pg_row_bool(tpc_pg_row_t *row, bool v)
{
    unsigned char *p = field(row, 1, "boolean", ONE(OID_BOOL));
    if (p)
        *p = v ? 1 : 0;
}

void tpc_pg_row_timestamptz(tpc_pg_row_t *row, int64_t unix_us)
{
    unsigned char *p = field(row, 8, "timestamptz", ONE(OID_TIMESTAMPTZ));
    if (p)
        tpc_store_be(p, (uint64_t)(unix_us - PG_EPOCH_US), 8);
}

void tpc_pg_row_bytea(tpc_pg_row_t *row, const void *bytes, size_t len)
{
    unsigned char *p = field(row, (long)len, "bytea", ONE(OID_BYTEA));
    if (p && len)
        memcpy(p, bytes, len);
}

static const Oid text_like[] = {OID_TEXT, OID_VARCHAR, OID_BPCHAR, OID_JSON, OID_JSONB};

/* jsonb's binary form is a version byte before the text; json's is the text alone. */
static void text_value(tpc_pg_row_t *row, const char *s, size_t len, const char *what,
                       const Oid *oks, size_t nok)
{
    bool jsonb =
        !row->why[0] && row->nfields < row->ncols && row->cols[row->nfields].type == OID_JSONB;
    unsigned char *p = field(row, (long)(len + jsonb), what, oks, nok);
    if (!p)
        return;
    if (jsonb)
        *p++ = 1;
    if (len)
        memcpy(p, s, len);
}

void tpc_pg_row_text(tpc_pg_row_t *row, const char *s, size_t len)
{
    text_value(row, s, len, "text", text_like, sizeof text_like / sizeof *text_like);
}

void tpc_pg_row_jsonb(tpc_pg_row_t *row, const char *json, size_t len)
{
    static const Oid json_types[] = {OID_JSONB, OID_JSON};
    text_value(row, json, len, "jsonb", json_types, 2);
}

long tpc__pg_numeric_binary(const char *s, unsigned char *out)
{
    int sign = 0;
    if (strcmp(s, "NaN") == 0 || strcmp(s, "nan") == 0) {
        tpc_store_be(out, 0, 2);
        tpc_store_be(out + 2, 0, 2);
        tpc_store_be(out + 4, 0xC000, 2);
        tpc_store_be(out + 6, 0, 2);
        return 8;
    }
    if (*s == '-' || *s == '+')
        sign = *s++ == '-' ? 0x4000 : 0;
    /* All digits in one string; the decimal point sits after `point` of them. */
    size_t n = strlen(s);
    char *d = malloc(n + 8);
    if (!d)
        return -1;
    size_t nd = 0;
    long point = -1, frac = 0;
    for (; *s && *s != 'e' && *s != 'E'; s++) {
        if (*s == '.' && point < 0) {
            point = (long)nd;
        } else if (isdigit((unsigned char)*s)) {
            d[nd++] = *s;
            frac += point >= 0;
        } else {
            free(d);
            return -1;
        }
    }
    long exp = 0;
    if (*s) {
        char *end;
        exp = strtol(s + 1, &end, 10);
        if (end == s + 1 || *end || exp > 100000 || exp < -100000) {
            free(d);
            return -1;
        }
    }
    if (nd == 0) {
        free(d);
        return -1;
    }
    if (point < 0)
        point = (long)nd;
    long p = point + exp, dscale = frac - exp;
    dscale = dscale < 0 ? 0 : dscale > 0x3FFF ? 0x3FFF : dscale;
    size_t first = 0;
    while (first < nd && d[first] == '0')
        first++, p--;
    /* Pad on the left so base-10000 groups line up with the decimal point, and on the right to
     * whole groups. */
    long padl = ((4 - (((p % 4) + 4) % 4)) % 4);
    size_t digits = nd - first, total = (size_t)padl + digits;
    total = (total + 3) / 4 * 4;
    long weight = (p + padl) / 4 - 1;
    int ngroups = 0;
    unsigned char *g = out + 8;
    for (size_t at = 0; at < total; at += 4) {
        int v = 0;
        for (size_t k = 0; k < 4; k++) {
            long i = (long)(at + k) - padl;
            v = v * 10 + (i >= 0 && (size_t)i < digits ? d[first + (size_t)i] - '0' : 0);
        }
        tpc_store_be(g + 2 * ngroups++, (uint64_t)v, 2);
    }
    free(d);
    /* Leading zero groups cannot occur (leading zeros were dropped); trailing ones are noise. */
    while (ngroups && g[2 * ngroups - 2] == 0 && g[2 * ngroups - 1] == 0)
        ngroups--;
    if (ngroups == 0)
        weight = 0, sign = 0;
    if (weight > 0x7FFF || weight < -0x7FFF)
        return -1;
    tpc_store_be(out, (uint64_t)ngroups, 2);
    tpc_store_be(out + 2, (uint64_t)(uint16_t)(int16_t)weight, 2);
    tpc_store_be(out + 4, (uint64_t)sign, 2);
    tpc_store_be(out + 6, (uint64_t)dscale, 2);
    return 8 + 2L * ngroups;
}

void tpc_pg_row_numeric(tpc_pg_row_t *row, const char *decimal)
{
    size_t n = decimal ? strlen(decimal) : 0;
    unsigned char small[256], *tmp = n * 2 + 16 <= sizeof small ? small : malloc(n * 2 + 16);
    long len = tmp && decimal ? tpc__pg_numeric_binary(decimal, tmp) : -1;
    if (len < 0) {
        if (!row->why[0])
            snprintf(row->why, sizeof row->why, "\"%.64s\" is not a numeric value",
                     decimal ? decimal : "(null)");
    } else {
        unsigned char *p = field(row, len, "numeric", ONE(OID_NUMERIC));
        if (p)
            memcpy(p, tmp, (size_t)len);
    }
    if (tmp != small)
        free(tmp);
}

tpc_error_t *tpc__pg_default_encoder(void *opaque, const tpc_record_t *r, tpc_pg_row_t *row)
{
    const tpc__pg_conn_t *c = opaque;
    if (r->key && !(r->flags & TPC_RECORD_NULL_KEY))
        tpc_pg_row_bytea(row, r->key, r->key_len);
    else
        tpc_pg_row_null(row);
    if (!r->value || (r->flags & TPC_RECORD_NULL_VALUE))
        tpc_pg_row_null(row);
    else if (c->tables[0].value_is_text)
        tpc_pg_row_text(row, r->value, r->value_len);
    else
        tpc_pg_row_bytea(row, r->value, r->value_len);
    return NULL;
}
