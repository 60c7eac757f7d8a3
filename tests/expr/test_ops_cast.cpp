// Casts from the floating dtypes and bool to every dtype (comparisons and the cast rules at the
// edges: test_ops_cmp_cast.cpp).
#include "expr/cmp_cast_cases.hpp"

TEST_CASE_TEMPLATE_APPLY(casts, std::tuple<float, double, half, bfloat16, bool>);
