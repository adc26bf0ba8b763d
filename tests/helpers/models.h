/* Models that more than one suite builds and checks in its own way. */
#ifndef EMBER_TEST_MODELS_H
#define EMBER_TEST_MODELS_H

#include "ember.h"

/* A U-Net level over x (N, 3, H, W), H and W even: an encoder conv to 4 channels, a skip
 * joining them to a downsampled, convolved, group-normed and upsampled copy (em_concat_skip:
 * Concat over an Identity), an Inception-like Concat of three branches along dim -3 (a 1x1 conv,
 * a 3x3 conv with a ReLU, an Identity), a 1x1 conv to 2 channels -> (N, 2, H, W). */
em_module *em_test_concat_unet(void);

#endif
