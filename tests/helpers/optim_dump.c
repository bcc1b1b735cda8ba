/* SPDX-License-Identifier: BSD-3-Clause */
/* optim_dump.c - runs N steps of one of ddptrain's optimizers (src/model/optim.h) on random
 * parameters and gradients and writes everything into an HDF5 file that
 * tests/helpers/optim_torch.py replays with torch.optim (and its own transcription of timm's
 * Lamb and Lars):
 *
 *   /names, /roles         the tensors' names, in the flat buffer's order, and their roles
 *                          (model.h's TensorRole: the batch norm's bias is a group's)
 *   /params0/<name>        the parameters before the first step
 *   /grads/<k>/<name>      step k's gradients (as given, before any clipping)
 *   /lr                    float64 [N]: each step's learning rate
 *   /after/<k>/<name>      the parameters after step k
 *   /state/<state>/<name>  the optimizer's state after the last step (its checkpoint names)
 *   /grad_norm             float32 [N], with --clip: each step's norm before clipping
 *   attributes of the root: the optimizer, its settings, the groups' options, the clip
 *
 * The tensors are those of a small network (a convolution, a batch norm, a linear layer...),
 * with ddptrain's roles, so that --no_decay_1d and --bn_bias_lr_mult make PyTorch's groups;
 * one of 36,864 elements goes through the parallel loops and several blocks of the sums, odd
 * sizes through the vector loops' tails; a batch norm's bias starts at 0 (a trust ratio of 1)
 * and one gradient is 0 at the first step (LARS' ratio of 1 there).
 *
 * usage: optim_dump OUT.h5 --optimizer NAME [--steps N] [--seed S] [--lr LR] [--wd WD]
 *                  [--momentum M] [--nesterov 0|1] [--beta1 B] [--beta2 B] [--eps E]
 *                  [--trust_coeff T] [--max_grad_norm G] [--no_decay_1d 0|1]
 *                  [--bn_bias_lr_mult X] [--clip MAX] [--grad_scale F]
 * (--beta2 is RMSprop's alpha; --grad_scale multiplies every gradient, to make LAMB's and
 * --clip's global norms exceed their limits or not.) */
#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/util.h"
#include "model/grad_clip.h"
#include "model/optim.h"

typedef struct {
    const char *name;
    int ndim, shape[4];
    TensorRole role;
} Spec;

static const Spec SPECS[] = {
    {"conv1.weight", 4, {8, 3, 3, 3}, TENSOR_CONV_WEIGHT},
    {"bn1.weight", 1, {8}, TENSOR_BN_WEIGHT},
    {"bn1.bias", 1, {8}, TENSOR_BN_BIAS},
    {"layer1.conv.weight", 4, {64, 64, 3, 3}, TENSOR_CONV_WEIGHT},
    {"layer1.conv.bias", 1, {64}, TENSOR_CONV_BIAS},
    {"head.weight", 2, {7, 5}, TENSOR_LINEAR_WEIGHT},
    {"fc.weight", 2, {10, 16}, TENSOR_LINEAR_WEIGHT},
    {"fc.bias", 1, {10}, TENSOR_LINEAR_BIAS},
};
#define NT ((int)(sizeof SPECS / sizeof SPECS[0]))

static void write_data(hid_t f, const char *name, hid_t type, const void *data, int ndim, const hsize_t *dims) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    CHECK(H5Pset_create_intermediate_group(lcpl, 1) >= 0);
    hid_t sp = H5Screate_simple(ndim, dims, NULL);
    hid_t ds = H5Dcreate2(f, name, type, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(ds >= 0);
    CHECK(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Pclose(lcpl);
}

/* every tensor of the flat buffer x under group/<name> */
static void write_tensors(hid_t f, const char *group, const TensorInfo *t, const float *x) {
    for (int i = 0; i < NT; i++) {
        char name[256];
        hsize_t dims[4];
        for (int d = 0; d < t[i].ndim; d++) dims[d] = (hsize_t)t[i].shape[d];
        snprintf_check(name, sizeof name, "%s/%s", group, t[i].name);
        write_data(f, name, H5T_NATIVE_FLOAT, x + t[i].offset, t[i].ndim, dims);
    }
}

static void attr_str(hid_t f, const char *k, const char *v) {
    hid_t t = H5Tcopy(H5T_C_S1);
    CHECK(H5Tset_size(t, strlen(v) + 1) >= 0);
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(f, k, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0 && H5Awrite(a, t, v) >= 0);
    H5Aclose(a); H5Sclose(sp); H5Tclose(t);
}

static void attr_f64(hid_t f, const char *k, double v) {
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(f, k, H5T_NATIVE_DOUBLE, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0 && H5Awrite(a, H5T_NATIVE_DOUBLE, &v) >= 0);
    H5Aclose(a); H5Sclose(sp);
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: optim_dump OUT.h5 --optimizer NAME [options]");
    const char *out = argv[1], *opt_name = "sgd";
    int steps = 4, nesterov = 0, no_decay_1d = 0;
    double seed = 1, lr = 0.01, wd = 0.01, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = -1, trust = 0.001;
    double max_grad_norm = 0, mult = 1, clip = 0, grad_scale = 1;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--optimizer")) opt_name = v;
        else if (!strcmp(k, "--steps")) steps = atoi(v);
        else if (!strcmp(k, "--seed")) seed = atof(v);
        else if (!strcmp(k, "--lr")) lr = atof(v);
        else if (!strcmp(k, "--wd")) wd = atof(v);
        else if (!strcmp(k, "--momentum")) momentum = atof(v);
        else if (!strcmp(k, "--nesterov")) nesterov = atoi(v);
        else if (!strcmp(k, "--beta1")) beta1 = atof(v);
        else if (!strcmp(k, "--beta2")) beta2 = atof(v);
        else if (!strcmp(k, "--eps")) eps = atof(v);
        else if (!strcmp(k, "--trust_coeff")) trust = atof(v);
        else if (!strcmp(k, "--max_grad_norm")) max_grad_norm = atof(v);
        else if (!strcmp(k, "--no_decay_1d")) no_decay_1d = atoi(v);
        else if (!strcmp(k, "--bn_bias_lr_mult")) mult = atof(v);
        else if (!strcmp(k, "--clip")) clip = atof(v);
        else if (!strcmp(k, "--grad_scale")) grad_scale = atof(v);
        else die("optim_dump: unknown option %s", k);
    }
    const OptimKind *kind = optim_kind(opt_name);
    if (!kind) die("optim_dump: no optimizer %s", opt_name);
    if (eps < 0) eps = kind->eps;

    TensorInfo t[NT];
    memset(t, 0, sizeof t);
    size_t n = 0;
    for (int i = 0; i < NT; i++) {
        snprintf_check(t[i].name, sizeof t[i].name, "%s", SPECS[i].name);
        t[i].ndim = SPECS[i].ndim;
        t[i].numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            t[i].shape[d] = SPECS[i].shape[d];
            t[i].numel *= (size_t)SPECS[i].shape[d];
        }
        t[i].role = SPECS[i].role;
        t[i].offset = n;
        t[i].bn = -1;
        n += t[i].numel;
    }

    Rng r;
    rng_init(&r, (uint64_t)seed, 0, 0);
    float *p = mallocCheck(n * sizeof(float)), *g = mallocCheck(n * sizeof(float));
    for (size_t j = 0; j < n; j++) p[j] = 0.1f * rng_normal(&r);
    for (int i = 0; i < NT; i++)
        if (t[i].role == TENSOR_BN_WEIGHT) for (size_t j = 0; j < t[i].numel; j++) p[t[i].offset + j] = 1.0f + 0.1f * rng_normal(&r);
        else if (t[i].role == TENSOR_BN_BIAS) memset(p + t[i].offset, 0, t[i].numel * sizeof(float));

    const OptimSettings set = {.momentum = (float)momentum, .weight_decay = wd, .nesterov = nesterov, .beta1 = beta1,
                               .beta2 = beta2, .eps = eps, .trust_coeff = trust, .max_grad_norm = max_grad_norm};
    Optimizer o;
    optim_init(&o, kind, &backend_cpu, n, &set);
    OptimGroupRules rules = OPTIM_GROUP_RULES_DEFAULT;
    rules.no_decay_1d = no_decay_1d;
    rules.bn_bias_lr_mult = mult;
    optim_set_tensor_groups(&o, t, NT, &rules);
    GradClip gc;
    grad_clip_init(&gc, &backend_cpu, clip);

    hid_t f = H5Fcreate(out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(f >= 0);
    {
        const char *names[NT];
        for (int i = 0; i < NT; i++) names[i] = t[i].name;
        hid_t st = H5Tcopy(H5T_C_S1);
        CHECK(H5Tset_size(st, H5T_VARIABLE) >= 0);
        const hsize_t d = NT;
        write_data(f, "names", st, names, 1, &d);
        H5Tclose(st);
        int roles[NT];
        for (int i = 0; i < NT; i++) roles[i] = (int)t[i].role;
        write_data(f, "roles", H5T_NATIVE_INT, roles, 1, &d);
    }
    write_tensors(f, "params0", t, p);
    double *lrs = mallocCheck((size_t)steps * sizeof(double));
    float *norms = mallocCheck((size_t)steps * sizeof(float));
    for (int k = 0; k < steps; k++) {
        for (size_t j = 0; j < n; j++) g[j] = (float)grad_scale * 0.05f * rng_normal(&r);
        for (int i = 0; i < NT; i++)   /* gradients of very different sizes per tensor */
            for (size_t j = 0; j < t[i].numel; j++) g[t[i].offset + j] *= (float)(i + 1) / 4.0f;
        if (k == 0) memset(g + t[5].offset, 0, t[5].numel * sizeof(float));   /* head.weight */
        char group[64];
        snprintf_check(group, sizeof group, "grads/%d", k);
        write_tensors(f, group, t, g);
        lrs[k] = lr * (1.0 + 0.25 * k);   /* a schedule's changing rate */
        if (gc.be) norms[k] = grad_clip(&gc, g, n);
        optim_step(&o, p, g, lrs[k]);
        snprintf_check(group, sizeof group, "after/%d", k);
        write_tensors(f, group, t, p);
    }
    for (int s = 0; s < kind->n_state; s++) {
        char group[64];
        snprintf_check(group, sizeof group, "state/%s", kind->state[s]);
        write_tensors(f, group, t, o.state[s]);
    }
    const hsize_t ds = (hsize_t)steps;
    write_data(f, "lr", H5T_NATIVE_DOUBLE, lrs, 1, &ds);
    if (gc.be) write_data(f, "grad_norm", H5T_NATIVE_FLOAT, norms, 1, &ds);
    attr_str(f, "optimizer", kind->name);
    attr_f64(f, "steps_taken", (double)o.steps);
    attr_f64(f, "weight_decay", wd);
    attr_f64(f, "momentum", momentum);
    attr_f64(f, "nesterov", nesterov);
    attr_f64(f, "beta1", beta1);
    attr_f64(f, "beta2", beta2);
    attr_f64(f, "eps", eps);
    attr_f64(f, "trust_coeff", trust);
    attr_f64(f, "max_grad_norm", max_grad_norm);
    attr_f64(f, "no_decay_1d", no_decay_1d);
    attr_f64(f, "bn_bias_lr_mult", mult);
    attr_f64(f, "clip", clip);
    H5Fclose(f);
    grad_clip_free(&gc);
    optim_free(&o);
    free(p); free(g); free(lrs); free(norms);
    return 0;
}
