// A C++ program outside the ember tree, built against an installed ember: the headers are C++
// (extern "C", EM_SHAPE from any integer types) and the library links; 1 + 2 summed over a
// (2, 3) tensor is 18.
#include <ember/ember.h>

#include <cstddef>
#include <cstdio>

int main()
{
    std::size_t rows = 2;
    long cols = 3;
    em_tensor *a = em_full(EM_SHAPE(rows, cols), EM_F32, 1.0);
    em_tensor *b = em_full(EM_SHAPE(2, 3), EM_F32, 2.0);
    em_tensor *sum = em_sum_all(em_add(a, b));
    double v = sum ? em_item(sum) : -1;
    std::printf("consumer (C++): sum of 1 + 2 over (2, 3) = %g\n", v);
    return v == 18.0 ? 0 : 1;
}
