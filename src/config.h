/* SPDX-License-Identifier: BSD-3-Clause */
/* config.h - the effective configuration, generated from config_table.h. */
#ifndef DDP_CONFIG_H
#define DDP_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include "config_table.h"

#define DDP_CTYPE_INT    long
#define DDP_CTYPE_FLOAT  double
#define DDP_CTYPE_BOOL   int
#define DDP_CTYPE_STR    char *
#define DDP_CTYPE_CHOICE char *

typedef struct Config {
#define X(name, type, def, min, max, help) DDP_CTYPE_##type name;
    DDP_CONFIG_TABLE(X)
#undef X
} Config;

/* Defaults, then argv. On a bad flag or value prints one line naming the flag and exits 2;
 * --help prints every option with its default and exits 0. Returns 0, or CONFIG_VERSION for
 * --version, which the program prints (version.h) before it exits 0. */
void config_init(Config *c);
int config_parse_args(Config *c, int argc, char **argv);
/* The same without exiting: 0, CONFIG_HELP or CONFIG_VERSION (asked for, nothing printed),
 * or -1 with the one line in err. */
enum { CONFIG_HELP = 1, CONFIG_VERSION = 2 };
int config_parse(Config *c, int argc, char **argv, char *err, size_t errlen);

/* Set one option from a string value as the command line would (tests, environment). Returns 0,
 * or -1 with a one-line reason in err. */
int config_set(Config *c, const char *name, const char *value, char *err, size_t errlen);

/* The type of option `name` (config_table.h): 0, or -1 when there is no such option. */
typedef enum { CONFIG_INT, CONFIG_FLOAT, CONFIG_BOOL, CONFIG_STR, CONFIG_CHOICE } ConfigType;
int config_option_type(const char *name, ConfigType *type);

/* The effective configuration as one JSON object (malloc'd, caller frees). */
char *config_to_json(const Config *c);

void config_print_help(FILE *out, const char *progname);
void config_free(Config *c);

#endif
