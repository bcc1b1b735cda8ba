/* SPDX-License-Identifier: BSD-3-Clause */
/* config_file.h - options from a JSON file in the form of the job directory's config.json
 * (config_to_json): one flat object whose keys are option names and whose values are strings,
 * numbers or booleans, as the option's type wants (a number for INT and FLOAT options, true or
 * false for BOOL, a string for STR and CHOICE). `ddptrain --config runs/J/config.json` repeats a
 * run; flags on the command line override the file wherever they stand (config_parse). */
#ifndef DDP_CONFIG_FILE_H
#define DDP_CONFIG_FILE_H

#include <stddef.h>

#include "config.h"

/* Files larger than this are refused (a config.json is about 3 KB). */
#define CONFIG_FILE_MAX_BYTES (1u << 20)

/* Set every option the file names. Returns 0, or -1 with one line in err naming `path` and,
 * where one is involved, the key: an unknown key, a value of the wrong type or out of range,
 * a repeated key, text that is not such an object, or a path that is not a regular file.
 * Options set before an error stay set. */
int config_file_apply(Config *c, const char *path, char *err, size_t errlen);

/* The same over `len` bytes of text (which need not end in NUL); `what` names it in messages. */
int config_json_apply(Config *c, const char *text, size_t len, const char *what, char *err, size_t errlen);

#endif
