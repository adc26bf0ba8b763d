/* libFuzzer target: PNG, JPEG and BMP bytes through ember's image decoder (em_image_decode, as
 * the image folder reads its files) under a pixel cap of 2^18, then each decoded image made into
 * gray and RGB samples of another size (em_image_sample: conversion and bilinear resize). Any
 * input must decode or fail with a message, never crash, leak, read past the bytes or work on
 * more pixels than the cap. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/image_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly size bytes, so ASan sees any read past them */
    uint8_t *bytes = malloc(size ? size : 1);
    assert(bytes);
    memcpy(bytes, data, size);
    em_error_clear();
    em_image img = {0};
    em_status st = em_image_decode(bytes, size, "fuzz", (int64_t)1 << 18, &img);
    if (st == EM_OK) {
        assert(img.width > 0 && img.height > 0 && (int64_t)img.width * img.height <= 1 << 18);
        assert(img.channels == 1 || img.channels == 3);
        float gray[1 * 5 * 7], rgb[3 * 4 * 3];
        assert(em_image_sample(&img, 1, 5, 7, gray) == EM_OK);
        assert(em_image_sample(&img, 3, 4, 3, rgb) == EM_OK);
        for (size_t k = 0; k < sizeof gray / sizeof *gray; k++)
            assert(gray[k] >= 0 && gray[k] <= 1);
        for (size_t k = 0; k < sizeof rgb / sizeof *rgb; k++)
            assert(rgb[k] >= 0 && rgb[k] <= 1);
        em_image_free(&img);
    } else {
        assert(em_error()[0] && !img.pixels);
    }
    free(bytes);
    em_error_clear();
    return 0;
}
