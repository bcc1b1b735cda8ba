/* SPDX-License-Identifier: BSD-3-Clause */
/* output.h - the rows written out, on rank 0: CSV or JSON Lines, one row per image that could
 * be read, in input order.
 *
 * CSV (RFC 4180): a header, file,[label,]top1,prob1,...,topK,probK; a field holding a comma, a
 * double quote, CR or LF is quoted, its quotes doubled. JSON Lines: one object per image,
 * {"file":...,["label":...,"label_index":...,]"topk":[{"class":...,"index":...,"prob":...},...]};
 * strings escaped as JSON needs (a control character as \u00XX), a byte that is not UTF-8 as
 * the surrogate \udcXX (Python's surrogateescape: os.fsencode gives the name back). Either way
 * the label is there when some input has labels (empty, or absent, for an image without one).
 * An image file's "file" is its path as listed; a shard sample's is SHARD:INDEX.
 * Probabilities are printed with %.6g.
 *
 * A file is written under a temporary name beside it (created exclusively) and renamed into
 * place once complete and flushed to disk: a failure leaves no file under the name. */
#ifndef DDP_PREDICT_OUTPUT_H
#define DDP_PREDICT_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

#include "classes.h"
#include "inputs.h"
#include "rows.h"

/* path NULL: the standard output. 0, or -1 with one line in err naming the file. */
int output_write(const char *path, int format, const Inputs *in, const Rows *rows, const ClassList *cl, char *err,
                 size_t errlen);

/* A file written whole or not at all: a temporary name beside path, created exclusively. */
typedef struct {
    FILE *f;
    char path[4200], tmp[4300];
} AtomicFile;

int atomic_open(AtomicFile *a, const char *path, char *err, size_t errlen);
/* Flush, fsync, rename, fsync of the folder; on any failure the temporary file is removed. */
int atomic_commit(AtomicFile *a, char *err, size_t errlen);
void atomic_abandon(AtomicFile *a);

#endif
