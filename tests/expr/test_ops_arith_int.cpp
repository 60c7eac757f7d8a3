// Arithmetic ops on the integer dtypes against the reference (the shifts: test_ops_shifts.cpp).
#include "expr/arith_cases.hpp"

TEST_CASE_TEMPLATE_APPLY(arithmetic, integer_dtypes);
