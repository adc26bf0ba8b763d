/* The typed body of the CPU softmax kernels, included by cpu_softmax.c once per real type.
 * Expects REAL (float or double), REAL_EXP and REAL_LOG (its exp and log) and SM_FN(name),
 * which names a function for that type. Rows are spread over OpenMP threads. */

/* y = softmax(x) or log_softmax(x) of one row, with the row's max subtracted first. */
static void SM_FN(row)(bool logsm, int64_t cols, const REAL *x, REAL *y)
{
    REAL mx = -INFINITY;
    for (int64_t j = 0; j < cols; j++)
        mx = x[j] > mx || isnan(x[j]) ? x[j] : mx;
    double sum = 0;
    for (int64_t j = 0; j < cols; j++) {
        const REAL e = REAL_EXP(x[j] - mx);
        if (!logsm)
            y[j] = e;
        sum += e;
    }
    if (logsm) {
        const REAL lse = (REAL)REAL_LOG((REAL)sum);
        #pragma omp simd
        for (int64_t j = 0; j < cols; j++)
            y[j] = (x[j] - mx) - lse;
    } else {
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
