/* SPDX-License-Identifier: BSD-3-Clause */
/* cuda_plugin.c - the module side of cuda_plugin.h: the table of the CUDA backend's entry
 * points, the one symbol ddptrain-cuda.so exports (its link keeps every other symbol local). */
#include "build_config.h"

#include "comm_nccl.h"
#include "cuda_plugin.h"
#include "device_data.h"
#include "ops_cuda.h"

static const CudaPlugin k_plugin = {
    .abi_version = CUDA_PLUGIN_ABI,
    .version = PACKAGE_VERSION,
    .device_count = cuda_device_count,
    .backend_open = backend_cuda_open,
    .backend_free = cuda_backend_free,
    .set_tf32 = cuda_set_tf32,
    .set_conv_benchmark = cuda_set_conv_benchmark,
    .set_amp = cuda_set_amp,
    .set_act_storage = cuda_set_act_storage,
#ifdef HAVE_NCCL
    .nccl_id_bytes = COMM_NCCL_ID_BYTES,
    .comm_nccl_make_id = comm_nccl_make_id,
    .comm_nccl_create = comm_nccl_create,
#endif
    .device_data_open = device_data_open,
    .device_data_next = device_data_next,
    .device_data_bytes = device_data_bytes,
    .device_data_free = device_data_free,
};

/* The table does not depend on the host's version: the host checks abi_version (plugin.c). */
const CudaPlugin *ddptrain_cuda_plugin(int abi_version) {
    (void)abi_version;
    return &k_plugin;
}
