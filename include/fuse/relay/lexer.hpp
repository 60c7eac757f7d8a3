// The Relay tokenizer: turns source text into tokens with their byte ranges, one token at a time
// (the parser peeks a few ahead and can restart the lexer at an offset after skipping a raw
// blob). It accepts what every TVM printer wrote (reference notes, section 1), which is more than
// TVM's own tokenizer reads:
//   * variable names with `/`, `.`, `::` (TF, darknet, TFLite and ONNX names), stopping before
//     `.DIGIT` so that `%5.0` is a projection;
//   * `#` line comments of the v0.5 printer (`# ty=...`), `r"""` and `METADATA:` metadata;
//   * float literals without a suffix (v0.6 float64), `nanf`, integer suffixes i8..i64;
//   * strings with escapes, in double or single quotes.
// Comments are not thrown away: each token carries the comments written just before it, so the
// parser can read `/* ty=... */` and span names that follow an expression.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/source.hpp"

namespace fuse::relay {

enum class token_kind : std::uint8_t {
  end,       ///< the end of the input (repeats forever)
  ident,     ///< a name, dots joined: nn.conv2d, relay.reshape_only, True, fn, float32
  local,     ///< %x (text: the name)
  graph,     ///< %12 (text: the digits)
  global,    ///< @main (text: the name)
  integer,   ///< 3, -1, 3i64 (value: i, dtype: dt)
  real,      ///< 0.5f, 1e-05f, 0.5 (float64), inff, nanf (value: f, dtype: dt)
  string,    ///< "NCHW" (text: the decoded value)
  meta,      ///< meta[KEY][INDEX] (text: KEY, value: i)
  punct,     ///< ( ) [ ] { } , ; : = . + - * / < > ! ? and -> => <= >= == != (text: spelling)
  version,   ///< #[version = "0.0.5"] or a bare v0.0.4 line (text: "0.0.5")
  metadata,  ///< #[metadata], METADATA: or r"""...""": the JSON is [i, json_end)
};

/// A comment between two tokens: [begin, end) is its text without the delimiters.
struct comment {
  std::size_t begin = 0, end = 0;
  enum class style : std::uint8_t { line, block, hash } kind = style::line;  // //, /* */, #
};

struct token {
  token_kind kind = token_kind::end;
  std::string text;
  std::size_t begin = 0, end = 0;  ///< byte range in the source
  std::int64_t i = 0;
  double f = 0;
  relay::dtype dt{};
  std::size_t json_end = 0;       ///< metadata: where the JSON ends
  bool newline_before = false;    ///< a line break separates it from the previous token
  std::vector<comment> comments;  ///< comments between the previous token and this one

  bool is(std::string_view punct) const { return kind == token_kind::punct && text == punct; }
  bool is_ident(std::string_view name) const { return kind == token_kind::ident && text == name; }
};

class lexer {
 public:
  explicit lexer(const source& src) : src_(&src), end_(src.text().size()) {}
  /// Lexes only [begin, end) of the source (a `/* ty=... */` comment's text).
  lexer(const source& src, std::size_t begin, std::size_t end) : src_(&src), pos_(begin), end_(end) {}

  const source& src() const { return *src_; }

  /// The token `k` places ahead (0: the next one).
  const token& peek(std::size_t k = 0) {
    while (ahead_.size() <= k) ahead_.push_back(lex());
    return ahead_[k];
  }
  token next() {
    peek();
    token t = std::move(ahead_.front());
    ahead_.pop_front();
    return t;
  }
  /// Drops the tokens peeked so far and continues at byte `offset` (after a skipped blob).
  void reset(std::size_t offset) {
    ahead_.clear();
    pos_ = offset;
    last_operand_ = true;  // a blob was a value: a following `-` is an operator
  }

  relay::error error_at(std::size_t offset, const std::string& message) const {
    return relay::error(*src_, src_->locate(offset), message);
  }

  static bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
  static bool digit(char c) { return c >= '0' && c <= '9'; }
  static bool name_char(char c) { return name_start(c) || digit(c); }

 private:
  char at(std::size_t p) const { return p < end_ ? src_->text()[p] : '\0'; }
  bool starts(std::size_t p, std::string_view s) const {
    return p + s.size() <= end_ && std::string_view(src_->text()).substr(p, s.size()) == s;
  }

  token lex();
  void skip_space_and_comments(token& t);
  void number(token& t);
  void variable(token& t);
  void identifier(token& t);
  void meta(token& t, std::size_t b);
  void string(token& t);
  void hash_attribute(token& t);
  void punctuation(token& t);
  std::string found_char(std::size_t p) const;
  std::string spelling(std::size_t start) const;

  const source* src_;
  std::size_t pos_ = 0;
  std::size_t end_;
  std::deque<token> ahead_;
  bool last_operand_ = false;
  std::size_t last_dot_end_ = std::size_t(-1);
};

}  // namespace fuse::relay
