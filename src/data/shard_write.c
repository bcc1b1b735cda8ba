/* SPDX-License-Identifier: BSD-3-Clause */
/* shard_write.c - writing a shard: raw or JPEG samples streamed in, under a hidden temporary name
 * that becomes the shard's name only once every sample is in and the file is on disk. */
#include "shard_write.h"
#include "shard_class_names.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hdf5_lock.h"
#include "base/util.h"

/* Every function below that calls HDF5 is a *_locked body run under hdf5_lock() by its public
 * wrapper: the library is not thread-safe and the checkpoint writer uses it from its own
 * thread. Each holds the lock for one file operation at most. */

static int write_attr(hid_t file, const char *name, hid_t ftype, hid_t mtype, int rank, hsize_t n, const void *buf) {
    hid_t sp = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, NULL);
    if (sp < 0) return -1;
    hid_t a = H5Acreate2(file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t r = a < 0 ? -1 : H5Awrite(a, mtype, buf);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return r < 0 ? -1 : 0;
}

static void shard_writer_abort_locked(ShardWriter *w) {
    if (w->images >= 0) H5Dclose(w->images);
    if (w->labels >= 0) H5Dclose(w->labels);
    if (w->jpeg >= 0) H5Dclose(w->jpeg);
    if (w->offsets >= 0) H5Dclose(w->offsets);
    if (w->sizes >= 0) H5Dclose(w->sizes);
    if (w->file >= 0) H5Fclose(w->file);
    w->images = w->labels = w->jpeg = w->offsets = w->sizes = w->file = -1;
    if (w->tmp_path[0]) unlink(w->tmp_path);
    w->tmp_path[0] = '\0';
}

/* The datasets of a JPEG shard (the raw one's are made below, as they always were). */
static int create_jpeg_datasets(ShardWriter *w, hid_t dcpl) {
    const hsize_t n = w->n, S = (hsize_t)w->image_size;
    /* `jpeg` grows as samples arrive (B is known at the end only), in chunks of 1 MiB, or
     * less for a small shard (an estimate from its pixels, so a test's tiny shard is not a
     * MiB); either way a function of n and S alone, so the bytes stay reproducible. */
    hsize_t jc = n * S * S / 2;
    jc = (jc + 4095) / 4096 * 4096;
    if (jc < 4096) jc = 4096;
    if (jc > ((hsize_t)1 << 20)) jc = (hsize_t)1 << 20;
    hsize_t zero = 0, unlimited = H5S_UNLIMITED, odims = n + 1, ochunk = odims < 65536 ? odims : 65536;
    hsize_t sdims[2] = {n, 2}, schunk[2] = {n < 32768 ? n : 32768, 2};
    /* A chunk cache that holds a whole chunk, so appends that end inside a chunk do not write
     * it out and read it back. */
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    H5Pset_chunk_cache(dapl, H5D_CHUNK_CACHE_NSLOTS_DEFAULT, 4u << 20, H5D_CHUNK_CACHE_W0_DEFAULT);
    H5Pset_chunk(dcpl, 1, &jc);
    hid_t sp = H5Screate_simple(1, &zero, &unlimited);
    w->jpeg = H5Dcreate2(w->file, "jpeg", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, dapl);
    H5Sclose(sp);
    H5Pclose(dapl);
    H5Pset_chunk(dcpl, 1, &ochunk);
    sp = H5Screate_simple(1, &odims, NULL);
    w->offsets = H5Dcreate2(w->file, "offsets", H5T_STD_U64LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Sclose(sp);
    H5Pset_chunk(dcpl, 2, schunk);
    sp = H5Screate_simple(2, sdims, NULL);
    w->sizes = H5Dcreate2(w->file, "sizes", H5T_STD_U16LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Sclose(sp);
    return w->jpeg < 0 || w->offsets < 0 || w->sizes < 0 ? -1 : 0;
}

static int shard_writer_open_locked(ShardWriter *w, const char *path, size_t n, int image_size,
                      int encoding, const ShardAttrs *attrs, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    w->file = w->images = w->labels = w->jpeg = w->offsets = w->sizes = -1;
    w->encoding = encoding;
    shards_quiet_hdf5();
    if (strlen(path) >= sizeof w->path) return errf(err, errlen, "%s: path too long", path);
    if (n == 0) return errf(err, errlen, "%s: a shard needs at least one sample", path);
    CHECK(image_size > 0 && attrs->num_classes > 0);
    CHECK(encoding == SHARD_ENC_RAW || (encoding == SHARD_ENC_JPEG && image_size <= SHARD_MAX_JPEG_SIZE));
    strcpy(w->path, path);
    w->n = n;
    w->image_size = image_size;
    /* Hidden name in the same directory (rename is atomic only within a file system); it never
     * matches the shard pattern, so a leftover from a killed run is ignored by discovery. */
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    char hidden[SHARD_PATH_MAX];
    snprintf_check(hidden, sizeof hidden, "%.*s.%s", dl, path, path + dl);

    /* No timestamps in the file, so the same data gives byte-identical shards. */
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_obj_track_times(fcpl, 0);
    /* Exclusive: never written through a file or symlink planted under the temporary name. */
    struct stat st;
    for (int k = 0; k < TMP_NAME_ATTEMPTS && w->file < 0; k++) {
        if (tmp_name(w->tmp_path, sizeof w->tmp_path, hidden, k) != 0) break;
        w->file = H5Fcreate(w->tmp_path, H5F_ACC_EXCL, fcpl, H5P_DEFAULT);
        if (w->file < 0 && lstat(w->tmp_path, &st) != 0) break;
    }
    H5Pclose(fcpl);
    if (w->file < 0) {
        errf(err, errlen, "%s: cannot create %s (directory missing or not writable?)", path, w->tmp_path);
        w->tmp_path[0] = '\0';
        return -1;
    }
    hsize_t S = (hsize_t)image_size;
    hsize_t idims[4] = {n, S, S, 3}, ldims[1] = {n};
    /* Chunks of ~0.75 MiB of images: big enough for fast sequential reads, small enough that
     * reading a slice of a shard does not pull in much more than asked. */
    hsize_t per = (hsize_t)(786432 / (S * S * 3));
    if (per < 1) per = 1;
    if (per > n) per = n;
    hsize_t ichunk[4] = {per, S, S, 3}, lchunk[1] = {n < 65536 ? n : 65536};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    int bad = 0;
    hid_t sp;
    if (encoding == SHARD_ENC_JPEG) {
        bad = create_jpeg_datasets(w, dcpl) != 0;
    } else {
        H5Pset_chunk(dcpl, 4, ichunk);
        sp = H5Screate_simple(4, idims, NULL);
        w->images = H5Dcreate2(w->file, "images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        H5Sclose(sp);
        bad = w->images < 0;
    }
    H5Pset_chunk(dcpl, 1, lchunk);
    sp = H5Screate_simple(1, ldims, NULL);
    w->labels = H5Dcreate2(w->file, "labels", H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Sclose(sp);
    H5Pclose(dcpl);
    bad = bad || w->labels < 0;

    int nc = attrs->num_classes;
    bad = bad || write_attr(w->file, "num_classes", H5T_STD_I32LE, H5T_NATIVE_INT, 0, 1, &nc) != 0;
    if (!bad && attrs->class_names) bad = shard_class_names_write(w->file, nc, attrs->class_names) != 0;
    if (!bad && attrs->has_norm) {
        bad = write_attr(w->file, "mean", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, 3, attrs->mean) != 0 ||
              write_attr(w->file, "std", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, 3, attrs->std) != 0;
    }
    if (!bad && encoding == SHARD_ENC_JPEG) {
        /* A variable-length UTF-8 string, as h5py writes a str (it reads back as one). */
        const char *enc = "jpeg";
        hid_t st = H5Tcopy(H5T_C_S1);
        H5Tset_size(st, H5T_VARIABLE);
        H5Tset_cset(st, H5T_CSET_UTF8);
        bad = write_attr(w->file, "encoding", st, st, 0, 1, &enc) != 0 ||
              write_attr(w->file, "image_size", H5T_STD_I32LE, H5T_NATIVE_INT, 0, 1, &image_size) != 0;
        H5Tclose(st);
    }
    if (bad) {
        shard_writer_abort(w);
        return errf(err, errlen, "%s: cannot create the datasets (disk full?)", path);
    }
    return 0;
}

static int shard_writer_append_locked(ShardWriter *w, const uint8_t *images, const int32_t *labels,
                        size_t count, char *err, size_t errlen) {
    if (count == 0) return 0;
    CHECK(w->file >= 0 && w->written + count <= w->n && w->encoding == SHARD_ENC_RAW);
    for (size_t i = 0; i < count; i++)
        CHECK(labels[i] >= 0);
    hsize_t S = (hsize_t)w->image_size;
    herr_t r = 0;
    for (int k = 0; k < 2 && r >= 0; k++) {
        hid_t d = k ? w->labels : w->images;
        hsize_t off[4] = {w->written, 0, 0, 0}, cnt[4] = {count, S, S, 3};
        int rank = k ? 1 : 4;
        hid_t fs = H5Dget_space(d);
        hid_t ms = H5Screate_simple(rank, cnt, NULL);
        r = H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
        if (r >= 0) r = H5Dwrite(d, k ? H5T_NATIVE_INT32 : H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT,
                                 k ? (const void *)labels : (const void *)images);
        H5Sclose(ms);
        H5Sclose(fs);
    }
    if (r < 0) {
        shard_writer_abort(w);
        return errf(err, errlen, "%s: write failed (disk full?)", w->path);
    }
    w->written += count;
    return 0;
}

/* Writes `count` elements (rows of `cols`) from buf at `start` of a 1-D or 2-D dataset. */
static herr_t write_rows(hid_t d, hid_t mtype, int rank, hsize_t cols, hsize_t start, hsize_t count, const void *buf) {
    hsize_t off[2] = {start, 0}, cnt[2] = {count, cols};
    hid_t fs = H5Dget_space(d);
    hid_t ms = H5Screate_simple(rank, cnt, NULL);
    herr_t r = (fs < 0 || ms < 0) ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL);
    if (r >= 0) r = H5Dwrite(d, mtype, ms, fs, H5P_DEFAULT, buf);
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    return r;
}

static int shard_writer_append_jpeg_locked(ShardWriter *w, const uint8_t *bytes, const uint64_t *offsets,
                                           const uint16_t *sizes, const int32_t *labels, size_t count,
                                           char *err, size_t errlen) {
    if (count == 0) return 0;
    CHECK(w->file >= 0 && w->written + count <= w->n && w->encoding == SHARD_ENC_JPEG);
    CHECK(offsets[0] == 0);
    const int S = w->image_size;
    for (size_t i = 0; i < count; i++) {
        const int h = sizes[2 * i], wd = sizes[2 * i + 1];
        CHECK(labels[i] >= 0 && offsets[i + 1] > offsets[i]);
        CHECK((h < wd ? h : wd) == S && (h < wd ? wd : h) <= 2 * S);
    }
    const uint64_t len = offsets[count];
    /* Absolute offsets of samples written .. written + count, the first being where this
     * append starts (written again by each append: the same value). */
    uint64_t *abs = mallocCheck((count + 1) * sizeof *abs);
    for (size_t i = 0; i <= count; i++) abs[i] = w->jpeg_written + offsets[i];
    hsize_t newlen = w->jpeg_written + len;
    herr_t r = H5Dset_extent(w->jpeg, &newlen);
    if (r >= 0) r = write_rows(w->jpeg, H5T_NATIVE_UINT8, 1, 1, w->jpeg_written, len, bytes);
    if (r >= 0) r = write_rows(w->offsets, H5T_NATIVE_UINT64, 1, 1, w->written, count + 1, abs);
    if (r >= 0) r = write_rows(w->sizes, H5T_NATIVE_UINT16, 2, 2, w->written, count, sizes);
    if (r >= 0) r = write_rows(w->labels, H5T_NATIVE_INT32, 1, 1, w->written, count, labels);
    free(abs);
    if (r < 0) {
        shard_writer_abort(w);
        return errf(err, errlen, "%s: write failed (disk full?)", w->path);
    }
    w->jpeg_written += len;
    w->written += count;
    return 0;
}

int shard_writer_finish(ShardWriter *w, char *err, size_t errlen) {
    CHECK(w->written == w->n);
    hdf5_lock();
    herr_t r = 0;
    hid_t *ds[5] = {&w->images, &w->labels, &w->jpeg, &w->offsets, &w->sizes};
    for (int k = 0; k < 5; k++) {
        if (*ds[k] >= 0 && H5Dclose(*ds[k]) < 0) r = -1;
        *ds[k] = -1;
    }
    if (H5Fclose(w->file) < 0) r = -1;
    w->file = -1;
    hdf5_unlock();
    if (r < 0) {
        shard_writer_abort(w);
        return errf(err, errlen, "%s: closing the file failed (disk full?)", w->path);
    }
    /* Data on disk before the name appears: a crash never leaves a real name on a partial file. */
    int fd = open(w->tmp_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        shard_writer_abort(w);
        return errf(err, errlen, "%s: fsync failed: %s", w->path, strerror(e));
    }
    close(fd);
    return 0;
}

int shard_commit(const char *tmp_path, const char *path, char *err, size_t errlen) {
    if (rename(tmp_path, path) != 0) {
        int e = errno;
        unlink(tmp_path);
        return errf(err, errlen, "%s: rename from temporary file failed: %s", path, strerror(e));
    }
    if (fsync_dir_of(path) != 0) return errf(err, errlen, "%s: fsync of its directory failed: %s", path, strerror(errno));
    return 0;
}

int shard_writer_close(ShardWriter *w, char *err, size_t errlen) {
    if (shard_writer_finish(w, err, errlen) != 0) return -1;
    int rc = shard_commit(w->tmp_path, w->path, err, errlen);
    w->tmp_path[0] = '\0';
    return rc;
}

/* ---- locked entry points ------------------------------------------------------------------- */

void shard_writer_abort(ShardWriter *w) {
    hdf5_lock();
    shard_writer_abort_locked(w);
    hdf5_unlock();
}

int shard_writer_open(ShardWriter *w, const char *path, size_t n, int image_size,
                      const ShardAttrs *attrs, char *err, size_t errlen) {
    hdf5_lock();
    int rc = shard_writer_open_locked(w, path, n, image_size, SHARD_ENC_RAW, attrs, err, errlen);
    hdf5_unlock();
    return rc;
}

int shard_writer_open_jpeg(ShardWriter *w, const char *path, size_t n, int image_size,
                           const ShardAttrs *attrs, char *err, size_t errlen) {
    hdf5_lock();
    int rc = shard_writer_open_locked(w, path, n, image_size, SHARD_ENC_JPEG, attrs, err, errlen);
    hdf5_unlock();
    return rc;
}

int shard_writer_append_jpeg(ShardWriter *w, const uint8_t *bytes, const uint64_t *offsets,
                             const uint16_t *sizes, const int32_t *labels, size_t count,
                             char *err, size_t errlen) {
    hdf5_lock();
    int rc = shard_writer_append_jpeg_locked(w, bytes, offsets, sizes, labels, count, err, errlen);
    hdf5_unlock();
    return rc;
}

int shard_writer_append(ShardWriter *w, const uint8_t *images, const int32_t *labels,
                        size_t count, char *err, size_t errlen) {
    hdf5_lock();
    int rc = shard_writer_append_locked(w, images, labels, count, err, errlen);
    hdf5_unlock();
    return rc;
}
