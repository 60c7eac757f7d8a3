// Printing fuse::half and fuse::bfloat16. Kept out of <fuse/core/half.hpp> so that device
// code never sees <ostream>.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <ostream>

#include <fuse/core/half.hpp>

namespace fuse {

/// With the stream's default float format: the fewest significant digits that read back as
/// the same value of the 16-bit format (half(0.1f) prints "0.1", not float's "0.0999756"),
/// but never fewer than the integer digits of a value below 10^6 (65504, not 6.55e+04).
/// With std::fixed or std::scientific: the exact float value, in the stream's own format.
template <class Format>
std::ostream& operator<<(std::ostream& os, basic_float16<Format> x) {
  const float value = x;
  if ((os.flags() & std::ios_base::floatfield) != std::ios_base::fmtflags{} || !isfinite(x)) return os << value;
  constexpr int most = std::numeric_limits<basic_float16<Format>>::max_digits10;  // always enough
  char text[48];
  int digits = 1;
  for (;; ++digits) {
    std::snprintf(text, sizeof text, "%.*e", digits - 1, double(value));
    if (digits == most || basic_float16<Format>(std::strtod(text, nullptr)).bits() == x.bits()) break;
  }
  char* e = text;
  while (*e != '\0' && *e != 'e') ++e;
  const int decimal_exponent = *e == 'e' ? std::atoi(e + 1) : 0;
  if (decimal_exponent >= digits && decimal_exponent < 6) digits = decimal_exponent + 1;
  const std::streamsize saved = os.precision(digits);
  os << value;
  os.precision(saved);
  return os;
}

}  // namespace fuse
