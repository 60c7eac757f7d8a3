// fuse-relay compile --report (see report.hpp).
#include "fuse/relay/report.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"

namespace fuse::relay {

std::string kernel_ops(const kernel& k) {
  std::string s;
  for (const expr* op : k.ops) s += (s.empty() ? "" : ", ") + op->callee->name;
  return s;
}

// The ops a kernel covers, in any order: where layers meet a value they all read (BERT's
// attention mask), the first layer's kernel evaluates its ops in another order.
std::string kernel_signature(const kernel& k) {
  std::vector<std::string> names;
  for (const expr* op : k.ops) {
    const op_def* d = find_op(op->callee->name);
    if (d && (d->pattern == op_pattern::injective || d->kernel == op_kernel::pass_through)) continue;
    names.push_back(op->callee->name);
  }
  std::sort(names.begin(), names.end());
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

repeating_block find_repeating_block(const std::vector<std::string>& sig) {
  const std::size_t n = sig.size();
  repeating_block best;
  for (std::size_t period = 1; 2 * period <= n; ++period) {
    // Runs of i where sig[i] == sig[i + period]: a run of length L from a holds L / period + 1
    // copies of the block that starts at a.
    for (std::size_t a = 0; a + period < n;) {
      if (sig[a] != sig[a + period]) {
        ++a;
        continue;
      }
      std::size_t b = a;
      while (b + period < n && sig[b] == sig[b + period]) ++b;
      const std::size_t repeats = (b - a) / period + 1;
      if (repeats >= 2 && repeats * period > best.repeats * best.length) best = {a, period, repeats};
      a = b;
    }
  }
  return best;
}

std::string plan_report(const plan& p) {
  std::string out;
  std::vector<std::string> sig;
  for (std::size_t k = 0; k < p.kernels.size(); ++k) {
    sig.push_back(kernel_signature(p.kernels[k]));
    out += "kernel " + std::to_string(k) + ": " + kernel_ops(p.kernels[k]) + "\n";
  }
  const repeating_block r = find_repeating_block(sig);
  if (r.length > 0) {
    const std::size_t last = r.first + r.length * r.repeats;  // one past the block's last copy
    out += "repeating block: " + std::to_string(r.length) + " kernel" + (r.length == 1 ? "" : "s") + " (kernels " +
           std::to_string(r.first) + "-" + std::to_string(r.first + r.length - 1) + "), " + std::to_string(r.repeats) +
           " times; " + std::to_string(r.first) + " kernel" + (r.first == 1 ? "" : "s") + " before, " +
           std::to_string(p.kernels.size() - last) + " after\n";
  } else {
    std::size_t most = 0, ops = 0;
    for (const kernel& k : p.kernels) most = std::max(most, k.ops.size()), ops += k.ops.size();
    char buf[96];
    std::snprintf(buf, sizeof buf, "no repeating block; ops per kernel: %.1f on average, %zu at most\n",
                  p.kernels.empty() ? 0.0 : static_cast<double>(ops) / static_cast<double>(p.kernels.size()), most);
    out += buf;
  }
  return out;
}

}  // namespace fuse::relay
