/* SPDX-License-Identifier: BSD-3-Clause */
/* device.c - see device.h. */
#include "build_config.h"

#include "device.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_amp.h"
#include "gpu_choice.h"
#include "gpu_refusals.h"
#include "ops/conv_cpu.h"   /* ops_cpu_describe */
#ifdef HAVE_CUDA_BACKEND
#include "plugin.h"   /* and CUDA_AMP_* (cuda/cuda_amp.h) */
#endif
#include "base/util.h"

int device_threads(const Config *c, const Bootstrap *b) {
    if (c->threads > 0) return (int)c->threads;
    const char *e = getenv("OMP_NUM_THREADS");
    if (e && atoi(e) > 0) return atoi(e);
    e = getenv("SLURM_CPUS_PER_TASK");
    if (e && atoi(e) > 0) return atoi(e);
    /* several ranks per node must not oversubscribe the cores: that costs far more than it
     * gains with OpenMP's spinning */
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    int per = cpus / (b->local_size > 0 ? b->local_size : 1);
    return per > 0 ? per : 1;
}

#ifdef HAVE_CUDA_BACKEND
/* The GPU's settings, before the model exists (each convolution takes its precision at init),
 * and what it refuses (gpu_refusals.h: one table, and the backend's NULL operations). */
static void configure_gpu(const CudaPlugin *cu, const Backend *be, const Config *c, int world_size) {
    char msg[512];
    if (gpu_refuses(c, be, msg, sizeof msg)) die_code(2, "%s", msg);
    cu->set_tf32((int)c->tf32);
    cu->set_conv_benchmark((int)c->cudnn_benchmark);
    const int amp = !c->use_amp ? CUDA_AMP_OFF : !strcmp(c->amp_dtype, "fp16") ? CUDA_AMP_FP16 : CUDA_AMP_BF16;
    cu->set_amp(amp);
    cu->set_act_storage(!strcmp(c->amp_activations, "16") ? amp : CUDA_AMP_OFF);
    if (!cu->comm_nccl_create && world_size > 1)
        die("--device %s: %d ranks on GPUs need NCCL, which this build lacks", c->device, world_size);
}
#endif

static void choose_backend(Device *d, const Config *c, const Bootstrap *b);

void device_choose(Device *d, const Config *c, const Bootstrap *b) {
    choose_backend(d, c, b);
    if (!d->be->on_device) {
        const int quiet = g_die_quiet;
        g_die_quiet = quiet || b->rank != 0;   /* every rank refuses alike; rank 0 says why */
        cpu_amp_configure(c);
        g_die_quiet = quiet;
    }
}

static void choose_backend(Device *d, const Config *c, const Bootstrap *b) {
    memset(d, 0, sizeof *d);
    d->be = &backend_cpu;
    d->gpu = -1;
    if (!strcmp(c->device, "cpu")) return;
#ifdef HAVE_CUDA_BACKEND
    char err[1200];
    const CudaPlugin *cu = NULL;
    const PluginStatus loaded = plugin_cuda_load(&cu, err, sizeof err);
    /* a module of another build is a broken installation, not a node without GPUs */
    if (loaded == PLUGIN_INCOMPATIBLE) die("--device %s: rank %d: %s", c->device, b->rank, err);
    if (loaded != PLUGIN_LOADED) {
        if (!strcmp(c->device, "cuda")) die("--device cuda: rank %d: %s", b->rank, err);
        snprintf(d->note, sizeof d->note, "%s", err);
        return;
    }
    if (!cu->comm_nccl_create && !strcmp(c->device, "auto") && b->world_size > 1) {
        snprintf(d->note, sizeof d->note, "%d ranks on GPUs need NCCL, which this build lacks", b->world_size);
        return;
    }
    const int visible = cu->device_count();
    const int dev = gpu_choose(b->local_rank, b->local_size, visible, getenv("CUDA_VISIBLE_DEVICES"), err, sizeof err);
    const Backend *g = dev >= 0 ? cu->backend_open(dev, err, sizeof err) : NULL;
    if (g) {
        d->be = g;
        d->gpu = dev;
        d->cuda = cu;
        configure_gpu(cu, g, c, b->world_size);
        return;
    }
    if (!strcmp(c->device, "cuda")) die("--device cuda: rank %d: %s", b->rank, err);
    /* auto on a rank that sees GPUs but cannot use its own (more ranks than GPUs on the node):
     * falling back to the CPU would leave it with MPI while its peers use NCCL, and their
     * communicators would never meet. */
    if (b->world_size > 1 && visible > 0)
        die("--device auto: rank %d sees %d GPU(s) but cannot use one (%s); start one rank per GPU, or pass "
            "--device cpu", b->rank, visible, err);
    snprintf(d->note, sizeof d->note, "no usable GPU (%s)", err);
#else
    if (!strcmp(c->device, "cuda")) {
        g_die_quiet = b->rank != 0;
        die_code(2, "--device cuda: this ddptrain was built without the CUDA backend");
    }
    snprintf(d->note, sizeof d->note, "built without the CUDA backend");
#endif
}

#ifdef HAVE_CUDA_BACKEND
/* Where the NCCL id may travel as a file (world.h's last channel): a directory every rank can
 * name before any communicator exists: --job_dir, or the Slurm default job directory; NULL
 * otherwise. */
static const char *nccl_rendezvous_dir(const Config *c, char *dir, size_t n) {
    const char *job = getenv("SLURM_JOB_ID"), *submit = getenv("SLURM_SUBMIT_DIR");
    if (c->job_dir[0]) snprintf_check(dir, n, "%s", c->job_dir);
    else if (job && *job) snprintf_check(dir, n, "%s/runs/%s", submit && *submit ? submit : ".", job);
    else return NULL;
    return dir;
}
#endif

int device_connect(const Device *d, World *w, const Config *c, char *err, size_t errlen) {
#ifdef HAVE_CUDA_BACKEND
    if (d->be->on_device && w->boot.world_size > 1) {   /* device_choose checked for NCCL */
        const DeviceCommFactory nccl = {
            .name = "nccl", .id_bytes = d->cuda->nccl_id_bytes,
            .make_id = d->cuda->comm_nccl_make_id, .create = d->cuda->comm_nccl_create,
        };
        char rdv_dir[4096];
        return world_connect(w, &nccl, d->gpu, c->comm_timeout, nccl_rendezvous_dir(c, rdv_dir, sizeof rdv_dir), err,
                             errlen);
    }
#endif
    return world_connect(w, NULL, -1, c->comm_timeout, NULL, err, errlen);
}

void device_describe(const Device *d, const Config *c, int threads, char *out, size_t n) {
    if (d->be->on_device)
        snprintf(out, n, "%s GPU %d: %s; %s", d->be->name, d->gpu, d->be->describe(),
                 !c->use_amp ? "float32 training"
                 : !strcmp(c->amp_dtype, "fp16") ? "mixed precision fp16 with dynamic loss scaling, float32 master weights"
                 : "mixed precision bf16, float32 master weights");
    else {
        char prec[400];
        cpu_amp_describe(c, prec, sizeof prec);
        snprintf(out, n, "cpu (%d threads per rank), %s, %s%s%s", threads, ops_cpu_describe(), prec,
                 d->note[0] ? "; " : "", d->note);
    }
}
