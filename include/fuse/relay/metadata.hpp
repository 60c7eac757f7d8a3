// The `#[metadata]` section of Relay text: TVM's JSON object graph, whose `relay.Constant`
// entries hold tensors as base64 NDArray blobs (`b64ndarrays`). Read with nlohmann-json; every
// field of every blob is validated against its bytes.
//
// The section is what TVM's SaveJSON writes for a Map<String, Array<ObjectRef>>:
//
//   {"root": 1, "nodes": [{"type_key": ""}, {"type_key": "Map", "keys": ["relay.Constant"], "data": [2]},
//    {"type_key": "Array", "data": [3]}, {"type_key": "relay.Constant", "attrs": {"data": "0", ...}}, ...],
//    "b64ndarrays": ["P6G0lvBAXt0AAAAA..."], "attrs": {"tvm_version": "0.x"}}
//
// Node references are indices into "nodes" (0 is null); a constant's "data" attribute indexes
// "b64ndarrays". A blob is the base64 of what TVM's SaveDLTensor writes (all little-endian):
// u64 magic, u64 reserved (0), i32 device_type, i32 device_id, i32 ndim, u8 code, u8 bits,
// u16 lanes, i64 shape[ndim], i64 data_byte_size, then data_byte_size bytes of row-major data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/source.hpp"

namespace fuse::relay {

/// What the metadata section holds.
struct metadata {
  /// Entries per meta table key (relay.Constant, VirtualDevice, ...): meta[KEY][i] is valid
  /// for i < table_sizes[KEY].
  std::map<std::string, std::size_t> table_sizes;
  /// meta[relay.Constant][i]: the decoded tensors, in index order.
  std::vector<std::shared_ptr<const constant_data>> constants;
  /// The printing TVM's version ("attrs": {"tvm_version": "0.19.0"}), empty when not given.
  std::string tvm_version;
};

// ---- base64 (standard alphabet, '=' padding, no line breaks) ----------------------------------

/// The base64 text of `bytes`, padded with '='.
std::string encode_base64(std::span<const unsigned char> bytes);

namespace metadata_detail {

/// The checking decoder: finds the first defect and says what it is (the error path).
std::vector<unsigned char> decode_base64_checked(std::string_view text, std::string& error);

}  // namespace metadata_detail

/// Decodes base64 text. On malformed text (a character outside the alphabet, a length that is
/// not a multiple of 4, '=' anywhere but the last one or two places, non-zero bits under the
/// padding) returns {} and sets `error`; otherwise clears it. The whole quads are decoded by
/// table, four characters at a time with one test for a bad one among them (metadata sections
/// hold hundreds of MB); any defect is then described by the checking decoder.
std::vector<unsigned char> decode_base64(std::string_view text, std::string& error);

// ---- NDArray blobs (TVM's SaveDLTensor layout) ------------------------------------------------

/// kTVMNDArrayMagic: the first 8 bytes of every blob.
inline constexpr std::uint64_t ndarray_magic = 0xDD5E40F096B4A13Full;
/// The largest ndim a blob may declare (DLPack has no limit; real tensors stay far below).
inline constexpr std::int32_t ndarray_max_ndim = 32;

/// The blob TVM would write for `c`: a CPU tensor, data_byte_size = c.bytes.size().
std::vector<unsigned char> encode_ndarray(const constant_data& c);

/// The `b64ndarrays` entry for `c`.
inline std::string encode_ndarray_base64(const constant_data& c) { return encode_base64(encode_ndarray(c)); }

/// Decodes one blob. Every field is checked against the blob's actual length before it is
/// trusted, so a corrupt size can never allocate more than the blob holds. On failure returns
/// null and sets `error` to a message naming the field; otherwise clears it. With `consumed`,
/// `blob` may continue past the array (a file of several: save_param_dict's) and *consumed is
/// set to the array's length; without it, bytes after the data are an error.
std::shared_ptr<const constant_data> decode_ndarray(std::span<const unsigned char> blob, std::string& error,
                                                    std::size_t* consumed = nullptr);

// ---- the section ------------------------------------------------------------------------------

/// Reads the metadata JSON that starts at byte `offset` of `src` (just after `#[metadata]`) and
/// runs to the end of the text (leading whitespace and an `r"""` ... `"""` wrapper, as older
/// printers wrote it, are skipped). Throws relay::error (located in src) on any malformed input:
/// a JSON syntax error at the offending byte, anything else at `offset`.
metadata read_metadata(const source& src, std::size_t offset);

}  // namespace fuse::relay
