/* SPDX-License-Identifier: BSD-3-Clause */
/* tfevents.h - TensorBoard's event files, scalars only: the file TensorBoard reads from a
 * --logdir, written as TensorFlow's and PyTorch's SummaryWriter write it.
 *
 * The file is a sequence of records (TFRecord framing), each
 *     uint64 length | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
 * little-endian, where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's
 * data is one serialized tensorflow.Event message (event.proto):
 *     Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 *     Summary { repeated Value value = 1; }
 *     Value   { string tag = 1; float simple_value = 2; }
 * The first record holds only wall_time and file_version "brain.Event:2"; every later one a
 * summary of scalars at one step. TensorBoard reads every file of a directory in name order and
 * joins them into one curve per tag: the name starts with the time, so a resumed run's file
 * follows its predecessor's on the same curves. */
#ifndef DDP_TFEVENTS_H
#define DDP_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "protobuf.h"

#define TFEVENTS_FILE_VERSION "brain.Event:2"
#define TFEVENTS_PREFIX "events.out.tfevents."   /* TensorBoard takes only files so named */
#define TFEVENTS_TAG_MAX 128

/* One scalar: its tag ("train/loss") and value (written as a float). */
typedef struct {
    char tag[TFEVENTS_TAG_MAX];
    double value;
} TfScalar;

typedef struct {
    int fd;            /* -1 when closed */
    char path[4400];
    PbBuf event, summary, value, record;   /* kept between records: no allocation once grown */
} TfEvents;

/* Creates the directory `dir` (its parent must exist; an existing directory is taken, a link
 * is not) and in it a new file events.out.tfevents.<unix time>.<host name>.<pid>, never
 * through a link (O_EXCL|O_NOFOLLOW), and writes its file_version record. The time is one
 * second after the newest event file's there when that is not earlier, so the new file sorts
 * last. Returns 0, or -1 with one line in err naming the path. */
int tfevents_open(TfEvents *t, const char *dir, char *err, size_t errlen);

/* One event at `step` holding the n scalars (n may be 0: nothing is written), in one write(2):
 * a TensorBoard reading the file meanwhile sees each record whole as soon as it is written.
 * The wall time is now. Returns 0, or -1 with errno. */
int tfevents_write_scalars(TfEvents *t, int64_t step, const TfScalar *s, size_t n);

void tfevents_close(TfEvents *t);

/* The framing of one record around data's n bytes, appended to out; and the CRC mask. */
void tfevents_frame(PbBuf *out, const void *data, size_t n);
uint32_t tfevents_mask(uint32_t crc);

#endif
