/* SPDX-License-Identifier: BSD-3-Clause */
/* cuda_plugin_fake.c - a CUDA backend module of another ABI version (no CUDA in it), which
 * tests/test_cuda_plugin.sh points ddptrain at: the host must refuse it with one line. */
#include "cuda/cuda_plugin.h"

static const CudaPlugin k_other = {.abi_version = CUDA_PLUGIN_ABI + 1, .version = "0.0.0-other-abi"};

const CudaPlugin *ddptrain_cuda_plugin(int abi_version) {
    (void)abi_version;
    return &k_other;
}
