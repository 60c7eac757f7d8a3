// Relay source text and the errors that point into it (fuse/relay/source.hpp).
#include "fuse/relay/source.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace fuse::relay {

source::source(std::string name, std::string text) : name_(std::move(name)), text_(std::move(text)) {
  starts_.push_back(0);
  for (std::size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') starts_.push_back(i + 1);
}

location source::locate(std::size_t at) const {
  std::size_t lo = 0, hi = starts_.size();
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    (starts_[mid] <= at ? lo : hi) = mid;
  }
  return {static_cast<int>(lo + 1), static_cast<int>(at - starts_[lo] + 1)};
}

std::string_view source::line(int line) const {
  if (line < 1 || static_cast<std::size_t>(line) > starts_.size()) return {};
  const std::size_t b = starts_[static_cast<std::size_t>(line - 1)];
  std::size_t e =
      static_cast<std::size_t>(line) < starts_.size() ? starts_[static_cast<std::size_t>(line)] : text_.size();
  while (e > b && (text_[e - 1] == '\n' || text_[e - 1] == '\r')) --e;
  return std::string_view(text_).substr(b, e - b);
}

std::string error::format(const source& src, location at, const std::string& message) {
  std::string out = src.name() + ":" + std::to_string(at.line) + ":" + std::to_string(at.col) + ": error: " + message;
  const std::string_view text = src.line(at.line);
  if (at.line > 0) {
    out += "\n  ";
    // Tabs stay tabs under the caret so that it lines up however the terminal shows them.
    std::string caret = "  ";
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      out += (c == '\r') ? ' ' : c;
      if (static_cast<int>(i) + 1 < at.col) caret += (c == '\t') ? '\t' : ' ';
    }
    out += "\n" + caret + "^";
  }
  return out;
}

}  // namespace fuse::relay
