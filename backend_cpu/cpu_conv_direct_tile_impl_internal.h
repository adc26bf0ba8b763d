/* The forward tiles of the direct convolution (cpu_conv_direct.c) for one vector width, included
 * once per width after defining DT_TARGET (the function attributes), DT_LANES (8 or 16 f32
 * lanes), DT_FN(name) (the name with the width's suffix), DT_SET1(x) (x in every lane) and
 * DT_STORE_TAIL(row, v, n) (the first n lanes of v stored at row). A tile holds MR output
 * channels x NV vectors of one output row in registers; every lane sums its taps in the same
 * order, so each width gives the same bits. */

typedef float DT_FN(dt_vec) __attribute__((vector_size(DT_LANES * sizeof(float)), aligned(4)));

/* y (MR rows ystride apart, NV vectors of columns, `tail` lanes of the last kept) = bias + the
 * sum over taps of a (K, MR) times the run of inputs at xb + off[k]. */
DT_TARGET __attribute__((always_inline)) static inline void
DT_FN(dconv_tile)(int mr, int nv, int64_t k, const float *a, const float *xb, const int64_t *off,
                  const float *bias, float *y, int64_t ystride, int tail)
{
    typedef DT_FN(dt_vec) vec;
    vec acc[6][2];
    #pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        acc[r][0] = (vec)DT_SET1(bias ? bias[r] : 0.0f);
        acc[r][1] = acc[r][0];
    }
    for (int64_t t = 0; t < k; t++, a += mr) {
        const float *b = xb + off[t];
        const vec b0 = *(const vec *)b;
        const vec b1 = nv > 1 ? *(const vec *)(b + DT_LANES) : b0;
        #pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const vec ar = (vec)DT_SET1(a[r]);
            acc[r][0] += ar * b0;
            if (nv > 1)
                acc[r][1] += ar * b1;
        }
    }
    #pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        float *row = y + r * ystride;
        if (nv > 1)
            *(vec *)row = acc[r][0];
        if (tail == DT_LANES)
            *(vec *)(row + DT_LANES * (nv - 1)) = acc[r][nv - 1];
        else
            DT_STORE_TAIL(row + DT_LANES * (nv - 1), acc[r][nv - 1], tail);
    }
}

#define DT_TILE(mr, nv)                                                                           \
    DT_TARGET static void DT_FN(dconv_tile_##mr##_##nv)(int64_t k, const float *a,               \
                                                        const float *xb, const int64_t *off,     \
                                                        const float *bias, float *y,             \
                                                        int64_t ystride, int tail)               \
    {                                                                                             \
        DT_FN(dconv_tile)(mr, nv, k, a, xb, off, bias, y, ystride, tail);                         \
    }
DT_TILE(1, 1)
DT_TILE(1, 2)
DT_TILE(2, 1)
DT_TILE(2, 2)
DT_TILE(3, 1)
DT_TILE(3, 2)
DT_TILE(4, 1)
DT_TILE(4, 2)
DT_TILE(5, 1)
DT_TILE(5, 2)
DT_TILE(6, 1)
DT_TILE(6, 2)
#undef DT_TILE

/* [mr][nv]: the tile for mr output channels and nv vectors of columns */
static const dconv_tile_fn DT_FN(dconv_tiles)[7][3] = {
    [1] = {NULL, DT_FN(dconv_tile_1_1), DT_FN(dconv_tile_1_2)},
    [2] = {NULL, DT_FN(dconv_tile_2_1), DT_FN(dconv_tile_2_2)},
    [3] = {NULL, DT_FN(dconv_tile_3_1), DT_FN(dconv_tile_3_2)},
    [4] = {NULL, DT_FN(dconv_tile_4_1), DT_FN(dconv_tile_4_2)},
    [5] = {NULL, DT_FN(dconv_tile_5_1), DT_FN(dconv_tile_5_2)},
    [6] = {NULL, DT_FN(dconv_tile_6_1), DT_FN(dconv_tile_6_2)},
};
