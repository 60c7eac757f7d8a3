// Writes the fuzzer's starting corpus: every Relay program the tests use as a fixture, one file
// each, into DIR (`seed_corpus DIR SEEDS_DIR CORPUS_DIR [FILE.relay...]`). The programs that the
// seed documents embed in prose are cut out (seed 001's `* ty=` comments repaired, and also kept
// as printed); the corpus files and any further .relay files are copied whole. Directories that
// do not exist are skipped: the fixtures outside the repository are read where they are.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "relay/seed_programs.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: seed_corpus DIR SEEDS_DIR CORPUS_DIR [FILE.relay...]\n");
    return 2;
  }
  const fs::path out = argv[1];
  fs::create_directories(out);
  int written = 0;
  const auto write = [&](const std::string& text) {
    std::ofstream(out / ("fixture_" + std::to_string(written++) + ".relay"), std::ios::binary) << text;
  };
  if (fs::is_directory(argv[2]))
    for (const auto& f : fs::directory_iterator(argv[2]))
      for (const std::string& p : fuse::test::embedded_programs(fuse::test::read_file(f.path()))) {
        write(p);
        if (const std::string r = fuse::test::restore_ty_comments(p); r != p) write(r);
      }
  if (fs::is_directory(argv[3]))
    for (const auto& f : fs::directory_iterator(argv[3]))
      if (f.path().extension() == ".relay") write(fuse::test::read_file(f.path()));
  for (int i = 4; i < argc; ++i) write(fuse::test::read_file(argv[i]));
  write(fuse::test::seed_cell_relay(1));
  write(fuse::test::seed_cell_relay(7));
  std::printf("%d fixture programs in %s\n", written, out.c_str());
  return 0;
}
