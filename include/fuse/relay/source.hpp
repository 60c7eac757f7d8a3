// Relay source text and the errors that point into it.
//
// Every error the frontend reports about its input names FILE:LINE:COL, then shows the line with
// a caret under the column (as compilers do):
//
//   model.relay:3:17: error: expected ')' after the arguments of nn.dense
//     %0 = nn.dense(%x, %w;
//                   ^
#pragma once

#include <cstddef>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fuse::relay {

/// A position in a source: 1-based line and column (columns count bytes). 0:0 is "no position".
struct location {
  int line = 0;
  int col = 0;
  friend bool operator==(const location&, const location&) = default;
};

/// A named text with its line starts, so that a location can show its line.
class source {
 public:
  source() = default;
  source(std::string name, std::string text);
  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }

  /// The location of byte offset `at`.
  location locate(std::size_t at) const;
  /// Line `line` (1-based) without its end of line; empty when out of range.
  std::string_view line(int line) const;

 private:
  std::string name_;
  std::string text_;
  std::vector<std::size_t> starts_;
};

/// An error in the input: what(), the formatted report, is "FILE:LINE:COL: error: MESSAGE", the
/// line and a caret. The parts stay available for tests and tools.
class error : public std::runtime_error {
 public:
  error(const source& src, location at, const std::string& message)
      : std::runtime_error(format(src, at, message)), file_(src.name()), at_(at), message_(message) {}
  /// An error with no position in a source (a bad command-line value, a missing file).
  explicit error(const std::string& message) : std::runtime_error("error: " + message), message_(message) {}

  const std::string& file() const { return file_; }
  location where() const { return at_; }
  const std::string& message() const { return message_; }

  static std::string format(const source& src, location at, const std::string& message);

 private:
  std::string file_;
  location at_{};
  std::string message_;
};

/// The bytes of a file; relay::error "cannot read PATH" when it cannot be read.
// Inline, as is relay::error(message): npy.hpp uses both, and the driver that `fuse-relay check`
// generates includes npy.hpp and is compiled without the fuse_relay library.
inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw error("cannot read " + path);
  return std::move(text).str();
}

}  // namespace fuse::relay
