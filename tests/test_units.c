/* test_units.c - config table parsing, model layout, schedule and optimizer arithmetic. */
#include <math.h>
#include <string.h>

#include "config.h"
#include "model.h"
#include "optim.h"
#include "schedule.h"
#include "util.h"

static int g_fail = 0;
#define EXPECT(cond, ...) do { \
    if (cond) { printf("ok: "); printf(__VA_ARGS__); printf("\n"); } \
    else { printf("FAIL (%s:%d): ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); g_fail++; } \
} while (0)

static void test_config(void) {
    Config c;
    config_init(&c);
    EXPECT(c.batch_size == 64 && c.epochs == 10 && fabs(c.lr - 0.01) < 1e-15 && fabs(c.momentum - 0.9) < 1e-15 &&
           fabs(c.weight_decay - 1e-4) < 1e-18 && c.grad_accum_steps == 1 && c.use_amp == 1 && c.save_every == 1 &&
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
    /* BN channels: stem 64, stage 1 4x64, stage 2 5x128, stage 3 5x256 = 2240 */
    EXPECT(m.num_buffers == 2 * 2240, "running mean and var of 2240 BN channels (%zu floats)", m.num_buffers);
    model_free(&m);
    model_init(&m, 16, 3, 7, 24, 2);
    EXPECT(model_find_param(&m, "layer3.2.conv2.weight") >= 0 && m.param_info[m.n_param_info - 2].shape[0] == 7,
           "width and blocks configurable (width 16, 3 blocks, 7 classes: %zu parameters)", m.num_params);
    model_free(&m);
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
}

static void test_sgd(void) {
    SGD o;
    sgd_init(&o, 2, 0.9f, 0.1f);
    float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f};
    /* by hand: d = g + wd p; buf = d; p -= lr buf; then d' = g + wd p'; buf = 0.9 buf + d' */
    double p0 = 1.0, b0 = 0.5 + 0.1 * 1.0;
    p0 -= 0.1 * b0;
    double d1 = 0.5 + 0.1 * p0, b1 = 0.9 * b0 + d1;
    p0 -= 0.1 * b1;
    sgd_step(&o, p, g, 0.1f);
    sgd_step(&o, p, g, 0.1f);
    EXPECT(fabs(p[0] - p0) < 1e-6, "SGD momentum + weight decay matches PyTorch's rule (%.7f vs %.7f)", p[0], p0);
    sgd_free(&o);
}

int main(void) {
    test_config();
    test_model_layout();
    test_schedule();
    test_sgd();
    printf(g_fail ? "%d check(s) failed\n" : "all checks passed\n", g_fail);
    return g_fail ? 1 : 0;
}
