/* SPDX-License-Identifier: BSD-3-Clause */
/* gpu_choice.h - which CUDA device a rank trains on.
 *
 * Two layouts are common, and both must work with the same flags:
 *   - one GPU per task: Slurm's --gpus-per-task=1 (slurm/train-gpu.sbatch), or any launcher that
 *     narrows CUDA_VISIBLE_DEVICES per task. Each rank sees exactly one device, numbered 0 (the
 *     CUDA runtime renumbers what CUDA_VISIBLE_DEVICES lists from 0).
 *   - every GPU of the node visible to every rank: mpirun, srun with --gres=gpu:N per node,
 *     torchrun. The local rank picks: rank L on the node takes device L.
 * More ranks on a node than devices visible to them (but more than one device) is neither, and
 * an error: two ranks on one GPU is something NCCL refuses anyway, later and less clearly. */
#ifndef DDP_GPU_CHOICE_H
#define DDP_GPU_CHOICE_H

#include <stddef.h>

/* The device index for local rank `local_rank` of `local_size` ranks on this node, when the
 * process sees `visible` devices; `cvd` is CUDA_VISIBLE_DEVICES (NULL when unset), quoted in
 * errors. Returns the index, or -1 with one line in err. */
int gpu_choose(int local_rank, int local_size, int visible, const char *cvd, char *err, size_t errlen);

#endif
