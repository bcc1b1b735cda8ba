/* SPDX-License-Identifier: BSD-3-Clause */
/* cuda_amp.h - the precision modes of the CUDA backend, CUDA_AMP_*: the argument of
 * cuda_set_amp and cuda_set_act_storage (ops_cuda.h, where they are described) and of the
 * module table's set_amp and set_act_storage (cuda_plugin.h). A header of its own so that the
 * host names the modes without the kernels' header; the values are part of the module's ABI. */
#ifndef DDP_CUDA_AMP_H
#define DDP_CUDA_AMP_H

enum { CUDA_AMP_OFF = 0, CUDA_AMP_BF16 = 1, CUDA_AMP_FP16 = 2 };

#endif
