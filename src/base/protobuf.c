/* SPDX-License-Identifier: BSD-3-Clause */
/* protobuf.c - see protobuf.h. */
#include "protobuf.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

void pb_init(PbBuf *b) { memset(b, 0, sizeof *b); }

void pb_free(PbBuf *b) {
    free(b->data);
    pb_init(b);
}

void pb_reset(PbBuf *b) { b->len = 0; }

static void reserve(PbBuf *b, size_t n) {
    CHECK(n <= SIZE_MAX - b->len);
    if (b->len + n <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) {
        CHECK(cap <= SIZE_MAX / 2);
        cap *= 2;
    }
    uint8_t *d = realloc(b->data, cap);
    CHECK(d != NULL);
    b->data = d;
    b->cap = cap;
}

void pb_raw(PbBuf *b, const void *p, size_t n) {
    if (n == 0) return;
    reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void pb_varint(PbBuf *b, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) tmp[n] |= 0x80;
        n++;
    } while (v);
    pb_raw(b, tmp, n);
}

static void key(PbBuf *b, int field, int wire) {
    CHECK(field >= 1 && field < (1 << 29));
    pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

/* Little-endian bytes of v, whatever the host's order. */
static void fixed(PbBuf *b, uint64_t v, int nbytes) {
    uint8_t tmp[8];
    for (int i = 0; i < nbytes; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    pb_raw(b, tmp, (size_t)nbytes);
}

void pb_int64(PbBuf *b, int field, int64_t v) {
    key(b, field, WIRE_VARINT);
    pb_varint(b, (uint64_t)v);   /* two's complement: a negative value takes 10 bytes */
}

void pb_float(PbBuf *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    key(b, field, WIRE_FIXED32);
    fixed(b, u, 4);
}

void pb_double(PbBuf *b, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    key(b, field, WIRE_FIXED64);
    fixed(b, u, 8);
}

void pb_bytes(PbBuf *b, int field, const void *p, size_t n) {
    key(b, field, WIRE_LEN);
    pb_varint(b, (uint64_t)n);
    pb_raw(b, p, n);
}

void pb_string(PbBuf *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

void pb_message(PbBuf *b, int field, const PbBuf *msg) { pb_bytes(b, field, msg->data, msg->len); }

void pb_packed_int64(PbBuf *b, int field, const int64_t *v, size_t n) {
    PbBuf tmp;
    pb_init(&tmp);
    for (size_t i = 0; i < n; i++) pb_varint(&tmp, (uint64_t)v[i]);
    pb_message(b, field, &tmp);
    pb_free(&tmp);
}

void pb_packed_float(PbBuf *b, int field, const float *v, size_t n) {
    key(b, field, WIRE_LEN);
    CHECK(n <= SIZE_MAX / 4);
    pb_varint(b, (uint64_t)n * 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], sizeof u);
        fixed(b, u, 4);
    }
}
