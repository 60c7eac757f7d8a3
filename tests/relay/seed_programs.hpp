// Reading the Relay programs that the seeds embed in prose, for the frontend's tests (the
// seeds are read from disk at run time, never copied into the repository).
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fuse::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Relay programs embedded in prose: from each `def @` or `fn (` / `fn(` through the brace that
// closes its body; `def`s that follow each other form one module.
inline std::size_t end_of_body(const std::string& t, std::size_t from) {
  std::size_t p = t.find('{', from);
  if (p == std::string::npos) return p;
  int depth = 0;
  for (; p < t.size(); ++p) {
    if (t[p] == '{') ++depth;
    if (t[p] == '}' && --depth == 0) return p + 1;
  }
  return std::string::npos;
}
inline std::vector<std::string> embedded_programs(const std::string& t) {
  std::vector<std::string> out;
  std::size_t p = 0;
  for (;;) {
    const std::size_t s = std::min({t.find("def @", p), t.find("fn (", p), t.find("fn(", p)});
    if (s == std::string::npos) break;
    std::size_t e = end_of_body(t, s);
    if (e == std::string::npos) break;
    for (;;) {
      std::size_t q = e;
      while (q < t.size() && std::isspace(static_cast<unsigned char>(t[q]))) ++q;
      if (t.compare(q, 5, "def @") != 0) break;
      const std::size_t next = end_of_body(t, q);
      if (next == std::string::npos) break;
      e = next;
    }
    out.push_back(t.substr(s, e - s));
    p = e;
  }
  return out;
}

// Seed 001's web page lost the slashes of `/* ty=... */` (it reads `* ty=... *`): put them back.
inline std::string restore_ty_comments(std::string s) {
  std::size_t p = 0;
  while ((p = s.find("* ty=", p)) != std::string::npos) {
    if (p > 0 && s[p - 1] == '/') {
      p += 5;
      continue;
    }
    s.insert(p, "/");
    const std::size_t close = s.find(" *", p + 6);
    if (close == std::string::npos) break;
    s.insert(close + 2, "/");
    p = close + 3;
  }
  return s;
}

/// Every program embedded in seeds 000 and 001 under `dir`, named SEED_K (001's with their
/// ty= comments restored); none when the directory does not exist.
inline std::vector<std::pair<std::string, std::string>> seed_programs_000_001(const std::filesystem::path& dir) {
  std::vector<std::pair<std::string, std::string>> programs;
  if (!std::filesystem::exists(dir)) return programs;
  for (const char* seed : {"000", "001"})
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string file = entry.path().filename().string();
      if (!file.starts_with(seed)) continue;
      std::string text = read_file(entry.path());
      if (file.starts_with("001")) text = restore_ty_comments(text);
      int k = 0;
      for (const std::string& program : embedded_programs(text))
        programs.emplace_back(std::string(seed) + "_" + std::to_string(k++), program);
    }
  return programs;
}

/// The first seed's cell, dense -> split -> sigmoid/tanh/exp -> multiply/add, as the test
/// programs write it (graph normal form, projections bound), at batch `batch`.
inline std::string seed_cell_relay(int batch = 1) {
  const std::string b = std::to_string(batch);
  return "def @main(%x: Tensor[(" + b +
         ", 10), float32], %w: Tensor[(30, 10), float32]) {\n"
         "  %0 = nn.dense(%x, %w, units=None) /* ty=Tensor[(" +
         b +
         ", 30), float32] */;\n"
         "  %1 = split(%0, indices_or_sections=3, axis=1);\n"
         "  %2 = %1.0;\n  %3 = sigmoid(%2);\n  %4 = %1.1;\n  %5 = tanh(%4);\n  %6 = %1.2;\n  %7 = exp(%6);\n"
         "  %8 = multiply(%5, %7);\n  add(%3, %8)\n}\n";
}

// Seed 002 quotes a block of bindings (`%20 = ...;` up to `%73 = ...;`) that uses names bound
// outside it: wrap it in a function whose parameters are those names, returning the last one.
// `param_types` gives the parameters' types in order of first use (none: untyped).
inline std::string wrap_binding_block(const std::string& t, const std::vector<std::string>& param_types = {}) {
  std::istringstream in(t);
  std::string line, body, last;
  std::vector<std::string> defined, params;
  auto name_at = [](const std::string& s, std::size_t p) {
    std::size_t e = p + 1;
    while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
    return s.substr(p + 1, e - p - 1);
  };
  while (std::getline(in, line)) {
    const std::size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] != '%' || line.find(" = ") == std::string::npos) {
      if (!body.empty()) break;
      continue;
    }
    std::string code = line.substr(b);
    for (std::size_t c; (c = code.find("/*")) != std::string::npos;) code.erase(c, code.find("*/", c) + 2 - c);
    const std::string lhs = name_at(code, 0);
    for (std::size_t p = code.find('%', 1); p != std::string::npos; p = code.find('%', p + 1)) {
      const std::string n = name_at(code, p);
      if (std::find(defined.begin(), defined.end(), n) == defined.end() &&
          std::find(params.begin(), params.end(), n) == params.end())
        params.push_back(n);
    }
    defined.push_back(lhs);
    last = lhs;
    body += line.substr(b) + "\n";
  }
  std::string fn = "fn (";
  for (std::size_t i = 0; i < params.size(); ++i)
    fn += (i ? ", %" : "%") + params[i] + (i < param_types.size() ? ": " + param_types[i] : std::string());
  return fn + ") {\n" + body + "%" + last + "\n}\n";
}

/// Seed 002's attention block as a function of %19 (the int32 QKV product it dequantizes,
/// [3, 3072, 768]) and %input_mask ([8, 384] int32); its two meta constants have no metadata
/// section, so they become inputs of the generated code.
inline std::string seed_002_block(const std::string& seed_text) {
  return wrap_binding_block(seed_text, {"Tensor[(3, 3072, 768), int32]", "Tensor[(8, 384), int32]"});
}

}  // namespace fuse::test
