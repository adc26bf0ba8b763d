/* The lane-parallel body of the Winograd tile transforms, written once and compiled for each
 * vector width by cpu_winograd_tiles.c: it defines WG_TARGET (the function attributes) and
 * WG_FN(name) (the name with the width's suffix) before including this file. A vector of 16
 * lanes is one AVX-512 register or two AVX2 ones. */

/* The three tile matrices, each applied along one axis of a tile: out[r][s] = the sum over k
 * of M[r][k] in[k][s], for s < sn, in and out addressed by their own strides (floats) for the
 * two axes, each entry a vector of 16 lanes. The rows of M are written as sums that form their
 * shared terms once (14 operations for B^T in place of 22, 10 for A^T in place of 18, 8 for A's
 * four inner rows in place of 16). */
#define WG_AT(p) (*(wg_vec *)(p))

/* B^T (6, 6) = (4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
 * 0 4 0 -5 0 1) */
WG_TARGET __attribute__((always_inline)) static inline void
WG_FN(apply_bt)(int sn, const float *in, int64_t in_k, int64_t in_s, float *out, int64_t out_r,
                int64_t out_s)
{
    #pragma GCC unroll 6
    for (int s = 0; s < sn; s++) {
        const float *i = in + s * in_s;
        float *o = out + s * out_s;
        const wg_vec d0 = WG_AT(i), d1 = WG_AT(i + in_k), d2 = WG_AT(i + 2 * in_k),
                     d3 = WG_AT(i + 3 * in_k), d4 = WG_AT(i + 4 * in_k), d5 = WG_AT(i + 5 * in_k);
        const wg_vec a = d4 - 4.0f * d2, b = d3 - 4.0f * d1; /* rows 1 and 2: a + b, a - b */
        const wg_vec c = d4 - d2, e = 2.0f * (d3 - d1);      /* rows 3 and 4: c + e, c - e */
        WG_AT(o) = d4 + 4.0f * d0 - 5.0f * d2;
        WG_AT(o + out_r) = a + b;
        WG_AT(o + 2 * out_r) = a - b;
        WG_AT(o + 3 * out_r) = c + e;
        WG_AT(o + 4 * out_r) = c - e;
        WG_AT(o + 5 * out_r) = d5 + 4.0f * d1 - 5.0f * d3;
    }
}

/* A^T (4, 6) = (1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1) */
WG_TARGET __attribute__((always_inline)) static inline void
WG_FN(apply_at)(int sn, const float *in, int64_t in_k, int64_t in_s, float *out, int64_t out_r,
                int64_t out_s)
{
    #pragma GCC unroll 6
    for (int s = 0; s < sn; s++) {
        const float *i = in + s * in_s;
        float *o = out + s * out_s;
        const wg_vec p0 = WG_AT(i), p1 = WG_AT(i + in_k), p2 = WG_AT(i + 2 * in_k),
                     p3 = WG_AT(i + 3 * in_k), p4 = WG_AT(i + 4 * in_k), p5 = WG_AT(i + 5 * in_k);
        const wg_vec s12 = p1 + p2, d12 = p1 - p2, s34 = p3 + p4, d34 = p3 - p4;
        WG_AT(o) = p0 + s12 + s34;
        WG_AT(o + out_r) = d12 + 2.0f * d34;
        WG_AT(o + 2 * out_r) = s12 + 4.0f * s34;
        WG_AT(o + 3 * out_r) = d12 + 8.0f * d34 + p5;
    }
}

/* A (6, 4) = (1 0 0 0; 1 1 1 1; 1 -1 1 -1; 1 2 4 8; 1 -2 4 -8; 0 0 0 1) */
WG_TARGET __attribute__((always_inline)) static inline void
WG_FN(apply_a)(int sn, const float *in, int64_t in_k, int64_t in_s, float *out, int64_t out_r,
               int64_t out_s)
{
    #pragma GCC unroll 6
    for (int s = 0; s < sn; s++) {
        const float *i = in + s * in_s;
        float *o = out + s * out_s;
        const wg_vec g0 = WG_AT(i), g1 = WG_AT(i + in_k), g2 = WG_AT(i + 2 * in_k),
                     g3 = WG_AT(i + 3 * in_k);
        const wg_vec even = g0 + g2, odd = g1 + g3;                 /* rows 1 and 2 */
        const wg_vec even4 = g0 + 4.0f * g2, odd4 = g1 + 4.0f * g3; /* rows 3 and 4 */
        WG_AT(o) = g0;
        WG_AT(o + out_r) = even + odd;
        WG_AT(o + 2 * out_r) = even - odd;
        WG_AT(o + 3 * out_r) = even4 + 2.0f * odd4;
        WG_AT(o + 4 * out_r) = even4 - 2.0f * odd4;
        WG_AT(o + 5 * out_r) = g3;
    }
}
#undef WG_AT

/* The 4x4 transposes inside each group of 4 lanes: with v[j] holding element j of 16 lanes,
 * t[k] holds in lanes 4q..4q+3 the elements 0..3 of lane 4q+k. The same network turns t back
 * into v. */
WG_TARGET __attribute__((always_inline)) static inline void
WG_FN(transpose4)(const wg_vec v[4], wg_vec t[4])
{
    const wg_vec lo01 = __builtin_shufflevector(v[0], v[1], WG_UNPACK_LO);
    const wg_vec hi01 = __builtin_shufflevector(v[0], v[1], WG_UNPACK_HI);
    const wg_vec lo23 = __builtin_shufflevector(v[2], v[3], WG_UNPACK_LO);
    const wg_vec hi23 = __builtin_shufflevector(v[2], v[3], WG_UNPACK_HI);
    t[0] = __builtin_shufflevector(lo01, lo23, WG_PAIRS_LO);
    t[1] = __builtin_shufflevector(lo01, lo23, WG_PAIRS_HI);
    t[2] = __builtin_shufflevector(hi01, hi23, WG_PAIRS_LO);
    t[3] = __builtin_shufflevector(hi01, hi23, WG_PAIRS_HI);
}

/* The full 16x16 transpose: out[l] holds element l of v[0..15]. Transposes of 4x4 inside groups
 * of 4 lanes, then of the 4-lane groups among each 4 vectors. */
WG_TARGET __attribute__((always_inline)) static inline void
WG_FN(transpose16)(const wg_vec v[L], wg_vec out[L])
{
    wg_vec t[4][4]; /* t[g][k], group q: elements 4q + k of v[4g..4g+3] */
    for (int g = 0; g < 4; g++)
        WG_FN(transpose4)(v + 4 * g, t[g]);
    for (int k = 0; k < 4; k++) {
        const wg_vec u0 = __builtin_shufflevector(t[0][k], t[1][k], WG_GROUPS_EVEN);
        const wg_vec u1 = __builtin_shufflevector(t[0][k], t[1][k], WG_GROUPS_ODD);
        const wg_vec u2 = __builtin_shufflevector(t[2][k], t[3][k], WG_GROUPS_EVEN);
        const wg_vec u3 = __builtin_shufflevector(t[2][k], t[3][k], WG_GROUPS_ODD);
        out[k] = __builtin_shufflevector(u0, u2, WG_HALVES_LO);
        out[4 + k] = __builtin_shufflevector(u1, u3, WG_HALVES_LO);
        out[8 + k] = __builtin_shufflevector(u0, u2, WG_HALVES_HI);
        out[12 + k] = __builtin_shufflevector(u1, u3, WG_HALVES_HI);
    }
}

/* u (36, M, C) = G k G^T for each kernel k (3, 3), in double, 16 input channels c0.. at a time:
 * k[t] holds tap t of their kernels, the lanes past C zero. Without contracting a multiply and
 * an add into one FMA: the compiler does so differently for one AVX-512 register and two AVX2
 * ones, and both bodies must give the same bits. */
WG_TARGET EM_UNFUSED static void WG_FN(weights)(const em_wg_geom *g, const float *w,
                                                 bool flip, float *u)
{
    EM_UNFUSED_BODY
    const int64_t cblocks = (g->c + L - 1) / L;
    #pragma omp parallel for if (g->m * g->c * EM_WG_P >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t mb = 0; mb < g->m * cblocks; mb++) {
        const int64_t m = mb / cblocks, c0 = mb % cblocks * L;
        const int nc = g->c - c0 < L ? (int)(g->c - c0) : L;
        wg_dvec k[9] = {0}, gk[EM_WG_A * 3]; /* the kernels (3, 3); G k (6, 3) */
        for (int t = 0; t < 9; t++)
            for (int l = 0; l < nc; l++)
                k[t][l] = flip ? w[((c0 + l) * g->m + m) * 9 + 8 - t]
                               : w[(m * g->c + c0 + l) * 9 + t];
        #pragma GCC unroll 6
        for (int i = 0; i < EM_WG_A; i++)
            #pragma GCC unroll 3
            for (int b = 0; b < 3; b++)
                gk[i * 3 + b] = wg_g[i * 3] * k[b] + wg_g[i * 3 + 1] * k[3 + b]
                                + wg_g[i * 3 + 2] * k[6 + b];
        #pragma GCC unroll 36
        for (int ij = 0; ij < EM_WG_P; ij++) {
            const wg_dvec *r = gk + ij / EM_WG_A * 3;
            const double *gj = wg_g + ij % EM_WG_A * 3;
            const wg_vec uf = __builtin_convertvector(r[0] * gj[0] + r[1] * gj[1] + r[2] * gj[2],
                                                      wg_vec);
            float *dst = u + (ij * g->m + m) * g->c + c0;
            if (nc == L)
                *(wg_vec *)dst = uf;
            else
                for (int l = 0; l < nc; l++)
                    dst[l] = uf[l];
        }
    }
}

/* gw (M, C, 3, 3) = G^T gu G for each (m, c) of gu (36, M, C), in double, 16 input channels
 * c0.. at a time, without contraction (as above). */
WG_TARGET EM_UNFUSED static void WG_FN(weights_back)(const em_wg_geom *g, const float *gu,
                                                      float *gw)
{
    EM_UNFUSED_BODY
    const int64_t cblocks = (g->c + L - 1) / L, mc_n = g->m * g->c;
    #pragma omp parallel for if (mc_n * EM_WG_P >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t mb = 0; mb < g->m * cblocks; mb++) {
        const int64_t m = mb / cblocks, c0 = mb % cblocks * L;
        const int nc = g->c - c0 < L ? (int)(g->c - c0) : L;
        wg_dvec ug[EM_WG_A * 3] = {0}; /* gu G (6, 3) */
        #pragma GCC unroll 36
        for (int ij = 0; ij < EM_WG_P; ij++) {
            const float *src = gu + ij * mc_n + m * g->c + c0;
            wg_vec gf = {0};
            if (nc == L)
                gf = *(const wg_vec *)src;
            else
                for (int l = 0; l < nc; l++)
                    gf[l] = src[l];
            const wg_dvec gd = __builtin_convertvector(gf, wg_dvec);
            #pragma GCC unroll 3
            for (int b = 0; b < 3; b++)
                ug[ij / EM_WG_A * 3 + b] += gd * wg_g[ij % EM_WG_A * 3 + b];
        }
        for (int ab = 0; ab < 9; ab++) {
            wg_dvec sum = {0};
            #pragma GCC unroll 6
            for (int i = 0; i < EM_WG_A; i++)
                sum += wg_g[i * 3 + ab / 3] * ug[i * 3 + ab % 3];
            for (int l = 0; l < nc; l++)
                gw[(m * g->c + c0 + l) * 9 + ab] = (float)sum[l];
        }
    }
}

WG_TARGET static void WG_FN(bias_sums)(const em_wg_geom *g, const float *gyt, double *gb)
{
    const int64_t plane = g->th * g->tw * EM_WG_M * EM_WG_M * L;
    for (int64_t m = 0; m < g->m; m++) {
        wg_dvec lane = {0};
        for (int64_t q = 0; q < plane; q += L)
            lane += __builtin_convertvector(*(const wg_vec *)(gyt + m * plane + q), wg_dvec);
        double sum = 0;
        for (int l = 0; l < L; l++)
            sum += lane[l];
        gb[m] += sum;
    }
}

WG_TARGET static void WG_FN(interleave)(const float *x, int64_t planes, int64_t h, int64_t w,
                                        int64_t n0, int lanes, int64_t ph, int64_t pw,
                                        int64_t hp, int64_t wp, float *xt)
{
    const int64_t rows = h < hp - ph ? h : hp - ph, cols = w < wp - pw ? w : wp - pw;
    const int64_t lane_step = planes * h * w;
    for (int64_t c = 0; c < planes; c++) {
        float *plane = xt + c * hp * wp * L;
        memset(plane, 0, (size_t)(hp * wp * L) * sizeof(float));
        const float *src = x + (n0 * planes + c) * h * w;
        for (int64_t r = 0; r < rows; r++) {
            float *dst = plane + ((r + ph) * wp + pw) * L;
            const float *at = src + r * w;
            int64_t col = 0;
            for (; col + 4 <= cols && lanes == L; col += 4) {
                /* 4 columns of 16 images: lane l's 4 values into group l / 4 of t[l % 4] */
                wg_vec t[4], v[4];
                #pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    t[k] = (wg_vec){WG_FOUR(at + k * lane_step + col),
                                    WG_FOUR(at + (4 + k) * lane_step + col),
                                    WG_FOUR(at + (8 + k) * lane_step + col),
                                    WG_FOUR(at + (12 + k) * lane_step + col)};
                WG_FN(transpose4)(t, v);
                for (int j = 0; j < 4; j++)
                    *(wg_vec *)(dst + (col + j) * L) = v[j];
            }
            for (; col < cols; col++)
                for (int l = 0; l < lanes; l++)
                    dst[col * L + l] = at[l * lane_step + col];
        }
    }
}

/* B^T d B of tile t of channel c of the interleaved planes xt: point s * 6 + r of the 36 at
 * out + r * out_r + s * out_s (16 lanes each). */
WG_TARGET __attribute__((always_inline)) static inline void
WG_FN(input_tile)(const em_wg_geom *g, const float *xt, int64_t c, int64_t t, float *out,
                  int64_t out_r, int64_t out_s)
{
    const float *d = xt + ((c * g->hp + t / g->tw * EM_WG_M) * g->wp + t % g->tw * EM_WG_M) * L;
    float tmp[EM_WG_P * L]; /* B^T d (6, 6, 16) */
    WG_FN(apply_bt)(EM_WG_A, d, g->wp * L, L, tmp, EM_WG_A * L, L);
    WG_FN(apply_bt)(EM_WG_A, tmp, L, EM_WG_A * L, out, out_r, out_s);
}

WG_TARGET static void WG_FN(input_transform)(const em_wg_geom *g, const float *xt, int64_t t0,
                                             int64_t t1, float *v)
{
    const int64_t nt = t1 - t0, vstride = em_wg_point_stride(g->c, nt);
    for (int64_t ct = 0; ct < g->c * nt; ct++)
        WG_FN(input_tile)(g, xt, ct / nt, t0 + ct % nt, v + ct * L, vstride, EM_WG_A * vstride);
}

/* vt (36, nt*16, C) = the transforms of input_transform with each point's matrix transposed:
 * row tile*16 + lane holds the C channels, for a product that reads them as rows. C a
 * multiple of 16: each tile's 16 channels c0.. go through a 16x16 transpose per point. */
WG_TARGET static void WG_FN(input_transform_t)(const em_wg_geom *g, const float *xt, int64_t t0,
                                               int64_t t1, float *vt)
{
    const int64_t nt = t1 - t0, pstride = em_wg_point_stride(g->c, nt);
    for (int64_t t = t0; t < t1; t++)
        for (int64_t c0 = 0; c0 < g->c; c0 += L) {
            wg_vec pts[EM_WG_P][L]; /* B^T d B of channels c0.. (36 points, 16 channels) */
            for (int j = 0; j < L; j++)
                WG_FN(input_tile)(g, xt, c0 + j, t, (float *)&pts[0][j], L * L,
                                  EM_WG_A * L * L);
            for (int pt = 0; pt < EM_WG_P; pt++) {
                wg_vec lanes[L];
                WG_FN(transpose16)(pts[pt], lanes);
                float *dst = vt + pt * pstride + (t - t0) * L * g->c + c0;
                for (int l = 0; l < L; l++)
                    *(wg_vec *)(dst + l * g->c) = lanes[l];
            }
        }
}

/* Row i of one output tile, out (4, 16) plus bias, into images [n0, n0 + lanes) of y: four
 * values (or the `cols` inside the edge) per image from one transposed group of lanes. */
WG_TARGET __attribute__((always_inline)) static inline void
WG_FN(store_row)(const wg_vec out[4], float bias, float *dst, int64_t lane_step, int lanes,
                 int64_t cols)
{
    wg_vec v[4], t[4];
    for (int j = 0; j < 4; j++)
        v[j] = out[j] + bias;
    WG_FN(transpose4)(v, t);
    if (lanes == L && cols == EM_WG_M) {
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            *(wg_four *)(dst + k * lane_step) = WG_GROUP(t[k], 0);
            *(wg_four *)(dst + (4 + k) * lane_step) = WG_GROUP(t[k], 1);
            *(wg_four *)(dst + (8 + k) * lane_step) = WG_GROUP(t[k], 2);
            *(wg_four *)(dst + (12 + k) * lane_step) = WG_GROUP(t[k], 3);
        }
        return;
    }
    for (int l = 0; l < lanes; l++)
        for (int64_t j = 0; j < cols; j++)
            dst[l * lane_step + j] = t[l % 4][l / 4 * 4 + j];
}

WG_TARGET static void WG_FN(output_transform)(const em_wg_geom *g, const float *p, int64_t t0,
                                              int64_t t1, const float *bias, int64_t n0,
                                              int lanes, float *y)
{
    const int64_t nt = t1 - t0, pstride = em_wg_point_stride(g->m, nt), hwo = g->ho * g->wo;
    for (int64_t mt = 0; mt < g->m * nt; mt++) {
        const int64_t m = mt / nt, t = t0 + mt % nt;
        const int64_t oh0 = t / g->tw * EM_WG_M, ow0 = t % g->tw * EM_WG_M;
        const int64_t cols = g->wo - ow0 < EM_WG_M ? g->wo - ow0 : EM_WG_M;
        float tmp[EM_WG_M * EM_WG_A * L]; /* A^T p (4, 6, 16) */
        wg_vec out[EM_WG_M * EM_WG_M];    /* A^T p A (4, 4, 16) */
        WG_FN(apply_at)(EM_WG_A, p + mt * L, EM_WG_A * pstride, pstride, tmp, EM_WG_A * L, L);
        WG_FN(apply_at)(EM_WG_M, tmp, L, EM_WG_A * L, (float *)out, L, EM_WG_M * L);
        const float b = bias ? bias[m] : 0.0f;
        for (int i = 0; i < EM_WG_M && oh0 + i < g->ho; i++)
            WG_FN(store_row)(out + i * EM_WG_M, b,
                             y + (n0 * g->m + m) * hwo + (oh0 + i) * g->wo + ow0, g->m * hwo,
                             lanes, cols);
    }
}

WG_TARGET static void WG_FN(grad_output_transform)(const em_wg_geom *g, const float *gyt,
                                                   int64_t t0, int64_t t1, float *gp)
{
    const int64_t nt = t1 - t0, pstride = em_wg_point_stride(g->m, nt);
    const int64_t row = g->tw * EM_WG_M * L;
    for (int64_t mt = 0; mt < g->m * nt; mt++) {
        const int64_t m = mt / nt, t = t0 + mt % nt;
        const int64_t oh0 = t / g->tw * EM_WG_M, ow0 = t % g->tw * EM_WG_M;
        const float *d = gyt + ((m * g->th * EM_WG_M + oh0) * g->tw * EM_WG_M + ow0) * L;
        float tmp[EM_WG_A * EM_WG_M * L]; /* A gy (6, 4, 16) */
        WG_FN(apply_a)(EM_WG_M, d, row, L, tmp, EM_WG_M * L, L);
        WG_FN(apply_a)(EM_WG_A, tmp, L, EM_WG_M * L, gp + mt * L, pstride, EM_WG_A * pstride);
    }
}
