/* SPDX-License-Identifier: BSD-3-Clause */
/* flags.c - the command line of a ddptrain-data command (flags.h). */
#include "flags.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void usage_error(const char *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    die_code(2, "%s: %s (see 'ddptrain-data %s --help')", cmd, msg, cmd);
}

/* Stores the value of a numeric flag: digits only (strtoull alone would take a sign or
 * spaces), within [lo, hi] for F_COUNT. */
static void set_number(const char *cmd, const Flag *f, const char *val) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (val[0] < '0' || val[0] > '9' || *end || errno)
        usage_error(cmd, "flag --%s: '%s' is not a non-negative integer", f->name, val);
    if (f->kind == F_U64) {
        *(uint64_t *)f->dst = (uint64_t)v;
    } else {
        if (v < (unsigned long long)f->lo || v > (unsigned long long)f->hi)
            usage_error(cmd, "flag --%s: %s is out of range [%lld, %lld]", f->name, val, f->lo, f->hi);
        *(long long *)f->dst = (long long)v;
    }
}

static Flag *find_flag(Flag *flags, int nflags, const char *name, size_t len) {
    Flag *f = NULL;
    for (int k = 0; k < nflags; k++)
        if (strlen(flags[k].name) == len && strncmp(flags[k].name, name, len) == 0) f = &flags[k];
    return f;
}

int parse_flags(const char *cmd, const char *usage, int argc, char **argv, Flag *flags, int nflags,
                char ***positional) {
    enum { MAX_FLAGS = 32 };
    CHECK(nflags <= MAX_FLAGS);
    int npos = 0, seen[MAX_FLAGS] = {0};
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (!positional) usage_error(cmd, "unexpected argument '%s'", arg);
            (*positional)[npos++] = argv[i];
            continue;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        Flag *f = find_flag(flags, nflags, name, eq ? (size_t)(eq - name) : strlen(name));
        if (!f) usage_error(cmd, "unknown flag '%s'", arg);
        seen[f - flags] = 1;
        if (f->kind == F_BOOL) {
            if (eq) usage_error(cmd, "flag --%s takes no value", f->name);
            *(int *)f->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) usage_error(cmd, "flag --%s needs a value", f->name);
        if (f->kind == F_STR) {
            if (!*val) usage_error(cmd, "flag --%s needs a non-empty value", f->name);
            *(const char **)f->dst = val;
            continue;
        }
        set_number(cmd, f, val);
    }
    for (int k = 0; k < nflags; k++)
        if (flags[k].required && !seen[k]) usage_error(cmd, "--%s %s is required", flags[k].name, flags[k].required);
    return npos;
}
