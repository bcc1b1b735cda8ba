/* SPDX-License-Identifier: BSD-3-Clause */
/* expect_testutil.h - EXPECT for C tests that check many things quietly: a failed condition
 * prints file:line, the condition and a message on stderr and counts into g_failures. */
#ifndef DDP_EXPECT_TESTUTIL_H
#define DDP_EXPECT_TESTUTIL_H

#include <stdio.h>

static int g_failures = 0;

#define EXPECT(cond, ...) do {                                                   \
        if (!(cond)) {                                                           \
            g_failures++;                                                        \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
        }                                                                        \
    } while (0)

#endif
