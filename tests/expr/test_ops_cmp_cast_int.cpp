// Comparisons on the integer dtypes, and casts from them to every dtype.
#include "expr/cmp_cast_cases.hpp"

TEST_CASE_TEMPLATE_APPLY(comparisons, integer_dtypes);
TEST_CASE_TEMPLATE_APPLY(casts, integer_dtypes);
