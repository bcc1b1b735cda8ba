/* SPDX-License-Identifier: BSD-3-Clause */
/* dump_model.c - runs MiniResNet forward, backward and 3 SGD steps on one random batch and
 * writes everything into an HDF5 file that tests/helpers/torch_compare.py replays in PyTorch:
 * parameters and buffers under state_dict names, the batch, logits, loss, every gradient,
 * running statistics after the forward, and parameters after 3 SGD steps.
 * With --accum K every step accumulates K micro-batches of N images as ddptrain does (each
 * forward with loss_scale 1/K, backward adding into the zeroed gradients, then one SGD step):
 * the batch is then K*N images, the logits those of the K forwards, the loss their mean, the
 * gradients and running statistics those after the first step's K micro-steps.
 *
 * --model NAME|FILE runs another network (zoo.h, netfile.h) instead of MiniResNet; its name
 * goes into the file's "arch" string, which tells torch_compare.py the torchvision model.
 *
 * usage: dump_model OUT.h5 [--model M] [--width W] [--blocks B] [--batch N] [--seed S] [--accum K]
 *                         [--perturb NAME]   (scale one gradient entry by 1.01: the comparison
 *                                             must then fail, proving the test can fail)
 *                         [--device cpu|cuda] (where the model runs: the same initial state,
 *                                             made on the CPU, then float32 with TF32 off)
 *                         [--wd W] [--nesterov 0|1] [--label_smoothing E] [--no_decay_1d 0|1]
 *                         [--bn_bias_lr_mult M]
 *                                            (the SGD steps' weight decay, default 1e-4,
 *                                             Nesterov momentum, the training loss's label
 *                                             smoothing, the parameter groups of ddptrain's
 *                                             options of those names; written under /options,
 *                                             which torch_compare.py reads to set up PyTorch's
 *                                             side)
 *                         [--blurpool 0|1]  (--use_blurpool: the network with its blur nodes,
 *                                             named NAME-blurpool, which tells torch_compare.py)
 *                         [--aux_logits 0|1] [--transform_input 0|1]
 *                                            (ddptrain's options of those names: the auxiliary
 *                                             classifiers left out, a transform_input node
 *                                             added; written under /options for
 *                                             torch_compare.py's builder of GoogLeNet and
 *                                             Inception v3)
 *                         [--steps S] [--ema_decay D] [--ema_every K]
 *                                            (S SGD steps instead of 3, params_after3 then holding
 *                                             the parameters after S; the moving average of
 *                                             --ema_decay updated after every K-th step, written
 *                                             under ema_params, ema_buffers and ema_nbt)
 *                         [--tta flip|flip_shift] (the evaluation's averaged logits of the whole
 *                                             batch under that test-time augmentation, with the
 *                                             initial weights, before any step: tta_logits,
 *                                             tta_correct, tta_loss_sum; CPU only)
 *                         [--amp 0|1]       (--use_amp on the CPU: bfloat16 convolutions and
 *                                             linear layers (conv_cpu.h, linear_cpu.h); written
 *                                             as options/amp, for which torch_compare.py runs
 *                                             PyTorch's side under torch.autocast("cpu", bf16);
 *                                             exit 77 where oneDNN has no bf16 kernels)
 *                         [--bf16_storage 0|1] (with --amp 1: 0 keeps every output float32, the
 *                                             CPU backend without conv2d_bf16_io; default 1:
 *                                             16-bit storage where model.c chooses it. Prints
 *                                             how many outputs are stored so.) */
#include <hdf5.h>
#include <math.h>
#include <string.h>

#include "build_config.h"
#include "model/ema.h"
#include "ops/conv_cpu.h"
#include "ops/linear_cpu.h"
#include "model/model.h"
#include "ckpt/init_from.h"
#include "model/netfile.h"
#ifdef HAVE_CUDA_BACKEND
#include "device/plugin.h"
#endif
#include "model/optim.h"
#include "run/tta.h"
#include "base/util.h"
#include "model_testutil.h"

/* A dataset of the given memory type, its groups made as needed. */
static void write_data(hid_t file, const char *name, hid_t type, const void *data, int ndim, const hsize_t *dims) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t space = H5Screate_simple(ndim, dims, NULL);
    hid_t ds = H5Dcreate2(file, name, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(ds >= 0);
    CHECK(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(ds); H5Sclose(space); H5Pclose(lcpl);
}

static void write_f32(hid_t file, const char *name, const float *data, int ndim, const hsize_t *dims) {
    write_data(file, name, H5T_NATIVE_FLOAT, data, ndim, dims);
}

/* The ReLU masks (y > 0) of a training forward, in the order PyTorch's forward calls F.relu:
 * the first, then per block the ReLU after bn1 and the one after the residual add. At a
 * pre-activation within round-off of zero the two implementations may legitimately disagree
 * on the mask, and one flipped element changes a BN-bias gradient by a few percent; the
 * comparison replays these masks so that it measures the arithmetic, not those coin tosses. */
/* A host copy of n floats of the model's backend memory (caller frees). */
static float *host_copy(const Model *m, const float *p, size_t n) {
    float *h = mallocCheck(n * sizeof(float));
    m->be->download(h, p, n * sizeof(float));
    return h;
}

/* The attribute "node" of dataset `name`: the node whose output it holds, for a replay that
 * goes by name where the table's order is not the order of PyTorch's calls. */
static void write_node_name(hid_t file, const char *name, const char *node) {
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    CHECK(ds >= 0);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(node) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(ds, "node", t, space, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0);
    CHECK(H5Awrite(a, t, node) >= 0);
    H5Aclose(a); H5Sclose(space); H5Tclose(t); H5Dclose(ds);
}

/* Masks of micro-step `micro` go after those of the earlier micro-steps of the same step.
 * Each names its ReLU node (the attribute "node"). */
static void write_masks(hid_t file, const Model *m, int step, int micro) {
    const int n = model_relu_count(m);
    for (int k = 0; k < n; k++) {
        int H, W, C;
        const float *out = model_relu_output(m, k, &H, &W, &C);
        size_t cnt = (size_t)m->last_N * H * W * C;
        unsigned char *mask = mallocCheck(cnt);
        float *y = host_copy(m, out, cnt);
        for (size_t j = 0; j < cnt; j++) mask[j] = y[j] > 0.0f;
        free(y);
        hsize_t dims[4] = {(hsize_t)m->last_N, (hsize_t)H, (hsize_t)W, (hsize_t)C};
        char name[64];
        snprintf_check(name, sizeof name, "masks/step%d/%03d", step, micro * n + k);
        write_data(file, name, H5T_NATIVE_UCHAR, mask, 4, dims);
        write_node_name(file, name, model_relu_name(m, k));
        free(mask);
    }
}

/* The max pools' choices (the input pixel each output took), as the masks: two inputs of a
 * window within round-off of each other are the same coin toss for a max as zero is for a ReLU,
 * and one output routed to the other pixel moves one channel of the stem's gradient. */
static void write_pool_args(hid_t file, const Model *m, int step, int micro) {
    const int n = model_maxpool_count(m);
    for (int k = 0; k < n; k++) {
        int H, W, C;
        const int32_t *arg = model_maxpool_arg(m, k, &H, &W, &C);
        size_t cnt = (size_t)m->last_N * H * W * C;
        int32_t *h = mallocCheck(cnt * sizeof(int32_t));
        m->be->download(h, arg, cnt * sizeof(int32_t));
        hsize_t dims[4] = {(hsize_t)m->last_N, (hsize_t)H, (hsize_t)W, (hsize_t)C};
        char name[64];
        snprintf_check(name, sizeof name, "pools/step%d/%03d", step, micro * n + k);
        write_data(file, name, H5T_NATIVE_INT32, h, 4, dims);
        free(h);
    }
}

/* The dropout and stochastic-depth masks of the last training forward, in order, those that
 * dropped anything: a dropout's keep flags as 0/1 [N, H, W, C], a stochastic depth's factor per
 * image [N]; PyTorch's side replays them in the order its modules run. */
static void write_noise(hid_t file, const Model *m, int step, int micro) {
    const int n = model_noise_count(m);
    int k_out = 0;
    for (int k = 0; k < n; k++) {
        NodeKind kind;
        int H, W, C;
        const void *mask = model_noise_mask(m, k, &kind, &H, &W, &C);
        if (!mask) continue;
        const size_t N = (size_t)m->last_N, cnt = kind == NODE_DROPOUT ? N * H * W * C : N;
        float *h = mallocCheck(cnt * sizeof(float));
        if (kind == NODE_DROPOUT) {
            uint8_t *keep = mallocCheck(cnt);
            m->be->download(keep, mask, cnt);
            for (size_t i = 0; i < cnt; i++) h[i] = keep[i];
            free(keep);
        } else {
            m->be->download(h, mask, cnt * sizeof(float));
        }
        hsize_t dims[4] = {(hsize_t)N, (hsize_t)H, (hsize_t)W, (hsize_t)C};
        char name[64];
        snprintf_check(name, sizeof name, "noise/step%d/%03d", step, micro * n + k_out++);
        write_f32(file, name, h, kind == NODE_DROPOUT ? 4 : 1, dims);
        free(h);
    }
}

static void write_tensors(hid_t file, const char *group, const TensorInfo *info, int n, const float *base) {
    /* base is host memory */
    for (int i = 0; i < n; i++) {
        hsize_t dims[4];
        for (int d = 0; d < info[i].ndim; d++) dims[d] = (hsize_t)info[i].shape[d];
        char name[160];
        snprintf_check(name, sizeof name, "%s/%s", group, info[i].name);
        write_f32(file, name, base + info[i].offset, info[i].ndim, dims);
    }
}

/* One optimizer step's gradients made the way src/train.c makes them: zeroed once, then per
 * micro-batch a training forward whose loss gradient is scaled by 1/accum and a backward that
 * adds into them. logits (host, or NULL) gets the accum forwards' logits; returns the mean
 * loss of the micro-batches, as the trainer logs it. */
static uint64_t g_seed;   /* --seed: the noise of the training forwards, as train.c draws it */

static float step_gradients(hid_t f, Model *run, int step, const float *xb, const int *yb, int N, int accum,
                            float *logits) {
    const size_t img = (size_t)run->image_size * run->image_size * 3, nl = (size_t)N * run->num_classes;
    model_zero_grad(run);
    for (int j = 0; j < accum; j++) {
        model_set_noise(run, g_seed, (uint64_t)step, 0, j);
        model_forward_train(run, xb + (size_t)j * N * img, yb + (size_t)j * N, N, 1.0f / (float)accum);
        write_masks(f, run, step, j);
        write_noise(f, run, step, j);
        write_pool_args(f, run, step, j);
        model_backward(run);
        if (logits) run->be->download(logits + (size_t)j * nl, run->logits, nl * sizeof(float));
    }
    return (float)(model_take_loss_sum(run) / accum);
}

int main(int argc, char **argv) {
    g_progname = "dump_model";
    if (argc < 2) die_code(2, "usage: dump_model OUT.h5 [--width W] [--blocks B] [--batch N] [--seed S] [--accum K] [--perturb NAME]");
    const char *out = argv[1];
    int width = 8, blocks = 1, N = 8, seed = 1, S = 16, K = 10, accum = 1;
    const char *perturb = NULL, *device = "cpu", *model = "miniresnet", *init_from = NULL;
    float wd = 1e-4f, smoothing = 0.0f, bn_bias_lr_mult = 1.0f;
    int nesterov = 0, no_decay_1d = 0, steps = 3, ema_every = 1, blurpool = 0, aux_logits = 1, transform_input = 0;
    double ema_decay = 0.0;
    int tta = TTA_NONE, amp = 0, bf16_storage = 1;
    float lr = 0.05f;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--width")) width = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--lr")) lr = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--classes")) K = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--init_from")) init_from = argv[i + 1];
        else if (!strcmp(argv[i], "--blocks")) blocks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) N = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--image_size")) S = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--accum")) accum = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--perturb")) perturb = argv[i + 1];
        else if (!strcmp(argv[i], "--device")) device = argv[i + 1];
        else if (!strcmp(argv[i], "--wd")) wd = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--nesterov")) nesterov = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--blurpool")) blurpool = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--aux_logits")) aux_logits = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--transform_input")) transform_input = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--label_smoothing")) smoothing = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--no_decay_1d")) no_decay_1d = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bn_bias_lr_mult")) bn_bias_lr_mult = (float)atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ema_decay")) ema_decay = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--ema_every")) ema_every = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--amp")) amp = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bf16_storage")) bf16_storage = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tta")) {
            tta = tta_parse(argv[i + 1]);
            if (tta <= TTA_NONE) die_code(2, "--tta %s: flip or flip_shift", argv[i + 1]);
        }
        else die_code(2, "unknown option %s", argv[i]);
    }
    /* mask names have 3 digits, and a forward has up to 129 masks */
    if (accum < 1 || accum > 7) die_code(2, "--accum %d: 1 to 7", accum);
    if (steps < 1 || steps > 100) die_code(2, "--steps %d: 1 to 100", steps);
    if (ema_decay < 0.0 || ema_decay >= 1.0 || ema_every < 1) die_code(2, "--ema_decay in [0, 1), --ema_every >= 1");
    if (amp) {   /* before the model: each convolution takes its precision at init */
        char impl[64];
        if (strcmp(device, "cpu") != 0) die_code(2, "--amp: CPU only here");
        if (conv2d_bf16_path(impl, sizeof impl) == CPU_BF16_NONE)
            die_code(77, "--amp: oneDNN has no bf16 kernels on this CPU (%s)", impl);
        conv2d_use_bf16(1);
        linear_use_bf16(1);
    }
    Model m;
    NetSpec net;
    char nerr[1200];
    if (netfile_load(model, width, blocks, &net, nerr, sizeof nerr) != 0) die_code(2, "%s", nerr);
    if (!aux_logits && netspec_drop_aux(&net) == 0) die_code(2, "--aux_logits 0: %s has no auxiliary classifier", model);
    if (transform_input && netspec_add_transform_input(&net) == 0)
        die_code(2, "--transform_input 1: %s has a transform_input node already", model);
    if (blurpool && netspec_blurpool(&net) == 0) die_code(2, "--blurpool: %s has no strided convolution to blur", model);
    Backend cpu = backend_cpu;   /* the model keeps a pointer to it: lives until the end */
    if (!bf16_storage) cpu.conv2d_bf16_io = NULL;
    if (model_init_net(&m, &cpu, &net, model, K, S, N, nerr, sizeof nerr) != 0) die_code(2, "%s", nerr);
    if (amp) {
        size_t saved;
        const int k = model_bf16_outputs(&m, &saved);
        printf("bf16-stored outputs: %d (%zu bytes less); float32 convolutions: %d\n", k, saved,
               conv2d_bf16_fallbacks());
    }
    m.width = width;
    m.blocks = blocks;
    model_init_weights(&m, (uint64_t)seed);
    g_seed = (uint64_t)seed;
    if (init_from) {   /* the weights of the file as they are (--init_from), BN included */
        char note[1400];
        if (init_from_file(&m, init_from, note, sizeof note, nerr, sizeof nerr) != 0) die_code(2, "%s", nerr);
        printf("dump_model: init_from %s: %s\n", init_from, note);
    } else {
        /* Non-trivial BN affine parameters and running statistics, so their paths are exercised. */
        model_randomize_bn(&m, (uint64_t)seed, 77);
    }
    /* The model that runs: this one, or a copy of its state on the GPU. */
    Model *run = &m;
#ifdef HAVE_CUDA_BACKEND
    Model gm;
#endif
    if (!strcmp(device, "cuda")) {
#ifdef HAVE_CUDA_BACKEND
        char err[1200];
        const CudaPlugin *cu = NULL;
        const PluginStatus loaded = plugin_cuda_load(&cu, err, sizeof err);
        if (loaded != PLUGIN_LOADED) die_code(loaded == PLUGIN_UNAVAILABLE ? 77 : 1, "--device cuda: %s", err);
        cu->set_tf32(0);
        const Backend *be = cu->backend_open(0, err, sizeof err);
        if (!be) die_code(77, "--device cuda: %s", err);
        if (model_init_net(&gm, be, &net, model, K, S, N, err, sizeof err) != 0) die_code(2, "%s", err);
        be->upload(gm.params, m.params, m.num_params * sizeof(float));
        be->upload(gm.buffers, m.buffers, m.num_buffers * sizeof(float));
        model_params_changed(&gm);
        run = &gm;
#else
        die_code(77, "--device cuda: built without the CUDA backend");
#endif
    } else if (strcmp(device, "cpu") != 0) {
        die_code(2, "--device %s: cpu or cuda", device);
    }
    const Backend *be = run->be;
    run->label_smoothing = smoothing;
    Rng r;
    rng_init(&r, (uint64_t)seed, 77, 1);

    /* The K micro-batches one after the other; K = 1 draws what dump_model always drew. */
    const int NT = N * accum;
    const size_t nx = (size_t)NT * S * S * 3;
    float *x = mallocCheck(nx * sizeof(float));
    int *y = mallocCheck((size_t)NT * sizeof(int));
    float *yf = mallocCheck((size_t)NT * sizeof(float));
    for (size_t i = 0; i < nx; i++) x[i] = rng_normal(&r);
    for (int i = 0; i < NT; i++) { y[i] = (int)rng_below(&r, (uint32_t)K); yf[i] = (float)y[i]; }
    float *xb = x;
    int *yb = y;
    if (be->on_device) {
        xb = be->alloc(nx * sizeof(float));
        yb = be->alloc((size_t)NT * sizeof(int));
        be->upload(xb, x, nx * sizeof(float));
        be->upload(yb, y, (size_t)NT * sizeof(int));
    }

    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) die("%s: cannot create", out);
    write_tensors(f, "params", m.param_info, m.n_param_info, m.params);
    write_tensors(f, "buffers", m.buffer_info, m.n_buffer_info, m.buffers);
    hsize_t xd[4] = {(hsize_t)NT, (hsize_t)S, (hsize_t)S, 3};
    write_f32(f, "input_nhwc", x, 4, xd);
    hsize_t yd[1] = {(hsize_t)NT};
    write_f32(f, "labels", yf, 1, yd);

    if (tta != TTA_NONE) {
        if (be->on_device) die_code(77, "--tta: CPU only");
        float *scratch = mallocCheck((size_t)N * S * S * 3 * sizeof(float));
        float *tl = mallocCheck((size_t)NT * K * sizeof(float));
        long correct;
        double loss_sum;
        tta_logits(run, tta, x, y, NT, scratch, tl);
        hsize_t td[2] = {(hsize_t)NT, (hsize_t)K};
        write_f32(f, "tta_logits", tl, 2, td);
        tta_evaluate(run, tta, x, y, NT, scratch, tl, &correct, &loss_sum, NULL);
        const float fc = (float)correct, fl = (float)loss_sum;
        hsize_t o1[1] = {1};
        write_f32(f, "tta_correct", &fc, 1, o1);
        write_f32(f, "tta_loss_sum", &fl, 1, o1);
        free(scratch);
        free(tl);
    }
    float *logits = mallocCheck((size_t)NT * K * sizeof(float));
    const float loss = step_gradients(f, run, 0, xb, yb, N, accum, logits);
    hsize_t ld[2] = {(hsize_t)NT, (hsize_t)K};
    write_f32(f, "logits", logits, 2, ld);
    free(logits);
    float *h;
    hsize_t one[1] = {1};
    write_f32(f, "loss", &loss, 1, one);
    float *grads = host_copy(run, run->grads, run->num_params);
    if (perturb) {
        long off = model_find_param(run, perturb);
        if (off < 0) die("--perturb %s: no such parameter", perturb);
        grads[off] *= 1.01f;
        if (grads[off] == 0.0f) grads[off] = 1e-3f;
        be->upload(run->grads, grads, run->num_params * sizeof(float));
    }
    write_tensors(f, "grads", run->param_info, run->n_param_info, grads);
    free(grads);
    h = host_copy(run, run->buffers, run->num_buffers);
    write_tensors(f, "buffers_after", run->buffer_info, run->n_buffer_info, h);
    free(h);

    /* 3 SGD steps on the same batch, or micro-batches (the first one uses the gradients above). */
    Optimizer opt;
    sgd_init_on(&opt, be, run->num_params, 0.9f, wd);
    opt.nesterov = nesterov;
    OptimGroupRules rules = OPTIM_GROUP_RULES_DEFAULT;
    rules.no_decay_1d = no_decay_1d;
    rules.bn_bias_lr_mult = bn_bias_lr_mult;
    optim_set_model_groups(&opt, run, &rules);
    Ema ema;
    if (ema_decay > 0.0) ema_init(&ema, run, ema_decay);
    for (int s = 0; s < steps; s++) {
        if (s > 0) {
            step_gradients(f, run, s, xb, yb, N, accum, NULL);
        }
        optim_step(&opt, run->params, run->grads, lr);
        model_params_changed(run);
        if (ema_decay > 0.0 && (s + 1) % ema_every == 0) ema_update(&ema, run);
    }
    if (ema_decay > 0.0) {
        float *ep = mallocCheck(run->num_params * sizeof(float)), *eb = mallocCheck(run->num_buffers * sizeof(float));
        int64_t *en = mallocCheck((size_t)model_bn_count(run) * sizeof(int64_t));
        ema_download(&ema, ep, eb, en);
        write_tensors(f, "ema_params", run->param_info, run->n_param_info, ep);
        write_tensors(f, "ema_buffers", run->buffer_info, run->n_buffer_info, eb);
        /* num_batches_tracked per batch-norm layer, in state_dict order, as floats */
        float *enf = mallocCheck((size_t)model_bn_count(run) * sizeof(float));
        for (int k = 0; k < model_bn_count(run); k++) enf[k] = (float)en[k];
        hsize_t nd[1] = {(hsize_t)model_bn_count(run)};
        write_f32(f, "ema_nbt", enf, 1, nd);
        const float na = (float)ema.n_averaged;
        write_f32(f, "ema_n_averaged", &na, 1, one);
        free(ep); free(eb); free(en); free(enf);
        ema_free(&ema);
    }
    h = host_copy(run, run->params, run->num_params);
    write_tensors(f, "params_after3", run->param_info, run->n_param_info, h);
    free(h);
    float meta[5] = {(float)width, (float)blocks, lr, 0.9f, (float)accum};
    hsize_t md[1] = {5};
    write_f32(f, "meta", meta, 1, md);
    write_f32(f, "options/weight_decay", &wd, 1, one);
    const float nest = (float)nesterov;
    write_f32(f, "options/nesterov", &nest, 1, one);
    write_f32(f, "options/label_smoothing", &smoothing, 1, one);
    const float nd1 = (float)no_decay_1d;
    write_f32(f, "options/no_decay_1d", &nd1, 1, one);
    write_f32(f, "options/bn_bias_lr_mult", &bn_bias_lr_mult, 1, one);
    const float fsteps = (float)steps, fevery = (float)ema_every;
    write_f32(f, "options/steps", &fsteps, 1, one);
    const float famp = (float)amp;
    write_f32(f, "options/amp", &famp, 1, one);
    {   /* the decay as given (double), as PyTorch takes it */
        hid_t space = H5Screate_simple(1, one, NULL);
        hid_t ds = H5Dcreate2(f, "options/ema_decay", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(ds >= 0);
        CHECK(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &ema_decay) >= 0);
        H5Dclose(ds); H5Sclose(space);
    }
    write_f32(f, "options/ema_every", &fevery, 1, one);
    {   /* the network's name: "miniresnet", "resnet18", ... or a file's */
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, strlen(m.net.name) + 1);
        hid_t space = H5Screate(H5S_SCALAR);
        hid_t ds = H5Dcreate2(f, "arch", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(ds >= 0);
        CHECK(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.net.name) >= 0);
        H5Dclose(ds); H5Sclose(space); H5Tclose(t);
    }
    const float faux = (float)aux_logits, ftransform = (float)transform_input;
    write_f32(f, "options/aux_logits", &faux, 1, one);
    write_f32(f, "options/transform_input", &ftransform, 1, one);
    const float ftta = (float)tta;
    write_f32(f, "options/tta", &ftta, 1, one);
    H5Fclose(f);
    printf("dump_model: wrote %s (width %d, blocks %d, batch %d x accum %d, %zu parameters, loss %.6f, %s)\n", out,
           width, blocks, N, accum, m.num_params, loss, be->name);
    optim_free(&opt);
    if (run != &m) {
        be->release(xb);
        be->release(yb);
        model_free(run);
    }
    model_free(&m);
    netspec_free(&net);
    free(x); free(y); free(yf);
    return 0;
}
