/* SPDX-License-Identifier: BSD-3-Clause */
/* cuda_plugin.h - the CUDA backend as a loadable module: the table of entry points it exports.
 *
 * Why a module: cuDNN, cuBLAS and NCCL are large and present only on GPU nodes. Linked into
 * ddptrain they would stop it from starting on a CPU node of the same cluster; as a module
 * (ddptrain-cuda.so under $(pkglibdir), found by plugin.h) they are loaded only when a rank
 * asks for a GPU, as Open MPI loads its components.
 *
 * The module exports one symbol, CUDA_PLUGIN_SYMBOL, a function that returns its table. The
 * host passes the ABI version it was built with; the module returns its own table whatever the
 * argument, and the host refuses a table whose abi_version is not its own (plugin.c). Change
 * CUDA_PLUGIN_ABI with any change to this struct or to the meaning of an entry, and to the
 * structs the entries share with the host (Backend, Comm, DataLoader): the module
 * and the host are one build. abi_version stays the first member in every version, so that
 * any host can read it.
 *
 * The module's code calls back into the host for everything that is not CUDA (util.h's checks
 * and die(), comm.h, dataloader.h): a host program exports its
 * symbols (-Wl,--export-dynamic, Makefile.am) and the module leaves them undefined, so that
 * both share one g_die_hook, one logger, one MPI. */
#ifndef DDP_CUDA_PLUGIN_H
#define DDP_CUDA_PLUGIN_H

#include <stddef.h>

#include "ops/backend.h"
#include "cuda_amp.h"
#include "data/dataloader.h"
#include "device_data.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_PLUGIN_ABI 3   /* 3: CommOps.sendrecv */
#define CUDA_PLUGIN_SYMBOL "ddptrain_cuda_plugin"
#define CUDA_PLUGIN_FILE "ddptrain-cuda.so"

struct Comm;

typedef struct CudaPlugin {
    int abi_version;          /* CUDA_PLUGIN_ABI of the module's build; first member forever */
    const char *version;      /* PACKAGE_VERSION of the module's build, for messages */

    /* ops_cuda.h and backend.h: the device and the Backend over it */
    int (*device_count)(void);
    const Backend *(*backend_open)(int device, char *err, size_t errlen);
    void (*backend_free)(void);
    void (*set_tf32)(int enable);
    void (*set_conv_benchmark)(int enable);
    void (*set_amp)(int mode);                /* CUDA_AMP_* (cuda_amp.h) */
    void (*set_act_storage)(int mode);        /* CUDA_AMP_* too */

    /* comm_nccl.h; NULL when the module was built without NCCL (one rank per job on GPUs).
     * The world (world.h) carries the id from rank 0 to the others. */
    size_t nccl_id_bytes;
    int (*comm_nccl_make_id)(void *id, char *err, size_t errlen);
    struct Comm *(*comm_nccl_create)(int rank, int world_size, int device, const void *id, double timeout_s,
                                     char *err, size_t errlen);

    /* device_data.h: batches made on the GPU */
    DeviceData *(*device_data_open)(const DataLoader *dl, int max_batch, char *err, size_t errlen);
    void (*device_data_next)(DeviceData *d, DataLoader *dl, float *x_dev, int *labels_dev, int *n_out);
    size_t (*device_data_bytes)(const DeviceData *d);
    void (*device_data_free)(DeviceData *d);
} CudaPlugin;

/* The module's one export. */
typedef const CudaPlugin *(*CudaPluginEntry)(int abi_version);
const CudaPlugin *ddptrain_cuda_plugin(int abi_version);

#ifdef __cplusplus
}
#endif

#endif
