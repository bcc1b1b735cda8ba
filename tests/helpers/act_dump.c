/* SPDX-License-Identifier: BSD-3-Clause */
/* act_dump.c - runs the CPU backend's activation functions on given values, for
 * tests/helpers/act_torch.py to compare with PyTorch's (tests/test_act_torch.sh).
 *
 * usage: act_dump FUNCTION SLOPE IN OUT
 *   IN holds n float32 inputs x then n float32 output gradients dy (native byte order);
 *   OUT receives y = f(x) then dx = dy * f'(x), as the "act" node's forward and backward
 *   compute them (backend.h's act_forward, act_backward), FUNCTION one of ACT_FNS's names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "base/util.h"

#define ACT_FN_NAME(e, name) name,
static const char *const fn_names[] = { ACT_FNS(ACT_FN_NAME) };
#undef ACT_FN_NAME

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: act_dump FUNCTION SLOPE IN OUT\n");
        return 2;
    }
    int fn = -1;
    for (int i = 0; i < ACT_FN_COUNT; i++)
        if (!strcmp(argv[1], fn_names[i])) fn = i;
    if (fn < 0) die("act_dump: no function '%s'", argv[1]);
    const float slope = strtof(argv[2], NULL);

    FILE *f = fopenCheck(argv[3], "rb");
    CHECK(fseek(f, 0, SEEK_END) == 0);
    const long bytes = ftell(f);
    CHECK(bytes >= 0 && bytes % (2 * sizeof(float)) == 0);
    rewind(f);
    const size_t n = (size_t)bytes / (2 * sizeof(float));
    float *in = mallocCheck(2 * n * sizeof(float) + 1), *out = mallocCheck(2 * n * sizeof(float) + 1);
    CHECK(fread(in, sizeof(float), 2 * n, f) == 2 * n);
    CHECK(fclose(f) == 0);

    const Backend *be = &backend_cpu;
    be->act_forward(fn, slope, in, out, n);
    be->act_backward(fn, slope, in, in + n, out + n, n);

    f = fopenCheck(argv[4], "wb");
    CHECK(fwrite(out, sizeof(float), 2 * n, f) == 2 * n);
    CHECK(fclose(f) == 0);
    free(in);
    free(out);
    return 0;
}
