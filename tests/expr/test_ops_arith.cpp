// Arithmetic ops on the floating dtypes against the reference (the integer dtypes and the
// shifts: test_ops_arith_int.cpp).
#include "expr/arith_cases.hpp"

TEST_CASE_TEMPLATE_APPLY(arithmetic, floating_dtypes);
