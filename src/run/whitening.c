/* SPDX-License-Identifier: BSD-3-Clause */
/* whitening.c - the whitening convolution's weight from every rank's training images
 * (whitening.h). */
#include "whitening.h"

#include <stdlib.h>

#include "base/util.h"
#include "model/whiten.h"

void whitening_init(Learner *l, DataLoader *train, Comm *comm, const Config *c, Logger *log) {
    Model *m = &l->model;
    int kh, kw;
    if (!whiten_kernel(m, &kh, &kw)) return;
    const uint8_t *img = dataloader_images(train);
    if (!img) {
        g_die_quiet = comm->rank != 0;
        die_code(2, "--model %s: its whitening convolution needs the training images in memory (not --data_in_memory no, "
                 "JPEG shards or --train_crop_size)", c->model);
    }
    const int d = 3 * kh * kw, S = dataloader_image_size(train);
    const size_t per = (size_t)((c->whiten_images + comm->world_size - 1) / comm->world_size);
    const size_t have = dataloader_num_samples(train), n = per < have ? per : have;
    double *sums = callocCheck((size_t)d * d + 1, sizeof *sums);   /* [d*d] then the patch count */
    whiten_patch_moments(img, n, S, dataloader_lut(train), kh, kw, sums, &sums[d * d]);
    if (comm->world_size > 1) comm_allreduce(comm, sums, (size_t)d * d + 1, COMM_FLOAT64, COMM_SUM);
    if (model_whiten(m, sums, sums[d * d], c->whiten_eps) != 0) {
        g_die_quiet = comm->rank != 0;
        die_code(2, "--model %s: the whitening convolution's eigenvectors did not converge (the images' patches hold "
                 "values that are not finite)", c->model);
    }
    log_info(log, "whitening: the first convolution's %d filters from %.0f %dx%d patches of %zu images per rank "
             "(eps %g)%s", 2 * d, sums[d * d], kh, kw, n, c->whiten_eps,
             c->whiten_bias_epochs > 0 ? "; its bias trained in the first --whiten_bias_epochs epochs" : "");
    free(sums);
}
