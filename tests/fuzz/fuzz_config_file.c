/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_config_file.c - the --config JSON reader: the input is the file's text; options it
 * sets are turned into the configuration's JSON, which must read back. */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_file.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    Config c;
    config_init(&c);
    char err[700];
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
