/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz.h - what the fuzz targets share: libFuzzer's entry point, and a scratch file for the
 * readers that take a path (HDF5 opens files by name).
 *
 * Each fuzz_<name>.c defines LLVMFuzzerTestOneInput. `make fuzz` links it with libFuzzer
 * under ASan+UBSan; tests/fuzz/replay.c links it into a plain program that runs the stored
 * corpus (tests/fuzz/<name>/) in the test suite. */
#ifndef DDP_FUZZ_H
#define DDP_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes data to this process's scratch file (under $TMPDIR, else /tmp) and returns its
 * path; the file is removed at exit. */
const char *fuzz_scratch_file(const uint8_t *data, size_t size, const char *suffix);

#endif
