/* SPDX-License-Identifier: BSD-3-Clause */
/* h5check_groups.c - the pre-walk's groups (see h5check.h): old-style groups (a symbol table
 * message, a v1 B-tree of symbol table nodes, names in a local heap) and new-style ones (link
 * messages), from the root down to every object's header, each group once. */
#include "h5walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- old-style groups: symbol table message, v1 B-tree, symbol table nodes, local heap ---- */

typedef struct {
    unsigned char *data;
    uint64_t size;
} Heap;

/* 1 if the group whose header is at `addr` was walked before (a hard link back up the tree is
 * legal HDF5), else 0 and it is recorded; -1 when out of memory. */
static int seen_group(Check *c, uint64_t addr) {
    if (2 * (c->ngroups + 1) > c->groups_cap) {
        const size_t cap = c->groups_cap ? 2 * c->groups_cap : 64;
        uint64_t *t = malloc(cap * sizeof *t);
        if (!t) return -1;
        memset(t, 0xff, cap * sizeof *t);   /* all ones: the undefined address, never a group's */
        for (size_t i = 0; i < c->groups_cap; i++) {
            if (c->groups[i] == UINT64_MAX) continue;
            size_t j = (size_t)(c->groups[i] * UINT64_C(0x9e3779b97f4a7c15) >> 32) & (cap - 1);
            while (t[j] != UINT64_MAX) j = (j + 1) & (cap - 1);
            t[j] = c->groups[i];
        }
        free(c->groups);
        c->groups = t;
        c->groups_cap = cap;
    }
    size_t j = (size_t)(addr * UINT64_C(0x9e3779b97f4a7c15) >> 32) & (c->groups_cap - 1);
    for (; c->groups[j] != UINT64_MAX; j = (j + 1) & (c->groups_cap - 1))
        if (c->groups[j] == addr) return 1;
    c->groups[j] = addr;
    c->ngroups++;
    return 0;
}

/* A name at `off` in the local heap: HDF5 1.10 takes heap offsets from B-tree keys and symbol
 * table entries without comparing them with the heap's size, and compares and copies the
 * names there as C strings. */
static int heap_name(Check *c, const Heap *h, uint64_t off, const char *what) {
    if (off >= h->size || !memchr(h->data + off, 0, (size_t)(h->size - off)))
        return h5w_fail(c, "%s at offset %llu of a %llu-byte local heap runs outside it", what, (unsigned long long)off,
                    (unsigned long long)h->size);
    return 0;
}

/* The local heap at `addr` ("HEAP", version 0, data size, free list head, data address): its
 * data segment read into h. HDF5 1.10 walks the free list reading two lengths at each offset
 * below the data size (up to 15 bytes past the segment) and follows it without end if it
 * loops, so the list is walked here first. */
static int read_heap(Check *c, uint64_t addr, Heap *h) {
    const size_t O = (size_t)c->sizeof_addr, L = (size_t)c->sizeof_len;
    unsigned char p[32];
    h->data = NULL;
    if (addr == c->undef) return h5w_fail(c, "a local heap at an undefined address");
    if (h5w_spend(c, 8 + 2 * L + O) != 0) return -1;
    if (h5w_read_rel(c, addr, p, 8 + 2 * L + O) != 0)
        return h5w_fail(c, "a local heap at %llu beyond the end of the file", (unsigned long long)addr);
    if (memcmp(p, "HEAP", 4) != 0 || p[4] != 0)
        return h5w_fail(c, "a local heap at %llu without its signature or of version %d", (unsigned long long)addr, p[4]);
    h->size = le(p + 8, (int)L);
    uint64_t free_at = le(p + 8 + L, (int)L);
    const uint64_t data = le(p + 8 + 2 * L, (int)O);
    if (data == c->undef) return h5w_fail(c, "a local heap whose data segment is at an undefined address");
    if (!within(c, data, h->size))
        return h5w_fail(c, "a local heap's data segment of %llu bytes at %llu overruns the end of the file",
                    (unsigned long long)h->size, (unsigned long long)data);
    if (h5w_spend(c, h->size) != 0) return -1;
    h->data = malloc(h->size ? (size_t)h->size : 1);
    if (!h->data) {
        snprintf(c->err, c->errlen, "%s: out of memory reading a local heap", c->path);
        return -1;
    }
    if (h5w_read_rel(c, data, h->data, (size_t)h->size) != 0)
        return h5w_fail(c, "a local heap's data segment at %llu cannot be read", (unsigned long long)data);
    /* free blocks do not overlap and each holds its two lengths: at most size / 2L of them */
    for (uint64_t k = 0; free_at != HEAP_FREE_NULL; k++) {
        if (k > h->size / (2 * L) || free_at > h->size || 2 * L > h->size - free_at)
            return h5w_fail(c, "a local heap's free list runs outside the heap or loops");
        const uint64_t next = le(h->data + free_at, (int)L), len = le(h->data + free_at + L, (int)L);
        if (next == 0 || len > h->size - free_at) return h5w_fail(c, "a local heap's free list runs outside the heap");
        free_at = next;
    }
    return 0;
}

static int check_object(Check *c, uint64_t addr, const char *parent, const char *name, int depth);

/* One symbol table node ("SNOD", version 1, number of symbols, then 2 * leaf K entries of
 * name offset, object header address, cache type, reserved and 16 bytes of scratch pad) and
 * the objects its entries name. */
static int check_snod(Check *c, uint64_t addr, const Heap *h, const char *path, int depth) {
    const size_t O = (size_t)c->sizeof_addr, L = (size_t)c->sizeof_len, E = L + O + 24;
    const uint64_t size = 8 + 2 * (uint64_t)c->leaf_k * E;
    if (addr == c->undef) return h5w_fail(c, "a symbol table node at an undefined address");
    if (!within(c, addr, size))
        return h5w_fail(c, "a symbol table node of %llu bytes at %llu overruns the end of the file",
                    (unsigned long long)size, (unsigned long long)addr);
    unsigned char hdr[8];
    if (h5w_spend(c, 8) != 0) return -1;
    if (h5w_read_rel(c, addr, hdr, 8) != 0) return h5w_fail(c, "a symbol table node at %llu cannot be read", (unsigned long long)addr);
    const unsigned nsyms = (unsigned)le(hdr + 6, 2);
    if (memcmp(hdr, "SNOD", 4) != 0 || hdr[4] != 1)
        return h5w_fail(c, "a symbol table node at %llu without its signature or of version %d", (unsigned long long)addr, hdr[4]);
    /* HDF5 1.10 decodes them all into an array of 2 * leaf K entries */
    if (nsyms > 2 * c->leaf_k) return h5w_fail(c, "a symbol table node of %u entries (at most %u)", nsyms, 2 * c->leaf_k);
    if (h5w_spend(c, nsyms * E) != 0) return -1;
    unsigned char *e = malloc(nsyms ? nsyms * E : 1);
    if (!e) {
        snprintf(c->err, c->errlen, "%s: out of memory reading a symbol table node", c->path);
        return -1;
    }
    int rc = 0;
    if (h5w_read_rel(c, addr + 8, e, nsyms * E) != 0)
        rc = h5w_fail(c, "a symbol table node at %llu cannot be read", (unsigned long long)addr);
    for (unsigned i = 0; rc == 0 && i < nsyms; i++) {
        const unsigned char *s = e + (size_t)i * E;
        const uint64_t name = le(s, (int)L), obj = le(s + L, (int)O);
        const uint32_t type = (uint32_t)le(s + L + O, 4);
        if ((rc = heap_name(c, h, name, "a link name")) != 0) break;
        const char *child = (const char *)h->data + name;
        if (type == 2) {   /* a soft link: its value is a name in the same heap */
            rc = heap_name(c, h, le(s + L + O + 8, 4), "a soft link's value");
            continue;
        }
        h5w_set_where(c, "object", path, child);
        if (obj == c->undef) { rc = h5w_fail(c, "linked to an object header at an undefined address"); break; }
        if (!within(c, obj, 16)) {
            rc = h5w_fail(c, "linked to an object header at %llu beyond the end of the file", (unsigned long long)obj);
            break;
        }
        rc = check_object(c, obj, path, child, depth + 1);
        h5w_set_where(c, "group", path, NULL);
    }
    free(e);
    return rc;
}

/* One node of a group's v1 B-tree ("TREE", type 0, level, entries used, left and right
 * siblings, then keys (heap offsets of names) and child addresses alternating, n children and
 * n + 1 keys); `level` is the level its parent implies, or -1 for the root. */
static int check_btree(Check *c, uint64_t addr, int level, const Heap *h, const char *path, int depth) {
    const size_t O = (size_t)c->sizeof_addr, L = (size_t)c->sizeof_len;
    const uint64_t two_k = 2 * (uint64_t)c->node_k;
    const uint64_t size = 8 + 2 * O + two_k * O + (two_k + 1) * L;   /* what HDF5 reads */
    if (addr == c->undef) return h5w_fail(c, "a B-tree node at an undefined address");
    if (!within(c, addr, size))
        return h5w_fail(c, "a B-tree node of %llu bytes at %llu overruns the end of the file",
                    (unsigned long long)size, (unsigned long long)addr);
    unsigned char hdr[8 + 16];
    if (h5w_btree_node_head(c, addr, 0, &level, hdr, "a group's B-tree node") != 0) return -1;
    const unsigned n = (unsigned)le(hdr + 6, 2);
    if (n > two_k) return h5w_fail(c, "a B-tree node of %u entries (at most %llu)", n, (unsigned long long)two_k);
    for (int s = 0; s < 2; s++) {
        const uint64_t sib = le(hdr + 8 + s * O, (int)O);
        if (sib != c->undef && !within(c, sib, size))
            return h5w_fail(c, "a B-tree node's sibling at %llu beyond the end of the file", (unsigned long long)sib);
    }
    if (n == 0) return 0;   /* an empty group; its one key is never read */
    const size_t bytes = n * (O + L) + L;
    if (h5w_spend(c, bytes) != 0) return -1;
    unsigned char *b = malloc(bytes);
    if (!b) {
        snprintf(c->err, c->errlen, "%s: out of memory reading a B-tree node", c->path);
        return -1;
    }
    int rc = 0;
    if (h5w_read_rel(c, addr + 8 + 2 * O, b, bytes) != 0)
        rc = h5w_fail(c, "a B-tree node at %llu cannot be read", (unsigned long long)addr);
    for (unsigned i = 0; rc == 0 && i <= n; i++) rc = heap_name(c, h, le(b + i * (O + L), (int)L), "a B-tree key");
    for (unsigned i = 0; rc == 0 && i < n; i++) {
        const uint64_t child = le(b + i * (O + L) + L, (int)O);
        rc = level > 0 ? check_btree(c, child, level - 1, h, path, depth) : check_snod(c, child, h, path, depth);
    }
    free(b);
    return rc;
}

/* The group whose header (at `addr`) holds the symbol table message just read. */
int h5w_check_group(Check *c, uint64_t addr, const char *path, int depth) {
    const uint64_t btree = c->stab_btree, heap = c->stab_heap;
    const int seen = seen_group(c, addr);
    if (seen < 0) {
        snprintf(c->err, c->errlen, "%s: out of memory", c->path);
        return -1;
    }
    if (seen) return 0;
    h5w_set_where(c, "group", path, NULL);
    if (depth > MAX_GROUP_DEPTH) return h5w_fail(c, "groups nested more than %d deep", MAX_GROUP_DEPTH);
    Heap h;
    int rc = read_heap(c, heap, &h);
    if (rc == 0) rc = check_btree(c, btree, -1, &h, path, depth);
    free(h.data);
    return rc;
}

static int check_object(Check *c, uint64_t addr, const char *parent, const char *name, int depth);

/* The hard links of a new-style group (its link messages, just walked into c->links): each
 * object is walked as check_object does, once however many links lead to it. */
int h5w_check_links(Check *c, uint64_t addr, const char *path, int depth) {
    const size_t n = c->nlinks;
    if (n == 0) return 0;
    const int seen = seen_group(c, addr);
    if (seen < 0) return h5w_fail(c, "out of memory");
    if (seen) return 0;
    h5w_set_where(c, "group", path, NULL);
    if (depth > MAX_GROUP_DEPTH) return h5w_fail(c, "groups nested more than %d deep", MAX_GROUP_DEPTH);
    struct HardLink *l = malloc(n * sizeof *l);   /* the walk below reuses c->links */
    if (!l) return h5w_fail(c, "out of memory");
    memcpy(l, c->links, n * sizeof *l);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!within(c, l[i].addr, 16)) {
            h5w_set_where(c, "object", path, l[i].name);
            rc = h5w_fail(c, "a link to an object header at %llu beyond the end of the file", (unsigned long long)l[i].addr);
        } else {
            rc = check_object(c, l[i].addr, path, l[i].name, depth + 1);
        }
    }
    free(l);
    return rc;
}

/* An object below the root, `name` in group `parent`: its header's messages (attributes,
 * layout), and, when it is a group, its members: an old-style group's symbol table, or a
 * new-style group's link messages. */
static int check_object(Check *c, uint64_t addr, const char *parent, const char *name, int depth) {
    h5w_set_where(c, "object", parent, name);
    if (h5w_check_header(c, addr, "its object header") != 0) return -1;
    if (h5w_check_chunk_index(c) != 0) return -1;
    if (!c->has_stab && c->nlinks == 0) return 0;
    char path[256];   /* for messages; a long one is cut short */
    snprintf(path, sizeof path, "%s%s%s", parent, parent[1] ? "/" : "", name);
    for (char *s = path; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) *s = '?';
    return c->has_stab ? h5w_check_group(c, addr, path, depth) : h5w_check_links(c, addr, path, depth);
}

/* The whole file: its superblock and root header (h5check.c), then the groups from the root
 * down. Here rather than in h5check.c so that the walk's files call one way. */
int h5check_file(const char *path, char *err, size_t errlen) {
    Check c = {.path = path, .err = err, .errlen = errlen, .fd = -1, .gcol_addr = UINT64_MAX};
    uint64_t root = 0;
    int rc = h5w_check_superblock(&c, &root);
    if (rc == 0) rc = c.has_stab ? h5w_check_group(&c, root, "/", 0) : h5w_check_links(&c, root, "/", 0);
    h5w_release(&c);
    return rc;
}
