/* SPDX-License-Identifier: BSD-3-Clause */
/* output.c - the rows written out (output.h). */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "options.h"

int atomic_open(AtomicFile *a, const char *path, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    if (strlen(path) >= sizeof a->path) return errf(err, errlen, "%s: path too long", QUOTED(path));
    snprintf(a->path, sizeof a->path, "%s", path);
    int fd = -1;
    for (int k = 0; k < TMP_NAME_ATTEMPTS && fd < 0; k++) {
        if (tmp_name(a->tmp, sizeof a->tmp, path, k) != 0) return errf(err, errlen, "%s: path too long", QUOTED(path));
        fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) return errf(err, errlen, "%s: cannot write: %s", QUOTED(path), strerror(errno));
    }
    if (fd < 0) return errf(err, errlen, "%s: cannot write: %d temporary names beside it are taken", QUOTED(path), TMP_NAME_ATTEMPTS);
    a->f = fdopen(fd, "w");
    CHECK(a->f != NULL);
    CHECK(setvbuf(a->f, NULL, _IOFBF, (size_t)1 << 20) == 0);
    return 0;
}

void atomic_abandon(AtomicFile *a) {
    if (!a->f) return;
    fclose(a->f);
    unlink(a->tmp);
    a->f = NULL;
}

int atomic_commit(AtomicFile *a, char *err, size_t errlen) {
    int rc = 0;
    if (fflush(a->f) != 0 || ferror(a->f) || fsync(fileno(a->f)) != 0)
        rc = errf(err, errlen, "%s: cannot write: %s", QUOTED(a->path), strerror(errno));
    if (fclose(a->f) != 0 && rc == 0) rc = errf(err, errlen, "%s: cannot write: %s", QUOTED(a->path), strerror(errno));
    a->f = NULL;
    if (rc == 0 && rename(a->tmp, a->path) != 0)
        rc = errf(err, errlen, "%s: cannot write (rename from %s): %s", QUOTED(a->path), QUOTED(a->tmp), strerror(errno));
    if (rc != 0) {
        unlink(a->tmp);
        return rc;
    }
    if (fsync_dir_of(a->path) != 0)
        return errf(err, errlen, "%s: cannot write (fsync of its folder): %s", QUOTED(a->path), strerror(errno));
    return 0;
}

/* ---- fields ---------------------------------------------------------------------------------- */

static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    while (*s) {
        const unsigned char c = (unsigned char)*s;
        const int len = c < 0x80 ? 1 : utf8_seq_len(s);
        if (len == 0) {   /* not UTF-8: surrogateescape, one byte */
            fprintf(f, "\\u%04x", 0xdc00 | c);
            s++;
            continue;
        }
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fwrite(s, 1, (size_t)len, f);
        s += len;
    }
    fputc('"', f);
}

/* An item's "file": the image's path, or SHARD:INDEX. */
static const char *item_name(const Source *s, size_t i, char *buf, size_t n) {
    if (s->kind == SRC_IMAGE) return s->path;
    snprintf(buf, n, "%s:%zu", s->path, i - s->first);
    return buf;
}

static void write_csv(FILE *f, const Inputs *in, const Rows *rows, const ClassList *cl) {
    fputs("file", f);
    if (in->has_labels) fputs(",label", f);
    for (int j = 1; j <= rows->k; j++) fprintf(f, ",top%d,prob%d", j, j);
    fputc('\n', f);
    char buf[4200], num[16];
    for (size_t i = 0; i < rows->n; i++) {
        const Row r = rows_get(rows, i);
        if (r.status != ROW_OK) continue;
        csv_field(f, item_name(inputs_source(in, i), i, buf, sizeof buf));
        if (in->has_labels) {
            fputc(',', f);
            if (r.label >= 0) csv_field(f, class_list_name(cl, r.label, num));
        }
        for (int j = 0; j < rows->k; j++) {
            fputc(',', f);
            csv_field(f, class_list_name(cl, (int)r.index[j], num));
            fprintf(f, ",%.6g", r.prob[j]);
        }
        fputc('\n', f);
    }
}

static void write_jsonl(FILE *f, const Inputs *in, const Rows *rows, const ClassList *cl) {
    char buf[4200], num[16];
    for (size_t i = 0; i < rows->n; i++) {
        const Row r = rows_get(rows, i);
        if (r.status != ROW_OK) continue;
        fputs("{\"file\":", f);
        json_string(f, item_name(inputs_source(in, i), i, buf, sizeof buf));
        if (r.label >= 0) {
            fputs(",\"label\":", f);
            json_string(f, class_list_name(cl, r.label, num));
            fprintf(f, ",\"label_index\":%d", r.label);
        }
        fputs(",\"topk\":[", f);
        for (int j = 0; j < rows->k; j++) {
            fputs(j ? ",{\"class\":" : "{\"class\":", f);
            json_string(f, class_list_name(cl, (int)r.index[j], num));
            fprintf(f, ",\"index\":%d,\"prob\":%.6g}", (int)r.index[j], r.prob[j]);
        }
        fputs("]}\n", f);
    }
}

int output_write(const char *path, int format, const Inputs *in, const Rows *rows, const ClassList *cl, char *err,
                 size_t errlen) {
    AtomicFile a = {0};
    FILE *f = stdout;
    if (path) {
        if (atomic_open(&a, path, err, errlen) != 0) return -1;
        f = a.f;
    }
    if (format == FORMAT_JSONL) write_jsonl(f, in, rows, cl);
    else write_csv(f, in, rows, cl);
    if (path) return atomic_commit(&a, err, errlen);
    if (fflush(stdout) != 0 || ferror(stdout)) return errf(err, errlen, "the standard output: cannot write: %s", strerror(errno));
    return 0;
}
