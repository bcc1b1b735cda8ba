/* SPDX-License-Identifier: BSD-3-Clause */
/* h5check_storage.c - checks of a dataset HDF5 has opened, before its elements are read (see
 * h5check.h): compact and contiguous storage of the elements' size, chunks of a chunk's size,
 * storage that was never written. They ask HDF5 for the dataset's layout and chunk index; the
 * bytes of the file are the pre-walk's (h5check.c). */
#include "h5check.h"

#include <stdio.h>
#include <string.h>

#define MAX_DIMS 32   /* HDF5's H5S_MAX_RANK */

/* The bytes dataset ds's elements take (-1 when HDF5 cannot say) when its layout is `want`;
 * else 0 with *other set. */
static double element_bytes(hid_t ds, H5D_layout_t want, int *other) {
    *other = 1;
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0) return 0.0;   /* HDF5's own read reports what is wrong */
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    H5Pclose(dcpl);
    if (layout != want) return 0.0;
    *other = 0;
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds);
    const hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    const size_t width = t >= 0 ? H5Tget_size(t) : 0;
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    return np >= 0 && width > 0 ? (double)np * (double)width : np == 0 ? 0.0 : -1.0;
}

int h5check_compact_storage(hid_t ds, char *why, size_t whylen) {
    int other;
    const double want = element_bytes(ds, H5D_COMPACT, &other);
    if (other) return 0;
    const hsize_t stored = H5Dget_storage_size(ds);
    if (want >= 0.0 && (double)stored == want) return 0;
    snprintf(why, whylen, "compact storage of %llu bytes for %.0f bytes of elements", (unsigned long long)stored, want);
    return -1;
}

int h5check_chunks(hid_t ds, const hsize_t *start, const hsize_t *count, char *why, size_t whylen) {
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0) return 0;
    int rc = 0;
    hsize_t cdim[MAX_DIMS], dims[MAX_DIMS], lo[MAX_DIMS], hi[MAX_DIMS], at[MAX_DIMS];
    hid_t t = -1, sp = -1;
    if (H5Pget_layout(dcpl) != H5D_CHUNKED) goto out;
    int fletcher = 0;
    const int nf = H5Pget_nfilters(dcpl);
    for (int k = 0; k < nf; k++) {
        unsigned flags;
        size_t nelem = 0;
        if (H5Pget_filter2(dcpl, (unsigned)k, &flags, &nelem, NULL, 0, NULL, NULL) != H5Z_FILTER_FLETCHER32) goto out;
        fletcher = 1;
    }
    t = H5Dget_type(ds);
    sp = H5Dget_space(ds);
    const int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    const size_t width = t >= 0 ? H5Tget_size(t) : 0;
    if (rank < 1 || rank > MAX_DIMS || width == 0 || H5Pget_chunk(dcpl, rank, cdim) != rank) goto out;
    H5Sget_simple_extent_dims(sp, dims, NULL);
    double bytes = (double)width;
    for (int d = 0; d < rank; d++) {
        const hsize_t s0 = start ? start[d] : 0, n = count ? count[d] : dims[d];
        if (cdim[d] == 0 || n == 0) goto out;
        bytes *= (double)cdim[d];
        lo[d] = s0 / cdim[d];
        hi[d] = (s0 + n - 1) / cdim[d];
        at[d] = lo[d];
    }
    /* The walk below asks HDF5 for each chunk the selection touches; a damaged extent or chunk
     * shape can make that count astronomical (a fuzzed checkpoint kept the loop busy past
     * libFuzzer's timeout). More chunks than the file stores means chunks never written, which
     * no reader here wants as fill values: refused, and the walk stays bounded by what the file
     * holds. Small selections skip the count, a walk of the whole chunk index. */
    double touched = 1.0;
    for (int d = 0; d < rank; d++) touched *= (double)(hi[d] - lo[d] + 1);
    if (touched > 4096.0) {
        hsize_t have = 0;
        if (H5Dget_num_chunks(ds, sp, &have) < 0 || touched > (double)have) {
            snprintf(why, whylen, "%.0f chunks in the selection but %llu stored in the file (chunks never written?)", touched,
                     (unsigned long long)have);
            rc = -1;
            goto out;
        }
    }
    for (;;) {   /* every chunk the selection touches, last dimension fastest */
        hsize_t offset[MAX_DIMS], stored = 0;
        haddr_t addr = HADDR_UNDEF;
        unsigned mask = 0;
        for (int d = 0; d < rank; d++) offset[d] = at[d] * cdim[d];
        /* a chunk never written has no address; one with an address and 0 bytes is a lie too */
        if (H5Dget_chunk_info_by_coord(ds, offset, &mask, &addr, &stored) >= 0 && addr != HADDR_UNDEF &&
            (double)stored != bytes && !(fletcher && (double)stored == bytes + 4.0)) {
            snprintf(why, whylen, "a chunk at element %llu of %llu stored in %llu bytes, but a chunk holds %.0f",
                     (unsigned long long)offset[0], (unsigned long long)dims[0], (unsigned long long)stored,
                     bytes + (fletcher ? 4.0 : 0.0));
            rc = -1;
            goto out;
        }
        int d = rank - 1;
        while (d >= 0 && at[d] == hi[d]) { at[d] = lo[d]; d--; }
        if (d < 0) break;
        at[d]++;
    }
out:
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Pclose(dcpl);
    return rc;
}

int h5check_contiguous(hid_t ds, char *why, size_t whylen) {
    int other;
    const double want = element_bytes(ds, H5D_CONTIGUOUS, &other);
    if (other || want <= 0.0) return 0;
    const double stored = (double)H5Dget_storage_size(ds);
    if (stored == 0.0 || stored >= want) return 0;
    snprintf(why, whylen, "contiguous storage of %.0f bytes for %.0f bytes of elements", stored, want);
    return -1;
}

int h5check_allocated(hid_t ds, char *why, size_t whylen) {
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0) return 0;
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds);
    const int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    const hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    const size_t width = t >= 0 ? H5Tget_size(t) : 0;
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    hsize_t dims[MAX_DIMS], cdim[MAX_DIMS];
    int rc = 0;
    if (np <= 0 || width == 0 || rank < 0 || rank > MAX_DIMS) goto out;
    if (layout == H5D_CONTIGUOUS) {
        const double want = (double)np * (double)width, stored = (double)H5Dget_storage_size(ds);
        if (stored < want) {
            snprintf(why, whylen, "%.0f bytes stored for %.0f bytes of elements (never written?)", stored, want);
            rc = -1;
        }
    } else if (layout == H5D_CHUNKED && rank >= 1 && H5Pget_chunk(dcpl, rank, cdim) == rank) {
        H5Sget_simple_extent_dims(sp, dims, NULL);
        double want = 1.0;
        for (int d = 0; d < rank; d++) want *= cdim[d] ? (double)((dims[d] + cdim[d] - 1) / cdim[d]) : 0.0;
        hsize_t have = 0;
        /* a dataspace, not H5S_ALL, which HDF5 1.10 answers with 0 */
        if (H5Dget_num_chunks(ds, sp, &have) < 0 || (double)have < want) {
            snprintf(why, whylen, "%llu of its %.0f chunks stored (the others never written)", (unsigned long long)have, want);
            rc = -1;
        }
    }
out:
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Pclose(dcpl);
    return rc;
}
