// The Relay tokenizer (fuse/relay/lexer.hpp).
#include "fuse/relay/lexer.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace fuse::relay {

token lexer::lex() {
  token t;
  skip_space_and_comments(t);
  t.begin = pos_;
  if (pos_ >= end_) {
    t.end = pos_;
    return t;
  }
  const char c = at(pos_);
  if (c == '-' && !last_operand_ && (digit(at(pos_ + 1)) || starts(pos_ + 1, "inff"))) number(t);
  else if (digit(c)) number(t);
  else if (c == '%' || c == '@') variable(t);
  else if (name_start(c)) identifier(t);
  else if (c == '"' || c == '\'') string(t);
  else if (c == '#') hash_attribute(t);
  else punctuation(t);
  t.end = pos_;
  last_operand_ = t.kind == token_kind::ident || t.kind == token_kind::local || t.kind == token_kind::graph ||
                  t.kind == token_kind::global || t.kind == token_kind::integer || t.kind == token_kind::real ||
                  t.kind == token_kind::string || t.kind == token_kind::meta || t.is(")") || t.is("]");
  last_dot_end_ = t.is(".") ? pos_ : std::size_t(-1);
  return t;
}

void lexer::skip_space_and_comments(token& t) {
  for (;;) {
    const char c = at(pos_);
    if (pos_ >= end_) return;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      if (c == '\n') t.newline_before = true;
      ++pos_;
    } else if (c == '/' && at(pos_ + 1) == '/') {
      const std::size_t b = pos_ + 2;
      while (pos_ < end_ && at(pos_) != '\n') ++pos_;
      t.comments.push_back({b, pos_, comment::style::line});
    } else if (c == '/' && at(pos_ + 1) == '*') {
      // Block comments nest (as in TVM); counted, not recursed, so any depth is fine.
      const std::size_t open = pos_;
      pos_ += 2;
      std::size_t depth = 1;
      while (depth > 0) {
        if (pos_ >= end_) throw error_at(open, "unterminated comment: '/*' without a matching '*/'");
        if (at(pos_) == '/' && at(pos_ + 1) == '*') depth++, pos_ += 2;
        else if (at(pos_) == '*' && at(pos_ + 1) == '/') depth--, pos_ += 2;
        else {
          if (at(pos_) == '\n') t.newline_before = true;
          ++pos_;
        }
      }
      t.comments.push_back({open + 2, pos_ - 2, comment::style::block});
    } else if (c == '#' && at(pos_ + 1) != '[') {
      // The v0.5 printer's `# ty=...` comments run to the end of the line.
      const std::size_t b = pos_ + 1;
      while (pos_ < end_ && at(pos_) != '\n') ++pos_;
      t.comments.push_back({b, pos_, comment::style::hash});
    } else {
      return;
    }
  }
}

void lexer::number(token& t) {
  const std::size_t start = pos_;
  bool negative = false;
  if (at(pos_) == '-') negative = true, ++pos_;
  if (starts(pos_, "inff")) {
    pos_ += 4;
    if (name_char(at(pos_))) throw error_at(start, "malformed number '" + spelling(start) + "'");
    t.kind = token_kind::real;
    t.dt = dtype::float32();
    t.f = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return;
  }
  const std::size_t digits = pos_;
  while (digit(at(pos_))) ++pos_;
  bool is_real = false;
  // After `.` (a projection `%5.0`) only digits: `%x.0.1` is two projections, not a float.
  if (last_dot_end_ != start) {
    if (at(pos_) == '.' && digit(at(pos_ + 1))) {
      is_real = true;
      ++pos_;
      while (digit(at(pos_))) ++pos_;
    }
    if ((at(pos_) == 'e' || at(pos_) == 'E') &&
        (digit(at(pos_ + 1)) || ((at(pos_ + 1) == '-' || at(pos_ + 1) == '+') && digit(at(pos_ + 2))))) {
      is_real = true;
      pos_ += 2;
      while (digit(at(pos_))) ++pos_;
    }
  }
  const std::string body = src_->text().substr(start, pos_ - start);
  char suffix = 0;
  unsigned bits = 0;
  if (last_dot_end_ != start && (at(pos_) == 'f' || at(pos_) == 'i')) {
    suffix = at(pos_++);
    while (digit(at(pos_)) && bits < 1000) bits = bits * 10 + static_cast<unsigned>(at(pos_++) - '0');
  }
  if (name_char(at(pos_)) || (suffix == 'i' && is_real))
    throw error_at(start, "malformed number '" + spelling(start) + "'");
  if (suffix == 'f' || (suffix == 0 && is_real)) {
    if (suffix == 'f' && bits == 0) bits = 32;
    if (suffix == 0) bits = 64;
    if (bits != 16 && bits != 32 && bits != 64)
      throw error_at(start, "malformed number '" + spelling(start) + "': float literals are f16, f32 or f64");
    t.kind = token_kind::real;
    t.dt = dtype{dtype::float_code, static_cast<std::uint8_t>(bits), 1};
    t.f = std::strtod(body.c_str(), nullptr);
    return;
  }
  if (suffix == 'i' && bits != 8 && bits != 16 && bits != 32 && bits != 64)
    throw error_at(start, "malformed number '" + spelling(start) + "': integer literals are i8, i16, i32 or i64");
  // Accumulate the magnitude with an overflow check (the most negative int64 fits too).
  std::uint64_t v = 0;
  const std::uint64_t limit = negative ? (std::uint64_t(1) << 63) : (std::uint64_t(1) << 63) - 1;
  for (std::size_t p = digits; digit(at(p)); ++p) {
    const unsigned d = static_cast<unsigned>(at(p) - '0');
    if (v > (limit - d) / 10) throw error_at(start, "integer literal '" + spelling(start) + "' does not fit int64");
    v = v * 10 + d;
  }
  t.kind = token_kind::integer;
  t.i = negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  if (suffix == 0)
    bits =
        (t.i >= std::numeric_limits<std::int32_t>::min() && t.i <= std::numeric_limits<std::int32_t>::max()) ? 32 : 64;
  t.dt = dtype{dtype::int_code, static_cast<std::uint8_t>(bits), 1};
  const std::int64_t hi = bits == 64 ? std::numeric_limits<std::int64_t>::max() : (std::int64_t(1) << (bits - 1)) - 1;
  if (t.i > hi || t.i < -hi - 1)
    throw error_at(start, "integer literal '" + spelling(start) + "' does not fit int" + std::to_string(bits));
}

// After `%` or `@`: letters, digits and `_`, plus `/` and `.` when a letter (for `.`) or a name
// character (for `/`) follows, and `::` inside a name. So `%5.0` stops before `.0`, `%x: T`
// and `%x:T` stop before the colon, and `%a/%b` stops before `/`.
void lexer::variable(token& t) {
  const char sigil = at(pos_++);
  const std::size_t b = pos_;
  for (;;) {
    const char c = at(pos_);
    if (name_char(c)) ++pos_;
    else if (c == '.' && name_start(at(pos_ + 1))) ++pos_;
    else if (c == '/' && name_char(at(pos_ + 1))) ++pos_;
    else if (c == ':' && at(pos_ + 1) == ':' && name_char(at(pos_ + 2))) pos_ += 2;
    else break;
  }
  if (pos_ == b) throw error_at(b - 1, std::string("expected a name after '") + sigil + "', found " + found_char(b));
  t.text = src_->text().substr(b, pos_ - b);
  bool all_digits = true;
  for (char c : t.text) all_digits = all_digits && digit(c);
  t.kind = sigil == '@' ? token_kind::global : all_digits ? token_kind::graph : token_kind::local;
}

void lexer::identifier(token& t) {
  const std::size_t b = pos_;
  // A bare `v0.0.4` line: the v0.6 printer's version header.
  if (at(b) == 'v' && digit(at(b + 1))) {
    std::size_t p = b + 1;
    while (digit(at(p)) || (at(p) == '.' && digit(at(p + 1)))) ++p;
    if (!name_char(at(p)) && src_->text().find('.', b) < p) {
      t.kind = token_kind::version;
      t.text = src_->text().substr(b + 1, p - b - 1);
      pos_ = p;
      return;
    }
  }
  while (name_char(at(pos_)) || (at(pos_) == '.' && name_start(at(pos_ + 1)))) ++pos_;
  t.kind = token_kind::ident;
  t.text = src_->text().substr(b, pos_ - b);
  if (t.text == "meta" && at(pos_) == '[') return meta(t, b);
  if (t.text == "inff" || t.text == "nanf") {
    t.kind = token_kind::real;
    t.dt = dtype::float32();
    t.f = t.text == "inff" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    return;
  }
  if (t.text == "r" && starts(pos_, "\"\"\"")) {
    // v0.5: `# meta data` then r"""<json>""".
    const std::size_t json = pos_ + 3;
    const std::size_t close = src_->text().find("\"\"\"", json);
    if (close == std::string::npos || close + 3 > end_) throw error_at(b, "unterminated r\"\"\" metadata string");
    t.kind = token_kind::metadata;
    t.i = static_cast<std::int64_t>(json);
    t.json_end = close;
    pos_ = close + 3;
    return;
  }
  if (t.text == "METADATA" && at(pos_) == ':') {
    // v0.6: `METADATA:` then the JSON to the end of the text.
    t.kind = token_kind::metadata;
    t.i = static_cast<std::int64_t>(pos_ + 1);
    t.json_end = end_;
    pos_ = end_;
    return;
  }
}

// meta[KEY][INDEX], one token as in TVM.
void lexer::meta(token& t, std::size_t b) {
  auto bad = [&] { return error_at(b, "malformed meta reference: expected meta[KEY][INDEX]"); };
  ++pos_;
  const std::size_t k = pos_;
  while (name_char(at(pos_)) || at(pos_) == '.') ++pos_;
  if (pos_ == k || at(pos_) != ']' || at(pos_ + 1) != '[') throw bad();
  t.text = src_->text().substr(k, pos_ - k);
  pos_ += 2;
  const std::size_t d = pos_;
  std::int64_t index = 0;
  while (digit(at(pos_))) {
    if (index > 1'000'000'000) throw error_at(b, "meta index too large");
    index = index * 10 + (at(pos_++) - '0');
  }
  if (pos_ == d || at(pos_) != ']') throw bad();
  ++pos_;
  t.kind = token_kind::meta;
  t.i = index;
}

void lexer::string(token& t) {
  const char quote = at(pos_);
  const std::size_t open = pos_++;
  t.kind = token_kind::string;
  for (;;) {
    if (pos_ >= end_)
      throw error_at(open, std::string("unterminated string: ") + quote + " without a closing " + quote);
    const char c = at(pos_++);
    if (c == quote) return;
    if (c != '\\') {
      t.text += c;
      continue;
    }
    if (pos_ >= end_) continue;  // reported as unterminated on the next turn
    const char e = at(pos_++);
    switch (e) {
      case 'n': t.text += '\n'; break;
      case 't': t.text += '\t'; break;
      case 'r': t.text += '\r'; break;
      case '"':
      case '\\':
      case '\'': t.text += e; break;
      default: t.text += '\\', t.text += e; break;  // kept as written
    }
  }
}

// `#[version = "0.0.5"]` and `#[metadata]` (which takes the rest of the text).
void lexer::hash_attribute(token& t) {
  const std::size_t b = pos_;
  const std::size_t close = src_->text().find(']', b);
  if (close == std::string::npos || close >= end_) throw error_at(b, "unterminated '#[': expected ']'");
  std::string_view body = std::string_view(src_->text()).substr(b + 2, close - b - 2);
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  body = trim(body);
  pos_ = close + 1;
  if (body == "metadata") {
    t.kind = token_kind::metadata;
    t.i = static_cast<std::int64_t>(pos_);
    t.json_end = end_;
    pos_ = end_;
    return;
  }
  if (body.starts_with("version")) {
    std::string_view v = trim(body.substr(7));
    if (v.starts_with("=")) {
      v = trim(v.substr(1));
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
        t.kind = token_kind::version;
        t.text = std::string(v.substr(1, v.size() - 2));
        return;
      }
    }
    throw error_at(b, "malformed version header: expected #[version = \"0.0.5\"]");
  }
  throw error_at(b, "unknown attribute '#[" + std::string(body) + "]': expected #[version = \"...\"] or #[metadata]");
}

void lexer::punctuation(token& t) {
  static constexpr std::string_view two[] = {"->", "=>", "<=", ">=", "==", "!="};
  for (std::string_view p : two)
    if (starts(pos_, p)) {
      t.kind = token_kind::punct;
      t.text = p;
      pos_ += 2;
      return;
    }
  const char c = at(pos_);
  if (std::string_view("()[]{},;:=.+-*/<>!?").find(c) == std::string_view::npos)
    throw error_at(pos_, "unexpected character " + found_char(pos_));
  t.kind = token_kind::punct;
  t.text = std::string(1, c);
  ++pos_;
}

std::string lexer::found_char(std::size_t p) const {
  if (p >= end_) return "the end of the input";
  const unsigned char c = static_cast<unsigned char>(at(p));
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  static constexpr char hex[] = "0123456789abcdef";
  return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
}

std::string lexer::spelling(std::size_t start) const {
  std::size_t e = start;
  while (e < end_ && e - start < 40 && (name_char(at(e)) || at(e) == '.' || at(e) == '-' || at(e) == '+')) ++e;
  return src_->text().substr(start, e - start);
}

}  // namespace fuse::relay
