/* The formula and derivative of each float unary op at one type, included by unary_ops_internal.h
 * once per type: expects EM_UNARY_T (float or double) and EM_UNARY_FN(name), which names the
 * function for that type. The math functions take and give EM_UNARY_T (<tgmath.h> in C, the
 * CUDA overloads under nvcc), so f32 computes in f32. */

/* op(v); p holds the op's parameters. */
EM_FORMULA EM_UNARY_T EM_UNARY_FN(em_unary_value)(em_unary_op op, EM_UNARY_T v,
                                                  const em_unary_params *p)
{
    typedef EM_UNARY_T T;
    const T h = (T)0.5, one = (T)1, zero = (T)0;
    switch (op) {
    case EM_UNARY_NEG: return -v;
    case EM_UNARY_ABS: return fabs(v);
    case EM_UNARY_SIGN: return v > zero ? one : v < zero ? -one : v;
    case EM_UNARY_EXP: return exp(v);
    case EM_UNARY_LOG: return log(v);
    case EM_UNARY_LOG1P: return log1p(v);
    case EM_UNARY_SQRT: return sqrt(v);
    case EM_UNARY_RSQRT: return one / sqrt(v);
    case EM_UNARY_SQUARE: return v * v;
    case EM_UNARY_RECIPROCAL: return one / v;
    case EM_UNARY_SIN: return sin(v);
    case EM_UNARY_COS: return cos(v);
    case EM_UNARY_TANH: return tanh(v);
    case EM_UNARY_SIGMOID: return one / (one + exp(-v));
    case EM_UNARY_RELU: return v < zero ? zero : v;
    case EM_UNARY_LEAKY_RELU: return v < zero ? v * (T)p->negative_slope : v;
    case EM_UNARY_GELU: return h * v * (one + erf(v * (T)EM_SQRT_HALF)); /* exact, with erf */
    case EM_UNARY_GELU_TANH: /* the tanh approximation */
        return h * v * (one + tanh((T)EM_SQRT_2_OVER_PI * (v + (T)EM_GELU_KAPPA * v * v * v)));
    case EM_UNARY_SILU: return v / (one + exp(-v));
    case EM_UNARY_FLOOR: return floor(v);
    case EM_UNARY_CEIL: return ceil(v);
    case EM_UNARY_ROUND: return nearbyint(v); /* half to even */
    case EM_UNARY_CLAMP: {
        const T lo = (T)p->min, hi = (T)p->max;
        return (v < lo ? lo : v) > hi ? hi : (v < lo ? lo : v);
    }
    case EM_UNARY_ADD_SCALAR: return v + (T)p->scalar;
    case EM_UNARY_MUL_SCALAR: return v * (T)p->scalar;
    case EM_UNARY_POW_SCALAR: return pow(v, (T)p->exponent);
    case EM_UNARY_SOFTSIGN: return v / (one + fabs(v));
    case EM_UNARY_MISH: return v * tanh(log1p(exp(v)));
    case EM_UNARY_SOFTPLUS: {
        const T b = (T)p->beta;
        return v * b > (T)p->threshold ? v : log1p(exp(v * b)) / b;
    }
    case EM_UNARY_HARDTANH: {
        const T lo = (T)p->min, hi = (T)p->max;
        return v < lo ? lo : v > hi ? hi : v;
    }
    case EM_UNARY_ELU: return v > zero ? v : expm1(v) * (T)p->alpha;
    case EM_UNARY_SELU:
        return v > zero ? v * (T)EM_SELU_SCALE : expm1(v) * (T)(EM_SELU_ALPHA * EM_SELU_SCALE);
    case EM_UNARY_HARDSWISH: {
        const T r = v + (T)3 < zero ? zero : v + (T)3;
        return v * (r > (T)6 ? (T)6 : r) / (T)6;
    }
    case EM_UNARY_LOGSIGMOID: return (v < zero ? v : zero) - log1p(exp(-fabs(v)));
    }
    return v; /* not an op: the kernels take none but the list's */
}

/* gy * op'(x): v is x, or y where from_y (the ops em_unary_grad_source lets read y), and is not
 * read by the ops whose derivative needs neither. PyTorch's rules at kinks: relu'(0) = abs'(0) =
 * 0, leaky_relu'(0) = slope, clamp passes min <= x <= max but hardtanh only min < x < max,
 * elu'(0) = alpha (selu'(0) = scale alpha), hardswish' is x / 3 + 1/2 on (-3, 3) (0 at -3 and 1
 * at 3, as PyTorch 2.x; 1.13 took the closed interval), pow with
 * exponent 0 gives 0. */
EM_FORMULA EM_UNARY_T EM_UNARY_FN(em_unary_grad_value)(em_unary_op op, bool from_y,
                                                       EM_UNARY_T g, EM_UNARY_T v,
                                                       const em_unary_params *p)
{
    typedef EM_UNARY_T T;
    const T h = (T)0.5, one = (T)1, two = (T)2, zero = (T)0;
    const T beta = (T)EM_SQRT_2_OVER_PI, kappa = (T)EM_GELU_KAPPA;
    switch (op) {
    case EM_UNARY_NEG: return -g;
    case EM_UNARY_ABS: return v > zero ? g : v < zero ? -g : zero;
    case EM_UNARY_EXP: return from_y ? g * v : g * exp(v);
    case EM_UNARY_LOG: return g / v;
    case EM_UNARY_LOG1P: return g / (one + v);
    case EM_UNARY_SQRT: return from_y ? g * h / v : g * h / sqrt(v);
    case EM_UNARY_RSQRT: return from_y ? -h * g * v * v * v : -h * g / (v * sqrt(v));
    case EM_UNARY_SQUARE: return g * two * v;
    case EM_UNARY_RECIPROCAL: return from_y ? -g * v * v : -g / (v * v);
    case EM_UNARY_SIN: return g * cos(v);
    case EM_UNARY_COS: return -g * sin(v);
    case EM_UNARY_TANH: {
        const T t = from_y ? v : tanh(v);
        return g * (one - t * t);
    }
    case EM_UNARY_SIGMOID: {
        if (from_y)
            return g * v * (one - v);
        const T e = one + exp(-v);
        return g / e * (one - one / e);
    }
    case EM_UNARY_RELU: return v > zero ? g : zero;
    case EM_UNARY_LEAKY_RELU: return v > zero ? g : g * (T)p->negative_slope;
    case EM_UNARY_GELU:
        return g * (h * (one + erf(v * (T)EM_SQRT_HALF)) +
                    v * (T)EM_INV_SQRT_2PI * exp(-h * v * v));
    case EM_UNARY_GELU_TANH: { /* PyTorch's formula, t = tanh(beta (x + kappa x^3)) */
        const T t = tanh(beta * (v + kappa * v * v * v));
        return g * (h * (one + t) + h * v * (one - t * t) * beta * (one + (T)3 * kappa * v * v));
    }
    case EM_UNARY_SILU: { /* s (1 + x (1 - s)), s = sigmoid(x) */
        const T e = one + exp(-v);
        return g / e * (one + v * (one - one / e));
    }
    case EM_UNARY_CLAMP: return v > (T)p->min && v < (T)p->max ? g : zero;
    case EM_UNARY_ADD_SCALAR: return g;
    case EM_UNARY_MUL_SCALAR: return g * (T)p->scalar;
    case EM_UNARY_POW_SCALAR: {
        const T e = (T)p->exponent;
        return e == zero ? zero : g * e * pow(v, e - one);
    }
    case EM_UNARY_SOFTSIGN: { /* 1 / (1 + |x|)^2 */
        const T d = one + fabs(v);
        return g / (d * d);
    }
    case EM_UNARY_MISH: { /* t + x s (1 - t^2), t = tanh(softplus(x)), s = sigmoid(x) */
        const T s = one / (one + exp(-v)), t = tanh(log1p(exp(v)));
        return g * (t + v * s * (one - t * t));
    }
    case EM_UNARY_SOFTPLUS: { /* z / (z + 1), z = exp(beta x); 1 where beta x > threshold */
        const T b = (T)p->beta, z = exp(v * b);
        return v * b > (T)p->threshold ? g : g * z / (z + one);
    }
    case EM_UNARY_HARDTANH: return v <= (T)p->min || v >= (T)p->max ? zero : g;
    case EM_UNARY_ELU: return v > zero ? g : g * (T)p->alpha * exp(v);
    case EM_UNARY_SELU:
        return v > zero ? g * (T)EM_SELU_SCALE : g * (T)(EM_SELU_ALPHA * EM_SELU_SCALE) * exp(v);
    case EM_UNARY_HARDSWISH:
        return v <= (T)-3 ? zero : v < (T)3 ? g * (v / (T)3 + h) : g;
    case EM_UNARY_LOGSIGMOID: { /* sigmoid(-x), from exp(-|x|) so it cannot overflow */
        const T z = exp(-fabs(v));
        return v < zero ? g * (one - z / (one + z)) : g * (z / (one + z));
    }
    case EM_UNARY_SIGN: case EM_UNARY_FLOOR: case EM_UNARY_CEIL: case EM_UNARY_ROUND:
        return zero; /* piecewise constant */
    }
    return zero; /* not an op: the kernels take none but the list's */
}
