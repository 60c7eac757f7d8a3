// Built against an installed fuse with find_package(fuse COMPONENTS relay): the frontend library
// parses, type-checks, plans and emits a Relay program (the seed's cell), and its installed
// headers need nothing beyond fuse's own dependencies (no nlohmann-json).
#include <fuse/relay/emit.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/pipeline.hpp>
#include <fuse/relay/plan.hpp>
#include <fuse/relay/printer.hpp>
#include <fuse/relay/typecheck.hpp>

#include <cstdio>
#include <string>

int main() {
  const char* text = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(1, 30), float32]) {
  %0 = split(%x, indices_or_sections=3, axis=1);
  %1 = sigmoid(%0.0);
  %2 = tanh(%0.1);
  %3 = exp(%0.2);
  %4 = multiply(%2, %3);
  add(%1, %4)
}
)";
  fuse::relay::module m = fuse::relay::parse("cell.relay", text);
  fuse::relay::typecheck(m);
  fuse::relay::prepare_for_planning(m);
  const fuse::relay::plan p = fuse::relay::make_plan(m);
  const fuse::relay::emitted e = fuse::relay::emit_header(m, p, "cell", "cell.relay");
  std::printf("kernels: %d, header: %zu bytes\n", static_cast<int>(e.kernels), e.header.size());
  return e.kernels == 1 && e.header.find("fuse::sigmoid") != std::string::npos ? 0 : 1;
}
