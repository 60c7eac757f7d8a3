// Long rows staged in shared memory (fuse/cuda/row_staging.hpp, `cuda::stage_rows(true)`), on the CUDA emulator: a block
// that owns a row copies the leaves it reads again once, and every phase and the outputs read
// them there. The results must be the same bits as without staging, under every thread order
// (the emulator fills shared memory with 0xA5, so a read before the copy or past it shows), and
// the launch must say what it staged. The row suites (test_rows*.cpp) check the staged results of
// rows above 1024 against the double reference.
#include "cuda/rows_check.hpp"

using namespace fuse;
using namespace fuse::test::rows;

namespace {

/// e on the emulator with and without staging: the same bits under every order, one launch
/// each. Returns the shared memory the staged launch took beyond the row kernel's partials.
template <class T, class E>
std::size_t staged_bytes(const E& e) {
  constexpr auto R = static_cast<int>(E::rank);
  const auto ext = e.shape().array();
  tensor<T, R> plain(ext);
  cuda::launch_log plain_log;
  cuda::eval(plain, e, cuda::emulated, cuda::log_to(plain_log));  // (off by default)
  REQUIRE(plain_log.size() == 1);
  CHECK(plain_log.launches[0].config.shared_bytes == cuda::row_shared_bytes);
  std::size_t bytes = 0;
  for (const auto order : schedules) {
    tensor<T, R> out(ext);
    std::memset(static_cast<void*>(out.data()), 0xA5, sizeof(T) * static_cast<std::size_t>(out.size()));
    cuda::launch_log log;
    cuda::eval(out, e, cuda::emulated(order), cuda::stage_rows(true), cuda::log_to(log));
    REQUIRE(log.size() == 1);
    bytes = log.launches[0].config.shared_bytes - cuda::row_shared_bytes;
    CHECK_MESSAGE(same_bits(out, plain), "staging changed the result");
  }
  return bytes;
}

/// The staging area of k rows of n elements of T: the table, then the rows.
template <class T>
std::size_t rows_of(index_t n, int k = 1) {
  return cuda::row_stage_table_bytes + static_cast<std::size_t>(k) * cuda::staged_row_bytes(n, sizeof(T));
}

}  // namespace

TEST_CASE("cuda emulated row staging: softmax and layer norms read their long rows from shared memory") {
  for (index_t n : {index_t{1025}, index_t{1031}, index_t{4097}}) {
    CAPTURE(n);
    const auto salt = 900 + static_cast<std::uint64_t>(n);
    auto [x, res, gamma, beta] = random_norm_operands(3, n, salt, 8);
    auto mask = test::random_tensor<float>({1, n}, salt + 4, 0, 1);
    for (index_t j = 0; j < n; ++j) mask(0, j) = mask(0, j) < 0.3f ? -10000.0f : 0.0f;
    CHECK(staged_bytes<float>(softmax(x.view())) == rows_of<float>(n));
    CHECK(staged_bytes<float>(log_softmax(x.view())) == rows_of<float>(n));
    // The mask's row is the same for every row, and staged with x's (read by both phases).
    CHECK(staged_bytes<float>(softmax(x.view() * 0.125f + mask.view())) == rows_of<float>(n, 2));
    // gamma and beta are read once, by the outputs: not staged.
    CHECK(staged_bytes<float>(layer_norm(x.view() + res.view(), gamma.view(), beta.view())) == rows_of<float>(n, 2));
    auto d = x.view() - mean(x.view(), -1, keepdims);
    CHECK(staged_bytes<float>(d / sqrt(mean(d * d, -1, keepdims) + 1e-5f) * gamma.view() + beta.view()) ==
          rows_of<float>(n));
    CHECK(staged_bytes<float>(x.view() - mean(x.view(), -1, keepdims)) == rows_of<float>(n));
    // x is read once (by the mean), y only by the outputs: nothing is read again.
    CHECK(staged_bytes<float>(mean(x.view(), -1, keepdims) * res.view()) == 0);
  }
}

TEST_CASE("cuda emulated row staging: element types, unaligned rows, five leaves, concatenations, limits") {
  const index_t n = 2049;
  // half, double and int8 elements (16-byte chunks, then the tail element by element).
  auto xh = test::random_tensor<half>({2, n}, 31, -4, 4);
  CHECK(staged_bytes<half>(softmax(xh.view())) == rows_of<half>(n));
  auto xd = test::random_tensor<double>({2, n}, 32, -30, 30);
  CHECK(staged_bytes<double>(softmax(xd.view())) == rows_of<double>(n));
  auto q = test::random_tensor<std::int8_t>({2, n}, 33, -128, 127);
  CHECK(staged_bytes<float>(softmax(cast<float>(q.view()) * 0.05f)) == rows_of<std::int8_t>(n));
  // Rows that start 4 bytes past a 16-byte boundary: copied element by element.
  auto wide = test::random_tensor<float>({3, n + 1}, 34, -8, 8);
  const tensor_view<const float, 2> shifted(wide.data() + 1, dynamic_shape<2>({3, n}), index_array<2>{{n + 1, 1}});
  CHECK(staged_bytes<float>(softmax(shifted)) == rows_of<float>(n));
  // Five leaves read again: the first four are staged.
  auto a = test::random_tensor<float>({2, n}, 35, -2, 2), b = test::random_tensor<float>({2, n}, 36, -2, 2);
  auto c = test::random_tensor<float>({2, n}, 37, -2, 2), e = test::random_tensor<float>({2, n}, 38, -2, 2);
  auto f = test::random_tensor<float>({2, n}, 39, -2, 2);
  CHECK(staged_bytes<float>(softmax(a.view() + b.view() + c.view() + e.view() + f.view())) == rows_of<float>(n, 4));
  // The same leaf twice is staged once.
  CHECK(staged_bytes<float>(softmax(a.view() * a.view() + b.view())) == rows_of<float>(n, 2));
  // Leaves inside a concatenation read the row at other positions: never staged.
  auto left = test::random_tensor<float>({2, 1000}, 40, -2, 2),
       right = test::random_tensor<float>({2, 1049}, 41, -2, 2);
  CHECK(staged_bytes<float>(softmax(concatenate(std::tie(left, right), 1))) == 0);
  // A row whose leaves do not fit the staging area (50000 floats: 200,000 bytes) is read as before.
  auto big = test::random_tensor<float>({2, 50000}, 42, -8, 8);
  CHECK(staged_bytes<float>(softmax(big.view())) == 0);
  // Rows a warp owns (up to 1024 elements) are never staged.
  auto shortrows = test::random_tensor<float>({4, 1024}, 43, -8, 8);
  CHECK(staged_bytes<float>(softmax(shortrows.view())) == 0);
}

TEST_CASE("cuda emulated row staging: in place, the staged copy is the row as it was before the writes") {
  const index_t n = 3001;
  auto x = test::random_tensor<float>({3, n}, 51, -8, 8);
  for (const auto order : schedules) {
    tensor<float, 2> staged = x, plain = x;
    cuda::launch_log log;
    cuda::eval(staged, softmax(staged.view()), cuda::emulated(order), cuda::stage_rows(true), cuda::log_to(log));
    cuda::eval(plain, softmax(plain.view()), cuda::emulated(order));
    REQUIRE(log.size() == 1);
    CHECK(log.launches[0].config.shared_bytes == cuda::row_shared_bytes + rows_of<float>(n));
    CHECK(same_bits(staged, plain));
  }
}
