/* h5check.c - see h5check.h. Layouts from the HDF5 File Format Specification, version 3.0
 * (superblock, object header prefixes, header messages 0x000C attribute, 0x0010 continuation,
 * 0x0015 attribute info, and the datatype and dataspace messages an attribute embeds). */
#include "h5check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MSG_ATTRIBUTE 0x000C
#define MSG_CONTINUATION 0x0010
#define MSG_ATTRIBUTE_INFO 0x0015
#define MAX_CHUNKS 256                 /* header chunks followed, against a continuation loop */
#define MAX_CHUNK (64u << 20)          /* bytes: far above any header ddptrain or h5py writes */
#define MAX_DIMS 32                    /* HDF5's H5S_MAX_RANK */

typedef struct {
    const char *path;
    int fd;
    uint64_t file_size;
    uint64_t base;          /* addresses in the file are relative to the superblock's base */
    int sizeof_addr, sizeof_len;
    char *err;
    size_t errlen;
    uint64_t pending[MAX_CHUNKS][2];   /* continuation blocks (address, length) still to walk */
    int npending, nwalked;
} Check;

static int fail(Check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(Check *c, const char *fmt, ...) {
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s: %s (damaged, or not written by ddptrain or h5py)", c->path, what);
    return -1;
}

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static int is_undefined(const unsigned char *p, int n) {
    for (int i = 0; i < n; i++)
        if (p[i] != 0xff) return 0;
    return 1;
}

/* n bytes at file offset `off` into buf; 0, or -1 when the file ends first. */
static int read_at(Check *c, uint64_t off, void *buf, size_t n) {
    if (off > c->file_size || n > c->file_size - off) return -1;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(c->fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* The datatype of an attribute: the message must hold its class's properties. Integers,
 * floats, strings, bitfields, opaque, references, enums (h5py's booleans) and variable-length
 * types (h5py's str) are checked to the byte; compound and array types, which have no place
 * among a shard's or checkpoint's attributes, are refused. Returns the element size, or 0 on
 * failure (err set). */
static uint64_t check_datatype(Check *c, const char *name, const unsigned char *p, size_t n, int depth) {
    if (n < 8) return fail(c, "attribute '%s': a datatype of %zu bytes", name, n), 0;
    const int cls = p[0] & 0x0f, version = p[0] >> 4;
    const uint64_t bits = le(p + 1, 3), size = le(p + 4, 4);
    if (version < 1 || version > 4) return fail(c, "attribute '%s': datatype version %d", name, version), 0;
    if (size == 0 || size > (1u << 20))
        return fail(c, "attribute '%s': an element of %llu bytes", name, (unsigned long long)size), 0;
    if (depth > 2) return fail(c, "attribute '%s': datatypes nested too deep", name), 0;
    size_t props = 0;
    switch (cls) {
    case 0: props = 4; break;             /* fixed-point: bit offset, precision */
    case 1: props = 12; break;            /* floating-point: offsets, sizes, exponent bias */
    case 2: props = 2; break;             /* time: precision */
    case 3: case 7: props = 0; break;     /* string, reference */
    case 4: props = 4; break;             /* bitfield: bit offset, precision */
    case 5: props = bits & 0xff; break;   /* opaque: its tag, padded */
    case 8: {                             /* enum: base type, member names, member values */
        if (n < 16 || (p[8] & 0x0f) != 0) return fail(c, "attribute '%s': an enum not over an integer type", name), 0;
        const uint64_t base = check_datatype(c, name, p + 8, n - 8, depth + 1);
        if (!base) return 0;
        size_t pos = 8 + 12;   /* the datatype and the base integer type */
        const size_t members = (size_t)(bits & 0xffff);
        for (size_t k = 0; k < members; k++) {
            const unsigned char *z = pos < n ? memchr(p + pos, 0, n - pos) : NULL;
            if (!z) return fail(c, "attribute '%s': enum member names overrun the datatype", name), 0;
            const size_t len = (size_t)(z - (p + pos)) + 1;
            pos += version < 3 ? align8(len) : len;
        }
        if (pos > n || members > (n - pos) / base)
            return fail(c, "attribute '%s': enum values overrun the datatype", name), 0;
        return size;
    }
    case 9:                               /* variable-length: its base type */
        if (!check_datatype(c, name, p + 8, n - 8, depth + 1)) return 0;
        return size;
    default:
        return fail(c, "attribute '%s' has a datatype of class %d (compound or array; ddptrain's files hold none)",
                    name, cls), 0;
    }
    if (n < 8 + props) return fail(c, "attribute '%s': datatype of class %d in %zu bytes", name, cls, n), 0;
    return size;
}

/* The dataspace of an attribute; the element count in *nelem. */
static int check_dataspace(Check *c, const char *name, const unsigned char *p, size_t n, uint64_t *nelem) {
    if (n < 4) return fail(c, "attribute '%s': a dataspace of %zu bytes", name, n);
    const int version = p[0], rank = p[1], flags = p[2];
    size_t head;
    int null_space = 0;
    if (version == 1) {
        head = 8;
        if (flags & 0x02) return fail(c, "attribute '%s': a dataspace with a permutation index", name);
    } else if (version == 2) {
        head = 4;
        if (p[3] > 2) return fail(c, "attribute '%s': dataspace type %d", name, p[3]);
        null_space = p[3] == 2;
    } else {
        return fail(c, "attribute '%s': dataspace version %d", name, version);
    }
    if (rank > MAX_DIMS) return fail(c, "attribute '%s': a dataspace of %d dimensions", name, rank);
    const size_t L = (size_t)c->sizeof_len;
    const size_t need = head + (size_t)rank * L * ((flags & 0x01) ? 2 : 1);
    if (n < need) return fail(c, "attribute '%s': %d dimensions in a dataspace of %zu bytes", name, rank, n);
    uint64_t count = null_space ? 0 : 1;
    for (int d = 0; d < rank && count; d++) {
        const uint64_t dim = le(p + head + (size_t)d * L, (int)L);
        if (dim > (UINT64_C(1) << 32) || (dim && count > (UINT64_C(1) << 32) / dim))
            return fail(c, "attribute '%s': more than 2^32 elements", name);
        count *= dim;
    }
    *nelem = count;
    return 0;
}

/* One attribute message of n bytes. */
static int check_attribute(Check *c, const unsigned char *p, size_t n, int msg_flags) {
    if (msg_flags & 0x02) return fail(c, "a shared attribute message in the root group");
    if (n < 8) return fail(c, "an attribute message of %zu bytes", n);
    const int version = p[0], flags = p[1];
    const size_t name_len = (size_t)le(p + 2, 2), dt_len = (size_t)le(p + 4, 2), ds_len = (size_t)le(p + 6, 2);
    size_t pos = 8;
    if (version == 3) pos = 9;   /* + the name's character set */
    else if (version != 1 && version != 2) return fail(c, "attribute message version %d", version);
    if (version > 1 && (flags & 0x03)) return fail(c, "an attribute with a shared datatype or dataspace");
    /* v1 pads the name, datatype and dataspace to 8 bytes; the sums stay far below SIZE_MAX */
    const size_t name_sp = version == 1 ? align8(name_len) : name_len;
    const size_t dt_sp = version == 1 ? align8(dt_len) : dt_len;
    const size_t ds_sp = version == 1 ? align8(ds_len) : ds_len;
    if (name_len == 0 || pos + name_sp > n)
        return fail(c, "an attribute name of %zu bytes in a %zu-byte message", name_len, n);
    const unsigned char *nm = p + pos;
    if (!memchr(nm, 0, name_len)) return fail(c, "an attribute name without its terminating NUL");
    char name[64];
    snprintf(name, sizeof name, "%s", (const char *)nm);
    for (char *s = name; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) *s = '?';   /* printed below */
    pos += name_sp;
    if (pos + dt_sp > n) return fail(c, "attribute '%s': a datatype of %zu bytes overruns its message", name, dt_len);
    const uint64_t elem = check_datatype(c, name, p + pos, dt_len, 0);
    if (!elem) return -1;
    pos += dt_sp;
    if (pos + ds_sp > n) return fail(c, "attribute '%s': a dataspace of %zu bytes overruns its message", name, ds_len);
    uint64_t nelem = 0;
    if (check_dataspace(c, name, p + pos, ds_len, &nelem) != 0) return -1;
    pos += ds_sp;
    if (nelem > (n - pos) / elem)
        return fail(c, "attribute '%s': %llu elements of %llu bytes overrun its %zu-byte message", name,
                    (unsigned long long)nelem, (unsigned long long)elem, n);
    return 0;
}

/* One header message; continuations are queued. */
static int check_message(Check *c, int type, const unsigned char *p, size_t n, int msg_flags) {
    const size_t O = (size_t)c->sizeof_addr, L = (size_t)c->sizeof_len;
    if (type == MSG_ATTRIBUTE) return check_attribute(c, p, n, msg_flags);
    if (type == MSG_CONTINUATION) {
        if (n < O + L) return fail(c, "a continuation message of %zu bytes", n);
        if (c->npending + c->nwalked >= MAX_CHUNKS)
            return fail(c, "more than %d object header chunks in the root group", MAX_CHUNKS);
        c->pending[c->npending][0] = le(p, (int)O);
        c->pending[c->npending][1] = le(p + O, (int)L);
        c->npending++;
        return 0;
    }
    if (type == MSG_ATTRIBUTE_INFO) {
        if (n < 2) return fail(c, "an attribute info message of %zu bytes", n);
        const size_t at = 2 + ((p[1] & 0x01) ? 2 : 0);
        if (n < at + O) return fail(c, "an attribute info message of %zu bytes", n);
        if (!is_undefined(p + at, (int)O))
            return fail(c, "root attributes in dense storage (more than HDF5 keeps in the header by default)");
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
        if (size > n - pos) return fail(c, "a header message of %zu bytes overruns its %zu-byte chunk", size, n);
        if (check_message(c, type, p + pos, size, flags) != 0) return -1;
        pos += size;
    }
    return 0;
}

static unsigned char *read_chunk(Check *c, uint64_t addr, uint64_t len) {
    if (len > MAX_CHUNK) {
        fail(c, "an object header chunk of %llu bytes", (unsigned long long)len);
        return NULL;
    }
    unsigned char *buf = malloc(len ? (size_t)len : 1);
    if (!buf) {
        snprintf(c->err, c->errlen, "%s: out of memory reading an object header", c->path);
        return NULL;
    }
    if (addr > UINT64_MAX - c->base || read_at(c, c->base + addr, buf, (size_t)len) != 0) {
        free(buf);
        fail(c, "an object header chunk at %llu beyond the end of the file", (unsigned long long)addr);
        return NULL;
    }
    return buf;
}

/* The root group's object header at `addr`: its first chunk, then every continuation. */
static int check_header(Check *c, uint64_t addr) {
    unsigned char pre[32];
    if (addr > UINT64_MAX - c->base || read_at(c, c->base + addr, pre, 16) != 0)
        return fail(c, "the root group's object header lies beyond the end of the file");
    int v2 = 0, creation_order = 0;
    uint64_t first, len;
    if (memcmp(pre, "OHDR", 4) == 0) {
        if (pre[4] != 2) return fail(c, "object header version %d", pre[4]);
        const int flags = pre[5];
        size_t at = 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
        const int nb = 1 << (flags & 0x03);
        if (read_at(c, c->base + addr, pre, at + (size_t)nb) != 0)
            return fail(c, "the root group's object header is cut short");
        len = le(pre + at, nb);
        first = addr + at + (uint64_t)nb;
        v2 = 1;
        creation_order = (flags & 0x04) != 0;
    } else if (pre[0] == 1) {
        len = le(pre + 8, 4);
        first = addr + 16;   /* 12 bytes of prefix, padded to 8 */
    } else {
        return fail(c, "the root group's object header has version %d", pre[0]);
    }
    unsigned char *buf = read_chunk(c, first, len);
    if (!buf) return -1;
    int rc = check_messages(c, buf, (size_t)len, v2, creation_order);
    free(buf);
    c->nwalked++;
    while (rc == 0 && c->npending > 0) {
        c->npending--;
        const uint64_t a = c->pending[c->npending][0], n = c->pending[c->npending][1];
        c->nwalked++;
        if (!(buf = read_chunk(c, a, n))) return -1;
        if (v2) {   /* "OCHK", the messages, a checksum */
            if (n < 8 || memcmp(buf, "OCHK", 4) != 0) rc = fail(c, "a header continuation block without its signature");
            else rc = check_messages(c, buf + 4, (size_t)n - 8, 1, creation_order);
        } else {
            rc = check_messages(c, buf, (size_t)n, 0, 0);
        }
        free(buf);
    }
    return rc;
}

int h5check_root_attributes(const char *path, char *err, size_t errlen) {
    Check c = {.path = path, .err = err, .errlen = errlen, .fd = -1};
    c.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (c.fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    int rc = 0;
    if (fstat(c.fd, &st) != 0) {
        snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        rc = -1;
        goto out;
    }
    c.file_size = (uint64_t)st.st_size;
    /* The superblock is at 0 or after a user block of 512, 1024, 2048, ... bytes. */
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char sb[128];
    uint64_t at = 0;
    for (;;) {
        if (read_at(&c, at, sb, 8) != 0) goto out;   /* no signature: HDF5's open says so */
        if (memcmp(sb, sig, 8) == 0) break;
        at = at ? at * 2 : 512;
    }
    const size_t got = c.file_size - at < sizeof sb ? (size_t)(c.file_size - at) : sizeof sb;
    if (got < 24 || read_at(&c, at, sb, got) != 0) { rc = fail(&c, "a superblock cut short"); goto out; }
    const int version = sb[8];
    size_t p;
    if (version <= 1) {
        c.sizeof_addr = sb[13];
        c.sizeof_len = sb[14];
        p = version == 0 ? 24 : 28;
    } else if (version <= 3) {
        c.sizeof_addr = sb[9];
        c.sizeof_len = sb[10];
        p = 12;
    } else {
        rc = fail(&c, "superblock version %d", version);
        goto out;
    }
    if ((c.sizeof_addr != 2 && c.sizeof_addr != 4 && c.sizeof_addr != 8) ||
        (c.sizeof_len != 2 && c.sizeof_len != 4 && c.sizeof_len != 8)) {
        rc = fail(&c, "addresses of %d and lengths of %d bytes", c.sizeof_addr, c.sizeof_len);
        goto out;
    }
    const size_t O = (size_t)c.sizeof_addr, L = (size_t)c.sizeof_len;
    /* v0/1: base, free space, end of file and driver addresses, then the root's symbol table
     * entry (link name offset, a length; object header address); v2/3: base, extension, end
     * of file, root object header address. */
    const size_t root_at = version <= 1 ? p + 4 * O + L : p + 3 * O;
    if (root_at + O > got) { rc = fail(&c, "a superblock cut short"); goto out; }
    c.base = le(sb + p, (int)O);
    if (c.base != at && c.base != 0) { rc = fail(&c, "a base address of %llu", (unsigned long long)c.base); goto out; }
    rc = check_header(&c, le(sb + root_at, (int)O));
out:
    close(c.fd);
    return rc;
}

int h5check_compact_storage(hid_t ds, char *why, size_t whylen) {
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl < 0) return 0;   /* HDF5's own read reports what is wrong */
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    H5Pclose(dcpl);
    if (layout != H5D_COMPACT) return 0;
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds);
    const hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    const size_t width = t >= 0 ? H5Tget_size(t) : 0;
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    const double want = np >= 0 ? (double)np * (double)width : -1.0;
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
