/* A program outside the ember tree, built against an installed ember: it must find the headers
 * and libraries through pkg-config or find_package(ember) and compute 1 + 2 = 3. */
#include <ember/ember.h>
#include <stdio.h>

int main(void)
{
    em_tensor *a = em_full(EM_SHAPE(2), EM_F32, 1.0);
    em_tensor *b = em_full(EM_SHAPE(2), EM_F32, 2.0);
    em_tensor *c = em_add(a, b);
    double v = c ? em_get(c, (int64_t[]){1}) : -1;
    printf("consumer: 1 + 2 = %g\n", v);
    em_release(c);
    em_release(b);
    em_release(a);
    return v == 3.0 ? 0 : 1;
}
