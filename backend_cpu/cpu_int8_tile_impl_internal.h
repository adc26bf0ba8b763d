/* One path's tile of the int8 product, written once for any vector width. The includer defines
 * TILE_TARGET (the function attributes), TILE_VEC (the vector type), TILE_LANES (its int32
 * lanes), TILE_MR (rows at most, 4 or 8), TILE_LOAD(at), TILE_SET1(word), TILE_ZERO(),
 * TILE_DOT(acc, u, s) (acc + the sums of 4 u8 x s8 products per lane), and
 * store_vec(p, r, j, sum), which writes the lanes of row r from column j. */

/* B's bytes of the vector starting at column j (a multiple of TILE_LANES), group 0 */
static inline const int8_t *vec_panel(const em_int8_product *p, int64_t j)
{
    return p->b + j / EM_INT8_PANEL * p->b_panel + j % EM_INT8_PANEL * EM_INT8_KGROUP;
}

/* One 4-byte group of mr rows (at a, rstep bytes apart) against two vectors of B. */
TILE_TARGET static __attribute__((always_inline)) inline void
tile_step(TILE_VEC c[][2], const uint8_t *a, int64_t rstep, const int8_t *b0, const int8_t *b1,
          int mr, bool a_signed)
{
    TILE_VEC v0 = TILE_LOAD(b0), v1 = TILE_LOAD(b1);
    #pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        TILE_VEC x = TILE_SET1(em_int8_load32(a + r * rstep));
        c[r][0] = a_signed ? TILE_DOT(c[r][0], v0, x) : TILE_DOT(c[r][0], x, v0);
        c[r][1] = a_signed ? TILE_DOT(c[r][1], v1, x) : TILE_DOT(c[r][1], x, v1);
    }
}

/* mr rows x the two vectors from column j; mr and a_signed are constants where it is
 * inlined, so the accumulators live in registers. */
TILE_TARGET static __attribute__((always_inline)) inline void
tile_rows(const em_int8_product *p, int64_t r0, int mr, int64_t j, bool a_signed)
{
    const int8_t *b0 = vec_panel(p, j), *b1 = vec_panel(p, j + TILE_LANES);
    const uint8_t *row = em_int8_a_row(p, r0);
    int64_t rstep = p->lda ? p->lda : EM_INT8_KGROUP, gstep = em_int8_a_step(p);
    int64_t kg = em_int8_groups(p->k), kfull = p->k / EM_INT8_KGROUP;
    TILE_VEC c[TILE_MR][2];
    #pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
        c[r][0] = c[r][1] = TILE_ZERO();
    for (int64_t g = 0; g < kfull; g++) {
        int64_t o = g * EM_INT8_GROUP_BYTES;
        tile_step(c, row + g * gstep, rstep, b0 + o, b1 + o, mr, a_signed);
    }
    if (kfull < kg) { /* the last, partial group, its words copied out */
        uint8_t last[TILE_MR * EM_INT8_KGROUP];
        for (int r = 0; r < mr; r++) {
            int32_t word = em_int8_a_group(p, row + r * rstep, kfull);
            memcpy(last + r * EM_INT8_KGROUP, &word, sizeof word);
        }
        int64_t o = kfull * EM_INT8_GROUP_BYTES;
        tile_step(c, last, EM_INT8_KGROUP, b0 + o, b1 + o, mr, a_signed);
    }
    #pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        store_vec(p, r0 + r, j, c[r][0]);
        store_vec(p, r0 + r, j + TILE_LANES, c[r][1]);
    }
}

#define TILE_CASE(mr)                                                                         \
    case mr:                                                                                  \
        if (p->a_signed)                                                                      \
            tile_rows(p, r0, mr, j, true);                                                    \
        else                                                                                  \
            tile_rows(p, r0, mr, j, false);                                                   \
        break;

/* mr (1 .. TILE_MR) rows x 2 * TILE_LANES columns from j */
TILE_TARGET static void tile_vectors(const em_int8_product *p, int64_t r0, int mr, int64_t j)
{
    switch (mr) {
        TILE_CASE(1)
        TILE_CASE(2)
        TILE_CASE(3)
        TILE_CASE(4)
#if TILE_MR > 4
        TILE_CASE(5)
        TILE_CASE(6)
        TILE_CASE(7)
        TILE_CASE(8)
#endif
    }
}

#undef TILE_CASE
