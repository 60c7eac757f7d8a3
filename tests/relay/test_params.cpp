// Weights files (fuse/relay/params.hpp): TVM's save_param_dict binary and NumPy .npz, both ways;
// archives NumPy itself wrote; DEFLATE's three block kinds; every defect the readers must name;
// and truncation and damage at every byte, which must throw relay::error and never crash.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fuse/relay/metadata.hpp>
#include <fuse/relay/npy.hpp>
#include <fuse/relay/params.hpp>

#include "relay/programs.hpp"
#include "support/random.hpp"

using namespace fuse::relay;
namespace pd = fuse::relay::params::detail;

namespace {

using bytes_t = std::vector<unsigned char>;

bytes_t from_hex(std::string_view hex) {
  bytes_t out;
  int high = -1;
  for (char c : hex) {
    const int v = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (v < 0) continue;  // spaces and line breaks
    if (high < 0) high = v;
    else out.push_back(static_cast<unsigned char>(high << 4 | v)), high = -1;
  }
  return out;
}

bytes_t from_base64(std::string_view text) {
  std::string err;
  const bytes_t b = decode_base64(text, err);
  REQUIRE_MESSAGE(err.empty(), err);
  return b;
}

std::string as_string(const bytes_t& b) { return std::string(b.begin(), b.end()); }

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}
#define CHECK_ERROR(call, text)                                                       \
  do {                                                                                \
    const std::string message_ = error_of([&] { (void)(call); });                     \
    CHECK_MESSAGE(message_.find(text) != std::string::npos, "message: " << message_); \
  } while (0)

/// A path in this run's scratch directory, which is removed when the tests exit.
std::string temp_path(const std::string& name) {
  struct scratch {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("fuse_test_params_" + std::to_string(fuse::test::base_seed()));
    scratch() { std::filesystem::create_directories(dir); }
    ~scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  };
  static const scratch s;
  return (s.dir / name).string();
}

void write_file(const std::string& path, const bytes_t& b) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
bytes_t read_bytes(const std::string& path) {
  const std::string s = read_file_bytes(path);
  return bytes_t(s.begin(), s.end());
}

using fuse::test::random_constant;

template <class T>
constant_data of(dtype dt, std::vector<std::int64_t> shape, const std::vector<T>& values) {
  constant_data c;
  c.dt = dt;
  c.shape = std::move(shape);
  c.bytes.resize(values.size() * sizeof(T));
  std::memcpy(c.bytes.data(), values.data(), c.bytes.size());
  return c;
}

void check_same(const params::entry& got, const std::string& name, const constant_data& want) {
  CAPTURE(name);
  CHECK(got.name == name);
  CHECK(got.data.dt == want.dt);
  CHECK(got.data.shape == want.shape);
  CHECK(got.data.bytes == want.bytes);
}

void put(bytes_t& b, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void patch(bytes_t& b, std::size_t at, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint64_t load(const bytes_t& b, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= std::uint64_t{b[at + static_cast<std::size_t>(i)]} << (8 * i);
  return v;
}

/// A ZIP archive of (name, method, CRC, size, data) members, written by the header's writer.
struct member {
  std::string name;
  std::string data;
  std::uint16_t method = 0;
  std::size_t size = 0;  // for method 8: the inflated size
};
bytes_t zip_of(const std::vector<member>& members, bool zip64 = false) {
  std::ostringstream out;
  pd::zip_writer z(out, zip64);
  for (const member& m : members) {
    const std::uint32_t crc = m.method == 0 ? pd::crc32(pd::as_bytes(m.data)) : 0;
    z.add(m.name, m.method, crc, m.method == 0 ? m.data.size() : m.size, m.data);
  }
  z.finish();
  const std::string s = out.str();
  return bytes_t(s.begin(), s.end());
}
/// The offset of the central directory of a non-ZIP64 archive (from its end record).
std::size_t central_directory(const bytes_t& z) { return static_cast<std::size_t>(load(z, z.size() - 22 + 16, 4)); }

/// DEFLATE bits, least significant first; Huffman codes go most significant bit first.
struct bit_writer {
  bytes_t out;
  unsigned used = 8;
  void bits(std::uint32_t v, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      if (used == 8) out.push_back(0), used = 0;
      out.back() = static_cast<unsigned char>(out.back() | ((v >> i) & 1) << used++);
    }
  }
  void code(std::uint32_t c, unsigned n) {
    for (unsigned i = n; i-- > 0;) bits((c >> i) & 1, 1);
  }
};

// ---- fixtures NumPy wrote (numpy 2.4, Python 3.11 zipfile) ------------------------------------

// np.savez_compressed(b, **{
//   "bert.encoder.layer.0.attention.self.query.weight": np.arange(256, dtype=np.float32).reshape(16, 16) / 8,
//   "conv:bias": np.array([1, -2, 3], dtype=np.int64), "scalar": np.float16(1.5), "flags": np.arange(10) % 3 == 0})
// The first member's stream is a dynamic-Huffman block, the other three fixed-Huffman ones.
constexpr std::string_view savez_compressed_b64 =
    "UEsDBC0AAAAIAAAAIQAwPHYs//////////80ABQAYmVydC5lbmNvZGVyLmxheWVyLjAuYXR0ZW50aW9uLnNlbGYucXVlcnkud2Vp"
    "Z2h0Lm5weQEAEACABAAAAAAAAOkBAAAAAAAAncj5a84BAMfxL0mSJEmS9CR5RksmLS0xkiS0hJDY2NaSbD2T5GrumzH3OffN3Ddz"
    "38x9M/c1DHOfL/kPfOr1w+ed075Tu4SupYIBweBwckpm70g4LhRuktooHB0Kp6ZH+keS+vVMjySn/O2tkvpmpuiZaUkZKX5UTGx0"
    "KCa2bnRoaOg/Vz74t6ZBkEU+QbMgCBFPIllkk0se+RRQSDFBfBCUoxLVCBFFAxoTT2sS6EIiaWQwkCxGMY5JZDODOSwgl+WsZj15"
    "bGMX+8jnKCc5SwFXuMEdCnnMc4oopoQv/CBoHgSlKUNZylGeClSkEpWpQlWqUZ0a1CRELWpThyjqEU19GtCQRsTSmDia0JR4WtCS"
    "VrSmDW1pTwId6EhnutCN7vQgkV4kk0oafehLPzKI0J8BDGQQQxhGFsMZwUhGMZoxjGUc45nARCYxmSlMJZtpTCeHGcxkFrOZw1zm"
    "MZ8FLGQRi8llCUtZxnJWsJJVrGYNa1nHejawkU3ksZktbGUb29nBTnaxmz3sZR/7OcBB8jnEYY5wlGMc5wQnOcVpznCWc5znAgVc"
    "5BKXucJVrnGdG9zkFre5w13ucZ9CHvCQRzzmCU95xnNe8JJXFPGaN7ylmHe85wMlfOQTn/nCV77xnR/85Be/m/8BUEsDBC0AAAAI"
    "AAAAIQB0qPMw//////////8NABQAY29udjpiaWFzLm5weQEAEACYAAAAAAAAAE4AAAAAAAAAm+wX6hsQychQxlCtnpJanFykbqWg"
    "bpNpoa6joJ6WX1RSlJgXn1+UkgoSd0vMKU4FihdnJBakAvkaxjqaOgq1ChQALkYGCPj3HwKYoXwAUEsDBC0AAAAIAAAAIQBEeW1d"
    "//////////8KABQAc2NhbGFyLm5weQEAEACCAAAAAAAAAEQAAAAAAAAAm+wX6hsQychQxlCtnpJanFykbqWgbpNmpK6joJ6WX1RS"
    "lJgXn1+UkgoSd0vMKU4FihdnJBakAvkamjoKtQoUAS4GOwBQSwMELQAAAAgAAAAhAEgaAAX//////////wkAFABmbGFncy5ucHkB"
    "ABAAigAAAAAAAABKAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxcpG6loF6TZKiuo6Cell9UUpSYF59flJIKEndLzClOBYoXZyQWpAL5"
    "GoYGOpo6CrUK5AMuRgYGKAIAUEsBAi0DLQAAAAgAAAAhADA8dizpAQAAgAQAADQAAAAAAAAAAAAAAIABAAAAAGJlcnQuZW5jb2Rl"
    "ci5sYXllci4wLmF0dGVudGlvbi5zZWxmLnF1ZXJ5LndlaWdodC5ucHlQSwECLQMtAAAACAAAACEAdKjzME4AAACYAAAADQAAAAAA"
    "AAAAAAAAgAFPAgAAY29udjpiaWFzLm5weVBLAQItAy0AAAAIAAAAIQBEeW1dRAAAAIIAAAAKAAAAAAAAAAAAAACAAdwCAABzY2Fs"
    "YXIubnB5UEsBAi0DLQAAAAgAAAAhAEgaAAVKAAAAigAAAAkAAAAAAAAAAAAAAIABXAMAAGZsYWdzLm5weVBLBQYAAAAABAAEAAwB"
    "AADhAwAAAAA=";

// np.savez(b, **{"w": np.array([[1.5, -2.0], [0.25, 8.0]], dtype=np.float32), "ids/0": np.array([7, -1], dtype=np.int8)})
// STORED members; NumPy forces ZIP64, so each local header has sizes 0xFFFFFFFF and a ZIP64 extra.
constexpr std::string_view savez_b64 =
    "UEsDBC0AAAAAAAAAIQA35EJJ//////////8FABQAdy5ucHkBABAAkAAAAAAAAACQAAAAAAAAAJNOVU1QWQEAdgB7J2Rlc2NyJzog"
    "JzxmNCcsICdmb3J0cmFuX29yZGVyJzogRmFsc2UsICdzaGFwZSc6ICgyLCAyKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAg"
    "ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAKAADAPwAAAMAAAIA+AAAAQVBLAwQtAAAAAAAAACEA6QyuM///////////"
    "CQAUAGlkcy8wLm5weQEAEACCAAAAAAAAAIIAAAAAAAAAk05VTVBZAQB2AHsnZGVzY3InOiAnfGkxJywgJ2ZvcnRyYW5fb3JkZXIn"
    "OiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg"
    "ICAgICAgICAgIAoH/1BLAQItAy0AAAAAAAAAIQA35EJJkAAAAJAAAAAFAAAAAAAAAAAAAACAAQAAAAB3Lm5weVBLAQItAy0AAAAA"
    "AAAAIQDpDK4zggAAAIIAAAAJAAAAAAAAAAAAAACAAccAAABpZHMvMC5ucHlQSwUGAAAAAAIAAgBqAAAAhAEAAAAA";

// class Unseekable(io.RawIOBase):  # zipfile then sets flag bit 3 and writes data descriptors
//     def __init__(s): s.buf = bytearray()
//     def writable(s): return True
//     def seekable(s): return False
//     def write(s, b): s.buf += b; return len(b)
//     def tell(s): raise OSError
// u = Unseekable(); np.savez_compressed(u, **{"x": np.arange(6, dtype=np.uint8).reshape(2, 3), "y": np.float64(-0.5)})
constexpr std::string_view savez_stream_b64 =
    "UEsDBC0ACAAIAAAAIQAAAAAA//////////8FABQAeC5ucHkBABAAAAAAAAAAAAAAAAAAAAAAAJvsF+obEMnIUMZQrZ6SWpxcpG6l"
    "oF5Taqiuo6Cell9UUpSYF59flJIKEndLzClOBYoXZyQWpAL5GkY6CsaaOgq1CmQDLgZGJmYWVgBQSwcIfp7Xz0wAAAAAAAAAhgAA"
    "AAAAAABQSwMELQAIAAgAAAAhAAAAAAD//////////wUAFAB5Lm5weQEAEAAAAAAAAAAAAAAAAAAAAAAAm+wX6hsQychQxlCtnpJa"
    "nFykbqWgbpNmoa6joJ6WX1RSlJgXn1+UkgoSd0vMKU4FihdnJBakAvkamjoKtQoUAS4GMHiwHwBQSwcIUG0qhEcAAAAAAAAAiAAA"
    "AAAAAABQSwECLQMtAAgACAAAACEAfp7Xz0wAAACGAAAABQAAAAAAAAAAAAAAgAEAAAAAeC5ucHlQSwECLQMtAAgACAAAACEAUG0q"
    "hEcAAACIAAAABQAAAAAAAAAAAAAAgAGbAAAAeS5ucHlQSwUGAAAAAAIAAgBmAAAAMQEAAAAA";

// Raw DEFLATE streams from zlib (wbits -15):
//   zlib.compressobj(6, zlib.DEFLATED, -15, 9, zlib.Z_FIXED): b"fuse fuse fuse relay params " * 4
constexpr std::string_view fixed_hex = "4b2b2d4e5548831345a93989950a05894589b9c548c2d4930300";
//   zlib.compressobj(0, zlib.DEFLATED, -15): b"stored block"
constexpr std::string_view stored_hex = "010c00f3ff73746f72656420626c6f636b";
//   Z_FIXED, with c.flush(zlib.Z_FULL_FLUSH) between b"abcabcabcabc" and b"xyzxyzxyz": a fixed block,
//   an empty stored block (the flush marker 00 00 FF FF), a final fixed block
constexpr std::string_view blocks_hex = "4a4c4a4e842100000000ffffaba8acaa002300";

const std::vector<dtype>& all_dtypes() {
  static const std::vector<dtype> d = [] {
    std::vector<dtype> v;
    for (const char* n : {"float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool"})
      v.push_back(*dtype::parse(n));
    return v;
  }();
  return d;
}
const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {3, 0, 2}, {1023}, {2, 3, 4}};

/// The tiny dict checked byte by byte: "a" float32 [1, -2] and "b:1" int8 7 (0-d).
std::vector<params::entry> tiny_dict() {
  return {{"a", of<float>(dtype::float32(), {2}, {1.0f, -2.0f})},
          {"b:1", of<std::int8_t>(*dtype::parse("int8"), {}, {7})}};
}
// The layout of tiny_dict as TVM's SaveParams writes it (src/runtime/file_utils.cc), computed by
// hand field by field.
constexpr std::string_view tiny_dict_hex =
    "B7 9C 04 05 4F 8D E5 F7"           // kTVMNDArrayListMagic
    "00 00 00 00 00 00 00 00"           // reserved
    "02 00 00 00 00 00 00 00"           // 2 names
    "01 00 00 00 00 00 00 00 61"        // "a"
    "03 00 00 00 00 00 00 00 62 3A 31"  // "b:1"
    "02 00 00 00 00 00 00 00"           // 2 arrays
    // "a": kTVMNDArrayMagic, reserved, DLDevice{kDLCPU 1, 0}, ndim 1, DLDataType{float 2, 32, 1}, shape, bytes
    "3F A1 B4 96 F0 40 5E DD  00 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00  01 00 00 00  02 20 01 00"
    "02 00 00 00 00 00 00 00  08 00 00 00 00 00 00 00  00 00 80 3F  00 00 00 C0"
    // "b:1": ndim 0, DLDataType{int 0, 8, 1}, no shape, 1 byte
    "3F A1 B4 96 F0 40 5E DD  00 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00  00 00 00 00  00 08 01 00"
    "01 00 00 00 00 00 00 00  07";

std::vector<params::entry> read_dict(const bytes_t& b) { return params::read_param_dict(b, "w.params"); }
std::vector<params::entry> read_npz(const bytes_t& b) { return params::read_npz(b, "w.npz"); }
std::vector<unsigned char> inflate(const bytes_t& raw, std::size_t size) { return pd::inflate(raw, size, "z"); }

}  // namespace

TEST_CASE("params: save_param_dict and read_file round trip every dtype and shape") {
  auto g = fuse::test::rng(101);
  std::vector<params::entry> entries;
  for (const dtype& dt : all_dtypes())
    for (const auto& shape : shapes)
      entries.push_back(
          {"bert.encoder.layer." + std::to_string(entries.size()) + "/w:" + dt.name(), random_constant(dt, shape, g)});
  const std::string path = temp_path("round.params");
  params::save_param_dict(path, entries);
  const auto back = params::read_file(path);
  REQUIRE(back.size() == entries.size());
  for (std::size_t i = 0; i < back.size(); ++i) check_same(back[i], entries[i].name, entries[i].data);
  params::save_param_dict(path, {});  // an empty dict is a valid file
  CHECK(params::read_file(path).empty());
}

TEST_CASE("params: save_npz and read_file round trip every dtype NumPy has") {
  auto g = fuse::test::rng(102);
  std::vector<params::entry> entries;
  for (const dtype& dt : all_dtypes()) {
    if (dt.code == dtype::bfloat_code) continue;
    for (const auto& shape : shapes)
      entries.push_back({"layer." + std::to_string(entries.size()) + "/w:" + dt.name(), random_constant(dt, shape, g)});
  }
  const std::string path = temp_path("round.npz");
  params::save_npz(path, entries);
  const auto back = params::read_file(path);
  REQUIRE(back.size() == entries.size());
  for (std::size_t i = 0; i < back.size(); ++i) check_same(back[i], entries[i].name, entries[i].data);
  params::save_npz(path, {});  // np.savez() of nothing: only an end record, "PK\5\6"
  CHECK(params::read_file(path).empty());
  // NumPy has no bfloat16.
  CHECK_ERROR(params::save_npz(path, {{"b", random_constant(*dtype::parse("bfloat16"), {2}, g)}}),
              "round.npz: cannot save 'b': npy: dtype bfloat16 has no NumPy equivalent");
}

TEST_CASE("params: save_param_dict writes TVM's layout byte by byte") {
  const std::string path = temp_path("tiny.params");
  params::save_param_dict(path, tiny_dict());
  CHECK(read_bytes(path) == from_hex(tiny_dict_hex));
  const auto back = read_dict(from_hex(tiny_dict_hex));
  REQUIRE(back.size() == 2);
  check_same(back[0], "a", tiny_dict()[0].data);
  check_same(back[1], "b:1", tiny_dict()[1].data);
}

TEST_CASE("params: the writers refuse what they cannot write back") {
  auto g = fuse::test::rng(103);
  const std::string path = temp_path("refused");
  constant_data short_data = random_constant(dtype::float32(), {2, 3}, g);
  short_data.bytes.pop_back();
  CHECK_ERROR(params::save_param_dict(path, {{"w", short_data}}),
              "refused: cannot save 'w': data_byte_size 23 does not match");
  CHECK_ERROR(params::save_npz(path, {{"w", short_data}}), "refused: cannot save 'w': ");
  constant_data vec = random_constant(dtype::float32(), {2}, g);
  vec.dt.lanes = 4;
  vec.bytes.resize(32);
  CHECK_ERROR(params::save_param_dict(path, {{"v", vec}}), "cannot save 'v': dtype float32x4 has 4 lanes");
  const auto one = random_constant(dtype::int32(), {1}, g);
  CHECK_ERROR(params::save_param_dict(path, {{"w", one}, {"w", one}}), "refused: cannot save duplicate name 'w'");
  CHECK_ERROR(params::save_npz(path, {{"w", one}, {"w", one}}), "refused: cannot save duplicate name 'w'");
}

TEST_CASE("params: reads what np.savez_compressed wrote (dynamic and fixed Huffman blocks)") {
  const bytes_t z = from_base64(savez_compressed_b64);
  const auto e = read_npz(z);
  REQUIRE(e.size() == 4);
  std::vector<float> w(256);
  for (int i = 0; i < 256; ++i) w[static_cast<std::size_t>(i)] = static_cast<float>(i) / 8;
  check_same(e[0], "bert.encoder.layer.0.attention.self.query.weight", of(dtype::float32(), {16, 16}, w));
  check_same(e[1], "conv:bias", of<std::int64_t>(dtype::int64(), {3}, {1, -2, 3}));
  check_same(e[2], "scalar", of<std::uint16_t>(*dtype::parse("float16"), {}, {0x3E00}));  // 1.5
  check_same(e[3], "flags", of<std::uint8_t>(dtype::boolean(), {10}, {1, 0, 0, 1, 0, 0, 1, 0, 0, 1}));
  // The same through read_file, which tells the format by its magic.
  const std::string path = temp_path("compressed.npz");
  write_file(path, z);
  CHECK(params::read_file(path).size() == 4);
}

TEST_CASE("params: reads what np.savez wrote (stored members, ZIP64 local headers)") {
  const auto e = read_npz(from_base64(savez_b64));
  REQUIRE(e.size() == 2);
  check_same(e[0], "w", of<float>(dtype::float32(), {2, 2}, {1.5f, -2.0f, 0.25f, 8.0f}));
  check_same(e[1], "ids/0", of<std::int8_t>(*dtype::parse("int8"), {2}, {7, -1}));
}

TEST_CASE("params: reads members with data descriptors (np.savez_compressed to a stream)") {
  const bytes_t z = from_base64(savez_stream_b64);
  const auto e = read_npz(z);
  REQUIRE(e.size() == 2);
  check_same(e[0], "x", of<std::uint8_t>(*dtype::parse("uint8"), {2, 3}, {0, 1, 2, 3, 4, 5}));
  check_same(e[1], "y", of<double>(*dtype::parse("float64"), {}, {-0.5}));
  // The descriptor after x's data ("PK\7\8", then its CRC-32) must agree with the directory.
  bytes_t bad = z;
  const std::size_t descriptor = as_string(z).find("PK\x07\x08");
  REQUIRE(descriptor != std::string::npos);
  bad[descriptor + 4] ^= 1;
  CHECK_ERROR(read_npz(bad),
              "w.npz: entry 'x.npy': the data descriptor and the central directory disagree on the CRC-32");
}

TEST_CASE("params: ZIP64 end records and central directory extra fields") {
  const std::string a = npy::write(of<float>(dtype::float32(), {2}, {1.0f, 2.0f}));
  const std::string b = npy::write(of<std::int32_t>(dtype::int32(), {}, {-3}));
  const bytes_t z = zip_of({{"a.npy", a}, {"dir/b.npy", b}}, true);
  // The end record defers everything to the ZIP64 one, which the locator before it points at.
  CHECK(load(z, z.size() - 22, 4) == 0x06054b50);
  CHECK(load(z, z.size() - 22 + 10, 2) == 0xFFFF);
  CHECK(load(z, z.size() - 22 + 16, 4) == 0xFFFFFFFF);
  CHECK(load(z, z.size() - 42, 4) == 0x07064b50);
  const auto e = read_npz(z);
  REQUIRE(e.size() == 2);
  check_same(e[0], "a", of<float>(dtype::float32(), {2}, {1.0f, 2.0f}));
  check_same(e[1], "dir/b", of<std::int32_t>(dtype::int32(), {}, {-3}));
  // A 32-bit field at 0xFFFFFFFF with no ZIP64 extra to hold the value.
  bytes_t plain = zip_of({{"a.npy", a}});
  patch(plain, central_directory(plain) + 20, 0xFFFFFFFF, 4);
  CHECK_ERROR(
      read_npz(plain),
      "w.npz: not a valid .npz archive: 'a.npy': a size or offset defers to a ZIP64 extra field that is not there");
  bytes_t no_record = zip_of({{"a.npy", a}});
  patch(no_record, no_record.size() - 22 + 8, 0xFFFF, 2);
  patch(no_record, no_record.size() - 22 + 10, 0xFFFF, 2);
  CHECK_ERROR(read_npz(no_record), "the end record defers to a ZIP64 end record that is not there");
  bytes_t bad_locator = z;
  patch(bad_locator, z.size() - 42 + 8, 3, 8);
  CHECK_ERROR(read_npz(bad_locator), "the ZIP64 end locator points at 3, where there is no ZIP64 end record");
}

TEST_CASE("params: inflate reads stored, fixed-Huffman and mixed blocks") {
  std::string text;
  for (int i = 0; i < 4; ++i) text += "fuse fuse fuse relay params ";
  CHECK(as_string(inflate(from_hex(fixed_hex), text.size())) == text);
  CHECK(as_string(inflate(from_hex(stored_hex), 12)) == "stored block");
  CHECK(as_string(inflate(from_hex(blocks_hex), 21)) == "abcabcabcabcxyzxyzxyz");
  CHECK(pd::crc32(pd::as_bytes("123456789")) == 0xCBF43926u);  // the check value of CRC-32/ISO-HDLC
  // A member deflated elsewhere, in an archive.
  const std::string npy_file = npy::write(of<std::uint8_t>(*dtype::parse("uint8"), {3}, {1, 2, 3}));
  bit_writer w;  // one stored block holding the file
  w.bits(1, 1), w.bits(0, 2), w.bits(0, 5);
  put(w.out, npy_file.size(), 2), put(w.out, ~npy_file.size() & 0xFFFF, 2);
  w.out.insert(w.out.end(), npy_file.begin(), npy_file.end());
  std::ostringstream out;
  pd::zip_writer z(out);
  z.add("s.npy", 8, pd::crc32(pd::as_bytes(npy_file)), npy_file.size(), as_string(w.out));
  z.finish();
  const std::string s = out.str();
  const auto e = read_npz(bytes_t(s.begin(), s.end()));
  REQUIRE(e.size() == 1);
  check_same(e[0], "s", of<std::uint8_t>(*dtype::parse("uint8"), {3}, {1, 2, 3}));
}

TEST_CASE("params: inflate names every defect") {
  const bytes_t fixed = from_hex(fixed_hex);
  CHECK_ERROR(inflate(from_hex("07"), 0), "z: bad DEFLATE data: block type 3 is reserved");
  CHECK_ERROR(inflate(from_hex("01 05 00 00 00"), 5),
              "a stored block's LEN 0x0005 is not the complement of NLEN 0x0000");
  CHECK_ERROR(inflate(from_hex("01 05 00 FA FF 61"), 5), "truncated: a stored block of 5 bytes has 1");
  CHECK_ERROR(inflate(bytes_t(fixed.begin(), fixed.end() - 3), 112), "truncated");
  bytes_t trailing = fixed;
  trailing.push_back(0);
  CHECK_ERROR(inflate(trailing, 112), "1 bytes follow the final block");
  CHECK_ERROR(inflate(fixed, 111), "inflates to more than the 111 bytes the archive declares");
  CHECK_ERROR(inflate(fixed, 113), "inflates to 112 bytes, the archive declares 113");
  {  // the code length code: 19 codes of one bit
    bit_writer w;
    w.bits(1, 1), w.bits(2, 2), w.bits(0, 5), w.bits(0, 5), w.bits(15, 4);
    for (int i = 0; i < 19; ++i) w.bits(1, 3);
    CHECK_ERROR(inflate(w.out, 1), "z: bad DEFLATE data: code length code: over-subscribed Huffman code lengths");
  }
  {  // the code length code: a single code (of one bit) is incomplete
    bit_writer w;
    w.bits(1, 1), w.bits(2, 2), w.bits(0, 5), w.bits(0, 5), w.bits(0, 4);
    w.bits(1, 3), w.bits(0, 3), w.bits(0, 3), w.bits(0, 3);
    CHECK_ERROR(inflate(w.out, 1), "code length code: incomplete Huffman code lengths");
  }
  // A dynamic block (HLIT 257, HDIST 1) whose literal/length code gives end-of-block, and
  // literal 0 when literal_length > 0, those lengths. The code length code gives symbols 0, 1,
  // 2 and 18 two bits each, so lengths 0, 1, 2 are the codes 00, 01, 10 and "18" (a run of
  // zeros) is 11; HCLEN 18 reaches symbol 1, the last in the order.
  auto one_code_block = [](unsigned end_of_block_length, unsigned literal_length) {
    bit_writer w;
    w.bits(1, 1), w.bits(2, 2), w.bits(0, 5), w.bits(0, 5), w.bits(14, 4);
    for (int sym : {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1})
      w.bits(sym <= 2 || sym == 18 ? 2 : 0, 3);
    if (literal_length) {
      w.code(literal_length, 2), w.code(3, 2), w.bits(127, 7), w.code(3, 2), w.bits(106, 7);  // then 138 + 117 zeros
    } else {
      w.code(3, 2), w.bits(127, 7), w.code(3, 2), w.bits(107, 7);  // 138 + 118 zeros
    }
    w.code(end_of_block_length, 2);  // symbol 256
    w.code(0, 2);                    // the one distance code: unused (length 0)
    return w;
  };
  {
    bit_writer w = one_code_block(1, 0);
    w.code(1, 1);  // not a code
    w.bits(0, 16);
    CHECK_ERROR(inflate(w.out, 0), "a Huffman code that the block's code does not assign");
    bit_writer ok = one_code_block(1, 0);
    ok.code(0, 1);  // end of block
    CHECK(inflate(ok.out, 0).empty());
  }
  CHECK_ERROR(inflate(one_code_block(0, 0).out, 0), "the block's code has no end-of-block symbol");
  CHECK_ERROR(inflate(one_code_block(1, 2).out, 0), "literal/length code: incomplete Huffman code lengths");
  {  // repeat-previous (16) first
    bit_writer w;
    w.bits(1, 1), w.bits(2, 2), w.bits(0, 5), w.bits(0, 5), w.bits(0, 4);
    w.bits(1, 3), w.bits(1, 3), w.bits(0, 3), w.bits(0, 3);  // 16 and 17: one bit each
    w.code(0, 1);
    CHECK_ERROR(inflate(w.out, 0), "code length 16 (repeat the previous) comes first");
  }
  {  // HLIT 287
    bit_writer w;
    w.bits(1, 1), w.bits(2, 2), w.bits(30, 5), w.bits(0, 5), w.bits(0, 4);
    CHECK_ERROR(inflate(w.out, 0), "HLIT 287 is more than 286 literal/length codes");
  }
  // Fixed-Huffman blocks: 7-bit codes 0000000 + (sym - 256) for 256..279, 8-bit 11000000 +
  // (sym - 280) for 280..287; distances 5 bits.
  {
    bit_writer w;
    w.bits(1, 1), w.bits(1, 2), w.code(1, 7), w.code(0, 5);  // length 3 at distance 1, nothing written yet
    CHECK_ERROR(inflate(w.out, 3), "distance 1 reaches before the start (0 bytes written)");
  }
  {
    bit_writer w;
    w.bits(1, 1), w.bits(1, 2), w.code(0xC0 + 6, 8);  // 286
    CHECK_ERROR(inflate(w.out, 3), "literal/length symbol 286 is not a length");
  }
  {
    bit_writer w;
    w.bits(1, 1), w.bits(1, 2), w.code(0x30 + 'a', 8), w.code(1, 7), w.code(30, 5);  // 'a', length 3, distance 30
    CHECK_ERROR(inflate(w.out, 4), "distance symbol 30 is not a distance");
  }
  {
    bit_writer w;  // 'a' then length 258 (symbol 285) at distance 1: a run of 259 a's
    w.bits(1, 1), w.bits(1, 2), w.code(0x30 + 'a', 8), w.code(0xC0 + 5, 8), w.code(0, 5), w.code(0, 7);
    CHECK(as_string(inflate(w.out, 259)) == std::string(259, 'a'));
  }
}

TEST_CASE("params: the TVM param dict reader names every defect") {
  const bytes_t good = from_hex(tiny_dict_hex);
  // Offsets in tiny_dict_hex; in a blob: device at 16, ndim 24, dtype 28, shape 32, then the size.
  constexpr std::size_t names_at = 16, first_blob = 52, second_blob = first_blob + 56;
  auto with = [&](std::size_t at, std::uint64_t v, int n) {
    bytes_t b = good;
    patch(b, at, v, n);
    return b;
  };
  CHECK_ERROR(read_dict(with(0, 0x1234, 8)),
              "w.params: not a valid TVM param dict: bad magic 0x0000000000001234 (expected 0xF7E58D4F05049CB7)");
  CHECK_ERROR(read_dict(bytes_t(good.begin(), good.begin() + 12)),
              "truncated: the reserved field needs 8 bytes at offset 8, the file has 12");
  CHECK_ERROR(read_dict(with(names_at, 1000000, 8)), "the name count 1000000 is more than the 149-byte file can hold");
  CHECK_ERROR(read_dict(with(names_at + 8, 5000, 8)), "name 0 of 5000 bytes runs past the end of the file");
  CHECK_ERROR(read_dict(with(first_blob - 8, 3, 8)), "2 names but 3 arrays");
  CHECK_ERROR(read_dict(with(first_blob + 24, 0xFFFFFFFF, 4)), "array 0 ('a'): ndim -1 out of range [0, 32]");
  CHECK_ERROR(read_dict(with(first_blob + 24, 33, 4)), "array 0 ('a'): ndim 33 out of range [0, 32]");
  CHECK_ERROR(read_dict(with(first_blob + 32, 3, 8)),
              "array 0 ('a'): data_byte_size 8 does not match shape and dtype float32 (expected 12)");
  CHECK_ERROR(read_dict(with(first_blob + 40, 9, 8)),
              "array 0 ('a'): data_byte_size 9 does not match shape and dtype float32 (expected 8)");
  bytes_t lanes = with(first_blob + 28, 0x00022002, 4);  // float32x2, and shape (1,) so that the size matches
  patch(lanes, first_blob + 32, 1, 8);
  CHECK_ERROR(read_dict(lanes), "array 0 ('a'): dtype float32x2 has 2 lanes (only 1 is read)");
  CHECK_ERROR(read_dict(with(first_blob + 28, 0x00012003, 4)),
              "array 0 ('a'): dtype code 3 is not int (0), uint (1), float (2)");
  CHECK_ERROR(read_dict(with(second_blob, 0, 8)), "array 1 ('b:1'): bad magic");
  {
    const auto blob = encode_ndarray(tiny_dict()[0].data);
    bytes_t twice;
    put(twice, params::param_dict_magic, 8), put(twice, 0, 8), put(twice, 2, 8);
    for (int i = 0; i < 2; ++i) put(twice, 1, 8), twice.push_back('a');
    put(twice, 2, 8);
    for (int i = 0; i < 2; ++i) twice.insert(twice.end(), blob.begin(), blob.end());
    CHECK_ERROR(read_dict(twice), "w.params: not a valid TVM param dict: duplicate name 'a' (arrays 0 and 1)");
  }
  bytes_t trailing = good;
  trailing.push_back(0);
  CHECK_ERROR(read_dict(trailing), "1 bytes follow the last array");
  CHECK_ERROR(read_dict(bytes_t(good.begin(), good.end() - 1)),
              "array 1 ('b:1'): truncated data: data_byte_size is 1 but 0 bytes follow");
  // The device a tensor was saved from does not matter (TVM itself always writes kDLCPU).
  const auto cuda = read_dict(with(first_blob + 16, 2, 4));
  CHECK(cuda[0].data.bytes == tiny_dict()[0].data.bytes);
}

TEST_CASE("params: the .npz reader names every defect") {
  const std::string a = npy::write(of<float>(dtype::float32(), {2}, {1.0f, 2.0f}));
  const bytes_t good = zip_of({{"a.npy", a}});
  const std::size_t cd = central_directory(good), end = good.size() - 22;
  auto with = [&](std::size_t at, std::uint64_t v, int n) {
    bytes_t b = good;
    patch(b, at, v, n);
    return b;
  };
  CHECK(read_npz(good).size() == 1);
  CHECK_ERROR(read_npz(bytes_t(good.begin(), good.end() - 1)),
              "w.npz: not a valid .npz archive: no end of central directory record (truncated, or not a ZIP archive)");
  CHECK_ERROR(read_npz(with(end + 4, 1, 2)), "w.npz: not a valid .npz archive: multi-disk archives are not supported");
  bytes_t nine = with(end + 8, 9, 2);
  patch(nine, end + 10, 9, 2);
  CHECK_ERROR(read_npz(nine), "the end record counts 9 members, more than a central directory of 51 bytes holds");
  CHECK_ERROR(read_npz(with(end + 12, 500, 4)), "the central directory (500 bytes at offset");
  CHECK_ERROR(read_npz(with(cd, 0x02014b51, 4)), "central directory entry 0 has a bad signature");
  CHECK_ERROR(read_npz(with(cd + 28, 200, 2)),
              "central directory entry 0: its name, extra field and comment run past the directory");
  CHECK_ERROR(read_npz(with(0, 0x04034b51, 4)), "w.npz: entry 'a.npy': no local header signature at offset 0");
  CHECK_ERROR(read_npz(with(cd + 42, 100000, 4)),
              "w.npz: entry 'a.npy': the local header at offset 100000 runs past the end");
  CHECK_ERROR(read_npz(with(cd + 8, 1, 2)), "w.npz: entry 'a.npy': encrypted members are not supported");
  bytes_t bzip2 = with(cd + 10, 12, 2);
  patch(bzip2, 8, 12, 2);
  CHECK_ERROR(read_npz(bzip2),
              "w.npz: entry 'a.npy': unsupported compression method 12 (only 0, stored, and 8, deflate, are read)");
  CHECK_ERROR(read_npz(with(8, 8, 2)),
              "w.npz: entry 'a.npy': the local header and the central directory disagree on the method");
  CHECK_ERROR(read_npz(with(30, 'b', 1)), "w.npz: entry 'a.npy': the local header names it differently");
  CHECK_ERROR(read_npz(with(cd + 20, 100000, 4)),
              "w.npz: entry 'a.npy': its 100000 bytes of data run past the end of the file");
  CHECK_ERROR(read_npz(with(cd + 24, 7, 4)), "stored, but its size 7 is not its compressed size");
  bytes_t flipped = good;
  flipped[cd - 1] ^= 0x40;  // the last data byte
  CHECK_ERROR(read_npz(flipped), "w.npz: entry 'a.npy': CRC-32 mismatch: the data has 0x");
  CHECK_ERROR(read_npz(zip_of({{"notes.txt", "hello"}})), "w.npz: entry 'notes.txt': not a .npy member");
  CHECK_ERROR(read_npz(zip_of({{"a.npy", a}, {"a.npy", a}})), "w.npz: entry 'a.npy': duplicate array name 'a'");
  CHECK_ERROR(read_npz(zip_of({{"a.npy", "not numpy"}})), "w.npz: entry 'a.npy': not a valid .npy file: bad magic");
  // Deflated members.
  bit_writer over;
  over.bits(1, 1), over.bits(2, 2), over.bits(0, 5), over.bits(0, 5), over.bits(15, 4);
  for (int i = 0; i < 19; ++i) over.bits(1, 3);
  CHECK_ERROR(read_npz(zip_of({{"h.npy", as_string(over.out), 8, 10}})),
              "w.npz: entry 'h.npy': bad DEFLATE data: code length code: over-subscribed Huffman code lengths");
  CHECK_ERROR(read_npz(zip_of({{"big.npy", "\x03", 8, 1033 * 1000}})),
              "entry 'big.npy': its size 1033000 is more than 1 bytes of DEFLATE data can hold");
  bytes_t wrong_crc = from_base64(savez_compressed_b64);
  patch(wrong_crc, 14, 0x12345678, 4);  // the first local header's CRC does not count: the directory's does
  CHECK(read_npz(wrong_crc).size() == 4);
  const std::size_t wcd = central_directory(wrong_crc);
  patch(wrong_crc, wcd + 16, 0x12345678, 4);
  CHECK_ERROR(read_npz(wrong_crc),
              "entry 'bert.encoder.layer.0.attention.self.query.weight.npy': CRC-32 mismatch: the data has 0x2C763C30, "
              "the archive says 0x12345678");
  // read_file: by magic, or neither.
  const std::string path = temp_path("neither.bin");
  write_file(path, from_hex("00 01 02 03 04 05 06 07 08"));
  CHECK_ERROR(
      params::read_file(path),
      "neither.bin: not a weights file: neither a TVM param dict (magic 0xF7E58D4F05049CB7) nor an .npz archive");
  CHECK_ERROR(params::read_file(temp_path("missing.npz")), "cannot read ");
}

TEST_CASE("params: truncation at every byte throws relay::error") {
  const std::vector<std::pair<bytes_t, bool>> files = {{from_hex(tiny_dict_hex), false},
                                                       {from_base64(savez_compressed_b64), true},
                                                       {from_base64(savez_b64), true},
                                                       {from_base64(savez_stream_b64), true}};
  for (const auto& [file, npz] : files) {
    for (std::size_t n = 0; n < file.size(); ++n) {
      CAPTURE(n);
      const bytes_t cut(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
      CHECK_THROWS_AS(npz ? read_npz(cut) : read_dict(cut), error);
    }
  }
  const bytes_t fixed = from_hex(fixed_hex);
  for (std::size_t n = 0; n < fixed.size(); ++n)
    CHECK_THROWS_AS(inflate(bytes_t(fixed.begin(), fixed.begin() + static_cast<std::ptrdiff_t>(n)), 112), error);
}

TEST_CASE("params: damage at any byte reads or throws relay::error") {
  // Every byte of each file with each bit flipped: the reader either reads something or throws
  // relay::error; it never crashes or reads out of bounds (the sanitizer build checks that).
  const std::vector<std::pair<bytes_t, bool>> files = {{from_hex(tiny_dict_hex), false},
                                                       {from_base64(savez_compressed_b64), true},
                                                       {from_base64(savez_stream_b64), true}};
  int thrown = 0, read = 0;
  for (const auto& [file, npz] : files) {
    for (std::size_t at = 0; at < file.size(); ++at) {
      for (int bit : {0, 3, 7}) {
        bytes_t b = file;
        b[at] = static_cast<unsigned char>(b[at] ^ (1 << bit));
        try {
          (void)(npz ? read_npz(b) : read_dict(b));
          ++read;
        } catch (const error&) {
          ++thrown;
        }
      }
    }
  }
  CHECK(thrown > 0);
  MESSAGE("damaged files: " << thrown << " rejected, " << read << " still read");
}
