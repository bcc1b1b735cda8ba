/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_netfile.c - network files (--model FILE): the input is the file's text. What
 * netfile_parse accepts must resolve or be refused with a message, and, written back with
 * netfile_write, must read back as the same table. */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/netfile.h"
#include "model/netspec.h"

/* The same nodes: kind, name, inputs, and every field their kind takes (node_kind.h). */
static int same(const NetSpec *a, const NetSpec *b) {
    if (a->n != b->n || a->init != b->init || strcmp(a->name, b->name) != 0) return 0;
    for (int i = 0; i < a->n; i++) {
        const NetNode *x = &a->node[i], *y = &b->node[i];
        if (x->kind != y->kind || strcmp(x->name, y->name) != 0 || x->in != y->in) return 0;
        int xi[NET_MAX_INPUTS], yi[NET_MAX_INPUTS];
        const int nx = node_inputs(x, xi);
        if (node_inputs(y, yi) != nx || memcmp(xi, yi, (size_t)nx * sizeof *xi) != 0) return 0;
        const NodeKindDef *d = node_kind(x->kind);
        for (int f = 0; f < d->n_fields; f++) {
            const NetField k = d->fields[f].field;
            /* a real is written in the fewest digits that read back the same float */
            if (net_field_type(k) == NET_FIELD_REAL ? net_field_real_const(x, k) != net_field_real_const(y, k)
                                                     : *net_field_member_const(x, k) != *net_field_member_const(y, k))
                return 0;
            if (net_field_type(k) == NET_FIELD_PAIR && *net_field_member2_const(x, k) != *net_field_member2_const(y, k))
                return 0;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    char err[700];
    NetSpec s;
    if (netfile_parse((const char *)data, size, "fuzz.json", &s, err, sizeof err) != 0) {
        if (!err[0] || strchr(err, '\n')) abort();   /* one line, always */
        return 0;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    netfile_write(f, &s);
    fclose(f);
    NetSpec back;
    if (netfile_parse(text, len, "written", &back, err, sizeof err) != 0 || !same(&s, &back)) abort();
    netspec_free(&back);
    free(text);
    NetSpec r;
    netspec_copy(&r, &s);
    err[0] = '\0';
    if (netspec_resolve(&r, 32, 10, "fuzz.json", err, sizeof err) != 0 && (!err[0] || strchr(err, '\n'))) abort();
    netspec_free(&r);
    netspec_free(&s);
    return 0;
}
