/* SPDX-License-Identifier: BSD-3-Clause */
/* h5walk.h - what the files of the pre-walk of an HDF5 file share (h5check.c: the superblock,
 * object headers and their messages, the global heap and chunk indexes they name;
 * h5check_groups.c: the groups, old-style and new-style, from the root down): the walk's
 * state, its bounded reads of the file and its one-line failure. Internal to those two files;
 * h5check.h is the interface. */
#ifndef DDP_H5WALK_H
#define DDP_H5WALK_H

#include <stddef.h>
#include <stdint.h>

#define MSG_ATTRIBUTE 0x000C
#define MSG_CONTINUATION 0x0010
#define MSG_SYMBOL_TABLE 0x0011
#define MSG_BTREE_K 0x0013
#define MSG_ATTRIBUTE_INFO 0x0015
#define MSG_LINK_INFO 0x0002
#define MSG_LINK 0x0006
#define MSG_LAYOUT 0x0008
#define MSG_FILTERS 0x000B
#define MAX_LINKS 65536                /* hard links of one new-style group followed */
#define MAX_CHUNKS 65536               /* chunks of one header followed, against a continuation loop:
                                        * a group's header grows a chunk or so per link (ResNet-50's
                                        * /model: 288) */
#define MAX_PENDING 256                /* continuation messages of one chunk waiting (1 as HDF5 writes) */
#define MAX_CHUNK (64u << 20)          /* bytes: far above any header ddptrain or h5py writes */
#define MAX_DIMS 32                    /* HDF5's H5S_MAX_RANK */
#define MAX_GROUP_DEPTH 32             /* groups in groups; ddptrain's files have 2 levels */
#define MAX_BTREE_LEVEL 31             /* HDF5's group B-trees rarely pass level 2 */
#define HEAP_FREE_NULL 1               /* the end of a local heap's free list */
#define CACHE_BLOCK 4096
#define CACHE_BLOCKS 8

typedef struct {
    const char *path;
    int fd;
    uint64_t file_size;
    uint64_t base;          /* addresses in the file are relative to the superblock's base */
    uint64_t end;           /* relative: the superblock's end of file, or the file's, the smaller */
    uint64_t undef;         /* the undefined address: all bits of sizeof_addr set */
    uint64_t budget;        /* bytes of metadata still to be read; see spend() */
    int sizeof_addr, sizeof_len;
    unsigned leaf_k, node_k;   /* symbols per symbol table node / 2, children per B-tree node / 2 */
    char *err;
    size_t errlen;
    const char *where_kind, *where_path, *where_name;   /* what a message is about: "object",
                            * "/model", "fc.weight" (or NULL); no kind for the root's header */
    int root, extension;    /* walking the root group's header / the superblock extension's */
    int has_stab;           /* what the header just walked holds */
    uint64_t stab_btree, stab_heap;
    uint64_t pending[MAX_PENDING][2];  /* continuation blocks (address, length) still to walk */
    int npending, nwalked;
    uint64_t *groups;       /* the header addresses of the groups walked: an open-addressing set */
    size_t ngroups, groups_cap;
    unsigned char *cache;   /* CACHE_BLOCKS blocks of the file; see read_at() */
    uint64_t cache_at[CACHE_BLOCKS];
    size_t cache_len[CACHE_BLOCKS];   /* 0: empty */
    int cache_next;
    struct HardLink { uint64_t addr; char name[64]; } *links;   /* the hard links of the header just
                            * walked (a new-style group's link messages), printable names */
    size_t nlinks, links_cap;
    int chunked;            /* the header just walked: a chunked layout indexed by a v1 B-tree, */
    uint64_t chunk_btree;   /* its address, */
    unsigned chunk_ndims;   /* the chunk's dimensions, the element size last, */
    uint32_t chunk_dims[MAX_DIMS + 1];
    uint64_t chunk_bytes;   /* their product, */
    int filters;            /* and its filters: 0 none, 1 Fletcher-32 alone, 2 others */
    uint64_t gcol_addr;     /* the global heap collection walked last (undef: none), and */
    uint64_t *gcol_size;    /* the size of its object of each index (GCOL_NONE: no such object) */
    size_t gcol_n;
} Check;

#define GCOL_NONE UINT64_MAX

static inline uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static inline int is_undefined(const unsigned char *p, int n) {
    for (int i = 0; i < n; i++)
        if (p[i] != 0xff) return 0;
    return 1;
}

/* Whether `size` bytes at relative address `addr` lie inside the file. HDF5 1.10 compares
 * addr + size with the end of file after the sum has wrapped, so the undefined address
 * (all ones) with any size passes its check, and the read then copies from nowhere. */
static inline int within(const Check *c, uint64_t addr, uint64_t size) {
    return addr != c->undef && addr <= c->end && size <= c->end - addr;
}

/* "PATH: [where: ]what (damaged, or not written by ddptrain or h5py)" into c->err; returns -1. */
int h5w_fail(Check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n bytes at relative address addr, inside the file; 0, or -1. */
int h5w_read_rel(Check *c, uint64_t addr, void *buf, size_t n);
/* n bytes more of the walk's budget; 0, or -1 (err set) when it is spent. */
int h5w_spend(Check *c, uint64_t n);
/* What the next failure is about: kind ("object", "group"), its parent path and name. */
void h5w_set_where(Check *c, const char *kind, const char *path, const char *name);
/* The object header at addr, every chunk and message; a symbol table lands in c->has_stab,
 * hard links in c->links, a chunked layout in c->chunked. */
int h5w_check_header(Check *c, uint64_t addr, const char *what);
/* The header of the version 1 B-tree node at addr (see h5check.c). */
int h5w_btree_node_head(Check *c, uint64_t addr, int type, int *level, unsigned char *hdr, const char *what);
/* The chunk index of the header just walked, when it holds a chunked layout indexed by a
 * v1 B-tree (h5check.c): every chunk inside the file, of a chunk's size, in order. */
int h5w_check_chunk_index(Check *c);
/* The old-style group at addr whose symbol table message was just read (h5check_groups.c). */
/* The file opened and its superblock, extension and root group's header checked (h5check.c):
 * 0 with the root's header address in *root, or -1 with c->err; h5w_release frees what it took
 * either way. c holds path, err, errlen, fd -1 and gcol_addr UINT64_MAX on entry. */
int h5w_check_superblock(Check *c, uint64_t *root);
void h5w_release(Check *c);
int h5w_check_group(Check *c, uint64_t addr, const char *path, int depth);
/* The new-style group at addr whose hard links were just read into c->links. */
int h5w_check_links(Check *c, uint64_t addr, const char *path, int depth);

#endif
