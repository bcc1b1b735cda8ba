/* SPDX-License-Identifier: BSD-3-Clause */
/* version.h - what `ddptrain --version` prints: the release, the backends this build has, and
 * the version of every library it uses, so that a bug report or a site's module says exactly
 * which build it is about. */
#ifndef DDP_VERSION_H
#define DDP_VERSION_H

#include <stdio.h>

/* "<progname> <version>" on the first line (what scripts parse), then one "name: ..." line per
 * backend and library. Calls no library's init: it runs before (and instead of) training. */
void version_print(FILE *out, const char *progname);

#endif
