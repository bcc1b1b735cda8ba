/* SPDX-License-Identifier: BSD-3-Clause */
/* crc32c.c - see crc32c.h.
 *
 * A byte at a time through a 256-entry table, built on first use: the records this checks are
 * a few hundred bytes written every --log_interval steps, so neither slicing-by-8 nor SSE4.2's
 * crc32 instruction (which would need a CPU check and a second path) would be seen. */
#include "crc32c.h"

#include <pthread.h>

#include "util.h"

#define CRC32C_POLY 0x82F63B78u   /* 0x1EDC6F41 bit-reversed: the CRC is computed LSB first */

static uint32_t g_table[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void make_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        g_table[i] = c;
    }
}

uint32_t crc32c_extend(uint32_t crc, const void *p, size_t n) {
    CHECK(pthread_once(&g_once, make_table) == 0);
    const unsigned char *b = p;
    uint32_t c = ~crc;   /* the final XOR of the previous part undone */
    for (size_t i = 0; i < n; i++) c = g_table[(c ^ b[i]) & 0xffu] ^ (c >> 8);
    return ~c;
}

uint32_t crc32c(const void *p, size_t n) { return crc32c_extend(0, p, n); }
