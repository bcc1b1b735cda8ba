/* SPDX-License-Identifier: BSD-3-Clause */
/* flags.h - the command line of the secondary programs (ddptrain-data's commands,
 * ddptrain-predict, ddptrain-export): flags from one table, positional arguments, --help, and
 * the one line of a bad command line. ddptrain's own options have config.h.
 *
 * A flag is --name VALUE or --name=VALUE (a switch takes none), anywhere among the arguments;
 * "--" ends them, and any argument after it is positional. Before "--", an argument that starts
 * with '-' is a flag (one the table lacks is an error), any other is positional.
 *
 * Every error is one line on stderr and exit status 2:
 *   PROG: error: [CMD: ]MESSAGE (see 'PROG[ CMD] --help')
 * PROG being g_progname (util.h). */
#ifndef DDP_BASE_FLAGS_H
#define DDP_BASE_FLAGS_H

typedef enum {
    FLAG_STRING,   /* const char *: a non-empty value, argv's string itself */
    FLAG_INT,      /* long long: digits only, within [lo, hi] */
    FLAG_U64,      /* uint64_t: digits only, any 64-bit value (a seed) */
    FLAG_SWITCH,   /* int: set to 1 when given; takes no value */
} FlagKind;

typedef struct {
    const char *name;    /* without the dashes */
    FlagKind kind;
    void *dst;           /* the variable it fills (FlagKind says its type); left as it is when not given */
    long long lo, hi;    /* FLAG_INT's range */
    const char *value;   /* the value's name: in a help line and in "--NAME VALUE is required" */
    const char *help;    /* its help line, printed after the usage text; NULL: the usage text covers it */
    int required;        /* a command line without it is an error */
} Flag;

/* A table's row starts with one of these, and may go on with .value, .help and .required:
 *     {INT_FLAG("shards", &nshards, 1, 99999), .value = "S", .required = 1},  */
#define STRING_FLAG(n, d) .name = (n), .kind = FLAG_STRING, .dst = (d)
#define INT_FLAG(n, d, min, max) .name = (n), .kind = FLAG_INT, .dst = (d), .lo = (min), .hi = (max)
#define U64_FLAG(n, d) .name = (n), .kind = FLAG_U64, .dst = (d)
#define SWITCH_FLAG(n, d) .name = (n), .kind = FLAG_SWITCH, .dst = (d)
#define NFLAGS(table) ((int)(sizeof(table) / sizeof((table)[0])))

typedef struct {
    const char *cmd;          /* the command of a program of several ("synth"), or NULL */
    const char *usage;        /* --help: this text, then the flags' help lines, then usage_end */
    const char *usage_end;    /* may be NULL */
    void (*version)(void);    /* prints --version's text; NULL: --version is no flag */
    Flag *flags;
    int nflags;               /* at most FLAGS_MAX */
} FlagSpec;

enum { FLAGS_MAX = 32 };

/* The usage error above, exit 2. cmd: as FlagSpec's. */
__attribute__((format(printf, 2, 3), noreturn))
void flags_usage_error(const char *cmd, const char *fmt, ...);

/* Parses argv[0..argc) (the arguments after the program's or the command's name) against
 * s->flags. --help or -h prints the help on stdout and exits 0; --version likewise, when
 * s->version is given. Positional arguments go to positional[] (room for argc of them) when it
 * is given, and are an error otherwise. Then the first required flag not given, in table order,
 * is an error. Returns the number of positional arguments. */
int flags_parse(const FlagSpec *s, int argc, char **argv, char **positional);

#endif
