/*
 * The row builder: values in PostgreSQL's binary wire format, appended straight to the
 * connection's send buffer as one tuple of binary COPY (field count, then each field as a length
 * and its bytes, -1 for NULL). Insert and upsert reuse the same tuples as parameter arrays, so
 * there is one encoding for every mode. Each value is checked against its column's type when it
 * is appended, because binary COPY would otherwise fail late with "incorrect binary data format"
 * or, worse, read the bytes as another type. Also the default record mapping.
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

bool tpc__pg_row_reserve(tpc_pg_row_t *row, size_t more)
{
    return row->len + more <= row->cap || tpc_array_grow(&row->buf, &row->cap, row->len + more, 1);
}

void tpc__pg_row_begin(tpc_pg_row_t *row)
{
    row->start = row->len;
    row->nfields = 0;
    row->why[0] = '\0';
    if (tpc__pg_row_reserve(row, 2))
        row->len += 2; /* the field count, written at the end */
    else
        snprintf(row->why, sizeof row->why, "out of memory");
}

tpc_error_t *tpc__pg_row_end(tpc_pg_row_t *row)
{
    if (!row->why[0] && row->nfields != row->ncols)
        snprintf(row->why, sizeof row->why, "the row has %d values for %d columns", row->nfields,
                 row->ncols);
    if (row->why[0]) {
        row->len = row->start;
        return tpc_error_new(TPC_ERR_INVALID_ARG, TPC_ERROR_FATAL, "invalid row: %s", row->why);
    }
    tpc_store_be(row->buf + row->start, (uint64_t)row->nfields, 2);
    return NULL;
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
    if (!tpc__pg_row_reserve(row, 4 + (len > 0 ? (size_t)len : 0))) {
        snprintf(row->why, sizeof row->why, "out of memory");
        return NULL;
    }
    tpc_store_be(row->buf + row->len, (uint64_t)(int64_t)(int32_t)len, 4);
    unsigned char *p = row->buf + row->len + 4;
    row->len += 4 + (len > 0 ? (size_t)len : 0);
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
    if (r->key)
        tpc_pg_row_bytea(row, r->key, r->key_len);
    else
        tpc_pg_row_null(row);
    if (!r->value)
        tpc_pg_row_null(row);
    else if (c->value_is_text)
        tpc_pg_row_text(row, r->value, r->value_len);
    else
        tpc_pg_row_bytea(row, r->value, r->value_len);
    return NULL;
}
