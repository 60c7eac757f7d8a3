// Compiler and target configuration shared by every fuse header.
//
// Everything that the CUDA executor will share (core, expr, the op table, math) is written
// against these macros so that it compiles both as plain C++20 and under nvcc.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define FUSE_HD __host__ __device__
#define FUSE_FORCE_INLINE __forceinline__
#else
#define FUSE_HD
#if defined(__GNUC__) || defined(__clang__)
#define FUSE_FORCE_INLINE inline __attribute__((always_inline))
#else
#define FUSE_FORCE_INLINE inline
#endif
#endif

// True while nvcc (or clang) compiles device code: host-only paths must be skipped then.
#if defined(__CUDA_ARCH__)
#define FUSE_DEVICE_PASS 1
#else
#define FUSE_DEVICE_PASS 0
#endif

// `#pragma GCC unroll n` for the host compiler. nvcc's front end does not know that pragma
// (warning 1675) and a .cu file may include the CPU executor, so under nvcc it is left out.
#define FUSE_PRAGMA(x) _Pragma(#x)
#if defined(__CUDACC__)
#define FUSE_UNROLL(n)
#else
#define FUSE_UNROLL(n) FUSE_PRAGMA(GCC unroll n)
#endif

// Before a device loop whose step is a run-time value: nvcc would unroll it and divide in 64
// bits (a call into a software sequence) to find the trip count.
#if defined(__CUDACC__)
#define FUSE_DEVICE_NO_UNROLL FUSE_PRAGMA(unroll 1)
#else
#define FUSE_DEVICE_NO_UNROLL
#endif

// Before a device loop of constant trip count over a small array: unrolled, the array stays in
// registers (a run-time index would put it in local memory). The host leaves the loop as it is.
#if defined(__CUDACC__)
#define FUSE_DEVICE_UNROLL FUSE_PRAGMA(unroll)
#else
#define FUSE_DEVICE_UNROLL
#endif

// Placed after a lambda's parameter list: `[&](int i) FUSE_LAMBDA_INLINE { ... }`.
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define FUSE_LAMBDA_INLINE __attribute__((always_inline))
#else
#define FUSE_LAMBDA_INLINE
#endif

#if defined(__GNUC__) || defined(__clang__)
#define FUSE_LIKELY(x) __builtin_expect(!!(x), 1)
#define FUSE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FUSE_NOINLINE __attribute__((noinline))
#else
#define FUSE_LIKELY(x) (x)
#define FUSE_UNLIKELY(x) (x)
#define FUSE_NOINLINE
#endif

namespace fuse {

/// Signed index type of every extent, stride and coordinate.
using index_t = std::int64_t;

/// Byte alignment of every owning tensor's storage (one cache line; also an AVX-512 vector).
inline constexpr std::size_t storage_alignment = 64;

}  // namespace fuse
