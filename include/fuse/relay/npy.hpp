// NumPy .npy files (format versions 1.0, 2.0 and 3.0) as constant_data: what `fuse-relay run`
// reads its inputs from and writes its outputs to. Little-endian, C order; every header field
// is validated, and the data size is checked against the file before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/source.hpp"

namespace fuse::relay::npy {

/// NumPy's descr for a dtype ("<f4", "|i1", "|b1"); empty when NumPy has none (bfloat16).
inline std::string descr(dtype d) {
  if (d.lanes != 1) return "";
  if (d.is_bool()) return "|b1";
  const char kind = d.code == dtype::float_code  ? 'f'
                    : d.code == dtype::int_code  ? 'i'
                    : d.code == dtype::uint_code ? 'u'
                                                 : 0;
  if (!kind || d.bits % 8 || d.bits > 64) return "";
  return std::string(d.bits == 8 ? "|" : "<") + kind + std::to_string(d.bits / 8);
}

inline std::optional<dtype> from_descr(std::string_view s) {
  if (s.size() < 3) return std::nullopt;
  const char order = s[0], kind = s[1];
  const std::string_view width = s.substr(2);
  if (width.size() != 1 || width[0] < '1' || width[0] > '8') return std::nullopt;
  const int bytes = width[0] - '0';
  if (bytes > 1 && order != '<' && !(order == '=')) return std::nullopt;  // big-endian data is not read
  if (kind == 'b' && bytes == 1) return dtype::boolean();
  dtype d;
  d.bits = static_cast<std::uint8_t>(bytes * 8);
  if (kind == 'f' && (bytes == 2 || bytes == 4 || bytes == 8)) d.code = dtype::float_code;
  else if (kind == 'i' && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8)) d.code = dtype::int_code;
  else if (kind == 'u' && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8)) d.code = dtype::uint_code;
  else return std::nullopt;
  return d;
}

/// The bytes of a .npy file holding c (version 1.0; 2.0 when the header needs it).
inline std::string write(const constant_data& c) {
  const std::string d = descr(c.dt);
  if (d.empty()) throw relay::error("npy: dtype " + c.dt.name() + " has no NumPy equivalent");
  std::string header = "{'descr': '" + d + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < c.shape.size(); ++i)
    header += std::to_string(c.shape[i]) + (c.shape.size() == 1 || i + 1 < c.shape.size() ? ", " : "");
  if (c.shape.size() == 1) header.pop_back();  // (7,)
  header += "), }";
  const bool v2 = header.size() + 11 > 65535;
  const std::size_t prefix = v2 ? 12 : 10;
  std::size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  const std::size_t n = header.size();
  for (std::size_t b = 0; b < (v2 ? 4u : 2u); ++b) out += static_cast<char>((n >> (8 * b)) & 0xFF);
  out += header;
  out.append(reinterpret_cast<const char*>(c.bytes.data()), c.bytes.size());
  return out;
}

/// Parses .npy bytes (`name` for messages). Throws relay::error naming the file and the field.
/// A view, so that a .npy held inside another buffer (an .npz member) is parsed where it lies.
inline constant_data read(std::string_view bytes, const std::string& name) {
  auto fail = [&](const std::string& m) -> constant_data {
    throw relay::error(name + ": not a valid .npy file: " + m);
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return fail("bad magic");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) return fail("unknown format version " + std::to_string(major));
  const std::size_t lenbytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + lenbytes) return fail("truncated header");
  std::size_t hlen = 0;
  for (std::size_t b = 0; b < lenbytes; ++b)
    hlen |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + b])) << (8 * b);
  const std::size_t start = 8 + lenbytes;
  if (hlen > bytes.size() - start) return fail("header length " + std::to_string(hlen) + " runs past the end");
  const std::string h(bytes.substr(start, hlen));
  // The header is a Python dict literal with three keys; read each by name.
  auto field = [&](const std::string& key) -> std::string {
    const std::size_t k = h.find("'" + key + "'");
    if (k == std::string::npos) fail("the header has no '" + key + "'");
    std::size_t p = h.find(':', k);
    if (p == std::string::npos) fail("malformed header");
    ++p;
    while (p < h.size() && h[p] == ' ') ++p;
    std::size_t e = p;
    if (p < h.size() && h[p] == '(') e = h.find(')', p) + 1;
    else if (p < h.size() && h[p] == '\'') e = h.find('\'', p + 1) + 1;
    else
      while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
    if (e == 0 || e == std::string::npos + 1 || e > h.size()) fail("malformed value of '" + key + "'");
    return h.substr(p, e - p);
  };
  const std::string descr_s = field("descr");
  if (descr_s.size() < 2) return fail("malformed descr");
  const auto dt = from_descr(std::string_view(descr_s).substr(1, descr_s.size() - 2));
  if (!dt) return fail("unsupported descr " + descr_s + " (little-endian bool, int, uint and float only)");
  if (field("fortran_order") != "False") return fail("Fortran-ordered arrays are not read");
  const std::string shape_s = field("shape");
  constant_data c;
  c.dt = *dt;
  std::int64_t count = 1;
  for (std::size_t p = 1; p + 1 < shape_s.size();) {
    while (p < shape_s.size() && (shape_s[p] == ' ' || shape_s[p] == ',')) ++p;
    if (p + 1 >= shape_s.size()) break;
    std::int64_t v = 0;
    std::size_t digits = 0;
    while (p < shape_s.size() && shape_s[p] >= '0' && shape_s[p] <= '9' && digits < 18)
      v = v * 10 + (shape_s[p++] - '0'), ++digits;
    if (!digits || (p < shape_s.size() && shape_s[p] >= '0' && shape_s[p] <= '9'))
      return fail("malformed shape " + shape_s);
    if (v > 0 && count > (std::int64_t{1} << 40) / v) return fail("shape " + shape_s + " is too large");
    count *= v;
    c.shape.push_back(v);
  }
  const std::size_t data = start + hlen;
  const auto need = static_cast<std::size_t>(count) * dt->bytes();
  if (bytes.size() - data != need)
    return fail("shape " + shape_s + " of " + dt->name() + " needs " + std::to_string(need) +
                " data bytes, the file has " + std::to_string(bytes.size() - data));
  c.bytes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data), bytes.end());
  return c;
}

inline constant_data read_file(const std::string& path) { return read(read_file_bytes(path), path); }

inline void write_file(const std::string& path, const constant_data& c) {
  std::ofstream f(path, std::ios::binary);
  const std::string b = write(c);
  if (!f || !f.write(b.data(), static_cast<std::streamsize>(b.size()))) throw relay::error("cannot write " + path);
}

}  // namespace fuse::relay::npy
