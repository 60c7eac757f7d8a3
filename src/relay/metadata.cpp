// The `#[metadata]` section of Relay text (fuse/relay/metadata.hpp): base64, NDArray blobs and
// the JSON object graph, read with nlohmann-json.
#include "fuse/relay/metadata.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/source.hpp"

namespace fuse::relay {

// ---- base64 (standard alphabet, '=' padding, no line breaks) ----------------------------------

std::string encode_base64(std::span<const unsigned char> bytes) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = bytes.size() - i < 3 ? bytes.size() - i : 3;
    std::uint32_t v = static_cast<std::uint32_t>(bytes[i]) << 16;
    if (n > 1) v |= static_cast<std::uint32_t>(bytes[i + 1]) << 8;
    if (n > 2) v |= bytes[i + 2];
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += n > 1 ? alphabet[(v >> 6) & 63] : '=';
    out += n > 2 ? alphabet[v & 63] : '=';
  }
  return out;
}

namespace metadata_detail {
namespace {

/// The 6-bit value of each base64 character; 0x80 marks a character outside the alphabet
/// ('=' included: padding is handled apart).
constexpr auto base64_values = [] {
  std::array<std::uint8_t, 256> t{};
  for (auto& v : t) v = 0x80;
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<std::uint8_t>(i);
  return t;
}();

}  // namespace

std::vector<unsigned char> decode_base64_checked(std::string_view text, std::string& error) {
  auto value = [](char c) -> int {
    const std::uint8_t v = base64_values[static_cast<unsigned char>(c)];
    return v & 0x80 ? -1 : v;
  };
  const std::size_t n = text.size();
  std::size_t pad = 0;
  if (n >= 1 && text[n - 1] == '=') pad = (n >= 2 && text[n - 2] == '=') ? 2 : 1;
  for (std::size_t i = 0; i + pad < n; ++i) {
    if (value(text[i]) >= 0) continue;
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(text[i])));
    error = text[i] == '=' ? "bad padding: '=' at offset " + std::to_string(i) + " before the end"
                           : "bad character " + std::string(hex) + " at offset " + std::to_string(i);
    return {};
  }
  if (n % 4 != 0) {
    error = "bad padding: length " + std::to_string(n) + " is not a multiple of 4";
    return {};
  }
  std::vector<unsigned char> out;
  out.reserve(n / 4 * 3);
  for (std::size_t i = 0; i < n; i += 4) {
    const bool last = i + 4 == n;
    const std::size_t chars = last ? 4 - pad : 4;
    std::uint32_t v = 0;
    for (std::size_t j = 0; j < 4; ++j) v = (v << 6) | static_cast<std::uint32_t>(j < chars ? value(text[i + j]) : 0);
    // A canonical encoder leaves the bits under the padding zero: anything else is corruption.
    if ((chars == 2 && (v & 0xFFFF) != 0) || (chars == 3 && (v & 0xFF) != 0)) {
      error = "bad padding: non-zero bits before the '=' at offset " + std::to_string(i + chars);
      return {};
    }
    out.push_back(static_cast<unsigned char>(v >> 16));
    if (chars > 2) out.push_back(static_cast<unsigned char>(v >> 8));
    if (chars > 3) out.push_back(static_cast<unsigned char>(v));
  }
  return out;
}

}  // namespace metadata_detail

std::vector<unsigned char> decode_base64(std::string_view text, std::string& error) {
  error.clear();
  const std::size_t n = text.size();
  if (n == 0) return {};
  if (n % 4 != 0) return metadata_detail::decode_base64_checked(text, error);
  const std::size_t pad = text[n - 1] != '=' ? 0 : text[n - 2] != '=' ? 1 : 2;
  const std::size_t full = pad ? n - 4 : n;  // characters in whole quads before the last padded one
  std::vector<unsigned char> out(full / 4 * 3 + (pad ? 3 - pad : 0));
  const auto* in = reinterpret_cast<const unsigned char*>(text.data());
  const auto& t = metadata_detail::base64_values;
  unsigned char* o = out.data();
  std::uint8_t bad = 0;
  for (std::size_t i = 0; i < full; i += 4, o += 3) {
    const std::uint8_t a = t[in[i]], b = t[in[i + 1]], c = t[in[i + 2]], d = t[in[i + 3]];
    bad |= a | b | c | d;
    const std::uint32_t v = std::uint32_t{a} << 18 | std::uint32_t{b} << 12 | std::uint32_t{c} << 6 | d;
    o[0] = static_cast<unsigned char>(v >> 16);
    o[1] = static_cast<unsigned char>(v >> 8);
    o[2] = static_cast<unsigned char>(v);
  }
  if (pad) {
    const std::uint8_t a = t[in[full]], b = t[in[full + 1]], c = pad == 1 ? t[in[full + 2]] : 0;
    bad |= a | b | c;
    const std::uint32_t v = std::uint32_t{a} << 18 | std::uint32_t{b} << 12 | std::uint32_t{c} << 6;
    if ((pad == 2 && (v & 0xFFFF) != 0) || (pad == 1 && (v & 0xFF) != 0)) bad |= 0x80;
    o[0] = static_cast<unsigned char>(v >> 16);
    if (pad == 1) o[1] = static_cast<unsigned char>(v >> 8);
  }
  if (bad & 0x80) return metadata_detail::decode_base64_checked(text, error);
  return out;
}

// ---- NDArray blobs (TVM's SaveDLTensor layout) ------------------------------------------------

std::vector<unsigned char> encode_ndarray(const constant_data& c) {
  std::vector<unsigned char> out;
  out.reserve(40 + 8 * c.shape.size() + c.bytes.size());
  auto put = [&out](std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
  };
  put(ndarray_magic, 8);
  put(0, 8);  // reserved
  put(1, 4);  // device_type kDLCPU
  put(0, 4);  // device_id
  put(c.shape.size(), 4);
  put(c.dt.code, 1);
  put(c.dt.bits, 1);
  put(c.dt.lanes, 2);
  for (std::int64_t d : c.shape) put(static_cast<std::uint64_t>(d), 8);
  put(c.bytes.size(), 8);
  out.insert(out.end(), c.bytes.begin(), c.bytes.end());
  return out;
}

std::shared_ptr<const constant_data> decode_ndarray(std::span<const unsigned char> blob, std::string& error,
                                                    std::size_t* consumed) {
  error.clear();
  std::size_t pos = 0;
  auto need = [&](std::size_t n, const char* field) {
    if (blob.size() - pos >= n) return true;
    error = "truncated: " + std::string(field) + " needs " + std::to_string(n) + " bytes at offset " +
            std::to_string(pos) + ", the blob has " + std::to_string(blob.size());
    return false;
  };
  auto get = [&](int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(blob[pos + static_cast<std::size_t>(i)]) << (8 * i);
    pos += static_cast<std::size_t>(n);
    return v;
  };
  auto hex = [](std::uint64_t v) {
    char s[24];
    std::snprintf(s, sizeof s, "0x%016llX", static_cast<unsigned long long>(v));
    return std::string(s);
  };

  if (!need(8, "magic")) return nullptr;
  if (const std::uint64_t magic = get(8); magic != ndarray_magic) {
    error = "bad magic " + hex(magic) + " (expected " + hex(ndarray_magic) + ")";
    return nullptr;
  }
  if (!need(8, "reserved")) return nullptr;
  if (const std::uint64_t reserved = get(8); reserved != 0) {
    error = "reserved field is " + hex(reserved) + " (expected 0)";
    return nullptr;
  }
  // The device is where TVM had the tensor when it saved it; the bytes mean the same anywhere.
  if (!need(8, "device")) return nullptr;
  get(8);
  if (!need(4, "ndim")) return nullptr;
  const auto ndim = static_cast<std::int32_t>(static_cast<std::uint32_t>(get(4)));
  if (ndim < 0 || ndim > ndarray_max_ndim) {
    error = "ndim " + std::to_string(ndim) + " out of range [0, " + std::to_string(ndarray_max_ndim) + "]";
    return nullptr;
  }
  if (!need(4, "dtype")) return nullptr;
  auto c = std::make_shared<constant_data>();
  c->dt.code = static_cast<std::uint8_t>(get(1));
  c->dt.bits = static_cast<std::uint8_t>(get(1));
  c->dt.lanes = static_cast<std::uint16_t>(get(2));
  if (c->dt.code != dtype::int_code && c->dt.code != dtype::uint_code && c->dt.code != dtype::float_code &&
      c->dt.code != dtype::bfloat_code && c->dt.code != dtype::bool_code) {
    error = "dtype code " + std::to_string(c->dt.code) + " is not int (0), uint (1), float (2), bfloat (4) or bool (6)";
    return nullptr;
  }
  if (c->dt.bits < 1 || c->dt.bits > 64) {
    error = "dtype bits " + std::to_string(c->dt.bits) + " out of range [1, 64]";
    return nullptr;
  }
  if (c->dt.lanes < 1) {
    error = "dtype lanes 0 (expected at least 1)";
    return nullptr;
  }
  const auto rank = static_cast<std::size_t>(ndim);
  if (!need(8 * rank, "shape")) return nullptr;
  c->shape.resize(rank);
  // The element count is multiplied in shape order, as constant_data::elements() does, so that
  // no prefix product it will form later can overflow.
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  std::int64_t elements = 1;
  for (std::size_t i = 0; i < rank; ++i) {
    const auto d = static_cast<std::int64_t>(get(8));
    if (d < 0) {
      error = "shape[" + std::to_string(i) + "] is " + std::to_string(d) + " (negative)";
      return nullptr;
    }
    if (d != 0 && elements > max / d) {
      error = "shape overflows: the product of its dims exceeds 2^63 at shape[" + std::to_string(i) + "]";
      return nullptr;
    }
    c->shape[i] = d;
    elements *= d;
  }
  const auto element_bytes = static_cast<std::int64_t>(c->dt.bytes());
  if (elements > max / element_bytes) {
    error = "shape overflows: " + std::to_string(elements) + " elements of " + std::to_string(element_bytes) +
            " bytes exceed 2^63 bytes";
    return nullptr;
  }
  const std::int64_t expected = elements * element_bytes;
  if (!need(8, "data_byte_size")) return nullptr;
  const auto size = static_cast<std::int64_t>(get(8));
  if (size != expected) {
    error = "data_byte_size " + std::to_string(size) + " does not match shape and dtype " + c->dt.name() +
            " (expected " + std::to_string(expected) + ")";
    return nullptr;
  }
  const std::size_t left = blob.size() - pos;
  if (static_cast<std::uint64_t>(size) > left) {
    error =
        "truncated data: data_byte_size is " + std::to_string(size) + " but " + std::to_string(left) + " bytes follow";
    return nullptr;
  }
  if (!consumed && left > static_cast<std::uint64_t>(size)) {
    error = std::to_string(left - static_cast<std::size_t>(size)) + " trailing bytes after the data";
    return nullptr;
  }
  const auto data = blob.subspan(pos, static_cast<std::size_t>(size));
  c->bytes.assign(data.begin(), data.end());
  if (consumed) *consumed = pos + data.size();
  return c;
}

// ---- the section ------------------------------------------------------------------------------

namespace metadata_detail {
namespace {

/// The section's JSON with the strings of the top-level "b64ndarrays" array (the tensors: nearly
/// all of its bytes) taken out: nlohmann-json then parses only the object graph, and the blobs
/// are decoded where they lie in the text. Each blob string becomes "\u0001N" (N its index in
/// `blobs`); `moved` maps offsets in `json` back to the text for parse errors. Empty (`ok`
/// false) when the text already holds a "\u0001" escape, so that a placeholder cannot be
/// mistaken for a string of the text: the section is then parsed whole.
struct skeleton {
  bool ok = false;
  std::string json;
  std::vector<std::string_view> blobs;
  std::vector<std::pair<std::size_t, std::size_t>> moved;  // (end in json, end in text) of each placeholder

  std::size_t text_offset(std::size_t at, std::size_t begin) const {
    std::size_t from_json = 0, from_text = begin;
    for (const auto& [j, t] : moved) {
      if (j > at) break;
      from_json = j, from_text = t;
    }
    return from_text + (at - from_json);
  }
};

skeleton skeleton_of(std::string_view text, std::size_t begin) {
  skeleton k;
  if (text.find("\\u0001") != std::string_view::npos) return k;
  k.json.reserve(4096);
  int depth = 0;
  bool in_blobs = false;
  std::string_view last_string;  // the last string token at depth 1 (a key, when a ':' follows)
  std::size_t copied = 0;        // text[0, copied) is in json
  for (std::size_t i = 0; i < text.size();) {
    const char ch = text[i];
    if (ch == '"') {
      // A string: find its end (a quote not escaped); note whether it has escapes.
      std::size_t j = i + 1;
      bool escapes = false;
      for (;;) {
        const void* q = std::memchr(text.data() + j, '"', text.size() - j);
        const std::size_t end = q ? static_cast<std::size_t>(static_cast<const char*>(q) - text.data()) : text.size();
        const void* b = std::memchr(text.data() + j, '\\', end - j);
        if (!b) {
          j = end;
          break;
        }
        escapes = true;
        j = static_cast<std::size_t>(static_cast<const char*>(b) - text.data()) + 2;  // past the escaped character
        if (j >= text.size()) {
          j = text.size();
          break;
        }
      }
      if (j >= text.size()) break;  // unterminated: the parser reports it on what is copied
      const std::string_view body = text.substr(i + 1, j - i - 1);
      if (in_blobs && depth == 2 && !escapes && body.size() >= 64) {
        k.json.append(text.data() + copied, i - copied);
        k.json += "\"\\u0001" + std::to_string(k.blobs.size()) + "\"";
        k.blobs.push_back(body);
        copied = j + 1;
        k.moved.emplace_back(k.json.size(), begin + copied);
      } else if (depth == 1) {
        last_string = body;
      }
      i = j + 1;
      continue;
    }
    if (ch == '{' || ch == '[') {
      ++depth;
      if (ch == '[' && depth == 2 && last_string == "b64ndarrays") in_blobs = true;
    } else if (ch == '}' || ch == ']') {
      --depth;
      if (depth < 2) in_blobs = false;
    }
    ++i;
  }
  k.json.append(text.data() + copied, text.size() - copied);
  k.ok = true;
  return k;
}

}  // namespace
}  // namespace metadata_detail

metadata read_metadata(const source& src, std::size_t offset) {
  using json = nlohmann::json;
  const std::string& text = src.text();
  if (offset > text.size()) offset = text.size();
  const location at = src.locate(offset);
  auto fail = [&](const std::string& message) { return error(src, at, "metadata: " + message); };
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };

  std::size_t begin = offset, end = text.size();
  while (begin < end && space(text[begin])) ++begin;
  if (text.compare(begin, 4, "r\"\"\"") == 0) {
    begin += 4;
    while (end > begin && space(text[end - 1])) --end;
    if (end - begin < 3 || text.compare(end - 3, 3, "\"\"\"") != 0)
      throw fail("the r\"\"\" before the JSON is not closed by \"\"\"");
    end -= 3;
  }

  // nlohmann's what() starts "[json.exception.KIND.N] ", and a parse error's continues "parse
  // error at line L, column C: ": the relay::error says both better.
  auto reason = [](std::string what) {
    if (const std::size_t tag = what.find("] "); what.starts_with("[json.exception.") && tag != std::string::npos)
      what = what.substr(tag + 2);
    if (what.starts_with("parse error"))
      if (const std::size_t colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    return what;
  };
  const metadata_detail::skeleton sk =
      metadata_detail::skeleton_of(std::string_view(text).substr(begin, end - begin), begin);
  json doc;
  try {
    if (sk.ok) doc = json::parse(sk.json);
    else
      doc = json::parse(text.begin() + static_cast<std::ptrdiff_t>(begin),
                        text.begin() + static_cast<std::ptrdiff_t>(end));
  } catch (const json::parse_error& e) {
    // e.byte counts the characters read, the offending one included; past the end it points
    // just after the last non-blank character instead (an unterminated object, say).
    const std::size_t read = e.byte > 0 ? e.byte - 1 : 0;
    std::size_t pos = sk.ok ? sk.text_offset(read, begin) : begin + read;
    if (pos >= end) {
      pos = end;
      while (pos > begin && space(text[pos - 1])) --pos;
    }
    throw error(src, src.locate(pos), "metadata: invalid JSON: " + reason(e.what()));
  } catch (const json::exception& e) {
    throw fail("invalid JSON: " + reason(e.what()));  // a number out of range: no position
  }

  if (!doc.is_object()) throw fail("the section is not a JSON object");
  const auto nodes_it = doc.find("nodes");
  if (nodes_it == doc.end() || !nodes_it->is_array()) throw fail("missing \"nodes\" array");
  const json& nodes = *nodes_it;
  static const json empty_array = json::array();
  const auto blobs_it = doc.find("b64ndarrays");
  if (blobs_it != doc.end() && !blobs_it->is_array()) throw fail("\"b64ndarrays\" is not an array");
  const json& blobs = blobs_it == doc.end() ? empty_array : *blobs_it;

  // Indices are JSON numbers ("root", "data") or decimal strings (attribute values).
  auto to_index = [&](const json& v, const std::string& what) -> std::size_t {
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::size_t>(v.get<std::int64_t>());
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      bool ok = !s.empty() && s.size() <= 18;  // 18 digits cannot overflow
      std::size_t n = 0;
      for (std::size_t i = 0; ok && i < s.size(); ++i) {
        ok = s[i] >= '0' && s[i] <= '9';
        n = n * 10 + static_cast<std::size_t>(s[i] - '0');
      }
      if (ok) return n;
    }
    std::string shown = v.dump();
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    throw fail(what + " is " + shown + ", not an index");
  };
  // nodes[i] as an object with a string type_key.
  auto node = [&](std::size_t i, const std::string& what) -> const json& {
    if (i >= nodes.size())
      throw fail(what + " refers to node " + std::to_string(i) + ", out of range (" + std::to_string(nodes.size()) +
                 " nodes)");
    const json& n = nodes[i];
    if (!n.is_object() || !n.contains("type_key") || !n["type_key"].is_string())
      throw fail("nodes[" + std::to_string(i) + "] (" + what + ") is not an object with a \"type_key\"");
    return n;
  };
  auto type_key = [](const json& n) -> const std::string& { return n["type_key"].get_ref<const std::string&>(); };
  auto field = [&](const json& n, const char* name, std::size_t i) -> const json& {
    const auto it = n.find(name);
    if (it == n.end()) throw fail("nodes[" + std::to_string(i) + "] (" + type_key(n) + ") has no \"" + name + "\"");
    return *it;
  };
  auto array_field = [&](const json& n, const char* name, std::size_t i) -> const json& {
    const json& a = field(n, name, i);
    if (!a.is_array())
      throw fail("nodes[" + std::to_string(i) + "] (" + type_key(n) + "): \"" + name + "\" is not an array");
    return a;
  };
  // A key of a Map that is not written inline: a runtime.String node.
  auto string_node = [&](std::size_t i, const std::string& what) -> std::string {
    const json& n = node(i, what);
    if (type_key(n) != "runtime.String" && type_key(n) != "String")
      throw fail(what + " is nodes[" + std::to_string(i) + "] of type '" + type_key(n) + "', expected runtime.String");
    if (const auto r = n.find("repr_str"); r != n.end() && r->is_string()) return r->get<std::string>();
    if (const auto r = n.find("repr_b64"); r != n.end() && r->is_string()) {
      std::string err;
      const auto bytes = decode_base64(r->get_ref<const std::string&>(), err);
      if (!err.empty()) throw fail("nodes[" + std::to_string(i) + "]: repr_b64: " + err);
      return std::string(bytes.begin(), bytes.end());
    }
    throw fail("nodes[" + std::to_string(i) + "] (runtime.String) has no \"repr_str\" or \"repr_b64\"");
  };

  try {
    const auto root_it = doc.find("root");
    if (root_it == doc.end()) throw fail("missing \"root\"");
    const std::size_t root = to_index(*root_it, "\"root\"");
    if (root == 0) throw fail("\"root\" is null (node 0)");
    const json& map = node(root, "\"root\"");
    // StrMap: TVM before 0.7 had a separate map type for string keys, laid out the same way.
    if (type_key(map) != "Map" && type_key(map) != "StrMap")
      throw fail("\"root\" is nodes[" + std::to_string(root) + "] of type '" + type_key(map) + "', expected a Map");

    // (key, node index of its Array). With "keys" the keys are inline strings (or refs to
    // strings); without, "data" alternates key and value refs.
    std::vector<std::pair<std::string, std::size_t>> tables;
    const json& data = array_field(map, "data", root);
    if (const auto keys = map.find("keys"); keys != map.end()) {
      if (!keys->is_array() || keys->size() != data.size())
        throw fail("the root Map's \"keys\" is not an array as long as its \"data\"");
      for (std::size_t i = 0; i < data.size(); ++i) {
        const json& k = (*keys)[i];
        const std::string where = "the root Map's key " + std::to_string(i);
        tables.emplace_back(k.is_string() ? k.get<std::string>() : string_node(to_index(k, where), where),
                            to_index(data[i], "the root Map's value " + std::to_string(i)));
      }
    } else {
      if (data.size() % 2 != 0)
        throw fail("the root Map's \"data\" has an odd number of entries (expected key, value pairs)");
      for (std::size_t i = 0; i < data.size(); i += 2) {
        const std::string where = "the root Map's key " + std::to_string(i / 2);
        tables.emplace_back(string_node(to_index(data[i], where), where),
                            to_index(data[i + 1], "the root Map's value " + std::to_string(i / 2)));
      }
    }

    metadata md;
    std::vector<std::size_t> constant_blobs;  // meta[relay.Constant][i] -> b64ndarrays index
    for (const auto& [key, value] : tables) {
      const std::string what = "meta[" + key + "]";
      if (md.table_sizes.contains(key)) throw fail("the root Map has the key " + key + " twice");
      if (value == 0) throw fail(what + " is null");
      const json& array = node(value, what);
      if (type_key(array) != "Array")
        throw fail(what + " is nodes[" + std::to_string(value) + "] of type '" + type_key(array) +
                   "', expected an Array");
      const json& entries = array_field(array, "data", value);
      md.table_sizes[key] = entries.size();
      const bool constants = key == "relay.Constant";
      for (std::size_t i = 0; i < entries.size(); ++i) {
        const std::string entry = what + "[" + std::to_string(i) + "]";
        const std::size_t j = to_index(entries[i], entry);
        if (!constants) {
          if (j != 0) node(j, entry);
          continue;
        }
        if (j == 0) throw fail(entry + " is null");
        const json& c = node(j, entry);
        if (type_key(c) != "relay.Constant")
          throw fail(entry + " is nodes[" + std::to_string(j) + "] of type '" + type_key(c) +
                     "', expected relay.Constant");
        const json& attrs = field(c, "attrs", j);
        const auto blob = attrs.is_object() ? attrs.find("data") : attrs.end();
        if (!attrs.is_object() || blob == attrs.end())
          throw fail(entry + " (nodes[" + std::to_string(j) + "]) has no attrs.data");
        const std::size_t k = to_index(*blob, entry + " attrs.data");
        if (k >= blobs.size())
          throw fail(entry + " refers to b64ndarrays[" + std::to_string(k) + "], out of range (" +
                     std::to_string(blobs.size()) + " blobs)");
        constant_blobs.push_back(k);
      }
    }

    // Every blob is validated, referenced or not (TVM's loader rejects a bad one either way); an
    // error names the first constant that uses it.
    std::vector<std::size_t> first_user(blobs.size(), constant_blobs.size());
    for (std::size_t i = constant_blobs.size(); i-- > 0;) first_user[constant_blobs[i]] = i;
    std::vector<std::shared_ptr<const constant_data>> decoded(blobs.size());
    for (std::size_t k = 0; k < blobs.size(); ++k) {
      std::string what = "b64ndarrays[" + std::to_string(k) + "]";
      if (first_user[k] < constant_blobs.size())
        what += " (meta[relay.Constant][" + std::to_string(first_user[k]) + "])";
      if (!blobs[k].is_string()) throw fail(what + " is not a string");
      // A blob the skeleton took out is read where it lies in the text.
      std::string_view b64 = blobs[k].get_ref<const std::string&>();
      if (sk.ok && b64.size() >= 2 && b64[0] == '\x01') b64 = sk.blobs.at(std::stoul(std::string(b64.substr(1))));
      std::string err;
      const auto bytes = decode_base64(b64, err);
      if (!err.empty()) throw fail(what + ": base64: " + err);
      decoded[k] = decode_ndarray(bytes, err);
      if (!decoded[k]) throw fail(what + ": " + err);
    }
    if (const auto a = doc.find("attrs"); a != doc.end() && a->is_object())
      if (const auto v = a->find("tvm_version"); v != a->end() && v->is_string())
        md.tvm_version = v->get<std::string>();
    md.constants.reserve(constant_blobs.size());
    for (std::size_t k : constant_blobs) md.constants.push_back(decoded[k]);
    return md;
  } catch (const json::exception& e) {
    // The checks above cover every access; this keeps a missed case an error, not a crash.
    throw fail("malformed object graph: " + reason(e.what()));
  }
}

}  // namespace fuse::relay
