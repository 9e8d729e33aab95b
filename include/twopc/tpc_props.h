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
 *
 * Operators give the same keys from outside the code: a `key = value` file and `TWOPC_`
 * environment variables, read into a tpc_config_t and handed to each component's setter (the
 * last group of this header).
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

/* ------------------------------------------------------------------------------------------ */
/** @name Configuration files and the environment
 *
 * A program reads a file of `key = value` lines and the `TWOPC_...` environment variables into a
 * tpc_config_t, then hands it to each component it builds: tpc_job_configure() for the job,
 * tpc_txn_sink_configure() for a sink, tpc_kafka_source_configure() for a Kafka source, each
 * under the name of its vertex. Every key goes through the component's own setter, so a file
 * and the environment take exactly the keys, values and messages of tpc_job_set() and the
 * others. docs/configuration.md describes the format; in short:
 *
 *     # the job's keys come first (or under [job])
 *     checkpoint.dir = /var/lib/orders/checkpoints
 *     checkpoint.interval.ms = 2000
 *
 *     # the vertex named "postgres"
 *     [postgres]
 *     pg.mode = upsert
 *
 * and `TWOPC_CHECKPOINT_INTERVAL_MS=500` (a job key) or `TWOPC_POSTGRES__PG_MODE=insert`
 * (component, two underscores, key; '.' and '-' become '_', letters are upper case).
 *
 * Precedence, lowest first: the table's default; what the program set before configuring;
 * the file; the environment; what the program sets after configuring. Every key of a file and
 * every `TWOPC_<NAME>__<KEY>` variable must be taken by some component:
 * tpc_config_check_used() says which one was not, after the program configured them all.
 *
 * Errors are TPC_ERR_CONFIG and start with where the key came from (`orders.conf:12: ...` or
 * `environment variable TWOPC_RESTART_ATTEMPTS: ...`); values of secret rows never appear in
 * them. Threads: one configuration is used by one thread at a time.
 * @{ */

/** Keys read from files and the environment, until components take them. */
typedef struct tpc_config tpc_config_t;

/** The files a configuration reads are at most this large. */
#define TPC_CONFIG_FILE_MAX (1u << 20)

/** @brief A new, empty configuration. @returns NULL only if out of memory; free it with
 * tpc_config_destroy(). */
TPC_API tpc_config_t *tpc_config_new(void);
/** @brief Free @p cfg. NULL is fine. */
TPC_API void tpc_config_destroy(tpc_config_t *cfg);

/**
 * @brief Read the `key = value` file at @p path into @p cfg.
 *
 * One entry a line: `key = value` (whitespace around key and value trimmed; the value is the
 * rest of the line after the first '=', '=' included, and may be empty), `[name]` to start the
 * keys of the component named so (`[job]`: the job's), a comment starting with '#', or a blank
 * line. Lines end with LF or CRLF. Refused, with the file and line: a line of any other shape,
 * a '#' after a space in a value (a comment after a value, which would otherwise be part of
 * it), a key given twice in one section, a section started twice, control characters, a file
 * larger than TPC_CONFIG_FILE_MAX. A second file may not repeat a key of the first.
 * Keys are checked against the components when they take them.
 * @returns NULL, or TPC_ERR_CONFIG (also when the file cannot be read); @p cfg is then as before.
 */
TPC_API tpc_error_t *tpc_config_read_file(tpc_config_t *cfg, const char *path);

/** @brief As tpc_config_read_file(), from the @p len bytes at @p text, with @p origin (e.g. a
 * file name) in messages. */
TPC_API tpc_error_t *tpc_config_read_text(tpc_config_t *cfg, const char *origin, const char *text,
                                          size_t len);

/**
 * @brief Take the variables of @p envp (NULL-terminated "NAME=value" strings; NULL: the
 * process's environment) whose name starts with `TWOPC_`, replacing those of an earlier call.
 *
 * `TWOPC_<KEY>` is a job key and `TWOPC_<NAME>__<KEY>` a key of the component named NAME: KEY
 * and NAME are the key and the component's name with letters in upper case and every other
 * character than a letter or a digit written '_' (checkpoint.max-concurrent:
 * `TWOPC_CHECKPOINT_MAX_CONCURRENT`; kafka.linger.ms of the vertex "kafka-out":
 * `TWOPC_KAFKA_OUT__KAFKA_LINGER_MS`). For a key of a row ending in ".*" (kafka.*) the '_' after
 * the prefix become '.'. Values are taken as they are, not trimmed.
 *
 * Other programs use `TWOPC_` names too (TWOPC_PG_CONNINFO, TWOPC_KAFKA_BOOTSTRAP of the
 * examples and tests): a variable without "__" that names no job key is left alone, unless it
 * starts like one (the first word of a job key: TWOPC_CHECKPOINT_..., TWOPC_RESTART_...), which
 * tpc_job_configure() refuses as a misspelt key.
 *
 * Folding loses case, '-' and '.', so two variables may spell one key (`TWOPC_sink__pg_table`
 * and `TWOPC_SINK__PG_TABLE`): they are refused, both named, rather than the later one winning
 * (a job-level pair only when it reads like a job key, as above).
 * @returns NULL; TPC_ERR_CONFIG naming two variables of one key, and then @p cfg holds no
 *     variable; or TPC_ERR_NOMEM.
 */
TPC_API tpc_error_t *tpc_config_read_env(tpc_config_t *cfg, char *const *envp);

/** A component's setter, such as tpc_job_set(), for tpc_config_apply(). */
typedef tpc_error_t *(*tpc_config_set_fn)(void *component, const char *key, const char *value);

/**
 * @brief Give the keys of section @p name (NULL: the job's) to a component: first the file's,
 * in file order, then the environment's, each through @p set(@p component, key, value).
 * Components call it from their own configure function; a program calls those.
 * @param tables the component's property tables (@p ntables of them), which map environment
 *     names to keys and list the keys in the hint for an unknown one.
 * @returns NULL, or the setter's error prefixed with the key's origin (an unknown key:
 *     TPC_ERR_CONFIG listing the keys of @p tables); TPC_ERR_CONFIG naming both components when
 *     @p name and a component configured before are one name in the environment ("a-b" and
 *     "a.b" are both `TWOPC_A_B__`) and a variable of that name is set.
 */
TPC_API tpc_error_t *tpc_config_apply(tpc_config_t *cfg, const char *name,
                                      const tpc_props_t *const *tables, size_t ntables,
                                      tpc_config_set_fn set, void *component);

/**
 * @brief The job's keys in @p cfg (the file's first section or [job], and `TWOPC_<KEY>`
 * variables) into @p job, through tpc_job_set(); job thread, before tpc_job_run().
 * @returns NULL, or TPC_ERR_CONFIG starting with the file and line or the variable's name.
 */
TPC_API tpc_error_t *tpc_job_configure(tpc_job_t *job, tpc_config_t *cfg);

/**
 * @brief The value @p cfg holds for @p key of section @p name (NULL: the job's): the
 * environment's if set, else the file's, else NULL. Owned by @p cfg. @p origin (may be NULL)
 * receives where it came from. For a program that needs a value itself; it does not count as
 * taken for tpc_config_check_used().
 */
TPC_API const char *tpc_config_get(const tpc_config_t *cfg, const char *name, const char *key,
                                   const char **origin);

/**
 * @brief After the program configured every component: refuse a key of the file, a
 * `TWOPC_<NAME>__<KEY>` variable or a job key's `TWOPC_<KEY>` variable that no component took
 * (a misspelt section, a component the program does not have, a job it configures in code
 * only), so that nothing written there is silently ignored.
 * @returns NULL, or TPC_ERR_CONFIG with its origin and the names the program configured.
 */
TPC_API tpc_error_t *tpc_config_check_used(const tpc_config_t *cfg);
/** @} */

#ifdef __cplusplus
}
#endif

#endif
