/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_cli.c - the command-line parser: the input is argv, NUL-separated; a parsed
 * configuration is also turned into its JSON. */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *buf = mallocCheck(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[257];
    int argc = 0;
    argv[argc++] = "ddptrain";
    for (size_t i = 0; i <= size && argc < 256;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    Config c;
    config_init(&c);
    char err[600];
    if (config_parse(&c, argc, argv, err, sizeof err) == 0) free(config_to_json(&c));
    config_free(&c);
    free(buf);
    return 0;
}
