/* SPDX-License-Identifier: BSD-3-Clause */
/* zoo_tensors.c - the state_dict of networks as ddptrain lays it out, for tests/test_zoo_params.sh
 * to compare with torchvision's: for each MODEL (a built-in name or a network file)
 *
 *     net MODEL PARAMETERS
 *     NAME SHAPE          (one line per tensor, in state_dict order; SHAPE "64x3x7x7", "-" for a
 *                          batch norm's num_batches_tracked, a 0-d tensor)
 *
 * Only the layout is made (no buffer, no initialisation), so even a RegNetY-128GF costs nothing.
 * PyTorch's state_dict gives a module's parameters, then its buffers; ddptrain keeps three tables
 * (parameters, buffers, batch-norm counters), each in node order (netspec_layout_order's),
 * interleaved here node by node.
 * `zoo_tensors --list` prints the built-in names instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "model/model.h"
#include "model/model_step.h"
#include "model/netfile.h"
#include "model/zoo.h"

static void print_tensor(FILE *f, const TensorInfo *t) {
    fprintf(f, "%s ", t->name);
    if (t->role == TENSOR_BN_COUNTER) { fprintf(f, "-\n"); return; }
    for (int d = 0; d < t->ndim; d++) fprintf(f, "%s%d", d ? "x" : "", t->shape[d]);
    fprintf(f, "\n");
}

/* The tensors of every node in layout order, as model_init_net lays them out (each node's record
 * appends its own to the three layouts), without the check that the backend runs every kind:
 * the kernels of a kind may come after its record. */
static int dump(const char *model, int classes, int size) {
    NetSpec net;
    char err[2048];
    if (netfile_load(model, 64, 2, &net, err, sizeof err) != 0 ||
        netspec_resolve(&net, size, classes, model, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    Layout P = {0}, B = {0}, NB = {0};
    printf("net %s ", model);
    size_t at = 0;
    char *text = NULL;
    FILE *out = open_memstream(&text, &at);
    int *order = callocCheck((size_t)net.n, sizeof(int));
    netspec_layout_order(&net, order);
    for (int k = 0; k < net.n; k++) {
        const NetNode *n = &net.node[order[k]];
        const NodeKindDef *d = node_kind(n->kind);
        if (!d->layout) continue;
        ModelStep st;
        memset(&st, 0, sizeof st);
        const NetNode *src = n->in == NET_INPUT ? NULL : &net.node[n->in];
        st.kind = n->kind;
        st.C_in = src ? src->C : 3;
        st.C = n->C;
        st.k = n->k; st.stride = n->stride; st.pad = n->pad; st.groups = n->groups;
        const int p0 = P.n, b0 = B.n, c0 = NB.n;
        d->layout(&backend_cpu, n, &st, &P, &B, &NB);
        for (int j = p0; j < P.n; j++) print_tensor(out, &P.info[j]);
        for (int j = b0; j < B.n; j++) print_tensor(out, &B.info[j]);
        for (int j = c0; j < NB.n; j++) print_tensor(out, &NB.info[j]);
        if (d->release) d->release(&backend_cpu, &st);
    }
    free(order);
    fclose(out);
    printf("%zu\n%s", P.size, text);
    free(text);
    free(P.info); free(B.info); free(NB.info);
    netspec_free(&net);
    return 0;
}

int main(int argc, char **argv) {
    g_progname = "zoo_tensors";
    int classes = 1000, size = 32, rc = 0;
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < zoo_count(); i++) printf("%s\n", zoo_name(i));
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--classes") && i + 1 < argc) classes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--image_size") && i + 1 < argc) size = atoi(argv[++i]);
        else rc |= dump(argv[i], classes, size);
    }
    if (argc < 2) die_code(2, "usage: zoo_tensors [--classes N] [--image_size S] MODEL... | --list");
    return rc;
}
