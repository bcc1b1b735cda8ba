/* SPDX-License-Identifier: BSD-3-Clause */
/* aug_space.c - see aug_space.h. The magnitudes are torchvision 0.14's _augmentation_space
 * tables (AutoAugment, RandAugment, TrivialAugmentWide, AugMix), computed as it computes them. */
#include "aug_space.h"

#include <math.h>

/* torch.linspace(s, e, n)[i] in float32: the kernel's halves, counted from either end. */
static float linspace(float s, float e, int n, int i) {
    const float step = (e - s) / (float)(n - 1);
    return i < n / 2 ? s + step * (float)i : e - step * (float)(n - i - 1);
}

double autoaug_magnitude(int policy, int op, int bin, int n, int w, int h) {
    const int wide = policy == AA_TA_WIDE, mix = policy == AA_AUGMIX;
    switch (op) {
    case PIL_SHEAR_X:
    case PIL_SHEAR_Y: return linspace(0.0f, wide ? 0.99f : 0.3f, n, bin);
    case PIL_TRANSLATE_X: return linspace(0.0f, wide ? 32.0f : (float)(mix ? w / 3.0 : 150.0 / 331.0 * w), n, bin);
    case PIL_TRANSLATE_Y: return linspace(0.0f, wide ? 32.0f : (float)(mix ? h / 3.0 : 150.0 / 331.0 * h), n, bin);
    case PIL_ROTATE: return linspace(0.0f, wide ? 135.0f : 30.0f, n, bin);
    case PIL_BRIGHTNESS:
    case PIL_COLOR:
    case PIL_CONTRAST:
    case PIL_SHARPNESS: return linspace(0.0f, wide ? 0.99f : 0.9f, n, bin);
    case PIL_POSTERIZE:   /* 8 - round(arange(n) / ((n - 1) / k)), float32, ties to even; AugMix's 4 - */
        return (mix ? 4 : 8) - (int)nearbyintf((float)bin / (float)((n - 1) / (wide ? 6.0 : 4.0)));
    case PIL_SOLARIZE: return linspace(255.0f, 0.0f, n, bin);
    default: return 0.0;
    }
}
