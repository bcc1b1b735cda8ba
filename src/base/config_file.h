/* SPDX-License-Identifier: BSD-3-Clause */
/* config_file.h - a reader for one flat JSON object, the form of the job directory's
 * config.json (config_to_json): keys in double quotes, each with a string, a number, true or
 * false; no nesting, no null, no key twice. It knows no options: every key and its value go to
 * a callback, which decides what they mean (config.c does, for `--config FILE`). A second form
 * holds one list of such objects under a key (json_records_read: network files). */
#ifndef DDP_CONFIG_FILE_H
#define DDP_CONFIG_FILE_H

#include <stddef.h>

/* Files larger than this are refused (a config.json is about 3 KB). */
#define JSON_FLAT_MAX_BYTES (1u << 20)

/* The kind of a value as written: a string (decoded), a number (its text as written: a JSON
 * number, at most 64 characters), or true or false (the text "true" or "false"); in a record of
 * json_records_read, also a list of strings and numbers, handed over as its elements joined by
 * '\n', each its type ('s' or 'n') then its text ("sconv1\nsconv2"). */
typedef enum { JSON_FLAT_STRING, JSON_FLAT_NUMBER, JSON_FLAT_BOOL, JSON_FLAT_LIST } JsonKind;

/* "a string", "a number", "true or false": for messages. */
const char *json_kind_name(JsonKind kind);

/* One key and its value, in the order of the text; line and column (from 1, in bytes) are
 * those of the key's opening quote. Returns 0 to go on, or -1 with one line in err (errlen
 * bytes), which the reader prefixes with "WHAT: ". */
typedef int (*JsonPairFn)(void *ctx, const char *key, JsonKind kind, const char *value, size_t line, size_t column,
                          char *err, size_t errlen);

/* Reads `len` bytes of text (which need not end in NUL) as one flat object and hands each pair
 * to fn. Returns 0, or -1 with one line in err naming `what`: "WHAT: malformed JSON at line L,
 * column C (key "K"): ..." for text that is not such an object, "WHAT: key "K" appears twice"
 * (found before fn sees the repeat), or "WHAT: " and fn's own message. Pairs handed to fn
 * before an error stay handed. */
int json_flat_read(const char *text, size_t len, const char *what, JsonPairFn fn, void *ctx, char *err,
                   size_t errlen);

/* The same over the file at `path`, named by it in messages; a path that cannot be opened,
 * is not a regular file, cannot be read or is larger than JSON_FLAT_MAX_BYTES is refused with
 * one line in err. */
int json_flat_read_file(const char *path, JsonPairFn fn, void *ctx, char *err, size_t errlen);

/* The text of the regular file at path, of at most JSON_FLAT_MAX_BYTES (malloc'd, *len bytes,
 * not NUL-terminated), or NULL with one line in err naming the file. */
char *json_read_text(const char *path, size_t *len, char *err, size_t errlen);

/* Called after the last pair of the index-th record (from 0) of the list; line and column are
 * those of its '{'. Returns 0 to go on, or -1 with one line in err. */
typedef int (*JsonRecordFn)(void *ctx, size_t index, size_t line, size_t column, char *err, size_t errlen);

/* The same reader over an object whose values are flat but one: the key `array_key` holds a
 * list of flat objects (records), as a network file's "nodes" (netfile.h). The other pairs go
 * to head_fn, each record's pairs to rec_fn, then end_fn. Messages as json_flat_read's. */
int json_records_read(const char *text, size_t len, const char *what, JsonPairFn head_fn, const char *array_key,
                      JsonPairFn rec_fn, JsonRecordFn end_fn, void *ctx, char *err, size_t errlen);
int json_records_read_file(const char *path, JsonPairFn head_fn, const char *array_key, JsonPairFn rec_fn,
                           JsonRecordFn end_fn, void *ctx, char *err, size_t errlen);

#endif
