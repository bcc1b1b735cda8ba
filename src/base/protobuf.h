/* SPDX-License-Identifier: BSD-3-Clause */
/* protobuf.h - a writer of Protocol Buffers' wire format, for the files other tools read:
 * TensorBoard's event records and ONNX models. Only encoding, and only what those messages
 * use: varints (int32, int64, uint64, bool, enums), 32- and 64-bit fixed (float, double), and
 * length-delimited fields (strings, bytes, nested messages, packed repeated numbers).
 *
 * A message is built into a PbBuf that grows as needed; a nested message is built into a
 * buffer of its own and appended as a length-delimited field (pb_message). Field numbers are the
 * .proto's; the caller writes fields in any order (a parser accepts that), conventionally in
 * field-number order. Negative int32/int64 values are written as 10-byte varints, as
 * protobuf's own encoders do (not zigzag: that is sint32/sint64, which neither format uses). */
#ifndef DDP_PROTOBUF_H
#define DDP_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *data;
    size_t len, cap;
} PbBuf;

void pb_init(PbBuf *b);
void pb_free(PbBuf *b);
/* Forgets the contents, keeps the memory. */
void pb_reset(PbBuf *b);

/* The raw pieces: bytes as they are, a varint, a field's key (number << 3 | wire type). */
void pb_raw(PbBuf *b, const void *p, size_t n);
void pb_varint(PbBuf *b, uint64_t v);

/* Fields. pb_int64 serves int32, int64, uint32, uint64, bool and enums. */
void pb_int64(PbBuf *b, int field, int64_t v);
void pb_float(PbBuf *b, int field, float v);
void pb_double(PbBuf *b, int field, double v);
void pb_bytes(PbBuf *b, int field, const void *p, size_t n);
void pb_string(PbBuf *b, int field, const char *s);
/* A nested message: msg's bytes as a length-delimited field. */
void pb_message(PbBuf *b, int field, const PbBuf *msg);
/* A packed repeated int64 field (n values) and a packed repeated float field. */
void pb_packed_int64(PbBuf *b, int field, const int64_t *v, size_t n);
void pb_packed_float(PbBuf *b, int field, const float *v, size_t n);

#endif
