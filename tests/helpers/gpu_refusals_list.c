/* SPDX-License-Identifier: BSD-3-Clause */
/* gpu_refusals_list.c - what a GPU rank refuses (src/device/gpu_refusals.h), for
 * tests/test_gpu_refusals.sh: loads the CUDA module from DDPTRAIN_PLUGIN_DIR as ddptrain does
 * (the fake device module where there is no GPU), opens its backend and prints, one a line:
 *   member NAME                      every operation of backend.h, in order
 *   null NAME                        each the module's Backend leaves NULL
 *   conv_grouped N                   its conv_grouped
 *   refusal FLAG<TAB>OP<TAB>EXAMPLE  each entry of the table (OP "-" for an argument refusal)
 * and exits 1 when an entry's operation is one the backend has (a stale refusal). */
#include <stdio.h>
#include <string.h>

#include "device/gpu_refusals.h"
#include "device/plugin.h"
#include "base/util.h"

int main(void) {
    const CudaPlugin *cu;
    char err[4800];
    if (plugin_cuda_load(&cu, err, sizeof err) != PLUGIN_LOADED) die("%s", err);
    const Backend *be = cu->backend_open(0, err, sizeof err);
    if (!be) die("%s", err);
    for (int i = 0; i < backend_op_count(); i++) printf("member %s\n", backend_op_name(i));
    for (int i = 0; i < backend_op_count(); i++)
        if (!backend_op_present(be, i)) printf("null %s\n", backend_op_name(i));
    printf("conv_grouped %d\n", be->conv_grouped);
    int stale = 0;
    for (int i = 0; i < gpu_refusal_count(); i++) {
        const GpuRefusal *r = gpu_refusal(i);
        printf("refusal %s\t%s\t%s\n", r->flag, r->op ? r->op : "-", r->example);
        for (int k = 0; r->op && k < backend_op_count(); k++)
            if (!strcmp(backend_op_name(k), r->op) && backend_op_present(be, k)) {
                fprintf(stderr, "--%s: refused for want of %s, which the backend has\n", r->flag, r->op);
                stale = 1;
            }
    }
    return stale;
}
