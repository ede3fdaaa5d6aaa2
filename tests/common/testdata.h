// The llama.cpp oracle in ../shared/testdata: token ids and the logits
// llama.cpp computed for them (see its README).
#pragma once

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace latte::test {

inline const std::string kTestdata = LATTE_TESTDATA_DIR;
inline constexpr int kTestdataTokens = 160;
inline constexpr int kTestdataVocab = 512;

// A tag unique to this test process, for temporary file names (ctest runs
// test processes side by side).
inline const std::string& process_tag() {
  static const std::string tag = std::to_string(std::random_device{}()) + std::to_string(std::random_device{}());
  return tag;
}

// BOS then 159 ids (positions 0..159).
inline std::vector<std::int32_t> testdata_tokens() {
  std::ifstream in(kTestdata + "/tokens.txt");
  std::vector<std::int32_t> ids;
  std::string item;
  while (std::getline(in, item, ',')) ids.push_back(std::stoi(item));
  return ids;
}

// llama.cpp's logits for `name` ("tiny-dense"): float32 [160, 512]; empty if
// the file is short.
inline std::vector<float> testdata_logits(const std::string& name) {
  std::ifstream in(kTestdata + "/" + name + ".logits.f32", std::ios::binary);
  std::vector<float> v(static_cast<std::size_t>(kTestdataTokens) * kTestdataVocab);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  if (in.gcount() != static_cast<std::streamsize>(v.size() * 4)) v.clear();
  return v;
}

}  // namespace latte::test
