/* SPDX-License-Identifier: BSD-3-Clause */
/* test_units.c - config table parsing, model layout, a model shaped for another input size,
 * progressive resizing's crop per epoch, schedule, optimizer arithmetic and the
 * fp16 loss scaler's rules (on the CPU backend, which shares them with the CUDA kernel), which
 * GPU a rank takes, the memory a rank may take under cgroup limits, how a message quotes
 * a name (quote_name), the protobuf writer's bytes, and CRC-32C's check value. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/config.h"
#include "base/crc32c.h"
#include "device/gpu_choice.h"
#include "base/half.h"
#include "base/memavail.h"
#include "base/protobuf.h"
#include "model/model.h"
#include "model/optim.h"
#include "dist/reducer.h"
#include "model/scaler.h"
#include "model/schedule.h"
#include "base/util.h"
#include "helpers/tmpdir_testutil.h"

static int g_fail = 0;
#define EXPECT(cond, ...) do { \
    if (cond) { printf("ok: "); printf(__VA_ARGS__); printf("\n"); } \
    else { printf("FAIL (%s:%d): ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); g_fail++; } \
} while (0)

static void test_config(void) {
    Config c;
    config_init(&c);
    EXPECT(c.batch_size == 64 && c.epochs == 10 && fabs(c.lr - 0.01) < 1e-15 && fabs(c.momentum - 0.9) < 1e-15 &&
           fabs(c.weight_decay - 1e-4) < 1e-18 && c.grad_accum_steps == 1 && c.use_amp == CONFIG_AUTO && c.save_every == 1 &&
           c.log_interval == 10 && c.seed == 42 && c.num_classes == 10 && c.image_size == 32 && c.width == 64 &&
           c.blocks == 2 && c.augment == 1 && c.max_steps == 0,
           "defaults are the article's");
    char *argv[] = {"x", "--batch_size", "128", "--lr=0.1", "--no-use_amp", "--augment", "--no-augment",
                    "--lr_schedule", "cosine_step", "--data_dir=/d"};
    config_parse_args(&c, 10, argv);
    EXPECT(c.batch_size == 128 && fabs(c.lr - 0.1) < 1e-15 && c.use_amp == 0 && c.augment == 0 &&
           !strcmp(c.lr_schedule, "cosine_step") && !strcmp(c.data_dir, "/d"),
           "--name VALUE, --name=VALUE, --flag, --no-flag, choice");
    char err[256];
    EXPECT(config_set(&c, "lr", "-1", err, sizeof err) != 0 && strstr(err, "--lr"), "lr < 0 refused: %s", err);
    EXPECT(config_set(&c, "batch_size", "0", err, sizeof err) != 0, "batch_size 0 refused: %s", err);
    EXPECT(config_set(&c, "batch_size", "12x", err, sizeof err) != 0, "non-numeric refused: %s", err);
    EXPECT(config_set(&c, "lr", "nan", err, sizeof err) != 0, "nan refused: %s", err);
    EXPECT(config_set(&c, "use_amp", "maybe", err, sizeof err) != 0, "bad boolean refused: %s", err);
    /* a SWITCH: auto/on/off, and a BOOL's spellings; bare --use_amp on, --no-use_amp off */
    EXPECT(config_set(&c, "use_amp", "auto", err, sizeof err) == 0 && c.use_amp == CONFIG_AUTO &&
           config_set(&c, "use_amp", "on", err, sizeof err) == 0 && c.use_amp == 1 &&
           config_set(&c, "use_amp", "false", err, sizeof err) == 0 && c.use_amp == 0 &&
           config_set(&c, "use_amp", "true", err, sizeof err) == 0 && c.use_amp == 1,
           "--use_amp takes auto, on, off, true and false");
    {
        char *a1[] = {"x", "--use_amp"}, *a2[] = {"x", "--use_amp=auto"}, *a3[] = {"x", "--no-use_amp"};
        config_parse_args(&c, 2, a1);
        const int bare = c.use_amp;
        config_parse_args(&c, 2, a2);
        const int autov = c.use_amp;
        config_parse_args(&c, 2, a3);
        EXPECT(bare == 1 && autov == CONFIG_AUTO && c.use_amp == 0, "bare --use_amp is on, --no-use_amp off");
        EXPECT(config_json_apply(&c, "{\"use_amp\": true}", 17, "t", err, sizeof err) == 0 && c.use_amp == 1 &&
               config_json_apply(&c, "{\"use_amp\": \"auto\"}", 19, "t", err, sizeof err) == 0 &&
               c.use_amp == CONFIG_AUTO, "a config file's true and \"auto\" for --use_amp");
        char *j = config_to_json(&c);
        EXPECT(strstr(j, "\"use_amp\": \"auto\"") != NULL, "auto written as \"auto\"");
        free(j);
        c.use_amp = 0;
    }
    EXPECT(config_set(&c, "lr_schedule", "linear", err, sizeof err) != 0, "bad choice refused: %s", err);
    EXPECT(config_set(&c, "nope", "1", err, sizeof err) != 0, "unknown option refused: %s", err);
    char *json = config_to_json(&c);
    EXPECT(strstr(json, "\"batch_size\": 128") && strstr(json, "\"use_amp\": false") &&
           strstr(json, "\"data_dir\": \"/d\""), "JSON dump has the effective values");
    free(json);
    config_free(&c);
}

static void test_model_layout(void) {
    Model m;
    model_init(&m, 64, 2, 10, 32, 2);
    EXPECT(m.num_params == 2777674, "MiniResNet width 64 has %zu parameters (2,777,674 expected)", m.num_params);
    EXPECT(!strcmp(m.param_info[0].name, "conv1.weight") && m.param_info[0].offset == 0,
           "first tensor conv1.weight at 0");
    EXPECT(!strcmp(m.param_info[m.n_param_info - 1].name, "fc.bias"), "last tensor fc.bias");
    EXPECT(model_find_param(&m, "layer2.0.shortcut.0.weight") >= 0 && model_find_param(&m, "layer1.0.shortcut.0.weight") < 0,
           "projection shortcuts only where the shape changes");
    size_t off = 0;
    int contiguous = 1;
    for (int i = 0; i < m.n_param_info; i++) { contiguous &= m.param_info[i].offset == off; off += m.param_info[i].numel; }
    EXPECT(contiguous && off == m.num_params, "tensors tile the flat buffer in order");
    /* BN channels: first 64, stage 1 4x64, stage 2 5x128, stage 3 5x256 = 2240 */
    EXPECT(m.num_buffers == 2 * 2240, "running mean and var of 2240 BN channels (%zu floats)", m.num_buffers);
    model_free(&m);
    model_init(&m, 16, 3, 7, 24, 2);
    EXPECT(model_find_param(&m, "layer3.2.conv2.weight") >= 0 && m.param_info[m.n_param_info - 2].shape[0] == 7,
           "width and blocks configurable (width 16, 3 blocks, 7 classes: %zu parameters)", m.num_params);
    model_free(&m);
}

/* Multiply-adds per image worked out by hand from the layer shapes (32x32 input, 10 classes),
 * for width w and 2 blocks per stage:
 *   conv1       32*32 * 3*w*9                                              =  27648 w
 *   stage 1     4 convs 32*32 * w*w*9                                      =  36864 w^2
 *   stage 2     16*16 * (2w*w*9 + 3 * 2w*2w*9 + 2w*w [1x1 shortcut])       =  32768 w^2
 *   stage 3     8*8 * (4w*2w*9 + 3 * 4w*4w*9 + 4w*2w)                      =  32768 w^2
 *   head        4w*10                                                      =     40 w
 * and with 1 block per stage 18432 + 2 * 14336 = 47104 w^2 + 27688 w. */
static double hand_macs(int w, int blocks) {
    double quad = blocks == 2 ? 102400.0 : 47104.0;
    return quad * w * w + 27688.0 * w;
}

static void test_model_flops(void) {
    const int cases[][2] = { {64, 2}, {4, 2}, {4, 1}, {16, 1} };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int w = cases[i][0], blocks = cases[i][1];
        Model m;
        model_init(&m, w, blocks, 10, 32, 1);
        double macs = model_macs_per_image(&m), want = hand_macs(w, blocks);
        EXPECT(macs == want, "width %d, %d blocks: %.0f multiply-adds per image forward (%.0f by hand)",
               w, blocks, macs, want);
        EXPECT(model_train_flops_per_image(&m) == 6.0 * macs, "training image = 3 x 2 FLOPs per multiply-add");
        model_free(&m);
    }
    EXPECT(fabs(hand_macs(64, 2) - 421.2e6) < 0.1e6, "width 64: ~421 M multiply-adds, %.3f GFLOP per training image",
           6.0 * hand_macs(64, 2) / 1e9);
}

static void test_schedule(void) {
    Schedule s;
    schedule_init(&s, "cosine", 0.1, 0.0, 10, 100, 0);
    EXPECT(fabs(schedule_lr(&s, 0, 0) - 0.1) < 1e-12 && fabs(schedule_lr(&s, 5, 550) - 0.05) < 1e-12 &&
           fabs(schedule_lr(&s, 9, 999) - 0.1 * 0.5 * (1 + cos(M_PI * 0.9))) < 1e-12,
           "cosine per epoch as CosineAnnealingLR(T_max=epochs)");
    schedule_init(&s, "cosine_step", 0.1, 0.0, 10, 100, 0);
    EXPECT(fabs(schedule_lr(&s, 2, 250) - 0.1 * 0.5 * (1 + cos(M_PI * 0.25))) < 1e-12, "cosine per step");
    schedule_init(&s, "constant", 0.1, 0.0, 10, 100, 10);
    EXPECT(fabs(schedule_lr(&s, 0, 0) - 0.01) < 1e-12 && fabs(schedule_lr(&s, 0, 9) - 0.1) < 1e-12 &&
           fabs(schedule_lr(&s, 3, 300) - 0.1) < 1e-12, "linear warm-up then constant");
    /* one cycle over 10 x 100 steps: up from lr/25 for 300 steps, down to lr/25/1e4 at step 999 */
    schedule_init(&s, "onecycle", 0.1, 0.0, 10, 100, 0);
    EXPECT(s.onecycle.total_steps == 1000 && fabs(schedule_lr(&s, 0, 0) - 0.004) < 1e-15 &&
           fabs(schedule_lr(&s, 2, 299) - 0.1) < 1e-15 && fabs(schedule_lr(&s, 9, 999) - 0.004 / 1e4) < 1e-15 &&
           schedule_lr(&s, 1, 150) < schedule_lr(&s, 2, 250) && schedule_lr(&s, 5, 500) > schedule_lr(&s, 6, 600),
           "onecycle: lr/25 at step 0, lr at pct_start, lr/25/1e4 at the last step");
    s.onecycle.anneal_linear = 1;
    EXPECT(fabs(schedule_lr(&s, 1, 149) - (0.004 + (0.1 - 0.004) * 149.0 / 299.0)) < 1e-15, "onecycle linear");
    s.onecycle.total_steps = 10;
    s.onecycle.pct_start = 0.1;
    EXPECT(schedule_onecycle_problem(&s) != NULL, "onecycle with a first phase of no length refused");
}

static void test_sgd(void) {
    Optimizer o;
    sgd_init(&o, 2, 0.9f, 0.1f);
    float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f};
    /* by hand: d = g + wd p; buf = d; p -= lr buf; then d' = g + wd p'; buf = 0.9 buf + d' */
    double p0 = 1.0, b0 = 0.5 + 0.1 * 1.0;
    p0 -= 0.1 * b0;
    double d1 = 0.5 + 0.1 * p0, b1 = 0.9 * b0 + d1;
    p0 -= 0.1 * b1;
    optim_step(&o, p, g, 0.1f);
    optim_step(&o, p, g, 0.1f);
    EXPECT(fabs(p[0] - p0) < 1e-6, "SGD momentum + weight decay matches PyTorch's rule (%.7f vs %.7f)", p[0], p0);
    optim_free(&o);

    /* Nesterov: the same buffer, the step along d + momentum * buf */
    sgd_init(&o, 2, 0.9f, 0.1f);
    o.nesterov = 1;
    float q[2] = {1.0f, -2.0f};
    double q0 = 1.0, d0 = 0.5 + 0.1 * 1.0, c0 = d0;
    q0 -= 0.1 * (d0 + 0.9 * c0);
    double e1 = 0.5 + 0.1 * q0, c1 = 0.9 * c0 + e1;
    q0 -= 0.1 * (e1 + 0.9 * c1);
    optim_step(&o, q, g, 0.1f);
    optim_step(&o, q, g, 0.1f);
    EXPECT(fabs(q[0] - q0) < 1e-6 && fabs(q0 - p0) > 1e-3, "SGD Nesterov matches PyTorch's rule (%.7f vs %.7f)", q[0], q0);
    optim_free(&o);

    /* Parameter groups over a model: none by default (the single-group step of old); with
     * no_decay_1d / bn_bias_lr_mult, each tensor's settings by its rank and kind */
    Model m;
    model_init(&m, 4, 1, 10, 8, 2);
    sgd_init(&o, m.num_params, 0.9f, 0.1f);
    const OptimGroupRules plain = OPTIM_GROUP_RULES_DEFAULT, rules = {1, -1.0, 2.0, 1.0};
    EXPECT(optim_set_model_groups(&o, &m, &plain) == 1 && o.group == NULL, "default settings: one group, none installed");
    optim_free(&o);
    sgd_init(&o, m.num_params, 0.9f, 0.1f);
    optim_set_model_groups(&o, &m, &rules);
    int good = o.group != NULL;
    for (int i = 0; good && i < m.n_param_info; i++) {
        const TensorInfo *t = &m.param_info[i];
        const int bn_bias = t->ndim == 1 && strcmp(t->name, "fc.bias") != 0 && strstr(t->name, ".bias") != NULL;
        for (int k = 0; k < o.n_group; k++) {
            const OptimGroup *g = &o.group[k];
            if (t->offset < g->offset || t->offset + t->numel > g->offset + g->n) continue;
            good &= g->weight_decay == (t->ndim == 1 ? 0.0f : 0.1f) && g->lr_mult == (bn_bias ? 2.0 : 1.0);
        }
    }
    EXPECT(good, "no_decay_1d and bn_bias_lr_mult 2: %d groups, every tensor's decay and lr multiplier right", o.n_group);
    optim_free(&o);
    model_free(&m);
}

/* GradScaler semantics: unscale, skip on inf/NaN with parameters and momentum untouched,
 * backoff, growth after `interval` clean steps (never to inf), skipped-step count, restore. */
static void test_scaler(void) {
    GradScaler s;
    scaler_init(&s, &backend_cpu, 1, 8.0f, 2.0f, 0.5f, 3);
    Optimizer o;
    sgd_init(&o, 3, 0.9f, 0.0f);
    float p[3] = {1.0f, 1.0f, 1.0f};
    float g[3] = {8.0f, 16.0f, -24.0f};
    scaler_unscale(&s, g, 3);
    EXPECT(g[0] == 1.0f && g[1] == 2.0f && g[2] == -3.0f && !*scaler_skip_flag(&s), "unscale divides by the scale, no overflow");
    optim_step_unless(&o, p, g, 0.5f, scaler_skip_flag(&s));
    scaler_update(&s);
    EXPECT(p[0] == 0.5f && p[1] == 0.0f && p[2] == 2.5f && scaler_get_scale(&s) == 8.0f && scaler_get_tracker(&s) == 1,
           "a clean step updates: p = %g %g %g, scale %g, tracker %d", p[0], p[1], p[2], scaler_get_scale(&s),
           scaler_get_tracker(&s));
    float p_before[3], b_before[3];
    memcpy(p_before, p, sizeof p);
    memcpy(b_before, o.state[0], sizeof b_before);
    const float bad[2] = {INFINITY, NAN};
    for (int k = 0; k < 2; k++) {
        float gi[3] = {8.0f, bad[k], 8.0f};
        scaler_unscale(&s, gi, 3);
        const int flagged = *scaler_skip_flag(&s);
        optim_step_unless(&o, p, gi, 0.5f, scaler_skip_flag(&s));
        scaler_update(&s);
        EXPECT(flagged && !memcmp(p, p_before, sizeof p) && !memcmp(o.state[0], b_before, sizeof b_before) &&
               !*scaler_skip_flag(&s) && scaler_get_tracker(&s) == 0,
               "a gradient of %g skips the step (parameters and momentum unchanged), resets the tracker and clears the flag",
               (double)bad[k]);
    }
    EXPECT(scaler_get_scale(&s) == 2.0f, "two overflows halve the scale twice: %g", scaler_get_scale(&s));
    EXPECT(scaler_take_skipped(&s) == 2 && scaler_take_skipped(&s) == 0, "skipped steps counted once");
    for (int k = 0; k < 3; k++) {
        float gi[3] = {1.0f, 1.0f, 1.0f};
        scaler_unscale(&s, gi, 3);
        scaler_update(&s);
        if (k < 2) EXPECT(scaler_get_scale(&s) == 2.0f, "clean step %d of 3: scale unchanged", k + 1);
    }
    EXPECT(scaler_get_scale(&s) == 4.0f && scaler_get_tracker(&s) == 0, "3 clean steps in a row double the scale: %g",
           scaler_get_scale(&s));
    scaler_set(&s, 3.0e38f, 2);
    { float gi[1] = {0.0f}; scaler_unscale(&s, gi, 1); scaler_update(&s); }
    EXPECT(scaler_get_scale(&s) == 3.0e38f && scaler_get_tracker(&s) == 0, "growth that would overflow keeps the scale");
    scaler_set(&s, 1024.0f, 1);
    EXPECT(scaler_get_scale(&s) == 1024.0f && scaler_get_tracker(&s) == 1, "state restored from a checkpoint");
    optim_free(&o);
    scaler_free(&s);

    GradScaler off;
    scaler_init(&off, &backend_cpu, 0, 8.0f, 2.0f, 0.5f, 3);
    float g1[1] = {INFINITY};
    scaler_unscale(&off, g1, 1);
    scaler_update(&off);
    EXPECT(!scaler_scale_ptr(&off) && !scaler_skip_flag(&off) && isinf(g1[0]) && scaler_get_scale(&off) == 1.0f,
           "a disabled scaler changes nothing");
    scaler_free(&off);
}

/* The model applies the loss scale to the gradient: with a power of two every gradient is
 * exactly that multiple, and unscaling gives back the unscaled gradients bit for bit. */
static void test_model_grad_scale(void) {
    Model m;
    model_init(&m, 4, 1, 10, 8, 6);
    model_init_weights(&m, 7);
    const size_t nx = 6 * 8 * 8 * 3;
    float *x = mallocCheck(nx * sizeof(float));
    int y[6] = {0, 3, 9, 1, 1, 5};
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    float *ref = mallocCheck(m.num_params * sizeof(float));
    model_zero_grad(&m);
    model_forward(&m, x, y, 6, 1, 1.0f, NULL);
    model_backward(&m);
    memcpy(ref, m.grads, m.num_params * sizeof(float));
    GradScaler s;
    scaler_init(&s, &backend_cpu, 1, 1024.0f, 2.0f, 0.5f, 2000);
    m.grad_scale = scaler_scale_ptr(&s);
    model_zero_grad(&m);
    model_forward(&m, x, y, 6, 1, 1.0f, NULL);
    model_backward(&m);
    size_t exact = 0, nonzero = 0;
    for (size_t i = 0; i < m.num_params; i++) {
        exact += m.grads[i] == 1024.0f * ref[i];
        nonzero += ref[i] != 0.0f;
    }
    scaler_unscale(&s, m.grads, m.num_params);
    EXPECT(exact == m.num_params && nonzero > m.num_params / 2 && !memcmp(m.grads, ref, m.num_params * sizeof(float)) &&
           !*scaler_skip_flag(&s),
           "loss scale 1024: %zu of %zu gradients exactly 1024x (%zu nonzero), unscaled bit-identical", exact,
           m.num_params, nonzero);
    scaler_free(&s);
    free(ref);
    free(x);
    model_free(&m);
}

/* A model shaped down to a smaller input (progressive resizing) computes what a model built at
 * that size computes: the same logits, loss, gradients and running statistics, bit for bit; and
 * shaped back up, what one built at the larger size does. */
static void train_once(Model *m, const float *x, const int *y, int n, float *logits, float *grads, float *buffers) {
    model_zero_grad(m);
    model_forward(m, x, y, n, 1, 1.0f, NULL);
    model_backward(m);
    memcpy(logits, m->logits, (size_t)n * m->num_classes * sizeof(float));
    memcpy(grads, m->grads, m->num_params * sizeof(float));
    memcpy(buffers, m->buffers, m->num_buffers * sizeof(float));
}

static void test_model_input_size(void) {
    enum { N = 3, BIG = 32, SMALL = 24, K = 10 };
    Model shaped, at_small, at_big;
    model_init(&shaped, 8, 1, K, BIG, N);
    model_init(&at_small, 8, 1, K, SMALL, N);
    model_init(&at_big, 8, 1, K, BIG, N);
    model_init_weights(&shaped, 5);
    model_init_weights(&at_small, 5);
    model_init_weights(&at_big, 5);
    const size_t nx = (size_t)N * BIG * BIG * 3;
    float *x = mallocCheck(nx * sizeof(float));
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    int y[N] = {1, 7, 4};
    const size_t np = shaped.num_params, nb = shaped.num_buffers;
    float *l[2], *g[2], *b[2];
    for (int i = 0; i < 2; i++) {
        l[i] = mallocCheck((size_t)N * K * sizeof(float));
        g[i] = mallocCheck(np * sizeof(float));
        b[i] = mallocCheck(nb * sizeof(float));
    }
    char err[512];
    EXPECT(model_set_input_size(&shaped, SMALL, err, sizeof err) == 0 && shaped.input_size == SMALL &&
           shaped.image_size == BIG && model_macs_per_image(&shaped) == model_macs_per_image(&at_small),
           "shaped from %d to %d: the MACs of a model built at %d", BIG, SMALL, SMALL);
    train_once(&shaped, x, y, N, l[0], g[0], b[0]);
    train_once(&at_small, x, y, N, l[1], g[1], b[1]);
    EXPECT(!memcmp(l[0], l[1], (size_t)N * K * sizeof(float)) && !memcmp(g[0], g[1], np * sizeof(float)) &&
           !memcmp(b[0], b[1], nb * sizeof(float)),
           "at %d: logits, %zu gradients and the running statistics those of a model built at %d", SMALL, np, SMALL);
    /* back up: the running statistics moved once more on the shaped model, so both start alike */
    memcpy(at_big.buffers, shaped.buffers, nb * sizeof(float));
    EXPECT(model_set_input_size(&shaped, BIG, err, sizeof err) == 0 && shaped.input_size == BIG,
           "shaped back to %d", BIG);
    train_once(&shaped, x, y, N, l[0], g[0], b[0]);
    train_once(&at_big, x, y, N, l[1], g[1], b[1]);
    EXPECT(!memcmp(l[0], l[1], (size_t)N * K * sizeof(float)) && !memcmp(g[0], g[1], np * sizeof(float)) &&
           !memcmp(b[0], b[1], nb * sizeof(float)),
           "back at %d: logits, gradients and running statistics those of a model built at %d", BIG, BIG);
    EXPECT(model_set_input_size(&shaped, BIG + 8, err, sizeof err) != 0 && strstr(err, "larger than") &&
           shaped.input_size == BIG, "a size above the one it was built for refused: %s", err);
    EXPECT(model_set_input_size(&shaped, 0, err, sizeof err) != 0 && strstr(err, "not a size") &&
           shaped.input_size == BIG && model_macs_per_image(&shaped) == model_macs_per_image(&at_big),
           "size 0 refused, the model left as it was: %s", err);
    for (int i = 0; i < 2; i++) { free(l[i]); free(g[i]); free(b[i]); }
    free(x);
    model_free(&shaped);
    model_free(&at_small);
    model_free(&at_big);
}

/* FFCV's ramp (get_resolution): the low size up to the start epoch, np.interp between the two
 * ends rounded to a multiple of the step (ties to even, as np.round), the high size from the end
 * epoch; worked out by hand here. */
static void test_progressive_schedule(void) {
    Config c;
    config_init(&c);
    char err[256];
    const char *set[][2] = {{"epochs", "10"}, {"image_size", "224"}, {"train_crop_size", "160"},
                            {"progressive_min_crop", "96"}, {"progressive_start_epoch", "2"},
                            {"progressive_end_epoch", "8"}, {"progressive_step", "16"}};
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) CHECK(config_set(&c, set[i][0], set[i][1], err, sizeof err) == 0);
    /* epochs 3..7: 96 + 64 (e - 2) / 6 = 106.7, 117.3, 128, 138.7, 149.3 */
    const long want[10] = {96, 96, 112, 112, 128, 144, 144, 160, 160, 160};
    int same = 0;
    for (int e = 0; e < 10; e++) same += config_train_crop_at(&c, e) == want[e];
    EXPECT(same == 10 && config_check_recipe(&c, err, sizeof err) == 0, "96 to 160 over epochs 2-8 in steps of 16");
    /* 96 + 32 / 2 = 112 = 3.5 steps of 32: to 4 (even), 128; and 64 + 64 / 4 = 80 = 2.5: to 2, 64 */
    CHECK(config_set(&c, "train_crop_size", "128", err, sizeof err) == 0);
    CHECK(config_set(&c, "progressive_start_epoch", "1", err, sizeof err) == 0);
    CHECK(config_set(&c, "progressive_end_epoch", "3", err, sizeof err) == 0);
    CHECK(config_set(&c, "progressive_step", "32", err, sizeof err) == 0);
    const long tie1 = config_train_crop_at(&c, 1);
    CHECK(config_set(&c, "progressive_min_crop", "64", err, sizeof err) == 0);
    CHECK(config_set(&c, "progressive_end_epoch", "5", err, sizeof err) == 0);
    const long tie2 = config_train_crop_at(&c, 1);
    EXPECT(tie1 == 128 && tie2 == 64, "ties round to an even number of steps (np.round): %ld, %ld", tie1, tie2);
    /* a step that overshoots the top is kept within it */
    CHECK(config_set(&c, "train_crop_size", "120", err, sizeof err) == 0);
    CHECK(config_set(&c, "progressive_min_crop", "100", err, sizeof err) == 0);
    const long top = config_train_crop_at(&c, 3);   /* 100 + 20 * 3 / 4 = 115: 4 steps of 32 = 128 */
    EXPECT(top == 120, "a multiple of the step above --train_crop_size is kept at it: %ld", top);
    CHECK(config_set(&c, "progressive_min_crop", "120", err, sizeof err) == 0);
    EXPECT(config_check_recipe(&c, err, sizeof err) != 0 && strstr(err, "--progressive_min_crop 120"),
           "a low end not below the top refused: %s", err);
    CHECK(config_set(&c, "progressive_min_crop", "100", err, sizeof err) == 0);
    CHECK(config_set(&c, "progressive_start_epoch", "5", err, sizeof err) == 0);
    EXPECT(config_check_recipe(&c, err, sizeof err) != 0 && strstr(err, "--progressive_start_epoch 5"),
           "a ramp that ends before it starts refused: %s", err);
    CHECK(config_set(&c, "progressive_min_crop", "0", err, sizeof err) == 0);
    EXPECT(config_train_crop_at(&c, 0) == 120 && config_train_crop_at(&c, 9) == 120, "off: --train_crop_size throughout");
    config_free(&c);
}

/* ---- evaluation in chunks of the training capacity ----
 * A backend that counts the bytes the model allocates: evaluation must allocate nothing,
 * whatever the number of images, and its totals must be those of one forward over all of them
 * on a model built big enough. */
static size_t g_alloc_bytes;

static void *counting_alloc(size_t bytes) {
    g_alloc_bytes += bytes;
    return backend_cpu.alloc(bytes);
}

/* model_evaluate_each's hook: each chunk's logits copied to their images' rows, and where the
 * chunks fell. */
typedef struct {
    float *logits;            /* [N][K] */
    const int *labels;        /* the call's */
    int next, chunks, bad;    /* the image the next chunk should start at; chunks seen; chunks out of place */
    int cap;
} ChunkSeen;

static void see_chunk(void *ctx, const Model *m, const int *labels, int off, int n) {
    ChunkSeen *s = ctx;
    if (off != s->next || n < 1 || n > s->cap || labels != s->labels + off) s->bad++;
    memcpy(s->logits + (size_t)off * m->num_classes, m->logits, (size_t)n * m->num_classes * sizeof(float));
    s->next = off + n;
    s->chunks++;
}

static void test_model_evaluate_chunks(void) {
    enum { CAP = 8, N = 37, S = 16, K = 10 };   /* 37 = 4 chunks of 8 and one of 5 */
    Backend counting = backend_cpu;
    counting.alloc = counting_alloc;
    Model small, big;
    g_alloc_bytes = 0;
    model_init_on(&small, &counting, 8, 1, K, S, CAP);
    const size_t small_bytes = g_alloc_bytes;
    g_alloc_bytes = 0;
    model_init_on(&big, &counting, 8, 1, K, S, N);
    const size_t big_bytes = g_alloc_bytes;
    model_init_weights(&small, 3);
    model_init_weights(&big, 3);
    /* running statistics away from 0 and 1, so that evaluation mode is really exercised (means
     * near 0: larger ones would silence every ReLU, and with them the images) */
    for (int t = 0; t < small.n_buffer_info; t++) {
        const TensorInfo *b = &small.buffer_info[t];
        const int is_var = strstr(b->name, "running_var") != NULL;
        for (size_t i = b->offset; i < b->offset + b->numel; i++) {
            const float u = (float)((i * 2654435761u) % 1000) / 1000.0f;
            small.buffers[i] = big.buffers[i] = is_var ? 0.5f + u : 0.2f * u - 0.1f;
        }
    }
    const size_t nx = (size_t)N * S * S * 3;
    float *x = mallocCheck(nx * sizeof(float));
    int y[N];
    /* every image with its own contrast and brightness, so that no two give the same logits */
    for (size_t i = 0; i < nx; i++) {
        const size_t img = i / ((size_t)S * S * 3);
        x[i] = ((float)((i * 40503u) % 997) / 498.5f - 1.0f) * (0.3f + 0.1f * (float)(img % 11)) +
               0.2f * (float)(img % 5) - 0.4f;
    }
    for (int i = 0; i < N; i++) y[i] = (i * 7) % K;

    /* Labels that the model predicts for some images only (in no periodic pattern, so that
     * chunks that read the wrong labels cannot agree by accident), read off the logits of one
     * forward over all of them: the correct count then says which predictions were right. */
    model_forward(&big, x, y, N, 0, 1.0f, NULL);
    int expect_correct = 0;
    for (int i = 0; i < N; i++) {
        const float *z = big.logits + (size_t)i * K;
        int arg = 0;
        for (int k = 1; k < K; k++)
            if (z[k] > z[arg]) arg = k;
        const int hit = (i * i + 3 * i) % 7 < 3;
        y[i] = hit ? arg : (arg + 1 + (i * i) % (K - 1)) % K;
        expect_correct += hit;
    }
    long c_one = 0, c_chunks = 0;
    double l_one = 0.0, l_chunks = 0.0;
    model_evaluate(&big, x, y, N, &c_one, &l_one);
    g_alloc_bytes = 0;
    model_evaluate(&small, x, y, N, &c_chunks, &l_chunks);
    EXPECT(g_alloc_bytes == 0 && small_bytes < big_bytes,
           "evaluating %d images on a model built for %d allocates %zu bytes (the model holds %zu; one built for "
           "%d would hold %zu)", N, CAP, g_alloc_bytes, small_bytes, N, big_bytes);
    EXPECT(c_chunks == expect_correct && c_one == expect_correct && fabs(l_chunks - l_one) <= 1e-6 * fabs(l_one) &&
           l_one > 0.0,
           "%d images in chunks of %d: %ld correct, loss sum %.9g; in one piece: %ld correct, loss sum %.9g", N,
           CAP, c_chunks, l_chunks, c_one, l_one);

    /* The hook sees every chunk in order, with its labels, and its logits are the one-forward's. */
    model_forward(&big, x, y, N, 0, 1.0f, NULL);
    ChunkSeen seen = {mallocCheck((size_t)N * K * sizeof(float)), y, 0, 0, 0, CAP};
    long c_each = 0;
    double l_each = 0.0;
    model_evaluate_each(&small, x, y, N, &c_each, &l_each, see_chunk, &seen);
    double worst = 0.0;
    for (size_t i = 0; i < (size_t)N * K; i++) {
        const double d = fabs((double)seen.logits[i] - big.logits[i]) / (1.0 + fabs((double)big.logits[i]));
        if (d > worst) worst = d;
    }
    EXPECT(seen.chunks == (N + CAP - 1) / CAP && seen.next == N && !seen.bad && worst <= 1e-5 && c_each == c_chunks &&
           l_each == l_chunks,
           "model_evaluate_each: %d chunks (want %d) up to image %d, %d out of place, logits %.3g from one forward's, "
           "%ld correct, loss sum %.9g", seen.chunks, (N + CAP - 1) / CAP, seen.next, seen.bad, worst, c_each, l_each);
    free(seen.logits);

    /* The loss sum is the per-sample loss summed: the images after the first chunk matter. */
    long c_head = 0;
    double l_head = 0.0;
    model_evaluate(&small, x, y, CAP, &c_head, &l_head);
    int c_fwd = -1;
    const float l_fwd = model_forward(&small, x, y, CAP, 0, 1.0f, &c_fwd);
    EXPECT(c_head == c_fwd && l_head == (double)l_fwd * CAP && fabs(l_head - l_one) > 1e-3 * fabs(l_one),
           "a batch that fits is one forward (%ld correct, loss sum %.9g); it differs from all %d images'", c_head,
           l_head, N);
    free(x);
    model_free(&small);
    model_free(&big);
}

/* ---- the reducer's request lifecycle, over a fake comm ----
 * A device comm (wait_stream) leaves requests active after reducer_finish; the reducer must
 * reap each before posting into it again, and reducer_drain must leave none. The fake comm
 * completes a request on its 40th test (slow, so requests outlive their step) and counts
 * posts into an active request. */
static struct { int posts, reposts_active, stream_waits, waits; } g_fc;

static void fc_iallreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, CommRequest *req) {
    (void)c; (void)buf; (void)count; (void)dt; (void)op;
    g_fc.posts++;
    if (req->active) g_fc.reposts_active++;
    req->active = 1;
    req->handle.i = 40;
}
static int fc_test(Comm *c, CommRequest *req) {
    (void)c;
    if (--req->handle.i > 0) return 0;
    req->active = 0;
    return 1;
}
static void fc_wait(Comm *c, CommRequest *req) { (void)c; g_fc.waits++; req->active = 0; }
static void fc_wait_stream(Comm *c, CommRequest *req) { (void)c; (void)req; g_fc.stream_waits++; }
static void fc_noop(Comm *c) { (void)c; }

/* A 2-rank comm over the fake operations, as an MPI one with every thread level. */
static Comm fake_comm(const CommOps *ops) {
    Comm c;
    memset(&c, 0, sizeof c);
    c.ops = ops;
    c.world_size = 2;
    c.thread_level = 3;
    return c;
}

static int reducer_active_requests(const Reducer *r) {
    int n = 0;
    for (int b = 0; b < r->n_bucket; b++) n += r->bucket[b].req[0].active + r->bucket[b].req[1].active;
    return n;
}

static void test_reducer_requests(void) {
    Model m;
    model_init(&m, 4, 1, 10, 8, 2);
    for (int device = 0; device < 2; device++) {
        CommOps ops = {.name = "fake", .iallreduce = fc_iallreduce, .test = fc_test, .wait = fc_wait,
                       .wait_stream = device ? fc_wait_stream : NULL, .barrier = fc_noop};
        Comm c = fake_comm(&ops);
        memset(&g_fc, 0, sizeof g_fc);
        Reducer r;
        /* small buckets: several per step */
        reducer_init(&r, &c, m.grads, m.param_info, m.n_param_info, 2000, 400, NULL);
        int max_active = 0;
        for (long step = 1; step <= 6; step++) {
            for (int micro = 0; micro < 2; micro++) {   /* accumulation: the second one communicates */
                reducer_begin(&r, micro == 1, step);
                for (int i = m.n_param_info - 1; i >= 0; i--) reducer_grad_ready(&r, m.param_info[i].offset);
                reducer_finish(&r);
            }
            if (reducer_active_requests(&r) > max_active) max_active = reducer_active_requests(&r);
        }
        reducer_drain(&r);
        EXPECT(g_fc.posts == 6 * r.n_bucket && g_fc.reposts_active == 0 && reducer_active_requests(&r) == 0,
               "%s comm: %d buckets x 6 steps posted, never into an active request, none left after drain",
               device ? "device (wait_stream)" : "host", r.n_bucket);
        if (device)
            EXPECT(g_fc.stream_waits > 0 && g_fc.waits > 0 && max_active > r.n_bucket && max_active <= 2 * r.n_bucket,
                   "device comm: finish hands %d waits to the stream, %d reaped by waiting two steps later; up to "
                   "%d requests (of 2 x %d) in flight across steps", g_fc.stream_waits, g_fc.waits, max_active,
                   r.n_bucket);
        else
            EXPECT(g_fc.stream_waits == 0 && max_active == 0, "host comm: finish leaves nothing in flight");
        reducer_free(&r);
    }
    model_free(&m);
}

/* ---- the reducer's progress thread and its buckets ----
 * The buckets posted last (the first layers) are cut small and growing, so the one posted when
 * backward ends is small. With the progress thread, a bucket posted during backward completes
 * while the backward thread computes and calls nothing; the thread tests nothing outside
 * backward; the final wait finds the buckets done. The fake comm completes a request on its
 * 5th test and counts tests made by another thread than this one. */
static struct { pthread_t main; int tests_main, tests_other; } g_pc;

static void pc_iallreduce(Comm *c, void *buf, size_t count, CommDtype dt, CommOp op, CommRequest *req) {
    (void)c; (void)buf; (void)count; (void)dt; (void)op;
    req->active = 1;
    req->handle.i = 5;
}
static int pc_test(Comm *c, CommRequest *req) {
    (void)c;
    if (pthread_equal(pthread_self(), g_pc.main)) g_pc.tests_main++;
    else g_pc.tests_other++;
    if (--req->handle.i > 0) return 0;
    req->active = 0;
    return 1;
}
static void pc_wait(Comm *c, CommRequest *req) { (void)c; req->active = 0; }

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_reducer_progress(void) {
    Model m;
    model_init(&m, 64, 2, 10, 32, 2);   /* MiniResNet, width 64: 2,777,674 parameters */
    /* the default caps for it: an eighth of the gradients (1.39 MB), first bucket 1 MB */
    const size_t cap = reducer_auto_cap(m.num_params * sizeof(float)), first = 1000000;
    Reducer r;
    reducer_init(&r, NULL, m.grads, m.param_info, m.n_param_info, cap, first, NULL);
    size_t last = (r.bucket[r.n_bucket - 1].end - r.bucket[r.n_bucket - 1].begin) * sizeof(float);
    int growing = 1, tail = 0;
    for (int b = r.n_bucket - 1; b > 0 && r.bucket[b - 1].end - r.bucket[b - 1].begin < cap / sizeof(float); b--, tail++)
        if (r.bucket[b - 1].end - r.bucket[b - 1].begin < (r.bucket[b].end - r.bucket[b].begin) / 2) growing = 0;
    char desc[512];
    reducer_describe(&r, desc, sizeof desc);
    EXPECT(r.bucket[r.n_bucket - 1].begin == 0 && last >= first / 16 && last < first / 4 && tail >= 2 && growing,
           "width 64 at the default caps: the bucket posted last holds %.3f MB (from the first tensor), the %d before "
           "it grow (%s)", (double)last / 1e6, tail, desc);
    reducer_free(&r);

    CommOps ops = {.name = "fake", .iallreduce = pc_iallreduce, .test = pc_test, .wait = pc_wait};
    Comm c = fake_comm(&ops);
    memset(&g_pc, 0, sizeof g_pc);
    g_pc.main = pthread_self();
    reducer_init(&r, &c, m.grads, m.param_info, m.n_param_info, cap, first, NULL);
    reducer_start_progress(&r, 100.0);
    int ok_steps = 0;
    for (long step = 1; step <= 3; step++) {
        reducer_begin(&r, 1, step);
        /* backward produces the last layer's gradients: bucket 0 is posted; then a long layer */
        reducer_grad_ready(&r, r.bucket[0].begin);
        const int main_before = g_pc.tests_main;
        sleep_ms(30);
        const int done_in_layer = r.bucket[0].t_done != 0.0, main_in_layer = g_pc.tests_main - main_before;
        for (int i = m.n_param_info - 1; i >= 0; i--) reducer_grad_ready(&r, m.param_info[i].offset);
        sleep_ms(30);
        int all_done = 1;
        for (int b = 0; b < r.n_bucket; b++) all_done &= r.bucket[b].t_done != 0.0;
        reducer_finish(&r);
        const int other_after = g_pc.tests_other;
        sleep_ms(10);
        ok_steps += done_in_layer && main_in_layer == 0 && all_done && !r.polling && g_pc.tests_other == other_after;
    }
    EXPECT(ok_steps == 3 && g_pc.tests_other > 0,
           "progress thread: in %d of 3 steps a bucket completed inside a layer and all %d before the final wait, "
           "none tested outside backward (%d tests by the thread, %d by backward)", ok_steps, r.n_bucket,
           g_pc.tests_other, g_pc.tests_main);
    reducer_free(&r);
    model_free(&m);
}

/* Which GPU a rank takes (gpu_choice.h): Slurm's --gpus-per-task=1 leaves every rank one
 * visible device, numbered 0, whatever its local rank; with the node's GPUs all visible, the
 * local rank picks; fewer visible GPUs than ranks on the node (but more than one) is an error
 * naming the counts and CUDA_VISIBLE_DEVICES. */
static void test_gpu_choice(void) {
    char err[300];
    for (int lr = 0; lr < 4; lr++)
        EXPECT(gpu_choose(lr, 4, 1, "GPU-of-this-task", err, sizeof err) == 0,
               "--gpus-per-task=1: local rank %d of 4 sees 1 device: takes device 0", lr);
    for (int lr = 0; lr < 4; lr++)
        EXPECT(gpu_choose(lr, 4, 4, NULL, err, sizeof err) == lr, "all 4 GPUs visible: local rank %d takes device %d", lr, lr);
    EXPECT(gpu_choose(1, 2, 8, "0,1,2,3,4,5,6,7", err, sizeof err) == 1, "2 ranks on an 8-GPU node: local rank 1 takes device 1");
    EXPECT(gpu_choose(0, 1, 1, NULL, err, sizeof err) == 0, "one rank, one GPU: device 0");
    err[0] = '\0';
    int r = gpu_choose(2, 4, 2, "0,1", err, sizeof err);
    EXPECT(r == -1 && strstr(err, "only 2 GPUs are visible") && strstr(err, "CUDA_VISIBLE_DEVICES=0,1"),
           "4 ranks, 2 GPUs visible: refused (%s)", err);
    err[0] = '\0';
    r = gpu_choose(0, 1, 0, "", err, sizeof err);
    EXPECT(r == -1 && strstr(err, "no CUDA device visible"), "no device visible: refused (%s)", err);
}

/* --comm_dtype's conversions: round to nearest even, range, NaN and infinity. */
static void test_half(void) {
    EXPECT(half_from_float(HALF_BF16, 1.0f) == 0x3f80 && half_from_float(HALF_FP16, 1.0f) == 0x3c00, "1.0 in bf16 and fp16");
    /* 1 + 2^-8 is halfway between two bf16 values: to even (1.0); 1 + 3*2^-8: up, to even. */
    EXPECT(half_to_float(HALF_BF16, half_from_float(HALF_BF16, 1.0f + 0x1p-8f)) == 1.0f &&
           half_to_float(HALF_BF16, half_from_float(HALF_BF16, 1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f,
           "bf16 rounds to nearest even");
    EXPECT(half_to_float(HALF_BF16, half_from_float(HALF_BF16, 1e30f)) > 9.9e29f &&
           isinf(half_to_float(HALF_FP16, half_from_float(HALF_FP16, 70000.0f))) &&
           half_to_float(HALF_FP16, half_from_float(HALF_FP16, 0x1p-24f)) == 0x1p-24f &&
           half_to_float(HALF_FP16, half_from_float(HALF_FP16, 0x1p-26f)) == 0.0f,
           "bf16 keeps float32's range; fp16 overflows above 65504, keeps 2^-24, loses 2^-26");
    EXPECT(isnan(half_to_float(HALF_BF16, half_from_float(HALF_BF16, NAN))) &&
           isnan(half_to_float(HALF_FP16, half_from_float(HALF_FP16, NAN))) &&
           isinf(half_to_float(HALF_BF16, half_from_float(HALF_BF16, -INFINITY))), "NaN and infinity survive");
    uint16_t a[2], b[2];
    float x[2] = {0.5f, -3.0f}, y[2] = {0.25f, 1.0f}, back[2];
    half_pack(HALF_FP16, a, x, 2);
    half_pack(HALF_FP16, b, y, 2);
    half_sum(HALF_FP16, a, b, 2);
    half_unpack(HALF_FP16, back, b, 2, 2.0f);
    EXPECT(back[0] == 0.375f && back[1] == -1.0f, "pack, sum, unpack / 2: %g %g", back[0], back[1]);
}

/* memavail_read on made-up /proc and /sys/fs/cgroup trees under ROOT. */
static void put(const char *root, const char *rel, const char *text) {
    char path[1024], cmd[1200];
    snprintf_check(path, sizeof path, "%s/%s", root, rel);
    snprintf_check(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    CHECK(system(cmd) == 0);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* A made-up system: {path under ROOT/NAME, content} pairs up to a NULL path, then read. */
typedef struct { const char *path, *text; } FakeFile;

static void read_fake(const char *root, const char *name, const FakeFile *files, MemAvail *m, char *line, size_t n) {
    char d[600];
    snprintf_check(d, sizeof d, "%s/%s", root, name);
    for (const FakeFile *f = files; f->path; f++) put(d, f->path, f->text);
    memavail_read(m, d);
    memavail_describe(m, line, n);
}

static void test_memavail(void) {
    char root[512], line[600];
    test_tmpdir(root, sizeof root, "ddp_test_memavail");
    const double MiB = 1048576.0;
    MemAvail m;

    /* no cgroup file: MemAvailable alone */
    static const FakeFile none[] = {{"proc/meminfo", "MemTotal: 8000000 kB\nMemFree: 100 kB\nMemAvailable: 4096000 kB\n"}, {0}};
    read_fake(root, "a", none, &m, line, sizeof line);
    EXPECT(m.node_bytes == 4096000.0 * 1024 && m.cgroup_bytes < 0 && memavail_bytes(&m) == m.node_bytes,
           "no cgroup: MemAvailable (%s)", line);

    /* v1, a job's group under a step's: the job's limit is the tighter, less its use, not
     * counting the inactive file cache */
    static const FakeFile v1[] = {
        {"proc/meminfo", "MemAvailable: 204800000 kB\n"},
        {"proc/self/cgroup", "5:cpuacct,cpu:/slurm/job_7/step_0\n4:memory:/slurm/job_7/step_0\n0::/\n"},
        {"sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"},
        {"sys/fs/cgroup/memory/slurm/memory.limit_in_bytes", "9223372036854771712\n"},
        {"sys/fs/cgroup/memory/slurm/job_7/memory.limit_in_bytes", "4294967296\n"},
        {"sys/fs/cgroup/memory/slurm/job_7/memory.usage_in_bytes", "2147483648\n"},
        {"sys/fs/cgroup/memory/slurm/job_7/memory.stat", "cache 1\ninactive_file 5\ntotal_inactive_file 1073741824\n"},
        {"sys/fs/cgroup/memory/slurm/job_7/step_0/memory.limit_in_bytes", "8589934592\n"},
        {"sys/fs/cgroup/memory/slurm/job_7/step_0/memory.usage_in_bytes", "2147483648\n"},
        {0}};
    read_fake(root, "b", v1, &m, line, sizeof line);
    EXPECT(m.cgroup_bytes == 3072 * MiB && m.limit_bytes == 4096 * MiB && !strcmp(m.cgroup, "/slurm/job_7") &&
           memavail_bytes(&m) == 3072 * MiB && strstr(line, "/slurm/job_7: limit 4096.0 MiB, 3072.0 MiB free"),
           "cgroup v1: the job's limit 4 GiB less 2 GiB used plus 1 GiB inactive cache (%s)", line);

    /* v2 alone: "max" is no limit; the limit above it counts */
    static const FakeFile v2[] = {
        {"proc/meminfo", "MemAvailable: 204800000 kB\n"},
        {"proc/self/cgroup", "0::/user.slice/job\n"},
        {"sys/fs/cgroup/cgroup.controllers", "cpu memory\n"},
        {"sys/fs/cgroup/user.slice/memory.max", "1073741824\n"},
        {"sys/fs/cgroup/user.slice/memory.current", "536870912\n"},
        {"sys/fs/cgroup/user.slice/job/memory.max", "max\n"},
        {"sys/fs/cgroup/user.slice/job/memory.current", "1000\n"},
        {0}};
    read_fake(root, "c", v2, &m, line, sizeof line);
    EXPECT(m.cgroup_bytes == 512 * MiB && !strcmp(m.cgroup, "/user.slice") && memavail_bytes(&m) == 512 * MiB,
           "cgroup v2: memory.max 'max' below a 1 GiB limit with 512 MiB used (%s)", line);

    /* a container: the named group is not under the mount, whose root holds the limit; a
     * limit above MemAvailable leaves MemAvailable the answer */
    static const FakeFile box[] = {
        {"proc/meminfo", "MemAvailable: 1024 kB\n"},
        {"proc/self/cgroup", "0::/docker/abc\n"},
        {"sys/fs/cgroup/cgroup.controllers", "memory\n"},
        {"sys/fs/cgroup/memory.max", "2147483648\n"},
        {"sys/fs/cgroup/memory.current", "0\n"},
        {0}};
    read_fake(root, "e", box, &m, line, sizeof line);
    EXPECT(m.cgroup_bytes == 2048 * MiB && memavail_bytes(&m) == 1024.0 * 1024 && !strncmp(line, "MemAvailable 1.0 MiB", 20),
           "container: the mount's root read; MemAvailable the smaller (%s)", line);

    /* nothing readable: 0, so --data_in_memory auto holds the share (as yes) */
    static const FakeFile nothing[] = {{0}};
    read_fake(root, "none", nothing, &m, line, sizeof line);
    EXPECT(memavail_bytes(&m) == 0.0 && m.node_bytes < 0 && m.cgroup_bytes < 0, "nothing readable: 0");
    test_rm_tree(root);
}

/* quote_name: plain names as they are; control characters and bytes that are not UTF-8
 * quoted with C escapes, as git quotes a path; cut on a character when the buffer is short. */
static void test_quote_name(void) {
    char b[64];
    static const struct { const char *in, *out; } cases[] = {
        {"train/cat/a.jpg", "train/cat/a.jpg"},
        {"caf\xc3\xa9 \"x\" \\", "caf\xc3\xa9 \"x\" \\"},                 /* UTF-8, quotes, backslash: as they are */
        {"a\nb\033[31m.jpg", "\"a\\nb\\033[31m.jpg\""},
        {"t\tq\"\\", "\"t\\tq\\\"\\\\\""},                          /* quoted: \" and \\ escaped too */
        {"caf\xe9", "\"caf\\351\""},                                   /* Latin-1: not UTF-8 */
        {"\xc2\x9b[2J", "\"\\302\\233[2J\""},                             /* C1 CSI, an escape in UTF-8 */
        {"\xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80", "\"\\355\\240\\200 \\300\\257 \\364\\220\\200\\200\""},   /* surrogate, overlong, past U+10FFFF */
        {"\xe2\x82", "\"\\342\\202\""},                                     /* a sequence the string ends inside */
        {"\x7f", "\"\\177\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        quote_name(b, sizeof b, cases[i].in);
        EXPECT(!strcmp(b, cases[i].out), "quote_name case %zu: [%s], want [%s]", i, b, cases[i].out);
    }
    char small[12];
    quote_name(small, sizeof small, "\n\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
    EXPECT(!strcmp(small, "\"\\n\xc3\xa9\xc3\xa9...\""), "quote_name cut on a character: [%s]", small);
    EXPECT(!name_needs_quoting("ok/name") && name_needs_quoting("a\x1b") && name_needs_quoting("\xff"),
           "name_needs_quoting");
}

/* The protobuf writer against the encoding guide's own examples (protobuf.dev, "Encoding"):
 * field 1 = 150 is 08 96 01, field 2 = "testing" is 12 07 74 65 73 74 69 6e 67, a message
 * holding field 1 = 150 in field 3 is 1a 03 08 96 01, packed 3, 270, 86942 in field 4 is
 * 22 06 03 8e 02 9e a7 05; and the fixed and negative forms. */
static void test_protobuf(void) {
    PbBuf b, m;
    pb_init(&b);
    pb_init(&m);
    pb_int64(&b, 1, 150);
    pb_string(&b, 2, "testing");
    pb_int64(&m, 1, 150);
    pb_message(&b, 3, &m);
    const int64_t packed[3] = {3, 270, 86942};
    pb_packed_int64(&b, 4, packed, 3);
    static const uint8_t want[] = {0x08, 0x96, 0x01, 0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g',
                                   0x1a, 0x03, 0x08, 0x96, 0x01, 0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05};
    EXPECT(b.len == sizeof want && !memcmp(b.data, want, sizeof want), "protobuf: the guide's examples (%zu bytes)",
           b.len);
    pb_reset(&b);
    pb_int64(&b, 2, -1);          /* ten bytes: ff x9, 01 */
    pb_float(&b, 2, 1.0f);        /* 15 00 00 80 3f */
    pb_double(&b, 1, -2.0);       /* 09, then 0xc000000000000000 little-endian */
    const float two[2] = {1.0f, -2.0f};
    pb_packed_float(&b, 5, two, 2);
    static const uint8_t want2[] = {0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                                    0x15, 0x00, 0x00, 0x80, 0x3f,
                                    0x09, 0, 0, 0, 0, 0, 0, 0, 0xc0,
                                    0x2a, 0x08, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
    EXPECT(b.len == sizeof want2 && !memcmp(b.data, want2, sizeof want2),
           "protobuf: negative varint, float, double, packed floats (%zu bytes)", b.len);
    pb_free(&b);
    pb_free(&m);
}

/* CRC-32C's check value (RFC 3720, B.4; the catalogue's "check" for CRC-32/ISCSI), whole and
 * continued across a split. */
static void test_crc32c(void) {
    const char *s = "123456789";
    EXPECT(crc32c(s, 9) == 0xE3069283u, "crc32c(\"123456789\") = 0x%08x (want 0xe3069283)", crc32c(s, 9));
    EXPECT(crc32c_extend(crc32c(s, 4), s + 4, 5) == 0xE3069283u && crc32c(s, 0) == 0, "crc32c continued across a split");
}

int main(void) {
    test_config();
    test_crc32c();
    test_quote_name();
    test_protobuf();
    test_half();
    test_model_layout();
    test_model_flops();
    test_schedule();
    test_sgd();
    test_scaler();
    test_model_grad_scale();
    test_model_evaluate_chunks();
    test_model_input_size();
    test_progressive_schedule();
    test_reducer_requests();
    test_reducer_progress();
    test_gpu_choice();
    test_memavail();
    printf(g_fail ? "%d check(s) failed\n" : "all checks passed\n", g_fail);
    return g_fail ? 1 : 0;
}
