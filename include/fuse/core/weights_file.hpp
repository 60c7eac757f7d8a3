// Large constants of a generated model, kept out of its C++ source: a header that carried
// BERT-base's 110 M weights as literals would not compile. `fuse-relay compile` writes them to
// a binary file beside the header; the generated model reads each one into its tensor once,
// when it is constructed, and checks that the file is the one it was generated with.
//
// Layout (little-endian; `fuse::weights_file_writer` writes it, `fuse::weights_file` reads it):
//
//   char[8]  "FUSEWTS1"
//   u64      model id: a hash of every entry (names, dtypes, shapes, bytes), which the generated
//            header also holds; a file from another model or another compile does not match
//   u64      entry count
//   entries  u64 data offset (from the start of the file, a multiple of 64), u64 data bytes,
//            u8 dtype code, u8 bits (DLPack's), u16 rank, u32 name bytes, i64 extents[rank],
//            the name
//   data     each entry's elements, row-major
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "fuse/core/error.hpp"

namespace fuse {

/// One entry's description: what the generated header expects of it.
struct weights_entry {
  std::string name;
  std::uint8_t code = 2, bits = 32;  ///< DLPack's type code (0 int, 1 uint, 2 float, 4 bfloat) and bits
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0, bytes = 0;
};

namespace weights_detail {

inline constexpr char magic[8] = {'F', 'U', 'S', 'E', 'W', 'T', 'S', '1'};

/// The model id: FNV-1a's step over 64-bit words (bytes one at a time would take seconds for
/// BERT-base's 440 MB), the tail byte by byte.
struct fnv1a {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void add(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, b + i, 8);
      h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  template <class T>
  void add_value(T v) {
    unsigned char b[sizeof(T)];
    for (std::size_t i = 0; i < sizeof(T); ++i)
      b[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(v) >> (8 * i));
    add(b, sizeof(T));
  }
};

template <class T>
void put(std::string& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<char>(static_cast<std::uint64_t>(v) >> (8 * i)));
}
template <class T>
T get(const unsigned char* p) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace weights_detail

/// Describes a weights file: add() each constant (its bytes stay where they are and must live
/// until write()), then id() (what the generated header checks) and write() (the file).
class weights_file_writer {
 public:
  /// Adds an entry; returns its index.
  std::size_t add(std::string name, std::uint8_t code, std::uint8_t bits, std::vector<std::int64_t> shape,
                  const void* data, std::size_t bytes) {
    weights_entry e{std::move(name), code, bits, std::move(shape), 0, bytes};
    hash_.add(e.name.data(), e.name.size());
    hash_.add_value(e.code);
    hash_.add_value(e.bits);
    for (std::int64_t d : e.shape) hash_.add_value(d);
    hash_.add(data, bytes);
    data_.push_back(static_cast<const char*>(data));
    entries_.push_back(std::move(e));
    return entries_.size() - 1;
  }
  std::uint64_t id() const { return hash_.h; }
  std::size_t size() const { return entries_.size(); }

  /// Writes the file (offsets assigned here); false when the stream fails.
  bool write(std::ostream& out) {
    using namespace weights_detail;
    std::size_t head = 8 + 8 + 8;
    for (const weights_entry& e : entries_) head += 8 + 8 + 1 + 1 + 2 + 4 + 8 * e.shape.size() + e.name.size();
    std::uint64_t at = (head + 63) / 64 * 64;
    for (weights_entry& e : entries_) {
      e.offset = at;
      at = (at + e.bytes + 63) / 64 * 64;
    }
    std::string table(magic, 8);
    put<std::uint64_t>(table, id());
    put<std::uint64_t>(table, entries_.size());
    for (const weights_entry& e : entries_) {
      put<std::uint64_t>(table, e.offset);
      put<std::uint64_t>(table, e.bytes);
      put<std::uint8_t>(table, e.code);
      put<std::uint8_t>(table, e.bits);
      put<std::uint16_t>(table, static_cast<std::uint16_t>(e.shape.size()));
      put<std::uint32_t>(table, static_cast<std::uint32_t>(e.name.size()));
      for (std::int64_t d : e.shape) put<std::int64_t>(table, d);
      table += e.name;
    }
    out.write(table.data(), static_cast<std::streamsize>(table.size()));
    std::uint64_t pos = table.size();
    static constexpr char zeros[64] = {};
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      out.write(zeros, static_cast<std::streamsize>(entries_[i].offset - pos));
      out.write(data_[i], static_cast<std::streamsize>(entries_[i].bytes));
      pos = entries_[i].offset + entries_[i].bytes;
    }
    out.write(zeros, static_cast<std::streamsize>(at - pos));
    return static_cast<bool>(out);
  }

 private:
  weights_detail::fnv1a hash_;
  std::vector<weights_entry> entries_;
  std::vector<const char*> data_;
};

/// An open weights file, checked against what the generated header expects: its id and entry
/// count. read() fills a tensor from entry i after checking its dtype, shape and bytes.
class weights_file {
 public:
  weights_file(const std::string& path, std::uint64_t id, std::size_t count, std::string_view model)
      : path_(path), model_(model), in_(path, std::ios::binary) {
    using namespace weights_detail;
    if (!in_) fail("cannot open the weights file " + path_ + " (pass its path to the model's constructor)");
    in_.seekg(0, std::ios::end);
    size_ = static_cast<std::uint64_t>(in_.tellg());
    in_.seekg(0);
    unsigned char head[24];
    if (size_ < sizeof head || !in_.read(reinterpret_cast<char*>(head), sizeof head) ||
        std::memcmp(head, magic, 8) != 0)
      fail(path_ + " is not a fuse weights file");
    if (get<std::uint64_t>(head + 8) != id)
      fail(path_ + " was written for another model or another compile of it (model id " +
           hex(get<std::uint64_t>(head + 8)) + ", the header expects " + hex(id) +
           "): use the weights file written with this header");
    if (get<std::uint64_t>(head + 16) != count)
      fail(path_ + " holds " + std::to_string(get<std::uint64_t>(head + 16)) + " entries, the header expects " +
           std::to_string(count));
    for (std::size_t i = 0; i < count; ++i) entries_.push_back(read_entry());
  }

  /// Fills `t` (a tensor of the entry's dtype T, already shaped) from entry i.
  template <class Tensor>
  void read(std::size_t i, Tensor& t) {
    const weights_entry& e = entries_.at(i);
    using T = typename Tensor::value_type;
    const std::uint64_t want = static_cast<std::uint64_t>(t.size()) * sizeof(T);
    bool same = e.shape.size() == Tensor::rank && e.bytes == want && e.bits == 8 * sizeof(T);
    for (std::size_t d = 0; same && d < e.shape.size(); ++d) same = e.shape[d] == t.shape()[d];
    if (!same)
      fail(path_ + ": entry " + std::to_string(i) + " (" + e.name +
           ") does not have the shape and dtype the header expects");
    if (e.offset > size_ || e.bytes > size_ - e.offset)
      fail(path_ + " is truncated: entry " + std::to_string(i) + " (" + e.name + ") lies past its end");
    in_.seekg(static_cast<std::streamoff>(e.offset));
    if (e.bytes && !in_.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(e.bytes)))
      fail(path_ + ": cannot read entry " + std::to_string(i) + " (" + e.name + ")");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw error(model_ + ": " + what); }
  static std::string hex(std::uint64_t v) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s = "0x";
    for (int i = 60; i >= 0; i -= 4) s += digits[(v >> i) & 15];
    return s;
  }

  weights_entry read_entry() {
    using namespace weights_detail;
    unsigned char fixed[24];
    if (!in_.read(reinterpret_cast<char*>(fixed), sizeof fixed)) fail(path_ + " is truncated in its table of entries");
    weights_entry e;
    e.offset = get<std::uint64_t>(fixed);
    e.bytes = get<std::uint64_t>(fixed + 8);
    e.code = fixed[16];
    e.bits = fixed[17];
    const auto rank = get<std::uint16_t>(fixed + 18);
    const auto name = get<std::uint32_t>(fixed + 20);
    if (rank > 32 || name > 4096) fail(path_ + " has a malformed table of entries");
    std::vector<unsigned char> rest(8 * std::size_t{rank} + name);
    if (!in_.read(reinterpret_cast<char*>(rest.data()), static_cast<std::streamsize>(rest.size())))
      fail(path_ + " is truncated in its table of entries");
    for (std::size_t d = 0; d < rank; ++d) e.shape.push_back(get<std::int64_t>(rest.data() + 8 * d));
    e.name.assign(reinterpret_cast<const char*>(rest.data()) + 8 * rank, name);
    return e;
  }

  std::string path_, model_;
  std::ifstream in_;
  std::uint64_t size_ = 0;
  std::vector<weights_entry> entries_;
};

}  // namespace fuse
