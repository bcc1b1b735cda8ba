/* SPDX-License-Identifier: BSD-3-Clause */
/* flags.h - the command line of a ddptrain-data command: --name VALUE and --name=VALUE flags
 * from a table, --help, and the one error line of a bad command line.
 *
 * Every error exits 2, naming the command and pointing at its --help. */
#ifndef DDP_DATA_CMD_FLAGS_H
#define DDP_DATA_CMD_FLAGS_H

typedef enum { F_STR, F_COUNT, F_U64, F_BOOL } FlagKind;
typedef struct {
    const char *name;     /* without the dashes */
    FlagKind kind;
    void *dst;            /* const char **, long long *, uint64_t *, int * */
    long long lo, hi;     /* F_COUNT range */
    const char *required; /* the value's name in "--NAME VALUE is required"; NULL: optional */
} Flag;

#define NFLAGS(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* "ddptrain-data: CMD: MESSAGE (see 'ddptrain-data CMD --help')", exit 2. */
__attribute__((format(printf, 2, 3), noreturn))
void usage_error(const char *cmd, const char *fmt, ...);

/* Parses argv[0..argc) against flags[0..nflags). --help or -h prints usage and exits 0. Other
 * arguments go to *positional (room for argc of them) when positional is given, and are an
 * error otherwise. Then the first required flag not given, in table order, is an error.
 * Returns the number of positional arguments. */
int parse_flags(const char *cmd, const char *usage, int argc, char **argv, Flag *flags, int nflags,
                char ***positional);

#endif
