// Floating ops (math, rounding) on float16 and bfloat16.
#include "expr/math_cases.hpp"

TEST_CASE_TEMPLATE_APPLY(floating, std::tuple<half, bfloat16>);
