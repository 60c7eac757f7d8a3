// main() of the benchmarks that measure OpenBLAS beside fuse (bench_dense, bench_rnn_cell).
//
// OpenBLAS chooses its kernels when libopenblas is loaded, before main() runs. Debian's 0.3.21
// does not know Zen 5 and falls back to its AVX2 Haswell kernel (about half this CPU's peak);
// OPENBLAS_CORETYPE=SkylakeX makes it use its AVX-512 kernel, the strong anchor. So when the CPU
// has AVX-512 and OPENBLAS_CORETYPE is not SkylakeX (unset, or set to something else by the
// environment: some machines export OPENBLAS_CORETYPE=Haswell), main sets it (and
// OPENBLAS_NUM_THREADS=1 if unset) and re-executes this binary with the same arguments.
// FUSE_OPENBLAS_CORETYPE=NAME asks for another core instead (Haswell: the kernel Debian picks
// by itself). OpenBLAS then runs on one thread, and the core it picked is printed and recorded
// in the benchmark context ("openblas_core").
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

}  // namespace

int main(int argc, char** argv) {
  const char* asked = std::getenv("FUSE_OPENBLAS_CORETYPE");
  const char* want = asked && *asked ? asked : cpu_has_avx512() ? "SkylakeX" : nullptr;
  const char* have = std::getenv("OPENBLAS_CORETYPE");
  if (want && (!have || std::strcmp(have, want) != 0)) {
    if (have) std::fprintf(stderr, "fuse bench: OPENBLAS_CORETYPE=%s replaced by %s\n", have, want);
    setenv("OPENBLAS_CORETYPE", want, 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 0);  // not overwritten when set
    execv("/proc/self/exe", argv);
    std::perror("fuse bench: re-executing with OPENBLAS_CORETYPE set failed; OpenBLAS keeps the kernel it chose");
  }
  openblas_set_num_threads(1);
  const char* core = openblas_get_corename();
  const std::string core_name = core ? core : "unknown";
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  std::fprintf(stderr, "OpenBLAS core: %s (OPENBLAS_CORETYPE=%s), 1 thread\n", core_name.c_str(),
               forced ? forced : "unset");
  benchmark::AddCustomContext("openblas_core", core_name);
  benchmark::AddCustomContext("openblas_coretype", forced ? forced : "unset");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
