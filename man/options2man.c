/* SPDX-License-Identifier: BSD-3-Clause */
/* options2man.c - the OPTIONS section of ddptrain(1), in roff, from src/base/config_table.h: the
 * one list of options, so the manual page cannot miss one or describe one that is gone.
 *
 *   options2man > options.roff      (the Makefile splices it into ddptrain.1.in)
 *
 * Built and run on the build machine only; it includes the table and nothing of ddptrain. */
#include <stdio.h>
#include <string.h>

#include "base/config_table.h"

/* The table's min column holds the '|' list of a CHOICE and a number otherwise: the string
 * itself for the first, the number as written in the table for the second. */
#define RANGE_TEXT(v, text) _Generic((v), char *: (v), default: (text))

/* Text for roff: a backslash and a hyphen (which roff may turn into a dash, and which a man
 * page search must find as a hyphen) escaped, and a line never starting with a control dot. */
static void roff_text(const char *s) {
    if (*s == '.' || *s == '\'') fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '\\') fputs("\\e", stdout);
        else if (*s == '-') fputs("\\-", stdout);
        else putchar(*s);
    }
}

static void option(const char *name, const char *type, const char *def, const char *min,
                   const char *max, const char *help) {
    fputs(".TP\n\\fB\\-\\-", stdout);
    roff_text(name);
    fputs("\\fR", stdout);
    switch (strcmp(type, "SWITCH") ? type[0] : 'W') {
    case 'B':   /* BOOL */
        fputs(", \\fB\\-\\-no\\-", stdout);
        roff_text(name);
        fputs("\\fR", stdout);
        break;
    case 'I': fputs(" \\fIN\\fR", stdout); break;      /* INT */
    case 'W':   /* SWITCH (auto, on or off; a BOOL's spellings too) */
        fputs(", \\fB\\-\\-no\\-", stdout);
        roff_text(name);
        fputs("\\fR, \\fB\\-\\-", stdout);
        roff_text(name);
        fputs("\\fR={auto|on|off}", stdout);
        break;
    case 'F': fputs(" \\fIX\\fR", stdout); break;      /* FLOAT */
    case 'S': fputs(" \\fIS\\fR", stdout); break;      /* STR */
    case 'C':                                          /* CHOICE */
        fputs(" {", stdout);
        roff_text(min);
        fputs("}", stdout);
        break;
    }
    putchar('\n');
    roff_text(help);
    putchar('\n');
    fputs(".br\nDefault: ", stdout);
    roff_text(*def ? def : "\"\" (empty)");
    if (type[0] == 'I' || type[0] == 'F') {
        fputs("; from ", stdout);
        roff_text(min);
        fputs(" to ", stdout);
        roff_text(max);
    }
    fputs(".\n", stdout);
}

int main(void) {
#define X(name, type, def, min, max, help) \
    option(#name, #type, def, RANGE_TEXT(min, #min), #max, help);
    DDP_CONFIG_TABLE(X)
#undef X
    return ferror(stdout) ? 1 : 0;
}
