/* SPDX-License-Identifier: BSD-3-Clause */
/* crc32c.h - CRC-32C (Castagnoli: the reflected polynomial 0x82F63B78, initial value and final
 * XOR 0xFFFFFFFF), the checksum of TensorBoard's event records (TFRecord framing) and of
 * iSCSI, ext4 and Btrfs. crc32c("123456789") is 0xE3069283. */
#ifndef DDP_CRC32C_H
#define DDP_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of n bytes. */
uint32_t crc32c(const void *p, size_t n);

/* The same continued: crc32c_extend(crc32c(a), b) is the CRC of a followed by b (0 for none). */
uint32_t crc32c_extend(uint32_t crc, const void *p, size_t n);

#endif
