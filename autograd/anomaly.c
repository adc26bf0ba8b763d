/* Anomaly mode: em_record checks each op's output for NaN/Inf in forward and the engine each
 * gradient a backward rule produces; the first offender is named with its input shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"

static _Thread_local bool anomaly_on;
static _Thread_local int backward_depth;

bool em_set_anomaly_mode(bool on)
{
    bool prev = anomaly_on;
    anomaly_on = on;
    return prev;
}

bool em_anomaly_mode(void)
{
    return anomaly_on;
}

void em_anomaly_backward_enter(void)
{
    backward_depth++;
}

void em_anomaly_backward_leave(void)
{
    backward_depth--;
}

typedef enum { FINITE = 0, HAS_NAN, HAS_INF, SCAN_FAILED } scan_result;

/* Scan t's elements on the host, in f32 (f64 for f64: no false overflow). NaN wins over Inf. */
static scan_result scan(const em_tensor *t)
{
    int64_t n = em_numel(t);
    if (!em_dtype_is_float(t->dtype) || n == 0)
        return FINITE;
    bool wide = t->dtype == EM_F64;
    void *buf = malloc((size_t)n * (wide ? sizeof(double) : sizeof(float)));
    if (!buf) {
        em_set_error(EM_ERR_MEMORY, "anomaly: out of memory checking a tensor");
        return SCAN_FAILED;
    }
    if (em_copy_to_host(t, wide ? EM_F64 : EM_F32, buf) != EM_OK) {
        free(buf);
        return SCAN_FAILED;
    }
    scan_result r = FINITE;
    for (int64_t i = 0; i < n && r != HAS_NAN; i++) {
        double v = wide ? ((const double *)buf)[i] : ((const float *)buf)[i];
        if (isnan(v))
            r = HAS_NAN;
        else if (isinf(v))
            r = HAS_INF;
    }
    free(buf);
    return r;
}

char *em_anomaly_shapes(em_tensor *const *inputs, int n_inputs)
{
    size_t cap = 64, len = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i])
            continue;
        char b[128];
        em_shape_str(inputs[i], b, sizeof b);
        size_t need = len + strlen(b) + 4;
        if (need > cap) {
            char *g = realloc(s, cap = 2 * need);
            if (!g) {
                free(s);
                return NULL;
            }
            s = g;
        }
        len += (size_t)snprintf(s + len, cap - len, "%s%s", len ? " x " : "", b);
    }
    return s;
}

bool em_anomaly_check_forward(const char *op, const em_tensor *out, em_tensor *const *inputs,
                              int n_inputs)
{
    if (!anomaly_on || backward_depth > 0)
        return true;
    scan_result r = scan(out);
    if (r == FINITE)
        return true;
    if (r == SCAN_FAILED)
        return false;
    char *shapes = em_anomaly_shapes(inputs, n_inputs);
    em_set_error(EM_ERR_NUMERIC, "anomaly: em_%s produced %s in forward; inputs %s", op,
                 r == HAS_NAN ? "NaN" : "Inf", shapes ? shapes : "?");
    free(shapes);
    return false;
}

em_status em_anomaly_check_backward(const em_node *node, em_tensor *const *grad_in)
{
    if (!anomaly_on)
        return EM_OK;
    for (int k = 0; k < node->n_inputs; k++) {
        if (!grad_in[k])
            continue;
        scan_result r = scan(grad_in[k]);
        if (r == FINITE)
            continue;
        if (r == SCAN_FAILED)
            return em_error_status();
        char *shapes = node->input_shapes ? NULL : em_anomaly_shapes(node->inputs, node->n_inputs);
        const char *s = node->input_shapes ? node->input_shapes : shapes ? shapes : "?";
        em_status st = em_set_error(EM_ERR_NUMERIC, "anomaly: backward of %s produced %s; "
                                    "inputs %s", node->op, r == HAS_NAN ? "NaN" : "Inf", s);
        free(shapes);
        return st;
    }
    return EM_OK;
}
