// The #[metadata] reader: base64 and NDArray blobs both ways, a hand-built section, the real
// sections in the corpus and seeds, every corruption it must name, and random damage.
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

#include "relay/programs.hpp"
#include "support/random.hpp"

using namespace fuse::relay;

namespace {

using bytes_t = std::vector<unsigned char>;

using fuse::test::random_constant;

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const std::size_t at = s.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "the test's template lost '" << from << "'");
  return s.replace(at, from.size(), to);
}

// float32 [[1, 2, 3], [4, 5, 6]] and int64 [7, -8, 9], encoded independently (Python struct +
// base64) from the layout in the reference, so that the encoder is not checked against itself.
const std::string blob_f32_2x3 =
    "P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAgAAAAIgAQACAAAAAAAAAAMAAAAAAAAAGAAAAAAAAAAAAIA/AAAAQAAAQEAAAIBAAACgQAAAwEA=";
const std::string blob_i64_3 =
    "P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAQAAAABAAQADAAAAAAAAABgAAAAAAAAABwAAAAAAAAD4/////////wkAAAAAAAAA";

// Two constants sharing one VirtualDevice, as TVM 0.9+ prints them (written for this test).
std::string sample_json(const std::string& blob0 = blob_f32_2x3, const std::string& blob1 = blob_i64_3) {
  return R"({
  "root": 1,
  "nodes": [
    {"type_key": ""},
    {"type_key": "Map", "keys": ["relay.Constant", "VirtualDevice"], "data": [2, 3]},
    {"type_key": "Array", "data": [4, 5]},
    {"type_key": "Array", "data": [6]},
    {"type_key": "relay.Constant", "attrs": {"_checked_type_": "0", "data": "0", "span": "0", "virtual_device_": "6"}},
    {"type_key": "relay.Constant", "attrs": {"_checked_type_": "0", "data": "1", "span": "0", "virtual_device_": "6"}},
    {"type_key": "VirtualDevice", "attrs": {"device_type_int": "-1", "memory_scope": "7", "target": "0", "virtual_device_id": "-1"}},
    {"type_key": "runtime.String", "repr_str": ""}
  ],
  "b64ndarrays": [")" +
         blob0 + R"(", ")" + blob1 + R"("],
  "attrs": {"tvm_version": "0.9.0"}
})";
}

const std::string program_head =
    "#[version = \"0.0.5\"]\n"
    "def @main(%x: Tensor[(2, 3), float32]) {\n"
    "  add(%x, meta[relay.Constant][0])\n"
    "}\n"
    "#[metadata]";

struct section {
  source src;
  std::size_t offset;
};
section make_section(const std::string& json) {
  return {source("model.relay", program_head + "\n" + json + "\n"), program_head.size()};
}

template <class T>
std::vector<T> values_of(const constant_data& c) {
  std::vector<T> v(c.bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), c.bytes.data(), v.size() * sizeof(T));
  return v;
}

// read_metadata must throw a relay::error naming `fragment`, located at the section.
void expect_error(const std::string& json, const std::string& fragment) {
  const section s = make_section(json);
  bool thrown = false;
  try {
    (void)read_metadata(s.src, s.offset);
  } catch (const error& e) {
    thrown = true;
    CHECK_MESSAGE(e.message().find(fragment) != std::string::npos,
                  "message '" << e.message() << "' lacks '" << fragment << "'");
    CHECK(e.message().starts_with("metadata: "));
    CHECK(e.file() == "model.relay");
    CHECK(e.where() == s.src.locate(s.offset));
  }
  CHECK_MESSAGE(thrown, "no error for a section whose error should mention '" << fragment << "'");
}

// A blob for `c`, then `edit` applied to its bytes, re-encoded into the sample's first slot.
template <class Edit>
std::string edited_blob(Edit edit) {
  constant_data c;
  c.dt = dtype::float32();
  c.shape = {2, 3};
  c.bytes.resize(24);
  bytes_t b = encode_ndarray(c);
  edit(b);
  return encode_base64(b);
}

void put_le(bytes_t& b, std::size_t at, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + static_cast<std::size_t>(i)] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

TEST_CASE("metadata: base64 known vectors and round trips") {
  std::string err;
  auto enc = [](std::string_view s) { return encode_base64(bytes_t(s.begin(), s.end())); };
  CHECK(enc("") == "");
  CHECK(enc("M") == "TQ==");
  CHECK(enc("Ma") == "TWE=");
  CHECK(enc("Man") == "TWFu");
  CHECK(enc("\xfb\xff\xbf") == "+/+/");
  const bytes_t man = decode_base64("TWFuTWE=", err);
  CHECK(err.empty());
  CHECK(std::string(man.begin(), man.end()) == "ManMa");

  auto g = fuse::test::rng(101);
  for (std::size_t n = 0; n < 40; ++n) {
    bytes_t b(n);
    for (auto& x : b) x = static_cast<unsigned char>(g());
    const std::string text = encode_base64(b);
    CHECK(text.size() == (n + 2) / 3 * 4);
    CHECK(decode_base64(text, err) == b);
    CHECK(err.empty());
  }
}

TEST_CASE("metadata: NDArray blobs round trip for every dtype and shape") {
  auto g = fuse::test::rng(102);
  const dtype float16{dtype::float_code, 16, 1};
  const dtype int8{dtype::int_code, 8, 1}, uint8{dtype::uint_code, 8, 1};
  const std::vector<dtype> dtypes = {dtype::float32(), int8,    uint8,           dtype::int32(),
                                     dtype::int64(),   float16, dtype::boolean()};
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {7}, {2, 3}, {1, 17, 3}};
  for (const dtype& dt : dtypes)
    for (const auto& shape : shapes) {
      CAPTURE(dt.name());
      CAPTURE(shape.size());
      const constant_data c = random_constant(dt, shape, g);
      const std::string text = encode_ndarray_base64(c);
      std::string err;
      const bytes_t blob = decode_base64(text, err);
      REQUIRE(err.empty());
      CHECK(blob.size() == 40 + 8 * shape.size() + c.bytes.size());
      const auto back = decode_ndarray(blob, err);
      REQUIRE_MESSAGE(back, err);
      CHECK(err.empty());
      CHECK(back->dt == dt);
      CHECK(back->shape == shape);
      CHECK(back->bytes == c.bytes);
    }
}

TEST_CASE("metadata: the blob layout matches SaveDLTensor") {
  std::string err;
  const bytes_t independent = decode_base64(blob_f32_2x3, err);
  REQUIRE(err.empty());
  constant_data c;
  c.dt = dtype::float32();
  c.shape = {2, 3};
  const float v[6] = {1, 2, 3, 4, 5, 6};
  c.bytes.resize(sizeof v);
  std::memcpy(c.bytes.data(), v, sizeof v);
  CHECK(encode_ndarray(c) == independent);
  CHECK(encode_ndarray_base64(c) == blob_f32_2x3);
  // The fields at their offsets: magic, ndim at 24, dtype at 28, shape at 32, size at 48.
  const bytes_t b = encode_ndarray(c);
  CHECK(b[0] == 0x3F);
  CHECK(b[7] == 0xDD);
  CHECK(b[16] == 1);
  CHECK(b[24] == 2);
  CHECK((b[28] == 2 && b[29] == 32 && b[30] == 1 && b[31] == 0));
  CHECK((b[32] == 2 && b[40] == 3 && b[48] == 24));
}

TEST_CASE("metadata: a hand-built section with two constants and a VirtualDevice table") {
  const section s = make_section(sample_json());
  const metadata md = read_metadata(s.src, s.offset);
  CHECK(md.table_sizes == std::map<std::string, std::size_t>{{"relay.Constant", 2}, {"VirtualDevice", 1}});
  REQUIRE(md.constants.size() == 2);
  CHECK(md.constants[0]->dt == dtype::float32());
  CHECK(md.constants[0]->shape == std::vector<std::int64_t>{2, 3});
  CHECK(values_of<float>(*md.constants[0]) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(md.constants[1]->dt == dtype::int64());
  CHECK(md.constants[1]->shape == std::vector<std::int64_t>{3});
  CHECK(values_of<std::int64_t>(*md.constants[1]) == std::vector<std::int64_t>{7, -8, 9});
}

TEST_CASE("metadata: the other encodings of the root map and the section") {
  SUBCASE("StrMap and string indices") {
    std::string json = replaced(sample_json(), "\"type_key\": \"Map\"", "\"type_key\": \"StrMap\"");
    json = replaced(json, "\"data\": [4, 5]", "\"data\": [\"4\", \"5\"]");
    const section s = make_section(json);
    const metadata md = read_metadata(s.src, s.offset);
    CHECK(md.constants.size() == 2);
    CHECK(md.table_sizes.at("VirtualDevice") == 1);
  }
  SUBCASE("keys as runtime.String nodes, alternating in data") {
    std::string json = replaced(sample_json(), R"("keys": ["relay.Constant", "VirtualDevice"], "data": [2, 3])",
                                R"("data": [8, 2, 9, 3])");
    json =
        replaced(json, R"({"type_key": "runtime.String", "repr_str": ""})",
                 R"({"type_key": "runtime.String", "repr_str": ""},
    {"type_key": "runtime.String", "repr_str": "relay.Constant"},
    {"type_key": "runtime.String", "repr_b64": ")" +
                     encode_base64(bytes_t{'V', 'i', 'r', 't', 'u', 'a', 'l', 'D', 'e', 'v', 'i', 'c', 'e'}) + R"("})");
    const section s = make_section(json);
    const metadata md = read_metadata(s.src, s.offset);
    CHECK(md.table_sizes == std::map<std::string, std::size_t>{{"relay.Constant", 2}, {"VirtualDevice", 1}});
    CHECK(md.constants.size() == 2);
  }
  SUBCASE("keys as node indices") {
    std::string json = replaced(sample_json(), R"(["relay.Constant", "VirtualDevice"])", "[8, 9]");
    json = replaced(json, R"({"type_key": "runtime.String", "repr_str": ""})",
                    R"({"type_key": "runtime.String", "repr_str": ""},
    {"type_key": "runtime.String", "repr_str": "relay.Constant"},
    {"type_key": "runtime.String", "repr_str": "VirtualDevice"})");
    const section s = make_section(json);
    CHECK(read_metadata(s.src, s.offset).table_sizes.at("relay.Constant") == 2);
  }
  SUBCASE("an r\"\"\" wrapper") {
    const section s = make_section("r\"\"\"" + sample_json() + "\"\"\"  \n");
    CHECK(read_metadata(s.src, s.offset).constants.size() == 2);
  }
  SUBCASE("two constants sharing one blob") {
    const section s = make_section(replaced(sample_json(), R"("data": "1", "span")", R"("data": "0", "span")"));
    const metadata md = read_metadata(s.src, s.offset);
    REQUIRE(md.constants.size() == 2);
    CHECK(md.constants[0] == md.constants[1]);
  }
  SUBCASE("an empty map") {
    const section s =
        make_section(R"({"root": 1, "nodes": [{"type_key": ""}, {"type_key": "Map", "keys": [], "data": []}],
      "b64ndarrays": [], "attrs": {"tvm_version": "0.19.0"}})");
    const metadata md = read_metadata(s.src, s.offset);
    CHECK(md.table_sizes.empty());
    CHECK(md.constants.empty());
  }
}

TEST_CASE("metadata: the real #[metadata] sections in the corpus and seeds") {
  namespace fs = std::filesystem;
  int sections = 0;
  for (const char* dir : {FUSE_RELAY_CORPUS_DIR, FUSE_SEEDS_DIR}) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      MESSAGE("skipped: no directory " << dir);
      continue;
    }
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".relay" && ext != ".txt")) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      const std::string marker = "#[metadata]";
      for (std::size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
        // A seed file may hold several programs: the section ends where its JSON object does.
        std::size_t end = text.find('{', at);
        if (end == std::string::npos) continue;
        int depth = 0;
        bool in_string = false;
        for (; end < text.size(); ++end) {
          const char ch = text[end];
          if (in_string) {
            if (ch == '\\') ++end;
            else if (ch == '"') in_string = false;
          } else if (ch == '"') in_string = true;
          else if (ch == '{') ++depth;
          else if (ch == '}' && --depth == 0) break;
        }
        if (end >= text.size()) end = text.size() - 1;
        std::size_t stop = end + 1;
        if (const std::size_t open = text.find_first_not_of(" \t\r\n", at + marker.size());
            text.compare(open, 4, "r\"\"\"") == 0 && text.find("\"\"\"", stop) != std::string::npos)
          stop = text.find("\"\"\"", stop) + 3;
        const std::string name = entry.path().filename().string();
        CAPTURE(name);
        const source src(name, text.substr(0, stop));
        ++sections;
        metadata md;
        try {
          md = read_metadata(src, at + marker.size());
        } catch (const error& e) {
          FAIL_CHECK(std::string(e.what()));
          continue;
        }
        const auto it = md.table_sizes.find("relay.Constant");
        CHECK(md.constants.size() == (it == md.table_sizes.end() ? 0 : it->second));
        for (const auto& c : md.constants)
          CHECK(c->bytes.size() == static_cast<std::size_t>(c->elements()) * c->dt.bytes());
        if (!md.constants.empty()) {
          const constant_data& first = *md.constants.front();
          MESSAGE(name << ": " << md.constants.size() << " constants, the first " << first.dt.name() << " of rank "
                       << first.shape.size());
          // The reference's sample 17: one float32 (2, 3) constant holding 1..6.
          if (name.find("17") != std::string::npos && first.dt == dtype::float32() &&
              first.shape == std::vector<std::int64_t>{2, 3})
            CHECK(values_of<float>(first) == std::vector<float>{1, 2, 3, 4, 5, 6});
        }
      }
    }
  }
  if (sections == 0) MESSAGE("skipped: no #[metadata] section in the corpus or the seeds");
}

TEST_CASE("metadata: corrupt blobs") {
  expect_error(sample_json(edited_blob([](bytes_t& b) { b[3] ^= 1; })),
               "b64ndarrays[0] (meta[relay.Constant][0]): bad magic 0x");
  expect_error(sample_json(edited_blob([](bytes_t& b) { b[3] ^= 1; })), "(expected 0xDD5E40F096B4A13F)");
  expect_error(sample_json(edited_blob([](bytes_t& b) { b[9] = 1; })), "reserved field is 0x");
  expect_error(sample_json(edited_blob([](bytes_t& b) { put_le(b, 24, 1000000, 4); })), "ndim 1000000 out of range");
  expect_error(sample_json(edited_blob([](bytes_t& b) { put_le(b, 24, 0xFFFFFFFF, 4); })), "ndim -1 out of range");
  expect_error(sample_json(edited_blob([](bytes_t& b) { b[28] = 3; })), "dtype code 3");
  expect_error(sample_json(edited_blob([](bytes_t& b) { b[29] = 0; })), "dtype bits 0");
  expect_error(sample_json(edited_blob([](bytes_t& b) { b[29] = 65; })), "dtype bits 65");
  expect_error(sample_json(edited_blob([](bytes_t& b) { put_le(b, 30, 0, 2); })), "dtype lanes 0");
  expect_error(sample_json(edited_blob([](bytes_t& b) { put_le(b, 40, static_cast<std::uint64_t>(-3), 8); })),
               "shape[1] is -3 (negative)");
  expect_error(sample_json(edited_blob([](bytes_t& b) {
                 put_le(b, 32, std::uint64_t{1} << 40, 8);
                 put_le(b, 40, std::uint64_t{1} << 40, 8);
               })),
               "shape overflows");
  expect_error(sample_json(edited_blob([](bytes_t& b) { put_le(b, 32, std::uint64_t{1} << 61, 8); })),
               "shape overflows");
  expect_error(sample_json(edited_blob([](bytes_t& b) { put_le(b, 48, 20, 8); })),
               "data_byte_size 20 does not match shape and dtype float32 (expected 24)");
  // A consistent header that claims more data than the blob has must not allocate it.
  expect_error(sample_json(edited_blob([](bytes_t& b) {
                 put_le(b, 32, 1 << 20, 8);
                 put_le(b, 48, 12 << 20, 8);
               })),
               "truncated data: data_byte_size is 12582912 but 24 bytes follow");
  expect_error(sample_json(edited_blob([](bytes_t& b) { b.pop_back(); })), "truncated data");
  expect_error(sample_json(edited_blob([](bytes_t& b) { b.resize(30); })), "truncated: dtype");
  expect_error(sample_json(edited_blob([](bytes_t& b) { b.resize(44); })), "truncated: shape");
  expect_error(sample_json(edited_blob([](bytes_t& b) { b.resize(5); })), "truncated: magic");
  expect_error(sample_json(edited_blob([](bytes_t& b) {
                 b.push_back(0);
                 b.push_back(0);
               })),
               "2 trailing bytes");
  // The second blob: the error names its own index and constant.
  expect_error(sample_json(blob_f32_2x3, edited_blob([](bytes_t& b) { b[0] = 0; })),
               "b64ndarrays[1] (meta[relay.Constant][1]): bad magic");
}

TEST_CASE("metadata: bad base64") {
  std::string err;
  CHECK(decode_base64("TW!u", err).empty());
  CHECK(err.find("bad character 0x21 at offset 2") != std::string::npos);
  CHECK(decode_base64("TWFuT", err).empty());
  CHECK(err.find("not a multiple of 4") != std::string::npos);
  CHECK(decode_base64("TQ=A", err).empty());
  CHECK(err.find("bad padding") != std::string::npos);
  CHECK(decode_base64("TQ==TWFu", err).empty());
  CHECK(err.find("bad padding: '=' at offset 2") != std::string::npos);
  CHECK(decode_base64("T===", err).empty());
  CHECK(err.find("bad padding") != std::string::npos);
  CHECK(decode_base64("TR==", err).empty());
  CHECK(err.find("non-zero bits") != std::string::npos);
  CHECK(decode_base64("TWF\nu", err).empty());
  CHECK(err.find("bad character 0x0A") != std::string::npos);

  std::string blob = blob_f32_2x3;
  blob[10] = '*';
  expect_error(sample_json(blob), "b64ndarrays[0] (meta[relay.Constant][0]): base64: bad character 0x2A at offset 10");
  expect_error(sample_json(blob_f32_2x3.substr(0, blob_f32_2x3.size() - 1)), "base64: bad padding");
  expect_error(sample_json(blob_f32_2x3 + "="), "base64: bad padding");
}

TEST_CASE("metadata: a broken object graph") {
  const std::string json = sample_json();
  expect_error(replaced(json, "\"data\": [4, 5]", "\"data\": [4, 99]"),
               "meta[relay.Constant][1] refers to node 99, out of range (8 nodes)");
  expect_error(replaced(json, "\"data\": [4, 5]", "\"data\": [4, 0]"), "meta[relay.Constant][1] is null");
  expect_error(replaced(json, "\"data\": [4, 5]", "\"data\": [4, 6]"),
               "meta[relay.Constant][1] is nodes[6] of type 'VirtualDevice', expected relay.Constant");
  expect_error(replaced(json, "\"data\": [4, 5]", "\"data\": [4, -5]"), "meta[relay.Constant][1] is -5, not an index");
  expect_error(replaced(json, "\"data\": [4, 5]", "\"data\": [4, 5.5]"), "not an index");
  expect_error(replaced(json, "\"data\": [4, 5]", "\"data\": [4, \"5x\"]"), "not an index");
  expect_error(replaced(json, "\"data\": [6]", "\"data\": [60]"),
               "meta[VirtualDevice][0] refers to node 60, out of range");
  expect_error(replaced(json, R"("data": "1", "span")", R"("data": "2", "span")"),
               "meta[relay.Constant][1] refers to b64ndarrays[2], out of range (2 blobs)");
  expect_error(replaced(json, R"("data": "1", "span")", R"("span")"),
               "meta[relay.Constant][1] (nodes[5]) has no attrs.data");
  expect_error(replaced(json, "\"root\": 1,", ""), "missing \"root\"");
  expect_error(replaced(json, "\"root\": 1,", "\"root\": 0,"), "\"root\" is null");
  expect_error(replaced(json, "\"root\": 1,", "\"root\": 42,"), "\"root\" refers to node 42, out of range");
  expect_error(replaced(json, "\"root\": 1,", "\"root\": 2,"), "\"root\" is nodes[2] of type 'Array', expected a Map");
  expect_error(replaced(json, "\"data\": [2, 3]", "\"data\": [2, 4]"),
               "meta[VirtualDevice] is nodes[4] of type 'relay.Constant', expected an Array");
  expect_error(replaced(json, "\"data\": [2, 3]", "\"data\": [2]"), "\"keys\" is not an array as long as its \"data\"");
  expect_error(replaced(json, "\"VirtualDevice\"], \"data\"", "\"relay.Constant\"], \"data\""),
               "the key relay.Constant twice");
  expect_error(replaced(json, "{\"type_key\": \"VirtualDevice\",", "{\"type\": \"VirtualDevice\","),
               "nodes[6] (meta[VirtualDevice][0]) is not an object with a \"type_key\"");
  expect_error(replaced(json, "\"nodes\"", "\"nodez\""), "missing \"nodes\" array");
  expect_error(replaced(json, "\"b64ndarrays\": [", "\"b64ndarrays\": [7, "),
               "b64ndarrays[0] (meta[relay.Constant][0]) is not a string");
  expect_error("[1, 2]", "not a JSON object");
  expect_error(replaced(json, "\"root\": 1,", "\"root\": 1e999,"), "invalid JSON: number overflow");
  expect_error("r\"\"\"" + json, "not closed");
}

TEST_CASE("metadata: malformed JSON points at the offending byte") {
  const std::string json =
      replaced(sample_json(), "{\"type_key\": \"VirtualDevice\"", "{\"type_key\" @ \"VirtualDevice\"");
  const section s = make_section(json);
  const std::size_t at = s.src.text().find('@', s.offset);  // not the one in @main
  try {
    (void)read_metadata(s.src, s.offset);
    FAIL("no error for malformed JSON");
  } catch (const error& e) {
    CHECK(e.message().starts_with("metadata: invalid JSON: "));
    CHECK(e.message().find("[json.exception") == std::string::npos);
    CHECK_MESSAGE(e.where() == s.src.locate(at), std::string(e.what()));
    CHECK(e.where().line == 15);  // the VirtualDevice node's line
  }
  // An unterminated section: the error points just after its last character, not past the text.
  const section cut = make_section(sample_json().substr(0, 100));
  try {
    (void)read_metadata(cut.src, cut.offset);
    FAIL("no error for a truncated section");
  } catch (const error& e) {
    CHECK(e.where() == cut.src.locate(program_head.size() + 1 + 100));
  }
  // Nothing after the marker.
  const source empty("model.relay", program_head + "\n");
  CHECK_THROWS_AS((void)read_metadata(empty, program_head.size()), error);
}

TEST_CASE("metadata: the blobs are read where they lie, and errors past them still point at their byte") {
  // The tensors' base64 strings never reach the JSON parser (metadata_detail::skeleton_of):
  // an error after them must still be located in the text.
  REQUIRE(blob_f32_2x3.size() >= 64);  // long enough to be taken out
  const std::string json =
      replaced(sample_json(), "\"attrs\": {\"tvm_version\": \"0.9.0\"}", "\"attrs\": {\"tvm_version\" @ \"0.9.0\"}");
  const section s = make_section(json);
  const std::size_t at = s.src.text().find('@', s.src.text().find("tvm_version"));
  try {
    (void)read_metadata(s.src, s.offset);
    FAIL("no error for malformed JSON");
  } catch (const error& e) {
    CHECK_MESSAGE(e.where() == s.src.locate(at), std::string(e.what()));
  }
  // A blob written with JSON escapes ("\/" for '/') is read by the parser, unescaped.
  constant_data c;
  c.dt = dtype::float32();
  c.shape = {64};
  c.bytes.resize(256);
  for (std::size_t i = 0; i < c.bytes.size(); ++i)
    c.bytes[i] = static_cast<unsigned char>(255 - i);  // '/' and '+' in the base64
  const std::string b64 = encode_base64(encode_ndarray(c));
  REQUIRE(b64.find('/') != std::string::npos);
  std::string escaped;
  for (char ch : b64) escaped += ch == '/' ? std::string("\\/") : std::string(1, ch);
  for (const std::string& blob : {b64, escaped}) {
    const section e = make_section(replaced(sample_json(), blob_f32_2x3, blob));
    const metadata md = read_metadata(e.src, e.offset);
    REQUIRE(md.constants.size() >= 1);
    CHECK(md.constants[0]->bytes == c.bytes);
  }
  // A section holding a "\u0001" escape anywhere is parsed whole (no placeholder can collide).
  const section u = make_section(replaced(sample_json(), "\"0.9.0\"", "\"0.9.0\\u0001\""));
  const metadata md = read_metadata(u.src, u.offset);
  REQUIRE(md.constants.size() >= 1);
  std::string err;
  CHECK(md.constants[0]->bytes == decode_ndarray(decode_base64(blob_f32_2x3, err), err)->bytes);
}

TEST_CASE("metadata: the table decoder and the checking decoder agree on every damaged text") {
  auto g = fuse::test::rng(104);
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=*\n";
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const std::size_t n = static_cast<std::size_t>(g() % 24);
    for (std::size_t i = 0; i < n; ++i)
      text += alphabet[static_cast<std::size_t>(g() % (round % 3 ? 64 : alphabet.size()))];
    if (round % 5 == 0 && n >= 2) text[n - 1] = '=';
    if (round % 7 == 0 && n >= 3) text[n - 2] = '=';
    std::string fast_err, checked_err;
    const bytes_t fast = decode_base64(text, fast_err);
    const bytes_t checked = metadata_detail::decode_base64_checked(text, checked_err);
    CAPTURE(text);
    CHECK(fast_err == checked_err);
    if (checked_err.empty()) CHECK(fast == checked);
  }
}

TEST_CASE("metadata: random damage never crashes") {
  auto g = fuse::test::rng(103);
  auto pick = [&g](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(g() % n); };

  std::string err;
  const bytes_t good = decode_base64(blob_f32_2x3, err);
  int blob_ok = 0, blob_bad = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    bytes_t b = good;
    switch (pick(4)) {
      case 0:
        for (std::size_t k = 1 + pick(3); k > 0; --k) b[pick(b.size())] ^= static_cast<unsigned char>(1u << pick(8));
        break;
      case 1: b.resize(pick(b.size() + 1)); break;
      case 2:
        for (std::size_t k = 1 + pick(9); k > 0; --k) b.push_back(static_cast<unsigned char>(g()));
        break;
      default: {  // a whole header field replaced by random bytes: sizes, dims, counts
        const std::size_t at = 8 * pick(7);
        for (std::size_t i = at; i < at + 8 && i < b.size(); ++i) b[i] = static_cast<unsigned char>(g());
      }
    }
    const auto c = decode_ndarray(b, err);
    CHECK((c != nullptr) == err.empty());
    if (c) {
      ++blob_ok;
      CHECK(b.size() == 40 + 8 * c->shape.size() + c->bytes.size());
      CHECK(c->bytes.size() == static_cast<std::size_t>(c->elements()) * c->dt.bytes());
    } else {
      ++blob_bad;
    }
  }
  CHECK(blob_ok > 0);
  CHECK(blob_bad > 0);

  const std::string json = sample_json();
  const std::size_t blob_at = json.find(blob_f32_2x3);
  const std::string chars = "{}[]\",:0123456789 -+/=aZ\\\x80\xff";
  int json_ok = 0, json_bad = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string t = json;
    for (std::size_t k = 1 + pick(3); k > 0; --k) {
      // Half the damage lands in the first blob, to reach the base64 and NDArray checks.
      const std::size_t at = pick(2) ? blob_at + pick(blob_f32_2x3.size()) : pick(t.size());
      if (at >= t.size()) continue;
      switch (pick(4)) {
        case 0: t[at] = chars[pick(chars.size())]; break;
        case 1: t.erase(at, 1); break;
        case 2: t.insert(at, 1, chars[pick(chars.size())]); break;
        default: t.resize(at);
      }
    }
    const section s = make_section(t);
    try {
      const metadata md = read_metadata(s.src, s.offset);
      ++json_ok;
      for (const auto& c : md.constants)
        CHECK(c->bytes.size() == static_cast<std::size_t>(c->elements()) * c->dt.bytes());
    } catch (const error& e) {
      ++json_bad;
      CHECK(e.message().starts_with("metadata: "));
    } catch (const std::exception& e) {
      FAIL_CHECK("not a relay::error: " << e.what());
    }
  }
  CHECK(json_ok > 0);
  CHECK(json_bad > 0);
}
