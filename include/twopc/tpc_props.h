/*
 * Configuration as tables: every component of twopc (the job, the transactional sink, each
 * connector) describes its keys in one table of tpc_prop_t rows (name, type, range or choices,
 * default, unit, description), and one parser reads every key of every component. Defaults are
 * applied from the table, every bad value gets the same message shape ("invalid value "V" for "K"",
 * with a hint that says what the key takes), and docs/configuration.md is generated from the same
 * tables (`twopc config`, tools/cmd_config.c), so code and documentation cannot drift.
 *
 * A connector author writes a table for the connector's own keys, points the connector ops table
 * at it (tpc_txn_connector_ops_t.props, tpc_txn.h) and gets parsing, defaults, messages and
 * documentation without writing any of them. Threads: tables are constant; the functions touch
 * only the configuration struct they are given.
 */
#ifndef TPC_PROPS_H
#define TPC_PROPS_H

#include "tpc_runtime.h"

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TPC_PROP_INT,    /**< a whole number from min to max (digits, optional '-'); int or int64_t */
    TPC_PROP_BOOL,   /**< true or false; a bool field */
    TPC_PROP_ENUM,   /**< one of choices; an int field set to the choice's index */
    TPC_PROP_STRING, /**< a non-empty string, copied; a char * field freed by tpc_props_free() */
    TPC_PROP_CUSTOM, /**< parsed by the row's set function; accepts says what it takes */
} tpc_prop_type_t;

/** Where a row's value lives in the configuration struct. */
typedef struct {
    size_t offset;
    size_t size;
} tpc_prop_field_t;

/** The field @p member of struct type @p type, for tpc_prop_t.field. */
#define TPC_PROP_FIELD(type, member)                                                               \
    {                                                                                              \
        offsetof(type, member), sizeof(((type *)0)->member)                                        \
    }

typedef struct tpc_prop tpc_prop_t;

struct tpc_prop {
    /** The key. A name ending in ".*" takes every key with that prefix (e.g. "kafka.*"); its set
     * function gets the whole key. */
    const char *name;
    tpc_prop_type_t type;
    tpc_prop_field_t field;     /**< unused by CUSTOM rows (their set function knows its fields) */
    int64_t min, max;           /**< INT: the accepted range */
    const char *const *choices; /**< ENUM: the accepted words, NULL-terminated */
    const char *def;            /**< the default as text, applied by tpc_props_init(); NULL: none */
    const char *unit;           /**< "ms", "bytes", ... for INT rows; NULL: none */
    const char *accepts; /**< what the value may be, in words (STRING and CUSTOM rows; optional) */
    const char *doc;     /**< what the key does, for the documentation */
    /** The value never appears in messages (passwords, connection strings). */
    bool secret;
    /**
     * CUSTOM: parse @p value of @p key into @p conf. STRING: an extra check run before the copy
     * is stored (NULL: any non-empty string). @returns NULL, or an error, normally made with
     * tpc_prop_invalid().
     */
    tpc_error_t *(*set)(void *conf, const tpc_prop_t *prop, const char *key, const char *value);
};

/** A component's keys. */
typedef struct {
    const char *component; /**< "job", "transactional sink", "kafka sink", ... */
    const char *setter;    /**< the function that takes these keys, e.g. "tpc_job_set()" */
    const tpc_prop_t *props;
    size_t count;
} tpc_props_t;

/** The row of @p table that takes @p key, or NULL. */
TPC_API const tpc_prop_t *tpc_props_find(const tpc_props_t *table, const char *key);

/**
 * @brief Apply every row's default to @p conf (zeroed or freshly allocated).
 * @returns NULL, or the error of a default its own row refuses (a bug in the table).
 */
TPC_API tpc_error_t *tpc_props_init(const tpc_props_t *table, void *conf);

/**
 * @brief Set @p key to @p value in @p conf, checked by the key's row.
 * @returns NULL; TPC_ERR_CONFIG "invalid value ..." with a hint that says what the key takes;
 * or TPC_ERR_NOT_FOUND when no row takes @p key (so a caller can try another table, and end with
 * tpc_props_unknown()).
 */
TPC_API tpc_error_t *tpc_props_set(const tpc_props_t *table, void *conf, const char *key,
                                   const char *value);

/** @brief Free the strings that STRING rows stored in @p conf (the struct itself stays). */
TPC_API void tpc_props_free(const tpc_props_t *table, void *conf);

/**
 * @brief The one shape of a refused value: TPC_ERR_CONFIG `invalid value "V" for "K"` (without V
 * for a secret row) and, as hint, @p fmt or else what the row takes (its range, choices or
 * accepts). For set functions of CUSTOM and STRING rows.
 */
TPC_API tpc_error_t *tpc_prop_invalid(const tpc_prop_t *prop, const char *key, const char *value,
                                      const char *fmt, ...) TPC_PRINTF(4, 5);

/**
 * @brief An unknown key: TPC_ERR_CONFIG `unknown configuration key "K" for a <component>`, the hint
 * listing the keys of @p tables (@p ntables of them, the first one naming the setter).
 */
TPC_API tpc_error_t *tpc_props_unknown(const tpc_props_t *const *tables, size_t ntables,
                                       const char *key);

/** @brief What @p prop takes, in words ("a whole number from 1 to 64 (ms)"), into @p buf. */
TPC_API void tpc_prop_describe(const tpc_prop_t *prop, char *buf, size_t size);

/** @returns the job's keys (tpc_job_set()). */
TPC_API const tpc_props_t *tpc_job_properties(void);

/** @brief @p table as a Markdown section (heading, then one row per key) on @p out. */
TPC_API void tpc_props_markdown(const tpc_props_t *table, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
