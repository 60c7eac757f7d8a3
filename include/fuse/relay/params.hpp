// Model weights as TVM users hold them, read and written: the binary of TVM's save_param_dict
// and NumPy .npz archives.
//
// save_param_dict (TVM src/runtime/file_utils.cc SaveParams; all little-endian):
//
//   u64 0xF7E58D4F05049CB7 (kTVMNDArrayListMagic), u64 reserved,
//   u64 name count, each name as u64 length + bytes,
//   u64 array count (= name count), each array an NDArray blob (SaveDLTensor, metadata.hpp).
//
// .npz (np.savez / np.savez_compressed): a ZIP archive with one `<name>.npy` member per array,
// STORED or DEFLATED. NumPy always writes ZIP64 extra fields (force_zip64), and a data
// descriptor when it writes to a stream that cannot seek. The ZIP reader follows PKWARE's
// APPNOTE and the DEFLATE decoder RFC 1951; both are written here from those specs because the
// project takes no compression dependency.
//
// Every length field is checked against the bytes that are there before anything is allocated
// from it; every defect throws relay::error naming the file, the entry and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fuse/relay/ir.hpp"

namespace fuse::relay::params {

/// One named tensor of a weights file.
struct entry {
  std::string name;
  constant_data data;
};

/// kTVMNDArrayListMagic: the first 8 bytes of a save_param_dict file.
inline constexpr std::uint64_t param_dict_magic = 0xF7E58D4F05049CB7ull;

namespace detail {

inline std::span<const unsigned char> as_bytes(std::string_view s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

/// The CRC-32 of `bytes` continued from `crc` (the CRC of what came before; 0 to start).
std::uint32_t crc32(std::span<const unsigned char> bytes, std::uint32_t crc = 0);

/// The bytes a raw DEFLATE stream inflates to; exactly `expected_size` of them, or relay::error
/// "CONTEXT: bad DEFLATE data: ...". The output grows as the stream proves it, never past
/// expected_size: a size a header made up costs nothing until the data is there.
std::vector<unsigned char> inflate(std::span<const unsigned char> in, std::size_t expected_size,
                                   const std::string& context);

/// A ZIP writer of members whose bytes the caller has (STORED, or compressed elsewhere). Writes
/// ZIP64 records where a size or offset needs them, or everywhere when `force_zip64` (tests).
class zip_writer {
 public:
  explicit zip_writer(std::ostream& out, bool force_zip64 = false) : out_(out), force_zip64_(force_zip64) {}

  /// Adds a member: method 0 (STORED: data is the content) or 8 (DEFLATED), its CRC-32 and
  /// content size.
  void add(const std::string& name, std::uint16_t method, std::uint32_t crc, std::uint64_t size, std::string_view data);

  /// Writes the central directory and the end records.
  void finish();

 private:
  struct member {
    std::string name;
    std::uint16_t method;
    std::uint32_t crc;
    std::uint64_t size, compressed, offset;
  };
  static std::string le(std::uint64_t v, int n);
  void write(std::string_view s);
  std::ostream& out_;
  bool force_zip64_;
  std::uint64_t offset_ = 0;
  std::vector<member> members_;
};

}  // namespace detail

/// Reads the binary of TVM's save_param_dict (`source_name` for messages).
std::vector<entry> read_param_dict(std::span<const unsigned char> bytes, const std::string& source_name);

/// Reads a NumPy .npz archive (np.savez or np.savez_compressed; `source_name` for messages).
std::vector<entry> read_npz(std::span<const unsigned char> bytes, const std::string& source_name);

/// Reads a weights file: TVM's save_param_dict binary or a NumPy .npz, told apart by the magic.
std::vector<entry> read_file(const std::string& path);

/// Writes `entries` as TVM's save_param_dict does (in the given order), readable by
/// tvm.runtime.load_param_dict. Throws relay::error for an entry that is not a valid tensor,
/// before anything is written.
void save_param_dict(const std::string& path, const std::vector<entry>& entries);

/// Writes `entries` as np.savez does (STORED `<name>.npy` members, in the given order), readable
/// by np.load. Throws relay::error for a dtype NumPy lacks (bfloat16) or an invalid tensor,
/// before anything is written.
void save_npz(const std::string& path, const std::vector<entry>& entries);

}  // namespace fuse::relay::params
