/* SPDX-License-Identifier: BSD-3-Clause */
/* flags.c - the command line of the secondary programs (flags.h). */
#include "flags.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void flags_usage_error(const char *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cmd) die_code(2, "%s: %s (see '%s %s --help')", cmd, msg, g_progname, cmd);
    die_code(2, "%s (see '%s --help')", msg, g_progname);
}

/* The help wrapped at 96 columns, under the flag's name. */
static void print_help(const FlagSpec *s, FILE *f) {
    fputs(s->usage, f);
    for (int i = 0; i < s->nflags; i++) {
        const Flag *g = &s->flags[i];
        if (!g->help) continue;
        fprintf(f, "  --%s%s%s\n", g->name, g->value ? " " : "", g->value ? g->value : "");
        const char *p = g->help;
        while (*p) {
            int len = (int)strlen(p);
            if (len > 88) {   /* cut at the last space that fits, or mid-word when none does */
                len = 88;
                while (len > 0 && p[len] != ' ') len--;
                if (len == 0) len = 88;
            }
            fprintf(f, "      %.*s\n", len, p);
            p += len;
            while (*p == ' ') p++;
        }
    }
    if (s->usage_end) fputs(s->usage_end, f);
}

/* Stores the value of a numeric flag: digits only (strtoull alone would take a sign or
 * spaces), within [lo, hi] for FLAG_INT. */
static void set_number(const FlagSpec *s, const Flag *g, const char *val) {
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(val, &end, 10);
    if (val[0] < '0' || val[0] > '9' || *end || errno)
        flags_usage_error(s->cmd, "flag --%s: '%s' is not a non-negative integer", g->name, QUOTED(val));
    if (g->kind == FLAG_U64) {
        *(uint64_t *)g->dst = (uint64_t)v;
        return;
    }
    CHECK(g->lo >= 0 && g->lo <= g->hi);
    if (v < (unsigned long long)g->lo || v > (unsigned long long)g->hi)
        flags_usage_error(s->cmd, "flag --%s: %s is out of range [%lld, %lld]", g->name, val, g->lo, g->hi);
    *(long long *)g->dst = (long long)v;
}

static const Flag *find_flag(const FlagSpec *s, const char *name, size_t len) {
    for (int k = 0; k < s->nflags; k++)
        if (strlen(s->flags[k].name) == len && strncmp(s->flags[k].name, name, len) == 0) return &s->flags[k];
    return NULL;
}

int flags_parse(const FlagSpec *s, int argc, char **argv, char **positional) {
    CHECK(s->nflags <= FLAGS_MAX);
    int npos = 0, seen[FLAGS_MAX] = {0}, flags_end = 0;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (flags_end || arg[0] != '-') {
            if (!positional) flags_usage_error(s->cmd, "unexpected argument '%s'", QUOTED(arg));
            positional[npos++] = argv[i];
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            flags_end = 1;
            continue;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_help(s, stdout);
            exit(0);
        }
        if (s->version && strcmp(arg, "--version") == 0) {
            s->version();
            exit(0);
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        const Flag *g = strncmp(arg, "--", 2) == 0 ? find_flag(s, name, eq ? (size_t)(eq - name) : strlen(name)) : NULL;
        if (!g) flags_usage_error(s->cmd, "unknown flag '%s'", QUOTED(arg));
        seen[g - s->flags] = 1;
        if (g->kind == FLAG_SWITCH) {
            if (eq) flags_usage_error(s->cmd, "flag --%s takes no value", g->name);
            *(int *)g->dst = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) flags_usage_error(s->cmd, "flag --%s needs a value", g->name);
        if (g->kind != FLAG_STRING) {
            set_number(s, g, val);
            continue;
        }
        if (!*val) flags_usage_error(s->cmd, "flag --%s needs a non-empty value", g->name);
        *(const char **)g->dst = val;
    }
    for (int k = 0; k < s->nflags; k++)
        if (s->flags[k].required && !seen[k])
            flags_usage_error(s->cmd, "--%s%s%s is required", s->flags[k].name, s->flags[k].value ? " " : "",
                              s->flags[k].value ? s->flags[k].value : "");
    return npos;
}
