// Writes seed 002's quantized attention block as a Relay program (the binding block the seed
// prints, wrapped as the seed test wraps it: tests/relay/seed_programs.hpp): the model
// bench_seed_block times under three planners. Usage: seed_block_text SEED_002.txt OUT.relay
#include <fstream>
#include <iostream>

#include "relay/seed_programs.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: seed_block_text SEED_002.txt OUT.relay\n";
    return 2;
  }
  const std::string text = fuse::test::read_file(argv[1]);
  if (text.empty()) {
    std::cerr << "seed_block_text: " << argv[1] << " is empty or unreadable\n";
    return 1;
  }
  std::ofstream out(argv[2]);
  out << fuse::test::seed_002_block(text);
  return out ? 0 : 1;
}
