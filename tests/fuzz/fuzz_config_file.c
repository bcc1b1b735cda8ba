/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_config_file.c - the --config JSON reader: the input is the file's text. json_flat_read
 * must hand each key's line and column as the key's opening quote; options config_json_apply
 * sets are turned into the configuration's JSON, which must read back. */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/config_file.h"
#include "base/util.h"

typedef struct {
    const char *s;
    size_t n;
} Text;

/* The line and column given must be those of a '"' in the text, and the value of its kind. */
static int check_pair(void *ctx, const char *key, JsonKind kind, const char *value, size_t line, size_t column,
                      char *err, size_t errlen) {
    const Text *t = ctx;
    size_t i = 0;
    for (size_t l = 1; l < line; i++) {
        if (i >= t->n) abort();
        if (t->s[i] == '\n') l++;
    }
    if (column < 1 || i + column - 1 >= t->n || t->s[i + column - 1] != '"') abort();
    if (memchr(t->s + i, '\n', column - 1) != NULL) abort();
    if (kind == JSON_FLAT_BOOL && strcmp(value, "true") != 0 && strcmp(value, "false") != 0) abort();
    if (kind == JSON_FLAT_NUMBER && (strlen(value) == 0 || strlen(value) > 64)) abort();
    (void)key;
    (void)err;
    (void)errlen;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    char err[700];
    Text t = { (const char *)data, size };
    (void)json_flat_read(t.s, t.n, "fuzz.json", check_pair, &t, err, sizeof err);
    Config c;
    config_init(&c);
    if (config_json_apply(&c, (const char *)data, size, "fuzz.json", err, sizeof err) == 0) {
        char *json = config_to_json(&c);
        Config back;
        config_init(&back);
        /* what config_to_json writes, config_json_apply takes, to the same JSON */
        if (config_json_apply(&back, json, strlen(json), "again.json", err, sizeof err) != 0) abort();
        char *json2 = config_to_json(&back);
        if (strcmp(json, json2) != 0) abort();
        free(json2);
        free(json);
        config_free(&back);
    }
    config_free(&c);
    return 0;
}
