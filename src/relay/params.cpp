// Weights files, read and written (see params.hpp): the binary of TVM's save_param_dict and NumPy
// .npz archives, with the ZIP reader and writer and the DEFLATE decoder they need.
#include "fuse/relay/params.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fuse/relay/metadata.hpp"
#include "fuse/relay/npy.hpp"
#include "fuse/relay/source.hpp"

namespace fuse::relay::params {

namespace detail {

namespace {

std::string hex(std::uint64_t v, int digits) {
  char s[24];
  std::snprintf(s, sizeof s, "0x%0*llX", digits, static_cast<unsigned long long>(v));
  return s;
}

std::uint64_t load_le(std::span<const unsigned char> b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(b[at + static_cast<std::size_t>(i)]) << (8 * i);
  return v;
}

void put_le(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// ---- CRC-32 (ISO 3309, the ZIP checksum: reflected polynomial 0xEDB88320) ---------------------

constexpr auto crc_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t n = 0; n < 256; ++n) {
    std::uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[n] = c;
  }
  return t;
}();

// ---- DEFLATE (RFC 1951) -----------------------------------------------------------------------

/// The bits of a DEFLATE stream, least significant first (RFC 1951 3.1.1). Past the end it
/// yields zeros to peek at but never lets them be consumed.
class bit_reader {
 public:
  bit_reader(std::span<const unsigned char> in, const std::string& context) : in_(in), context_(context) {}

  /// The next n (<= 32) bits without consuming them; zeros past the end.
  std::uint32_t peek(unsigned n) {
    refill();
    return static_cast<std::uint32_t>(buffer_ & ((std::uint64_t{1} << n) - 1));
  }
  bool has(unsigned n) {
    refill();
    return count_ >= n;
  }
  void drop(unsigned n) {
    if (!has(n)) fail("truncated: the stream ends inside a block");
    buffer_ >>= n;
    count_ -= n;
  }
  std::uint32_t bits(unsigned n) {
    const std::uint32_t v = peek(n);
    drop(n);
    return v;
  }
  /// Skips to the next byte boundary and hands the buffered whole bytes back to the input, so
  /// that a stored block's bytes can be copied from it directly.
  void align() {
    buffer_ >>= count_ % 8;
    count_ -= count_ % 8;
    next_ -= count_ / 8;
    buffer_ = 0;
    count_ = 0;
  }
  /// The next n bytes (after align()).
  std::span<const unsigned char> take(std::size_t n) {
    if (in_.size() - next_ < n)
      fail("truncated: a stored block of " + std::to_string(n) + " bytes has " + std::to_string(in_.size() - next_));
    const auto s = in_.subspan(next_, n);
    next_ += n;
    return s;
  }
  /// Whole bytes not yet read (after align()).
  std::size_t bytes_left() const { return in_.size() - next_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw relay::error(context_ + ": bad DEFLATE data: " + what);
  }

 private:
  void refill() {
    while (count_ <= 56 && next_ < in_.size()) {
      buffer_ |= static_cast<std::uint64_t>(in_[next_++]) << count_;
      count_ += 8;
    }
  }
  std::span<const unsigned char> in_;
  const std::string& context_;
  std::size_t next_ = 0;
  std::uint64_t buffer_ = 0;
  unsigned count_ = 0;
};

/// A canonical Huffman code (RFC 1951 3.2.2) built from code lengths. Codes of up to fast_bits
/// bits decode with one table look-up; longer ones walk the code lengths one bit at a time.
class huffman {
 public:
  static constexpr unsigned max_bits = 15, fast_bits = 9;

  /// Builds the code; returns what is wrong with the lengths, or "" when they form a code. A
  /// code must be complete (Kraft sum 1), except the one-code case of RFC 1951 3.2.7 (a single
  /// code of one bit) and no codes at all, which `allow_sparse` permits (lit/len and distance).
  std::string build(std::span<const std::uint8_t> lengths, bool allow_sparse) {
    count_.fill(0);
    fast_.fill(0);
    for (std::uint8_t l : lengths) ++count_[l];
    count_[0] = 0;
    int left = 1;  // code space left at the current length
    for (unsigned len = 1; len <= max_bits; ++len) {
      left = left * 2 - count_[len];
      if (left < 0) return "over-subscribed Huffman code lengths";
    }
    const unsigned codes =
        static_cast<unsigned>(lengths.size()) - static_cast<unsigned>(std::count(lengths.begin(), lengths.end(), 0));
    if (left > 0 && !(allow_sparse && (codes == 0 || (codes == 1 && count_[1] == 1))))
      return "incomplete Huffman code lengths";
    // Symbols in code order: by length, then by symbol (the canonical assignment).
    std::array<std::uint16_t, max_bits + 2> offset{};
    for (unsigned len = 1; len <= max_bits; ++len)
      offset[len + 1] = static_cast<std::uint16_t>(offset[len] + count_[len]);
    std::array<std::uint32_t, max_bits + 1> next_code{};
    for (unsigned len = 1, code = 0; len <= max_bits; ++len) {
      code = (code + count_[len - 1]) << 1;
      next_code[len] = code;
    }
    for (std::size_t s = 0; s < lengths.size(); ++s) {
      const unsigned len = lengths[s];
      if (!len) continue;
      symbol_[offset[len]++] = static_cast<std::uint16_t>(s);
      const std::uint32_t code = next_code[len]++;
      if (len > fast_bits) continue;
      // The stream holds a code's first bit first, so the table is indexed by the reversed code.
      std::uint32_t reversed = 0;
      for (unsigned b = 0; b < len; ++b) reversed |= ((code >> b) & 1) << (len - 1 - b);
      for (std::uint32_t i = reversed; i < (1u << fast_bits); i += 1u << len)
        fast_[i] = static_cast<std::uint16_t>(len << 9 | s);
    }
    return "";
  }

  unsigned decode(bit_reader& in) const {
    if (const std::uint16_t e = fast_[in.peek(fast_bits)]) {
      in.drop(e >> 9);
      return e & 0x1FF;
    }
    // Longer than fast_bits, or not a code: compare with the first code of each length.
    int code = 0, first = 0, index = 0;
    for (unsigned len = 1; len <= max_bits; ++len) {
      code |= static_cast<int>(in.bits(1));
      const int n = count_[len];
      if (code - first < n) return symbol_[static_cast<std::size_t>(index + code - first)];
      index += n;
      first = (first + n) << 1;
      code <<= 1;
    }
    in.fail("a Huffman code that the block's code does not assign");
  }

 private:
  std::array<std::uint16_t, max_bits + 1> count_{};
  std::array<std::uint16_t, 288> symbol_{};
  std::array<std::uint16_t, 1u << fast_bits> fast_{};  // len << 9 | symbol; 0: look further
};

// ---- ZIP (PKWARE APPNOTE 6.3) -----------------------------------------------------------------

constexpr std::uint32_t local_header_signature = 0x04034b50, central_header_signature = 0x02014b50,
                        end_signature = 0x06054b50, zip64_end_signature = 0x06064b50,
                        zip64_locator_signature = 0x07064b50, descriptor_signature = 0x08074b50;
constexpr std::uint16_t zip64_extra_id = 0x0001;
constexpr std::uint64_t zip32_max = 0xFFFFFFFF;  // a 32-bit field at this value is in the ZIP64 extra

/// A member of a ZIP archive as its central directory describes it.
struct zip_member {
  std::string name;
  std::uint16_t flags = 0, method = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0, size = 0, offset = 0;
};

/// The members of a ZIP archive, in central directory order; `fail(what)` makes the error to throw.
template <class Fail>
std::vector<zip_member> zip_directory(std::span<const unsigned char> z, const Fail& fail) {
  // The end record is the last thing in the file: 22 bytes and a comment of up to 65535.
  if (z.size() < 22) throw fail("no end of central directory record (truncated, or not a ZIP archive)");
  std::size_t end = z.size() - 22;
  for (;; --end) {
    if (load_le(z, end, 4) == end_signature && load_le(z, end + 20, 2) == z.size() - end - 22) break;
    if (end == 0 || z.size() - end - 22 == 0xFFFF)
      throw fail("no end of central directory record (truncated, or not a ZIP archive)");
  }
  if (load_le(z, end + 4, 2) != 0 || load_le(z, end + 6, 2) != 0) throw fail("multi-disk archives are not supported");
  std::uint64_t count = load_le(z, end + 10, 2), cd_size = load_le(z, end + 12, 4), cd_offset = load_le(z, end + 16, 4);
  if (load_le(z, end + 8, 2) != count) throw fail("multi-disk archives are not supported");
  std::size_t cd_limit = end;  // the central directory ends before this
  // ZIP64: a locator just before the end record points at the ZIP64 end record, which holds
  // the 64-bit count, size and offset.
  if (end >= 20 && load_le(z, end - 20, 4) == zip64_locator_signature) {
    const std::size_t locator = end - 20;
    if (load_le(z, locator + 4, 4) != 0 || load_le(z, locator + 16, 4) != 1)
      throw fail("multi-disk archives are not supported");
    const std::uint64_t record = load_le(z, locator + 8, 8);
    if (record > locator || locator - record < 56 ||
        load_le(z, static_cast<std::size_t>(record), 4) != zip64_end_signature)
      throw fail("the ZIP64 end locator points at " + std::to_string(record) + ", where there is no ZIP64 end record");
    const auto r = static_cast<std::size_t>(record);
    if (load_le(z, r + 16, 4) != 0 || load_le(z, r + 20, 4) != 0) throw fail("multi-disk archives are not supported");
    count = load_le(z, r + 32, 8);
    if (load_le(z, r + 24, 8) != count) throw fail("multi-disk archives are not supported");
    cd_size = load_le(z, r + 40, 8);
    cd_offset = load_le(z, r + 48, 8);
    cd_limit = r;
  } else if (count == 0xFFFF || cd_size == zip32_max || cd_offset == zip32_max) {
    throw fail("the end record defers to a ZIP64 end record that is not there");
  }
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset)
    throw fail("the central directory (" + std::to_string(cd_size) + " bytes at offset " + std::to_string(cd_offset) +
               ") runs past the end records at " + std::to_string(cd_limit));
  if (count > cd_size / 46)
    throw fail("the end record counts " + std::to_string(count) + " members, more than a central directory of " +
               std::to_string(cd_size) + " bytes holds");

  const auto cd = z.subspan(static_cast<std::size_t>(cd_offset), static_cast<std::size_t>(cd_size));
  std::vector<zip_member> members;
  members.reserve(static_cast<std::size_t>(count));
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::string which = "central directory entry " + std::to_string(i);
    if (cd.size() - at < 46) throw fail(which + " is truncated");
    if (load_le(cd, at, 4) != central_header_signature) throw fail(which + " has a bad signature");
    zip_member m;
    m.flags = static_cast<std::uint16_t>(load_le(cd, at + 8, 2));
    m.method = static_cast<std::uint16_t>(load_le(cd, at + 10, 2));
    m.crc = static_cast<std::uint32_t>(load_le(cd, at + 16, 4));
    m.compressed = load_le(cd, at + 20, 4);
    m.size = load_le(cd, at + 24, 4);
    const std::size_t name_len = load_le(cd, at + 28, 2), extra_len = load_le(cd, at + 30, 2),
                      comment_len = load_le(cd, at + 32, 2);
    if (load_le(cd, at + 34, 2) != 0) throw fail(which + ": multi-disk archives are not supported");
    m.offset = load_le(cd, at + 42, 4);
    if (cd.size() - at - 46 < name_len + extra_len + comment_len)
      throw fail(which + ": its name, extra field and comment run past the directory");
    const auto name = cd.subspan(at + 46, name_len);
    m.name.assign(name.begin(), name.end());
    // The ZIP64 extra field holds, in this order, each of these whose 32-bit field is 0xFFFFFFFF.
    const auto extra = cd.subspan(at + 46 + name_len, extra_len);
    bool zip64_seen = false;
    for (std::size_t e = 0; e + 4 <= extra.size();) {
      const std::size_t id = load_le(extra, e, 2), len = load_le(extra, e + 2, 2);
      if (extra.size() - e - 4 < len) throw fail("'" + m.name + "': an extra field runs past its header");
      if (id == zip64_extra_id) {
        zip64_seen = true;
        std::size_t f = e + 4;
        for (std::uint64_t* field : {&m.size, &m.compressed, &m.offset}) {
          if (*field != zip32_max) continue;
          if (f + 8 > e + 4 + len) throw fail("'" + m.name + "': the ZIP64 extra field is too short");
          *field = load_le(extra, f, 8);
          f += 8;
        }
      }
      e += 4 + len;
    }
    if (!zip64_seen && (m.size == zip32_max || m.compressed == zip32_max || m.offset == zip32_max))
      throw fail("'" + m.name + "': a size or offset defers to a ZIP64 extra field that is not there");
    members.push_back(std::move(m));
    at += 46 + name_len + extra_len + comment_len;
  }
  return members;
}

template <class Body>
void write_bytes(const std::string& path, const Body& body) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw relay::error("cannot write " + path);
  body(f);
  f.flush();
  if (!f) throw relay::error("cannot write " + path);
}

}  // namespace

std::uint32_t crc32(std::span<const unsigned char> bytes, std::uint32_t crc) {
  crc = ~crc;
  for (unsigned char b : bytes) crc = crc_table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::vector<unsigned char> inflate(std::span<const unsigned char> in, std::size_t expected_size,
                                   const std::string& context) {
  static constexpr std::uint16_t length_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                                    31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
  static constexpr std::uint8_t length_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                                    2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
  static constexpr std::uint16_t distance_base[30] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                                      33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                                      1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
  static constexpr std::uint8_t distance_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                                      6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
  // The order in which a dynamic block lists the code length code's lengths (RFC 1951 3.2.7).
  static constexpr std::uint8_t length_order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

  bit_reader bits(in, context);
  std::vector<unsigned char> out;
  out.reserve(std::min(expected_size, 4 * in.size() + 1024));
  // Room for n more bytes, or the error when they would pass expected_size.
  auto make_room = [&](std::size_t n) {
    if (n > expected_size - out.size())
      bits.fail("inflates to more than the " + std::to_string(expected_size) + " bytes the archive declares");
    if (n > out.capacity() - out.size())
      out.reserve(std::min(expected_size, std::max(out.size() + n, 2 * out.capacity())));
  };
  huffman literals, distances;
  bool last = false;
  while (!last) {
    last = bits.bits(1);
    const unsigned type = bits.bits(2);
    if (type == 0) {  // stored (3.2.4)
      bits.align();
      if (bits.bytes_left() < 4) bits.fail("truncated: a stored block's LEN and NLEN");
      const auto header = bits.take(4);
      const auto len = static_cast<std::uint16_t>(load_le(header, 0, 2));
      const auto nlen = static_cast<std::uint16_t>(load_le(header, 2, 2));
      if (static_cast<std::uint16_t>(~nlen) != len)
        bits.fail("a stored block's LEN " + hex(len, 4) + " is not the complement of NLEN " + hex(nlen, 4));
      const auto data = bits.take(len);
      make_room(len);
      out.insert(out.end(), data.begin(), data.end());
      continue;
    }
    if (type == 3) bits.fail("block type 3 is reserved");
    if (type == 1) {  // fixed Huffman codes (3.2.6)
      std::array<std::uint8_t, 288> l{};
      for (std::size_t s = 0; s < 288; ++s) l[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
      literals.build(l, false);
      std::array<std::uint8_t, 32> d{};
      d.fill(5);
      distances.build(d, false);
    } else {  // dynamic Huffman codes (3.2.7)
      const unsigned hlit = bits.bits(5) + 257, hdist = bits.bits(5) + 1, hclen = bits.bits(4) + 4;
      if (hlit > 286) bits.fail("HLIT " + std::to_string(hlit) + " is more than 286 literal/length codes");
      if (hdist > 30) bits.fail("HDIST " + std::to_string(hdist) + " is more than 30 distance codes");
      std::array<std::uint8_t, 19> cl{};
      for (unsigned i = 0; i < hclen; ++i) cl[length_order[i]] = static_cast<std::uint8_t>(bits.bits(3));
      huffman lengths_code;
      if (const std::string e = lengths_code.build(cl, false); !e.empty()) bits.fail("code length code: " + e);
      std::array<std::uint8_t, 286 + 30> lengths{};
      for (unsigned n = 0; n < hlit + hdist;) {
        const unsigned sym = lengths_code.decode(bits);
        if (sym < 16) {
          lengths[n++] = static_cast<std::uint8_t>(sym);
          continue;
        }
        if (sym == 16 && n == 0) bits.fail("code length 16 (repeat the previous) comes first");
        const std::uint8_t value = sym == 16 ? lengths[n - 1] : 0;
        const unsigned repeat = sym == 16 ? 3 + bits.bits(2) : sym == 17 ? 3 + bits.bits(3) : 11 + bits.bits(7);
        if (repeat > hlit + hdist - n)
          bits.fail("code lengths repeat past the " + std::to_string(hlit + hdist) + " codes");
        for (unsigned i = 0; i < repeat; ++i) lengths[n++] = value;
      }
      if (lengths[256] == 0) bits.fail("the block's code has no end-of-block symbol");
      if (const std::string e = literals.build(std::span(lengths).first(hlit), true); !e.empty())
        bits.fail("literal/length code: " + e);
      if (const std::string e = distances.build(std::span(lengths).subspan(hlit, hdist), true); !e.empty())
        bits.fail("distance code: " + e);
    }
    for (;;) {  // the compressed data (3.2.5)
      const unsigned sym = literals.decode(bits);
      if (sym < 256) {
        make_room(1);
        out.push_back(static_cast<unsigned char>(sym));
        continue;
      }
      if (sym == 256) break;
      if (sym > 285) bits.fail("literal/length symbol " + std::to_string(sym) + " is not a length");
      const unsigned length = length_base[sym - 257] + bits.bits(length_extra[sym - 257]);
      const unsigned dsym = distances.decode(bits);
      if (dsym > 29) bits.fail("distance symbol " + std::to_string(dsym) + " is not a distance");
      const std::size_t distance = distance_base[dsym] + bits.bits(distance_extra[dsym]);
      if (distance > out.size())
        bits.fail("distance " + std::to_string(distance) + " reaches before the start (" + std::to_string(out.size()) +
                  " bytes written)");
      make_room(length);
      // Byte by byte: a copy may overlap what it writes (distance < length repeats a pattern).
      std::size_t from = out.size() - distance;
      for (unsigned i = 0; i < length; ++i) out.push_back(out[from++]);
    }
  }
  bits.align();
  if (bits.bytes_left()) bits.fail(std::to_string(bits.bytes_left()) + " bytes follow the final block");
  if (out.size() != expected_size)
    bits.fail("inflates to " + std::to_string(out.size()) + " bytes, the archive declares " +
              std::to_string(expected_size));
  return out;
}

void zip_writer::add(const std::string& name, std::uint16_t method, std::uint32_t crc, std::uint64_t size,
                     std::string_view data) {
  if (name.size() > 0xFFFF)
    throw relay::error("zip: member name of " + std::to_string(name.size()) + " bytes is too long");
  member m{name, method, crc, size, data.size(), offset_};
  const bool zip64 = force_zip64_ || m.size >= zip32_max || m.compressed >= zip32_max;
  std::string h;
  put_le(h, local_header_signature, 4);
  put_le(h, zip64 ? 45 : 20, 2);  // version needed: 4.5 for ZIP64, else 2.0
  put_le(h, 0, 2);                // flags
  put_le(h, method, 2);
  put_le(h, 0, 2);     // time 00:00:00
  put_le(h, 0x21, 2);  // date 1980-01-01: a fixed stamp keeps output reproducible
  put_le(h, crc, 4);
  put_le(h, zip64 ? zip32_max : m.compressed, 4);
  put_le(h, zip64 ? zip32_max : m.size, 4);
  put_le(h, name.size(), 2);
  put_le(h, zip64 ? 20 : 0, 2);
  h += name;
  if (zip64) {  // a local header's ZIP64 extra holds both sizes (APPNOTE 4.5.3)
    put_le(h, zip64_extra_id, 2);
    put_le(h, 16, 2);
    put_le(h, m.size, 8);
    put_le(h, m.compressed, 8);
  }
  write(h);
  write(data);
  members_.push_back(std::move(m));
}

void zip_writer::finish() {
  const std::uint64_t cd_offset = offset_;
  for (const member& m : members_) {
    // In the central directory the ZIP64 extra holds just the fields whose 32-bit value is 0xFFFFFFFF.
    std::string extra;
    const bool big_size = force_zip64_ || m.size >= zip32_max,
               big_compressed = force_zip64_ || m.compressed >= zip32_max,
               big_offset = force_zip64_ || m.offset >= zip32_max;
    if (big_size) put_le(extra, m.size, 8);
    if (big_compressed) put_le(extra, m.compressed, 8);
    if (big_offset) put_le(extra, m.offset, 8);
    if (!extra.empty()) extra = le(zip64_extra_id, 2) + le(extra.size(), 2) + extra;
    std::string h;
    put_le(h, central_header_signature, 4);
    put_le(h, extra.empty() ? 20 : 45, 2);  // version made by
    put_le(h, extra.empty() ? 20 : 45, 2);  // version needed
    put_le(h, 0, 2);
    put_le(h, m.method, 2);
    put_le(h, 0, 2);
    put_le(h, 0x21, 2);
    put_le(h, m.crc, 4);
    put_le(h, big_compressed ? zip32_max : m.compressed, 4);
    put_le(h, big_size ? zip32_max : m.size, 4);
    put_le(h, m.name.size(), 2);
    put_le(h, extra.size(), 2);
    put_le(h, 0, 2);  // comment length
    put_le(h, 0, 2);  // disk number start
    put_le(h, 0, 2);  // internal attributes
    put_le(h, 0, 4);  // external attributes
    put_le(h, big_offset ? zip32_max : m.offset, 4);
    h += m.name;
    h += extra;
    write(h);
  }
  const std::uint64_t cd_size = offset_ - cd_offset, count = members_.size();
  const bool zip64 = force_zip64_ || count >= 0xFFFF || cd_size >= zip32_max || cd_offset >= zip32_max;
  std::string e;
  if (zip64) {
    const std::uint64_t record = offset_;
    put_le(e, zip64_end_signature, 4);
    put_le(e, 44, 8);  // the size of the rest of the record
    put_le(e, 45, 2);
    put_le(e, 45, 2);
    put_le(e, 0, 4);  // this disk
    put_le(e, 0, 4);  // the disk with the central directory
    put_le(e, count, 8);
    put_le(e, count, 8);
    put_le(e, cd_size, 8);
    put_le(e, cd_offset, 8);
    put_le(e, zip64_locator_signature, 4);
    put_le(e, 0, 4);
    put_le(e, record, 8);
    put_le(e, 1, 4);  // total disks
  }
  put_le(e, end_signature, 4);
  put_le(e, 0, 2);
  put_le(e, 0, 2);
  put_le(e, zip64 ? 0xFFFF : count, 2);
  put_le(e, zip64 ? 0xFFFF : count, 2);
  put_le(e, zip64 ? zip32_max : cd_size, 4);
  put_le(e, zip64 ? zip32_max : cd_offset, 4);
  put_le(e, 0, 2);  // comment length
  write(e);
}

std::string zip_writer::le(std::uint64_t v, int n) {
  std::string s;
  put_le(s, v, n);
  return s;
}

void zip_writer::write(std::string_view s) {
  out_.write(s.data(), static_cast<std::streamsize>(s.size()));
  offset_ += s.size();
}

}  // namespace detail

std::vector<entry> read_param_dict(std::span<const unsigned char> bytes, const std::string& source_name) {
  auto fail = [&](const std::string& what) {
    return relay::error(source_name + ": not a valid TVM param dict: " + what);
  };
  std::size_t pos = 0;
  auto u64 = [&](const std::string& field) {
    if (bytes.size() - pos < 8)
      throw fail("truncated: " + field + " needs 8 bytes at offset " + std::to_string(pos) + ", the file has " +
                 std::to_string(bytes.size()));
    const std::uint64_t v = detail::load_le(bytes, pos, 8);
    pos += 8;
    return v;
  };
  if (const std::uint64_t magic = u64("the magic"); magic != param_dict_magic)
    throw fail("bad magic " + detail::hex(magic, 16) + " (expected " + detail::hex(param_dict_magic, 16) + ")");
  u64("the reserved field");  // TVM's LoadParams ignores it too
  const std::uint64_t names = u64("the name count");
  // Each name takes at least 8 bytes and each array at least 40 (a blob's fixed fields).
  if (names > (bytes.size() - pos) / 48)
    throw fail("the name count " + std::to_string(names) + " is more than the " + std::to_string(bytes.size()) +
               "-byte file can hold");
  std::vector<entry> entries(static_cast<std::size_t>(names));
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::uint64_t len = u64("the length of name " + std::to_string(i));
    if (len > bytes.size() - pos)
      throw fail("name " + std::to_string(i) + " of " + std::to_string(len) + " bytes runs past the end of the file (" +
                 std::to_string(bytes.size() - pos) + " bytes left)");
    const auto name = bytes.subspan(pos, static_cast<std::size_t>(len));
    entries[i].name.assign(name.begin(), name.end());
    pos += name.size();
  }
  if (const std::uint64_t arrays = u64("the array count"); arrays != names)
    throw fail(std::to_string(names) + " names but " + std::to_string(arrays) + " arrays");
  std::map<std::string_view, std::size_t> seen;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string which = "array " + std::to_string(i) + " ('" + entries[i].name + "')";
    if (const auto [it, fresh] = seen.emplace(entries[i].name, i); !fresh)
      throw fail("duplicate name '" + entries[i].name + "' (arrays " + std::to_string(it->second) + " and " +
                 std::to_string(i) + ")");
    // The array's blob (the metadata's layout) runs to where its data_byte_size ends.
    std::string err;
    std::size_t blob_size = 0;
    const auto c = decode_ndarray(bytes.subspan(pos), err, &blob_size);
    if (!c) throw fail(which + ": " + err);
    if (c->dt.lanes != 1)
      throw fail(which + ": dtype " + c->dt.name() + " has " + std::to_string(c->dt.lanes) + " lanes (only 1 is read)");
    entries[i].data = *c;
    pos += blob_size;
  }
  if (pos != bytes.size()) throw fail(std::to_string(bytes.size() - pos) + " bytes follow the last array");
  return entries;
}

std::vector<entry> read_npz(std::span<const unsigned char> bytes, const std::string& source_name) {
  auto fail = [&](const std::string& what) {
    return relay::error(source_name + ": not a valid .npz archive: " + what);
  };
  const std::vector<detail::zip_member> members = detail::zip_directory(bytes, fail);
  std::vector<entry> entries;
  entries.reserve(members.size());
  std::map<std::string, std::string> seen;  // key -> member name
  for (const detail::zip_member& m : members) {
    const std::string context = source_name + ": entry '" + m.name + "'";
    auto bad = [&](const std::string& what) { return relay::error(context + ": " + what); };
    if (m.flags & 1) throw bad("encrypted members are not supported");
    if (m.method != 0 && m.method != 8)
      throw bad("unsupported compression method " + std::to_string(m.method) +
                " (only 0, stored, and 8, deflate, are read)");
    // The local header repeats the name and method; its extra field (NumPy puts a ZIP64 one
    // there) may differ from the central directory's, so only its length is used.
    if (m.offset > bytes.size() || bytes.size() - m.offset < 30)
      throw bad("the local header at offset " + std::to_string(m.offset) + " runs past the end");
    const auto local = static_cast<std::size_t>(m.offset);
    if (detail::load_le(bytes, local, 4) != detail::local_header_signature)
      throw bad("no local header signature at offset " + std::to_string(local));
    if (detail::load_le(bytes, local + 8, 2) != m.method)
      throw bad("the local header and the central directory disagree on the method");
    const std::size_t name_len = detail::load_le(bytes, local + 26, 2),
                      extra_len = detail::load_le(bytes, local + 28, 2);
    if (bytes.size() - local - 30 < name_len + extra_len)
      throw bad("the local header's name and extra field run past the end");
    if (std::string_view(reinterpret_cast<const char*>(bytes.data()) + local + 30, name_len) != m.name)
      throw bad("the local header names it differently");
    const std::size_t data_at = local + 30 + name_len + extra_len;
    if (m.compressed > bytes.size() - data_at)
      throw bad("its " + std::to_string(m.compressed) + " bytes of data run past the end of the file (" +
                std::to_string(bytes.size() - data_at) + " bytes left)");
    const auto data = bytes.subspan(data_at, static_cast<std::size_t>(m.compressed));
    // Bit 3: the CRC and sizes also follow the data, in a descriptor (optionally signed).
    if (m.flags & 8) {
      std::size_t d = data_at + data.size();
      if (bytes.size() - d >= 4 && detail::load_le(bytes, d, 4) == detail::descriptor_signature) d += 4;
      if (bytes.size() - d < 4) throw bad("the data descriptor runs past the end");
      if (detail::load_le(bytes, d, 4) != m.crc)
        throw bad("the data descriptor and the central directory disagree on the CRC-32");
    }
    std::vector<unsigned char> inflated;
    std::span<const unsigned char> content = data;
    if (m.method == 0) {
      if (m.size != m.compressed)
        throw bad("stored, but its size " + std::to_string(m.size) + " is not its compressed size " +
                  std::to_string(m.compressed));
    } else {
      // DEFLATE writes at most 258 bytes per length/distance pair of at least 2 bits, so 1032
      // per input byte: a larger size is a lie, refused before any of it is allocated.
      if (m.size / 1032 > m.compressed)
        throw bad("its size " + std::to_string(m.size) + " is more than " + std::to_string(m.compressed) +
                  " bytes of DEFLATE data can hold");
      inflated = detail::inflate(data, static_cast<std::size_t>(m.size), context);
      content = inflated;
    }
    if (const std::uint32_t crc = detail::crc32(content); crc != m.crc)
      throw bad("CRC-32 mismatch: the data has " + detail::hex(crc, 8) + ", the archive says " + detail::hex(m.crc, 8));
    if (!m.name.ends_with(".npy")) throw bad("not a .npy member (an .npz holds only NAME.npy members)");
    entry e{m.name.substr(0, m.name.size() - 4), {}};
    if (const auto [it, fresh] = seen.emplace(e.name, m.name); !fresh)
      throw bad("duplicate array name '" + e.name + "'");
    e.data = npy::read(std::string_view(reinterpret_cast<const char*>(content.data()), content.size()), context);
    entries.push_back(std::move(e));
  }
  return entries;
}

std::vector<entry> read_file(const std::string& path) {
  const std::string file = read_file_bytes(path);
  const auto bytes = detail::as_bytes(file);
  if (bytes.size() >= 8 && detail::load_le(bytes, 0, 8) == param_dict_magic) return read_param_dict(bytes, path);
  // "PK\3\4" opens an archive with members, "PK\5\6" an empty one (np.savez of nothing).
  if (file.starts_with("PK\x03\x04") || file.starts_with("PK\x05\x06")) return read_npz(bytes, path);
  throw relay::error(path + ": not a weights file: neither a TVM param dict (magic " +
                     detail::hex(param_dict_magic, 16) + ") nor an .npz archive (\"PK\\x03\\x04\")");
}

void save_param_dict(const std::string& path, const std::vector<entry>& entries) {
  std::string head;
  detail::put_le(head, param_dict_magic, 8);
  detail::put_le(head, 0, 8);
  detail::put_le(head, entries.size(), 8);
  std::map<std::string_view, std::size_t> seen;
  for (const entry& e : entries) {
    if (!seen.emplace(e.name, 0).second) throw relay::error(path + ": cannot save duplicate name '" + e.name + "'");
    // Each blob is checked by the decoder the reader uses, so that what is written reads back.
    std::string err;
    if (e.data.dt.lanes != 1)
      err = "dtype " + e.data.dt.name() + " has " + std::to_string(e.data.dt.lanes) + " lanes (only 1 is read back)";
    else decode_ndarray(encode_ndarray(e.data), err);
    if (!err.empty()) throw relay::error(path + ": cannot save '" + e.name + "': " + err);
    detail::put_le(head, e.name.size(), 8);
    head += e.name;
  }
  detail::put_le(head, entries.size(), 8);
  detail::write_bytes(path, [&](std::ostream& out) {
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    for (const entry& e : entries) {  // one blob in memory at a time
      const std::vector<unsigned char> blob = encode_ndarray(e.data);
      out.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
    }
  });
}

void save_npz(const std::string& path, const std::vector<entry>& entries) {
  std::map<std::string_view, std::size_t> seen;
  for (const entry& e : entries) {
    if (!seen.emplace(e.name, 0).second) throw relay::error(path + ": cannot save duplicate name '" + e.name + "'");
    try {
      npy::read(npy::write(e.data), e.name);  // what is written must read back
    } catch (const relay::error& x) {
      throw relay::error(path + ": cannot save '" + e.name + "': " + x.message());
    }
  }
  detail::write_bytes(path, [&](std::ostream& out) {
    detail::zip_writer zip(out);
    for (const entry& e : entries) {  // one member in memory at a time
      const std::string file = npy::write(e.data);
      zip.add(e.name + ".npy", 0, detail::crc32(detail::as_bytes(file)), file.size(), file);
    }
    zip.finish();
  });
}

}  // namespace fuse::relay::params
