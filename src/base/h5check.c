/* SPDX-License-Identifier: BSD-3-Clause */
/* h5check.c - the pre-walk of an HDF5 file (see h5check.h): the superblock, object headers and
 * their messages, and the raw structures messages name (global heap collections, chunk
 * indexes); the groups from the root down are h5check_groups.c's. Layouts from the HDF5 File
 * Format Specification, version 3.0 (superblock, object header prefixes, header messages
 * 0x000C attribute, 0x0010 continuation, 0x0011 symbol table, 0x0013 B-tree 'K' values,
 * 0x0015 attribute info, 0x0002 link info, 0x0006 link, 0x0008 data layout, 0x000B filter
 * pipeline, the datatype and dataspace messages an attribute embeds, version 1 B-trees, global
 * heap collections). */
#include "h5check.h"
#include "h5walk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int h5w_fail(Check *c, const char *fmt, ...) {
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (c->where_kind) {
        char name[256];   /* a name from the file, printable */
        snprintf(name, sizeof name, "%s%s%s", c->where_path, c->where_name && c->where_path[1] ? "/" : "",
                 c->where_name ? c->where_name : "");
        for (char *s = name; *s; s++)
            if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) *s = '?';
        snprintf(c->err, c->errlen, "%s: %s '%s': %s (damaged, or not written by ddptrain or h5py)", c->path,
                 c->where_kind, name, what);
    } else
        snprintf(c->err, c->errlen, "%s: %s (damaged, or not written by ddptrain or h5py)", c->path, what);
    return -1;
}




static int pread_all(Check *c, uint64_t off, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(c->fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* n bytes at file offset `off` into buf; 0, or -1 when the file ends first. Small reads go
 * through a cache of a few aligned blocks: headers, B-tree nodes, symbol table nodes and heaps
 * lie close together, and one pread per structure made the walk of a small checkpoint's ~100
 * objects cost half a millisecond. */
static int read_at(Check *c, uint64_t off, void *buf, size_t n) {
    if (off > c->file_size || n > c->file_size - off) return -1;
    if (n > CACHE_BLOCK || !c->cache) return pread_all(c, off, buf, n);
    unsigned char *out = buf;
    while (n > 0) {
        const uint64_t at = off - off % CACHE_BLOCK;
        int k = 0;
        while (k < CACHE_BLOCKS && !(c->cache_len[k] && c->cache_at[k] == at)) k++;
        if (k == CACHE_BLOCKS) {   /* round robin: the walk moves on and rarely comes back */
            k = c->cache_next;
            c->cache_next = (c->cache_next + 1) % CACHE_BLOCKS;
            const size_t len = c->file_size - at < CACHE_BLOCK ? (size_t)(c->file_size - at) : CACHE_BLOCK;
            c->cache_len[k] = 0;
            if (pread_all(c, at, c->cache + (size_t)k * CACHE_BLOCK, len) != 0) return -1;
            c->cache_at[k] = at;
            c->cache_len[k] = len;
        }
        const size_t from = (size_t)(off - at), take = c->cache_len[k] - from < n ? c->cache_len[k] - from : n;
        memcpy(out, c->cache + (size_t)k * CACHE_BLOCK + from, take);
        out += take;
        off += take;
        n -= take;
    }
    return 0;
}


int h5w_read_rel(Check *c, uint64_t addr, void *buf, size_t n) {
    if (!within(c, addr, n)) return -1;
    return read_at(c, c->base + addr, buf, n);
}

/* Every structure read is paid for from a budget of twice the file's size: a walk of a sound
 * file reads each header, node and heap about once, while damaged B-trees and symbol table
 * nodes that point into each other many times over could have it read without end. */
int h5w_spend(Check *c, uint64_t n) {
    if (n > c->budget) return h5w_fail(c, "groups whose B-trees and symbol tables lead to more than twice the file's bytes (a loop?)");
    c->budget -= n;
    return 0;
}

/* `path` and `name` must outlive the next h5w_fail(): they live in the walk's own frames and
 * heaps, and the path of an object is put together only when there is something to say. */
void h5w_set_where(Check *c, const char *kind, const char *path, const char *name) {
    c->where_kind = kind;
    c->where_path = path;
    c->where_name = name;
}

/* The datatype of an attribute: the message must hold its class's properties. Integers,
 * floats, strings, bitfields, opaque, references, enums (h5py's booleans) and variable-length
 * types (h5py's str) are checked to the byte; compound and array types, which have no place
 * among a shard's or checkpoint's attributes, are refused. Returns the element size, or 0 on
 * failure (err set). */
static uint64_t check_datatype(Check *c, const char *name, const unsigned char *p, size_t n, int depth) {
    if (n < 8) return h5w_fail(c, "attribute '%s': a datatype of %zu bytes", name, n), 0;
    const int cls = p[0] & 0x0f, version = p[0] >> 4;
    const uint64_t bits = le(p + 1, 3), size = le(p + 4, 4);
    if (version < 1 || version > 4) return h5w_fail(c, "attribute '%s': datatype version %d", name, version), 0;
    if (size == 0 || size > (1u << 20))
        return h5w_fail(c, "attribute '%s': an element of %llu bytes", name, (unsigned long long)size), 0;
    if (depth > 2) return h5w_fail(c, "attribute '%s': datatypes nested too deep", name), 0;
    size_t props = 0;
    switch (cls) {
    case 0: props = 4; break;             /* fixed-point: bit offset, precision */
    case 1: props = 12; break;            /* floating-point: offsets, sizes, exponent bias */
    case 2: props = 2; break;             /* time: precision */
    case 3: case 7: props = 0; break;     /* string, reference */
    case 4: props = 4; break;             /* bitfield: bit offset, precision */
    case 5: props = bits & 0xff; break;   /* opaque: its tag, padded */
    case 8: {                             /* enum: base type, member names, member values */
        if (n < 16 || (p[8] & 0x0f) != 0) return h5w_fail(c, "attribute '%s': an enum not over an integer type", name), 0;
        const uint64_t base = check_datatype(c, name, p + 8, n - 8, depth + 1);
        if (!base) return 0;
        size_t pos = 8 + 12;   /* the datatype and the base integer type */
        const size_t members = (size_t)(bits & 0xffff);
        for (size_t k = 0; k < members; k++) {
            const unsigned char *z = pos < n ? memchr(p + pos, 0, n - pos) : NULL;
            if (!z) return h5w_fail(c, "attribute '%s': enum member names overrun the datatype", name), 0;
            const size_t len = (size_t)(z - (p + pos)) + 1;
            pos += version < 3 ? align8(len) : len;
        }
        if (pos > n || members > (n - pos) / base)
            return h5w_fail(c, "attribute '%s': enum values overrun the datatype", name), 0;
        return size;
    }
    case 9:                               /* variable-length: its base type */
        if (!check_datatype(c, name, p + 8, n - 8, depth + 1)) return 0;
        return size;
    default:
        /* compound and array types: their members are decoded only when the attribute is
         * read, and ddptrain reads only the root's */
        if (!c->root) return size;
        return h5w_fail(c, "attribute '%s' has a datatype of class %d (compound or array; ddptrain's files hold none)",
                    name, cls), 0;
    }
    if (n < 8 + props) return h5w_fail(c, "attribute '%s': datatype of class %d in %zu bytes", name, cls, n), 0;
    return size;
}

/* The dataspace of an attribute; the element count in *nelem. */
static int check_dataspace(Check *c, const char *name, const unsigned char *p, size_t n, uint64_t *nelem) {
    if (n < 4) return h5w_fail(c, "attribute '%s': a dataspace of %zu bytes", name, n);
    const int version = p[0], rank = p[1], flags = p[2];
    size_t head;
    int null_space = 0;
    if (version == 1) {
        head = 8;
        if (flags & 0x02) return h5w_fail(c, "attribute '%s': a dataspace with a permutation index", name);
    } else if (version == 2) {
        head = 4;
        if (p[3] > 2) return h5w_fail(c, "attribute '%s': dataspace type %d", name, p[3]);
        null_space = p[3] == 2;
    } else {
        return h5w_fail(c, "attribute '%s': dataspace version %d", name, version);
    }
    if (rank > MAX_DIMS) return h5w_fail(c, "attribute '%s': a dataspace of %d dimensions", name, rank);
    const size_t L = (size_t)c->sizeof_len;
    const size_t need = head + (size_t)rank * L * ((flags & 0x01) ? 2 : 1);
    if (n < need) return h5w_fail(c, "attribute '%s': %d dimensions in a dataspace of %zu bytes", name, rank, n);
    uint64_t count = null_space ? 0 : 1;
    for (int d = 0; d < rank && count; d++) {
        const uint64_t dim = le(p + head + (size_t)d * L, (int)L);
        if (dim > (UINT64_C(1) << 32) || (dim && count > (UINT64_C(1) << 32) / dim))
            return h5w_fail(c, "attribute '%s': more than 2^32 elements", name);
        count *= dim;
    }
    *nelem = count;
    return 0;
}

/* The global heap collection at `addr` into c->gcol_size: each object's size by its index.
 * A collection is "GCOL", version 1, three reserved bytes and its size, then objects of an
 * index (2 bytes), a reference count (2), 4 reserved bytes, a size, and the data padded to 8,
 * until an object of index 0 (the free space) or the end. HDF5 1.10 trusts every size here:
 * an object larger than its collection, or than the sequence read into, was copied over the
 * end of a heap buffer (found by fuzz_shard in a variable-length "encoding" attribute). */
static int walk_gcol(Check *c, const char *name, uint64_t addr) {
    const size_t L = (size_t)c->sizeof_len;
    unsigned char head[16];
    if (!within(c, addr, 8 + L) || h5w_read_rel(c, addr, head, 8 + L) != 0)
        return h5w_fail(c, "attribute '%s': a global heap at %llu beyond the end of the file", name, (unsigned long long)addr);
    const uint64_t size = le(head + 8, (int)L);
    if (memcmp(head, "GCOL", 4) != 0 || head[4] != 1)
        return h5w_fail(c, "attribute '%s': no global heap collection at %llu", name, (unsigned long long)addr);
    if (size < 8 + L || size > MAX_CHUNK || !within(c, addr, size))
        return h5w_fail(c, "attribute '%s': a global heap collection of %llu bytes at %llu", name,
                    (unsigned long long)size, (unsigned long long)addr);
    if (h5w_spend(c, size) != 0) return -1;
    unsigned char *buf = malloc((size_t)size);
    if (!buf || h5w_read_rel(c, addr, buf, (size_t)size) != 0) {
        free(buf);
        return h5w_fail(c, "attribute '%s': a global heap collection cut short", name);
    }
    c->gcol_addr = c->undef;
    c->gcol_n = 0;
    int rc = 0;
    for (size_t off = 8 + L; off + 8 + L <= size;) {
        const size_t idx = (size_t)le(buf + off, 2);
        const uint64_t osize = le(buf + off + 8, (int)L);
        if (idx == 0) {   /* the free space, its header included: exactly the rest of the collection */
            /* HDF5 1.10 steps over it by its size and reads on: a size of 0 never moved on
             * (a hang, found by fuzz_shard), a short one had it read free space as objects */
            if (osize != size - off)
                rc = h5w_fail(c, "attribute '%s': global heap free space of %llu bytes where %llu are left", name,
                          (unsigned long long)osize, (unsigned long long)(size - off));
            break;
        }
        if (osize > size - off - 8 - L || align8((size_t)osize) > size - off - 8 - L) {
            rc = h5w_fail(c, "attribute '%s': a global heap object of %llu bytes past its collection", name,
                      (unsigned long long)osize);
            break;
        }
        if (idx >= c->gcol_n) {
            const size_t n = idx + 1 > 2 * c->gcol_n ? idx + 1 : 2 * c->gcol_n;
            uint64_t *t = realloc(c->gcol_size, n * sizeof *t);
            if (!t) { rc = h5w_fail(c, "attribute '%s': out of memory", name); break; }
            for (size_t k = c->gcol_n; k < n; k++) t[k] = GCOL_NONE;
            c->gcol_size = t;
            c->gcol_n = n;
        }
        if (c->gcol_size[idx] != GCOL_NONE) {
            rc = h5w_fail(c, "attribute '%s': two global heap objects of index %zu", name, idx);
            break;
        }
        c->gcol_size[idx] = osize;
        off += 8 + L + align8((size_t)osize);
    }
    free(buf);
    if (rc == 0) c->gcol_addr = addr;
    return rc;
}

/* The elements of a variable-length attribute (h5py's str): each a sequence length (4 bytes)
 * and the global heap object holding it (a collection's address and an index), which must
 * exist and hold exactly the sequence's bytes. `dt` is the attribute's datatype. The root's
 * attributes only: ddptrain reads no others, and h5py writes a collection per few thousand
 * strings, so remembering the last one walked keeps this to one read of each. */
static int check_vlen_data(Check *c, const char *name, const unsigned char *dt, const unsigned char *data,
                           uint64_t nelem, uint64_t elem) {
    const size_t O = (size_t)c->sizeof_addr;
    const uint64_t base = le(dt + 8 + 4, 4);   /* the base type's element size */
    if (elem < 4 + O + 4) return h5w_fail(c, "attribute '%s': variable-length elements of %llu bytes", name,
                                      (unsigned long long)elem);
    for (uint64_t k = 0; k < nelem; k++) {
        const unsigned char *e = data + k * elem;
        const uint64_t len = le(e, 4), addr = le(e + 4, (int)O), idx = le(e + 4 + O, 4);
        if (len == 0) continue;   /* HDF5 reads nothing for an empty sequence */
        if (addr != c->gcol_addr && walk_gcol(c, name, addr) != 0) return -1;
        if (idx == 0 || idx >= c->gcol_n || c->gcol_size[idx] == GCOL_NONE)
            return h5w_fail(c, "attribute '%s': element %llu names global heap object %llu, which does not exist", name,
                        (unsigned long long)k, (unsigned long long)idx);
        if (c->gcol_size[idx] != len * base)
            return h5w_fail(c, "attribute '%s': element %llu of %llu bytes in a global heap object of %llu", name,
                        (unsigned long long)k, (unsigned long long)(len * base),
                        (unsigned long long)c->gcol_size[idx]);
    }
    return 0;
}

/* One attribute message of n bytes. */
static int check_attribute(Check *c, const unsigned char *p, size_t n, int msg_flags) {
    /* a shared message lives elsewhere; ddptrain reads none but the root's attributes */
    if (msg_flags & 0x02) return c->root ? h5w_fail(c, "a shared attribute message in the root group") : 0;
    if (n < 8) return h5w_fail(c, "an attribute message of %zu bytes", n);
    const int version = p[0], flags = p[1];
    const size_t name_len = (size_t)le(p + 2, 2), dt_len = (size_t)le(p + 4, 2), ds_len = (size_t)le(p + 6, 2);
    size_t pos = 8;
    if (version == 3) pos = 9;   /* + the name's character set */
    else if (version != 1 && version != 2) return h5w_fail(c, "attribute message version %d", version);
    if (version > 1 && (flags & 0x03)) return h5w_fail(c, "an attribute with a shared datatype or dataspace");
    /* v1 pads the name, datatype and dataspace to 8 bytes; the sums stay far below SIZE_MAX */
    const size_t name_sp = version == 1 ? align8(name_len) : name_len;
    const size_t dt_sp = version == 1 ? align8(dt_len) : dt_len;
    const size_t ds_sp = version == 1 ? align8(ds_len) : ds_len;
    if (name_len == 0 || pos + name_sp > n)
        return h5w_fail(c, "an attribute name of %zu bytes in a %zu-byte message", name_len, n);
    const unsigned char *nm = p + pos;
    if (!memchr(nm, 0, name_len)) return h5w_fail(c, "an attribute name without its terminating NUL");
    char name[64];
    snprintf(name, sizeof name, "%s", (const char *)nm);
    for (char *s = name; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) *s = '?';   /* printed below */
    pos += name_sp;
    if (pos + dt_sp > n) return h5w_fail(c, "attribute '%s': a datatype of %zu bytes overruns its message", name, dt_len);
    const uint64_t elem = check_datatype(c, name, p + pos, dt_len, 0);
    if (!elem) return -1;
    pos += dt_sp;
    if (pos + ds_sp > n) return h5w_fail(c, "attribute '%s': a dataspace of %zu bytes overruns its message", name, ds_len);
    uint64_t nelem = 0;
    if (check_dataspace(c, name, p + pos, ds_len, &nelem) != 0) return -1;
    pos += ds_sp;
    if (nelem > (n - pos) / elem)
        return h5w_fail(c, "attribute '%s': %llu elements of %llu bytes overrun its %zu-byte message", name,
                    (unsigned long long)nelem, (unsigned long long)elem, n);
    const unsigned char *dt = p + pos - ds_sp - dt_sp;
    if (c->root && (dt[0] & 0x0f) == 9 && dt_len >= 16) return check_vlen_data(c, name, dt, p + pos, nelem, elem);
    return 0;
}

/* A link message (a new-style group's member): a hard link is queued in c->links to be walked
 * after its header; soft and external links are left to h5open.c, which refuses them before
 * they are followed. */
static int check_link(Check *c, const unsigned char *p, size_t n) {
    const size_t O = (size_t)c->sizeof_addr;
    if (n < 2 || p[0] != 1) return h5w_fail(c, "a link message of %zu bytes, version %d", n, n ? p[0] : -1);
    const int flags = p[1];
    size_t at = 2;
    int type = 0;
    if (flags & 0x08) { if (n < at + 1) return h5w_fail(c, "a link message cut short"); type = p[at++]; }
    if (flags & 0x04) at += 8;   /* creation order */
    if (flags & 0x10) at += 1;   /* the name's character set */
    const size_t lb = (size_t)1 << (flags & 0x03);
    if (n < at + lb) return h5w_fail(c, "a link message cut short");
    const uint64_t len = le(p + at, (int)lb);
    at += lb;
    if (len == 0 || len > n - at) return h5w_fail(c, "a link name of %llu bytes in a %zu-byte message", (unsigned long long)len, n);
    const unsigned char *name = p + at;
    at += (size_t)len;
    if (type != 0) return 0;
    if (n < at + O) return h5w_fail(c, "a hard link message cut short");
    if (c->nlinks == MAX_LINKS) return h5w_fail(c, "more than %d links in a group", MAX_LINKS);
    if (c->nlinks == c->links_cap) {
        const size_t cap = c->links_cap ? 2 * c->links_cap : 64;
        struct HardLink *t = realloc(c->links, cap * sizeof *t);
        if (!t) return h5w_fail(c, "out of memory");
        c->links = t;
        c->links_cap = cap;
    }
    struct HardLink *l = &c->links[c->nlinks++];
    l->addr = le(p + at, (int)O);
    const size_t k = len < sizeof l->name ? (size_t)len : sizeof l->name - 1;
    for (size_t i = 0; i < k; i++) l->name[i] = name[i] >= 0x20 && name[i] <= 0x7e ? (char)name[i] : '?';
    l->name[k] = '\0';
    return 0;
}

/* A data layout message. HDF5 1.10 divides by each chunk dimension when it opens a chunked
 * dataset: a dimension of 0 stopped the reader with SIGFPE (found by fuzz_checkpoint). The
 * dimensions (the element size last) must be 1 or more, at most MAX_DIMS + 1 of them. */
static int check_layout(Check *c, const unsigned char *p, size_t n) {
    const size_t O = (size_t)c->sizeof_addr;
    if (n < 2) return h5w_fail(c, "a data layout message of %zu bytes", n);
    const int version = p[0];
    size_t at, enc = 4, ndims;
    if (version == 1 || version == 2) {
        if (n < 8) return h5w_fail(c, "a data layout message of %zu bytes", n);
        ndims = p[1];
        if (p[2] != 2) return 0;   /* compact or contiguous: HDF5 checks their sizes */
        at = 8 + O;
    } else if (version == 3) {
        if (p[1] != 2) return 0;
        if (n < 3) return h5w_fail(c, "a data layout message of %zu bytes", n);
        ndims = p[2];
        at = 3 + O;
    } else if (version == 4) {
        if (p[1] != 2) return 0;
        if (n < 5) return h5w_fail(c, "a data layout message of %zu bytes", n);
        ndims = p[3];
        enc = p[4];
        at = 5;
        if (enc < 1 || enc > 8) return h5w_fail(c, "chunk dimensions encoded in %zu bytes", enc);
    } else {
        return h5w_fail(c, "data layout message version %d", version);
    }
    if (ndims < 1 || ndims > MAX_DIMS + 1) return h5w_fail(c, "a chunked layout of %zu dimensions", ndims);
    if (n < at || (n - at) / enc < ndims) return h5w_fail(c, "a chunked layout message cut short");
    c->chunk_bytes = 1;
    for (size_t d = 0; d < ndims; d++) {
        const uint64_t v = le(p + at + d * enc, (int)enc);
        if (v == 0) return h5w_fail(c, "a chunk dimension of 0");
        if (v > UINT32_MAX || c->chunk_bytes > (UINT64_C(1) << 40) / v) return h5w_fail(c, "a chunk of more than 2^40 bytes");
        c->chunk_dims[d] = (uint32_t)v;
        c->chunk_bytes *= v;
    }
    if (version <= 3) {   /* version 4's other chunk indexes are left to HDF5 */
        c->chunked = 1;
        c->chunk_ndims = (unsigned)ndims;
        c->chunk_btree = le(p + (version == 3 ? 3 : 8), (int)O);
    }
    return 0;
}

/* The filter pipeline message: which filters a chunk went through (Fletcher-32 is filter 3). */
static int check_filters(Check *c, const unsigned char *p, size_t n) {
    if (n < 2 || (p[0] != 1 && p[0] != 2)) return h5w_fail(c, "a filter pipeline message of %zu bytes", n);
    const int version = p[0], nf = p[1];
    size_t at = version == 1 ? 8 : 2;
    c->filters = 0;
    for (int f = 0; f < nf; f++) {
        if (n < at + 2) return h5w_fail(c, "a filter pipeline message cut short");
        const unsigned id = (unsigned)le(p + at, 2);
        size_t name_len = 0;
        if (version == 1 || id >= 256) {
            if (n < at + 4) return h5w_fail(c, "a filter pipeline message cut short");
            name_len = (size_t)le(p + at + 2, 2);
            at += 2;
        }
        if (n < at + 6) return h5w_fail(c, "a filter pipeline message cut short");
        const size_t nv = (size_t)le(p + at + 4, 2);
        at += 6;
        if (version == 1) name_len = align8(name_len);
        size_t vals = nv * 4;
        if (version == 1 && (nv & 1)) vals += 4;
        if (name_len > n - at || vals > n - at - name_len) return h5w_fail(c, "a filter pipeline message cut short");
        at += name_len + vals;
        c->filters = c->filters == 0 && id == 3 ? 1 : 2;
    }
    return 0;
}

/* The header of the version 1 B-tree node at addr into hdr (8 + 2 * O bytes): its signature,
 * its type (0: a group's, 1: a chunk index's), and its level, which must be *level (or any
 * when -1) and becomes *level. `what` names the node in messages. */
int h5w_btree_node_head(Check *c, uint64_t addr, int type, int *level, unsigned char *hdr, const char *what) {
    const size_t O = (size_t)c->sizeof_addr;
    if (h5w_spend(c, 8 + 2 * O) != 0) return -1;
    if (h5w_read_rel(c, addr, hdr, 8 + 2 * O) != 0) return h5w_fail(c, "%s at %llu cannot be read", what, (unsigned long long)addr);
    if (memcmp(hdr, "TREE", 4) != 0 || hdr[4] != type)
        return h5w_fail(c, "%s at %llu without its signature or of type %d", what, (unsigned long long)addr, hdr[4]);
    if ((*level >= 0 && hdr[5] != *level) || hdr[5] > MAX_BTREE_LEVEL)
        return h5w_fail(c, "%s at level %d where level %d belongs", what, hdr[5], *level >= 0 ? *level : MAX_BTREE_LEVEL);
    *level = hdr[5];
    return 0;
}

/* The v1 B-tree (node type 1) indexing a chunked dataset's chunks, walked in order: keys hold a
 * chunk's stored size, filter mask and offset. HDF5 1.10 takes each entry as it finds it: a
 * fuzzed shard whose index gained an entry of 0 bytes at address 0, out of order, had it copy a
 * whole chunk out of an 8-byte buffer. Each chunk must lie inside the file with the size a
 * chunk takes (unfiltered, or Fletcher-32's 4 more), at an offset on the chunk grid, the
 * offsets strictly increasing. prev holds the last offset seen (*have_prev once there is one). */
static int check_chunk_btree(Check *c, uint64_t addr, int level, uint64_t *prev, int *have_prev) {
    const size_t O = (size_t)c->sizeof_addr, nd = c->chunk_ndims, K = 8 + 8 * nd;
    unsigned char hdr[8 + 16];
    if (h5w_btree_node_head(c, addr, 1, &level, hdr, "a chunk index node") != 0) return -1;
    const size_t n = (size_t)le(hdr + 6, 2);
    if (n == 0) return 0;
    const size_t bytes = n * (K + O) + K;
    if (h5w_spend(c, bytes) != 0) return -1;
    unsigned char *b = malloc(bytes);
    if (!b) return h5w_fail(c, "out of memory");
    int rc = 0;
    if (h5w_read_rel(c, addr + 8 + 2 * O, b, bytes) != 0) rc = h5w_fail(c, "a chunk index node at %llu cut short", (unsigned long long)addr);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const unsigned char *key = b + i * (K + O);
        const uint64_t child = le(key + K, (int)O);
        if (level > 0) {
            rc = check_chunk_btree(c, child, level - 1, prev, have_prev);
            continue;
        }
        const uint64_t size = le(key, 4), mask = le(key + 4, 4);
        const uint64_t want = c->chunk_bytes + (c->filters == 1 && mask == 0 ? 4 : 0);
        if (size == 0 || !within(c, child, size) || (c->filters < 2 && size != want)) {
            rc = h5w_fail(c, "a chunk of %llu bytes at %llu (a chunk holds %llu)", (unsigned long long)size,
                      (unsigned long long)child, (unsigned long long)want);
            break;
        }
        int cmp = *have_prev ? 0 : 1;
        for (size_t d = 0; d < nd; d++) {
            const uint64_t off = le(key + 8 + 8 * d, 8);
            if (d + 1 == nd ? off != 0 : off % c->chunk_dims[d] != 0) {
                rc = h5w_fail(c, "a chunk at offset %llu of dimension %zu, off the chunk grid", (unsigned long long)off, d);
                break;
            }
            if (cmp == 0 && off != prev[d]) cmp = off > prev[d] ? 1 : -1;
            prev[d] = off;
        }
        if (rc == 0 && cmp <= 0) rc = h5w_fail(c, "chunk index entries out of order or twice");
        *have_prev = 1;
    }
    free(b);
    return rc;
}

int h5w_check_chunk_index(Check *c) {
    if (!c->chunked || c->chunk_btree == c->undef) return 0;   /* undefined: no chunk written yet */
    uint64_t prev[MAX_DIMS + 1];
    int have_prev = 0;
    return check_chunk_btree(c, c->chunk_btree, -1, prev, &have_prev);
}

/* One header message; continuations are queued, a symbol table noted. */
static int check_message(Check *c, int type, const unsigned char *p, size_t n, int msg_flags) {
    const size_t O = (size_t)c->sizeof_addr, L = (size_t)c->sizeof_len;
    if (type == MSG_ATTRIBUTE) return check_attribute(c, p, n, msg_flags);
    if (type == MSG_LINK) return check_link(c, p, n);
    if (type == MSG_LAYOUT) return check_layout(c, p, n);
    if (type == MSG_FILTERS) return check_filters(c, p, n);
    if (type == MSG_LINK_INFO) {   /* version, flags, [max creation index], fractal heap address, ... */
        const size_t at = 2 + ((n >= 2 && (p[1] & 0x01)) ? 8 : 0);
        if (n < at + O || p[0] != 0) return h5w_fail(c, "a link info message of %zu bytes", n);
        /* HDF5 1.10 opened the name index of a damaged dense group at whatever address it
         * found and read from nowhere (found by fuzz_init_from); ddptrain keeps its groups'
         * links in their headers and h5py writes symbol tables, so dense links are refused */
        if (!is_undefined(p + at, (int)O)) return h5w_fail(c, "a group's links in dense storage (a fractal heap)");
        return 0;
    }
    if (type == MSG_CONTINUATION) {
        if (n < O + L) return h5w_fail(c, "a continuation message of %zu bytes", n);
        if (c->npending + c->nwalked >= MAX_CHUNKS || c->npending == MAX_PENDING)
            return h5w_fail(c, "more than %d object header chunks", c->npending == MAX_PENDING ? MAX_PENDING : MAX_CHUNKS);
        c->pending[c->npending][0] = le(p, (int)O);
        c->pending[c->npending][1] = le(p + O, (int)L);
        c->npending++;
        return 0;
    }
    if (type == MSG_SYMBOL_TABLE) {   /* an old-style group: its B-tree and local heap */
        if (n < 2 * O) return h5w_fail(c, "a symbol table message of %zu bytes", n);
        c->has_stab = 1;
        c->stab_btree = le(p, (int)O);
        c->stab_heap = le(p + O, (int)O);
        return 0;
    }
    if (type == MSG_BTREE_K && c->extension) {   /* version, chunk index K, group node K, leaf K */
        if (n < 7 || p[0] != 0) return h5w_fail(c, "a B-tree 'K' values message of %zu bytes, version %d", n, n ? p[0] : -1);
        c->node_k = (unsigned)le(p + 3, 2);
        c->leaf_k = (unsigned)le(p + 5, 2);
        return 0;
    }
    if (type == MSG_ATTRIBUTE_INFO && c->root) {
        if (n < 2) return h5w_fail(c, "an attribute info message of %zu bytes", n);
        const size_t at = 2 + ((p[1] & 0x01) ? 2 : 0);
        if (n < at + O) return h5w_fail(c, "an attribute info message of %zu bytes", n);
        if (!is_undefined(p + at, (int)O))
            return h5w_fail(c, "root attributes in dense storage (more than HDF5 keeps in the header by default)");
    }
    return 0;
}

/* The messages of one header chunk: v1 (8-byte message headers, 8-byte aligned) or v2
 * (4 or 6 bytes; `creation_order`: the header tracks attribute creation order). */
static int check_messages(Check *c, const unsigned char *p, size_t n, int v2, int creation_order) {
    const size_t hdr = v2 ? 4 + (creation_order ? 2 : 0) : 8;
    size_t pos = 0;
    while (n - pos >= hdr) {
        const int type = v2 ? p[pos] : (int)le(p + pos, 2);
        const size_t size = (size_t)le(p + pos + (v2 ? 1 : 2), 2);
        const int flags = p[pos + (v2 ? 3 : 4)];
        pos += hdr;
        if (size > n - pos) return h5w_fail(c, "a header message of %zu bytes overruns its %zu-byte chunk", size, n);
        if (check_message(c, type, p + pos, size, flags) != 0) return -1;
        pos += size;
    }
    return 0;
}

/* A header chunk, into `small` (SMALL_CHUNK bytes) when it fits: most do, and a malloc for each
 * of a checkpoint's hundred headers was a good part of the walk's time. */
#define SMALL_CHUNK 1024
static unsigned char *read_chunk(Check *c, uint64_t addr, uint64_t len, unsigned char *small) {
    if (len > MAX_CHUNK) {
        h5w_fail(c, "an object header chunk of %llu bytes", (unsigned long long)len);
        return NULL;
    }
    if (h5w_spend(c, len) != 0) return NULL;
    unsigned char *buf = len <= SMALL_CHUNK ? small : malloc((size_t)len);
    if (!buf) {
        snprintf(c->err, c->errlen, "%s: out of memory reading an object header", c->path);
        return NULL;
    }
    if (h5w_read_rel(c, addr, buf, (size_t)len) != 0) {
        if (buf != small) free(buf);
        h5w_fail(c, "an object header chunk at %llu beyond the end of the file", (unsigned long long)addr);
        return NULL;
    }
    return buf;
}

/* The object header at `addr`: its first chunk, then every continuation. `what` names it in
 * messages ("the root group's object header"); a symbol table message lands in c->has_stab. */
int h5w_check_header(Check *c, uint64_t addr, const char *what) {
    unsigned char pre[32], small[SMALL_CHUNK];
    c->has_stab = 0;
    c->nlinks = 0;
    c->chunked = 0;
    c->filters = 0;
    c->npending = c->nwalked = 0;
    if (h5w_spend(c, 16) != 0) return -1;
    if (h5w_read_rel(c, addr, pre, 16) != 0) return h5w_fail(c, "%s lies beyond the end of the file", what);
    int v2 = 0, creation_order = 0;
    uint64_t first, len;
    if (memcmp(pre, "OHDR", 4) == 0) {
        if (pre[4] != 2) return h5w_fail(c, "object header version %d", pre[4]);
        const int flags = pre[5];
        size_t at = 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
        const int nb = 1 << (flags & 0x03);
        if (h5w_read_rel(c, addr, pre, at + (size_t)nb) != 0) return h5w_fail(c, "%s is cut short", what);
        len = le(pre + at, nb);
        first = addr + at + (uint64_t)nb;
        v2 = 1;
        creation_order = (flags & 0x04) != 0;
    } else if (pre[0] == 1) {
        len = le(pre + 8, 4);
        first = addr + 16;   /* 12 bytes of prefix, padded to 8 */
    } else {
        return h5w_fail(c, "%s has version %d", what, pre[0]);
    }
    unsigned char *buf = read_chunk(c, first, len, small);
    if (!buf) return -1;
    int rc = check_messages(c, buf, (size_t)len, v2, creation_order);
    if (buf != small) free(buf);
    c->nwalked++;
    while (rc == 0 && c->npending > 0) {
        c->npending--;
        const uint64_t a = c->pending[c->npending][0], n = c->pending[c->npending][1];
        c->nwalked++;
        if (!(buf = read_chunk(c, a, n, small))) return -1;
        if (v2) {   /* "OCHK", the messages, a checksum */
            if (n < 8 || memcmp(buf, "OCHK", 4) != 0) rc = h5w_fail(c, "a header continuation block without its signature");
            else rc = check_messages(c, buf + 4, (size_t)n - 8, 1, creation_order);
        } else {
            rc = check_messages(c, buf, (size_t)n, 0, 0);
        }
        if (buf != small) free(buf);
    }
    return rc;
}

int h5w_check_superblock(Check *c, uint64_t *root_out) {
    const char *path = c->path;
    char *err = c->err;
    const size_t errlen = c->errlen;
    c->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (c->fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    int rc = 0;
    if (fstat(c->fd, &st) != 0) {
        snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        rc = -1;
        goto out;
    }
    c->file_size = (uint64_t)st.st_size;
    c->cache = malloc(CACHE_BLOCKS * CACHE_BLOCK);   /* without it, every read is a pread */
    /* The superblock is at 0 or after a user block of 512, 1024, 2048, ... bytes. */
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char sb[128];
    uint64_t at = 0;
    for (;;) {
        if (read_at(c, at, sb, 8) != 0) goto out;   /* no signature: HDF5's open says so */
        if (memcmp(sb, sig, 8) == 0) break;
        at = at ? at * 2 : 512;
    }
    const size_t got = c->file_size - at < sizeof sb ? (size_t)(c->file_size - at) : sizeof sb;
    if (got < 24 || read_at(c, at, sb, got) != 0) { rc = h5w_fail(c, "a superblock cut short"); goto out; }
    const int version = sb[8];
    size_t p;
    if (version <= 1) {
        c->sizeof_addr = sb[13];
        c->sizeof_len = sb[14];
        p = version == 0 ? 24 : 28;
    } else if (version <= 3) {
        c->sizeof_addr = sb[9];
        c->sizeof_len = sb[10];
        p = 12;
    } else {
        rc = h5w_fail(c, "superblock version %d", version);
        goto out;
    }
    if ((c->sizeof_addr != 2 && c->sizeof_addr != 4 && c->sizeof_addr != 8) ||
        (c->sizeof_len != 2 && c->sizeof_len != 4 && c->sizeof_len != 8)) {
        rc = h5w_fail(c, "addresses of %d and lengths of %d bytes", c->sizeof_addr, c->sizeof_len);
        goto out;
    }
    const size_t O = (size_t)c->sizeof_addr, L = (size_t)c->sizeof_len;
    /* v0/1: base, free space, end of file and driver addresses, then the root's symbol table
     * entry (link name offset, a length; object header address); v2/3: base, extension, end
     * of file, root object header address. */
    const size_t root_at = version <= 1 ? p + 4 * O + L : p + 3 * O;
    if (root_at + O > got) { rc = h5w_fail(c, "a superblock cut short"); goto out; }
    c->base = le(sb + p, (int)O);
    if (c->base != at && c->base != 0) { rc = h5w_fail(c, "a base address of %llu", (unsigned long long)c->base); goto out; }
    c->undef = O == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * O)) - 1;
    const uint64_t eof = le(sb + p + 2 * O, (int)O);
    c->end = eof < c->file_size - c->base ? eof : c->file_size - c->base;
    c->budget = 2 * c->file_size + (1u << 20);
    /* v0/1 give the groups' K values; v2/3 files have HDF5's defaults unless their superblock
     * extension holds a B-tree 'K' values message */
    c->leaf_k = 4;
    c->node_k = 16;
    if (version <= 1) {
        c->leaf_k = (unsigned)le(sb + 16, 2);
        c->node_k = (unsigned)le(sb + 18, 2);
    } else if (le(sb + p + O, (int)O) != c->undef) {
        c->extension = 1;
        rc = h5w_check_header(c, le(sb + p + O, (int)O), "the superblock extension");
        c->extension = 0;
        if (rc != 0) goto out;
    }
    if (c->leaf_k == 0 || c->node_k == 0) { rc = h5w_fail(c, "groups of K %u and %u", c->leaf_k, c->node_k); goto out; }
    const uint64_t root = le(sb + root_at, (int)O);
    c->root = 1;
    rc = h5w_check_header(c, root, "the root group's object header");
    c->root = 0;
    *root_out = root;
out:
    return rc;
}

void h5w_release(Check *c) {
    free(c->cache);
    free(c->groups);
    free(c->gcol_size);
    free(c->links);
    if (c->fd >= 0) close(c->fd);
}
