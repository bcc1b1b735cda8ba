/* SPDX-License-Identifier: BSD-3-Clause */
/* confusion.c - see confusion.h. */
#include "confusion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* A JSON string, with config.json's rule for bytes that are not UTF-8 (\udcXX: Python's
 * surrogateescape, so json.load then os.fsencode gives the bytes back). */
static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    while (*s) {
        const unsigned char ch = (unsigned char)*s;
        const int len = utf8_seq_len(s);
        if (len == 0) fprintf(f, "\\u%04x", 0xdc00u | ch);
        else if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f) fprintf(f, "\\u%04x", ch);
        else fwrite(s, 1, (size_t)len, f);
        s += len ? len : 1;
    }
    fputc('"', f);
}

/* num / den as a fraction, or null when there is nothing to divide. */
static void json_fraction(FILE *f, int64_t num, int64_t den) {
    if (den > 0) fprintf(f, "%.6f", (double)num / (double)den);
    else fputs("null", f);
}

char *confusion_json(const EvalTally *t, const ConfusionInfo *info) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    const int K = t->K;
    const int64_t images = t->c[TALLY_IMAGES];
    fprintf(f, "{\n  \"format\": \"ddptrain-confusion\",\n  \"epoch\": %ld,\n  \"step\": %ld,\n  \"ema\": %s,\n  \"tta\": ",
            info->epoch, info->step, info->ema ? "true" : "false");
    json_string(f, info->tta);
    fprintf(f, ",\n  \"num_classes\": %d,\n  \"images\": %lld,\n  \"correct\": %lld,\n  \"test_acc\": ", K,
            (long long)images, (long long)t->c[TALLY_TOP1]);
    json_fraction(f, t->c[TALLY_TOP1], images);
    if (t->has_top5) {
        fprintf(f, ",\n  \"correct5\": %lld,\n  \"test_acc5\": ", (long long)t->c[TALLY_TOP5]);
        json_fraction(f, t->c[TALLY_TOP5], images);
    } else {
        fputs(",\n  \"correct5\": null,\n  \"test_acc5\": null", f);
    }
    fputs(",\n  \"classes\": [", f);
    const int64_t *n = eval_tally_class_images(t), *hits = eval_tally_class_hits(t);
    for (int k = 0; k < K; k++) {
        fprintf(f, "%s\n    {\"index\": %d, \"name\": ", k ? "," : "", k);
        const char *name = info->test ? dataloader_class_name(info->test, k) : NULL;
        if (name) json_string(f, name);
        else fputs("null", f);
        fprintf(f, ", \"images\": %lld, \"correct\": %lld, \"accuracy\": ", (long long)n[k], (long long)hits[k]);
        json_fraction(f, hits[k], n[k]);
        fputc('}', f);
    }
    fprintf(f, "\n  ],\n  \"matrix_max_classes\": %d,\n  \"matrix\": ", EVAL_TALLY_MATRIX_MAX);
    if (t->has_matrix) {
        fputc('[', f);
        for (int r = 0; r < K; r++) {   /* a row a line */
            const int64_t *row = eval_tally_row(t, r);
            fprintf(f, "%s\n    [", r ? "," : "");
            for (int k = 0; k < K; k++) fprintf(f, "%s%lld", k ? ", " : "", (long long)row[k]);
            fputc(']', f);
        }
        fputs("\n  ]\n}\n", f);
    } else {
        fprintf(f, "null,\n  \"matrix_note\": \"not written above %d classes (%d here): the per-class figures only\"\n}\n",
                EVAL_TALLY_MATRIX_MAX, K);
    }
    CHECK(fclose(f) == 0);
    return buf;
}

int confusion_write(const char *job_dir, const EvalTally *t, const ConfusionInfo *info) {
    char path[4200];
    snprintf_check(path, sizeof path, "%s/" CONFUSION_FILE, job_dir);
    char *text = confusion_json(t, info);
    const int rc = write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}
