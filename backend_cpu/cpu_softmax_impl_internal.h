/* The typed body of the CPU softmax kernels, included by cpu_softmax.c once per real type.
 * Expects REAL (float or double), REAL_EXP and REAL_LOG (its exp and log), SM_FN(name), which
 * names a function for that type, and SM_ROW_STATS(cols, x, mx, lse), a row's max and log-sum
 * from a vector kernel, false where it has none. Rows are spread over OpenMP threads. */

/* A row's max (*mx) and its sum of exp(x - max) in double, each exp also stored in e when given. */
static double SM_FN(exp_sum)(int64_t cols, const REAL *x, REAL *mx, REAL *e)
{
    REAL m = -INFINITY;
    for (int64_t j = 0; j < cols; j++)
        m = x[j] > m || isnan(x[j]) ? x[j] : m;
    double sum = 0;
    for (int64_t j = 0; j < cols; j++) {
        const REAL v = REAL_EXP(x[j] - m);
        if (e)
            e[j] = v;
        sum += v;
    }
    *mx = m;
    return sum;
}

/* A row's max (*mx) and the log of its sum of exp(x - max) (*lse): the includer's vector
 * SM_ROW_STATS where it takes the row, else exp_sum's */
static void SM_FN(stats)(int64_t cols, const REAL *x, REAL *mx, REAL *lse)
{
    if (!SM_ROW_STATS(cols, x, mx, lse))
        *lse = (REAL)REAL_LOG((REAL)SM_FN(exp_sum)(cols, x, mx, NULL));
}

/* y = softmax(x) or log_softmax(x) of one row, with the row's max subtracted first. */
static void SM_FN(row)(bool logsm, int64_t cols, const REAL *x, REAL *y)
{
    REAL mx, lse;
    if (logsm) {
        SM_FN(stats)(cols, x, &mx, &lse);
        #pragma omp simd
        for (int64_t j = 0; j < cols; j++)
            y[j] = (x[j] - mx) - lse;
    } else {
        const double sum = SM_FN(exp_sum)(cols, x, &mx, y);
        const REAL inv = (REAL)(1.0 / sum);
        #pragma omp simd
        for (int64_t j = 0; j < cols; j++)
            y[j] *= inv;
    }
}

static void SM_FN(softmax)(bool logsm, int64_t rows, int64_t cols, const REAL *x, REAL *y)
{
    #pragma omp parallel for if (rows > 1 && rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++)
        SM_FN(row)(logsm, cols, x + r * cols, y + r * cols);
}

/* softmax: gx = y * (gy - sum(gy * y)); log_softmax: gx = gy - exp(y) * sum(gy). */
static void SM_FN(grad)(bool logsm, int64_t rows, int64_t cols, const REAL *gy, const REAL *y,
                        REAL *gx)
{
    #pragma omp parallel for if (rows > 1 && rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++) {
        const REAL *g = gy + r * cols, *v = y + r * cols;
        REAL *out = gx + r * cols;
        double acc = 0;
        for (int64_t j = 0; j < cols; j++)
            acc += logsm ? g[j] : g[j] * v[j];
        const REAL sum = (REAL)acc;
        if (logsm) {
            for (int64_t j = 0; j < cols; j++)
                out[j] = g[j] - REAL_EXP(v[j]) * sum;
        } else {
            #pragma omp simd
            for (int64_t j = 0; j < cols; j++)
                out[j] = v[j] * (g[j] - sum);
        }
    }
}

/* loss[r] = -log_softmax(x)[r][t[r]], the value SM_FN(row) gives it; stats[2r] and stats[2r + 1]
 * the row's max and log-sum. False when a target is outside [0, cols). */
static bool SM_FN(xent)(int64_t rows, int64_t cols, const REAL *x, const int64_t *t, REAL *loss,
                        double *stats)
{
    bool ok = true;
    #pragma omp parallel for reduction(&& : ok) \
            if (rows > 1 && rows * cols >= EM_CPU_PARALLEL_MIN) num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++) {
        if (t[r] < 0 || t[r] >= cols) {
            ok = false;
            continue;
        }
        const REAL *xr = x + r * cols;
        REAL mx, lse;
        SM_FN(stats)(cols, xr, &mx, &lse);
        loss[r] = -((xr[t[r]] - mx) - lse);
        stats[2 * r] = mx;
        stats[2 * r + 1] = lse;
    }
    return ok;
}

/* gx = the gradient of SM_FN(xent)'s losses given g (rows): log_softmax's rule (SM_FN(grad))
 * applied to the gradient the gather of -g puts at each target, so the same values. */
static void SM_FN(xent_grad)(int64_t rows, int64_t cols, const REAL *x, const int64_t *t,
                             const double *stats, const REAL *g, REAL *gx)
{
    #pragma omp parallel for if (rows > 1 && rows * cols >= EM_CPU_PARALLEL_MIN) \
            num_threads(em_cpu_threads())
    for (int64_t r = 0; r < rows; r++) {
        const REAL *xr = x + r * cols, s = -g[r];
        const REAL mx = (REAL)stats[2 * r], lse = (REAL)stats[2 * r + 1];
        REAL *out = gx + r * cols;
        for (int64_t j = 0; j < cols; j++) {
            const REAL lp = (xr[j] - mx) - lse;
            out[j] = (j == t[r] ? s : 0) - REAL_EXP(lp) * s;
        }
    }
}
