/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_image.c - the image decoders on arbitrary bytes (ddptrain-data import's entry point:
 * JPEG or PNG by content, to RGB), then the resize + centre crop of what decoded, to a size
 * that shrinks one side and (for small images) enlarges the other. */
#include "fuzz.h"

#include <stdlib.h>

#include "data/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ImageRGB im;
    char err[512];
    if (image_decode(data, size, 1 << 22, &im, err, sizeof err) == 0) {
        uint8_t out[24 * 24 * 3];
        image_resize_crop(&im, 24, out);
        free(im.rgb);
    }
    return 0;
}
