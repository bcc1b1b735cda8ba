/* SPDX-License-Identifier: BSD-3-Clause */
/* ckpt_dump.c - writes a checkpoint of a MiniResNet with random weights, BN statistics,
 * num_batches_tracked and momentum, plus a one-shard test set that doubles as the reference:
 * random uint8 images with labels and mean/std attributes (the dataset format), and the logits
 * and number of correct predictions ddptrain computes for them in eval mode. tests/
 * ckpt_torch_check.py loads the checkpoint into PyTorch and must reproduce both.
 *
 * usage: ckpt_dump CKPT.h5 DATA_DIR [--width W] [--blocks B] [--image_size S] [--batch N] [--seed S]
 *        (writes DATA_DIR/test-00000-of-00001.h5) */
#include <hdf5.h>
#include <string.h>

#include "ckpt/checkpoint.h"
#include "model/model.h"
#include "model/optim.h"
#include "base/rng.h"
#include "base/util.h"
#include "model_testutil.h"

static void write_ds(hid_t f, const char *name, hid_t ftype, hid_t mtype, int ndim, const hsize_t *dims, const void *data) {
    hid_t sp = H5Screate_simple(ndim, dims, NULL);
    hid_t ds = H5Dcreate2(f, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(ds >= 0);
    CHECK(H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
}

static void write_attr(hid_t f, const char *name, hid_t ftype, hid_t mtype, hsize_t n, const void *data) {
    hid_t sp = n == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, NULL);
    hid_t a = H5Acreate2(f, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0);
    CHECK(H5Awrite(a, mtype, data) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
}

int main(int argc, char **argv) {
    g_progname = "ckpt_dump";
    if (argc < 3) die_code(2, "usage: ckpt_dump CKPT.h5 DATA_DIR [--width W] [--blocks B] [--image_size S] [--batch N] [--seed S]");
    const char *ckpt = argv[1], *data_dir = argv[2];
    int width = 8, blocks = 1, S = 16, N = 32, seed = 1, K = 10;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--width")) width = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--blocks")) blocks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--image_size")) S = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) N = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = atoi(argv[i + 1]);
        else die_code(2, "unknown option %s", argv[i]);
    }
    Model m;
    Optimizer opt;
    model_init(&m, width, blocks, K, S, N);
    model_init_weights(&m, (uint64_t)seed);
    sgd_init(&opt, m.num_params, 0.9f, 1e-4f);
    /* BN affine parameters and running statistics away from their defaults, so a load that
     * dropped or swapped any of them changes the logits. */
    model_randomize_bn(&m, (uint64_t)seed, 78);
    Rng r;
    rng_init(&r, (uint64_t)seed, 78, 1);
    /* the first BN 1234; per block bn1 100 + i, bn2 200 + i, the shortcut's 300 + i */
    for (int k = 0, i = -1; k < m.n_bn; k++) {
        const char *name = m.bn_info[k].name;
        if (k == 0) m.bn_tracked[k] = 1234;
        else if (strstr(name, ".bn1.")) m.bn_tracked[k] = 100 + ++i;
        else if (strstr(name, ".bn2.")) m.bn_tracked[k] = 200 + i;
        else m.bn_tracked[k] = 300 + i;
    }
    for (size_t i = 0; i < opt.n; i++) opt.state[0][i] = 0.01f * rng_normal(&r);
    opt.steps = 42;
    model_params_changed(&m);

    TrainState ts = {.epoch = 2, .step_in_epoch = 5, .global_step = 25, .world_size = 2, .seed = (uint64_t)seed};
    char err[1024];
    if (checkpoint_save(ckpt, &m, &opt, &ts, "{\"source\": \"ckpt_dump\"}", err, sizeof err) != 0) die("%s", err);

    /* The test set: uint8 NHWC images, normalised as the data loader does. */
    const float mean[3] = {0.4f, 0.5f, 0.6f}, stdv[3] = {0.2f, 0.25f, 0.3f};
    size_t npix = (size_t)N * S * S * 3;
    uint8_t *img = mallocCheck(npix);
    float *x = mallocCheck(npix * sizeof(float));
    int *y = mallocCheck((size_t)N * sizeof(int));
    int32_t *y32 = mallocCheck((size_t)N * sizeof(int32_t));
    for (size_t i = 0; i < npix; i++) {
        img[i] = (uint8_t)rng_below(&r, 256);
        int c = (int)(i % 3);
        x[i] = ((float)img[i] / 255.0f - mean[c]) / stdv[c];
    }
    for (int i = 0; i < N; i++) y32[i] = y[i] = (int)rng_below(&r, (uint32_t)K);
    int correct = 0;
    model_forward(&m, x, y, N, 0, 1.0f, &correct);

    if (mkdir_p(data_dir) != 0) die("%s: cannot create directory", data_dir);
    char shard[4096];
    snprintf_check(shard, sizeof shard, "%s/test-00000-of-00001.h5", data_dir);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fcreate(shard, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) die("%s: cannot create", shard);
    hsize_t di[4] = {(hsize_t)N, (hsize_t)S, (hsize_t)S, 3}, dl[1] = {(hsize_t)N}, dg[2] = {(hsize_t)N, (hsize_t)K};
    write_ds(f, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, 4, di, img);
    write_ds(f, "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, 1, dl, y32);
    write_ds(f, "ref_logits", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, dg, m.logits);
    int ncls = K;
    write_attr(f, "num_classes", H5T_STD_I32LE, H5T_NATIVE_INT, 0, &ncls);
    write_attr(f, "mean", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 3, mean);
    write_attr(f, "std", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 3, stdv);
    write_attr(f, "ref_correct", H5T_STD_I32LE, H5T_NATIVE_INT, 0, &correct);
    CHECK(H5Fclose(f) >= 0);
    printf("ckpt_dump: wrote %s (width %d, blocks %d, %zu parameters) and %s (%d images %dx%d, %d correct)\n",
           ckpt, width, blocks, m.num_params, shard, N, S, S, correct);
    free(img); free(x); free(y); free(y32);
    optim_free(&opt);
    model_free(&m);
    return 0;
}
