// GGUF reader and writer: round trips through the writer, the two llama.cpp
// files in ../shared/testdata, and one test per validation failure.
#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "quant/fp16.h"
#include "quant/ggml_blocks.h"
#include "runtime/error.h"
#include "runtime/gguf/gguf_file.h"
#include "tools/gguf_writer.h"
#if LATTE_TEST_POSIX
#include "tests/common/fifo_util.h"
#endif
#include "tests/common/testdata.h"

namespace latte {
namespace {

using V = GgufWriter::Value;

std::string testdata(const char* name) { return std::string(LATTE_TESTDATA_DIR) + "/" + name; }

std::string temp_path(const char* stem) {
  return ::testing::TempDir() + stem + "_" + test::process_tag() + ".gguf";
}

// Runs `fn`, expecting a latte::Error with `status` whose message contains
// every one of `parts`.
void expect_error(const std::function<void()>& fn, Status status,
                  std::initializer_list<const char*> parts) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << status_name(e.status()) << ": " << e.what();
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
        << "message '" << e.what() << "' lacks '" << p << "'";
    return;
  }
  ADD_FAILURE() << "no latte::Error thrown";
}

void expect_parse_error(const GgufWriter& w, Status status, std::initializer_list<const char*> parts) {
  std::vector<std::uint8_t> bytes = w.to_bytes();
  expect_error([&] { GgufFile::from_memory(bytes.data(), bytes.size()); }, status, parts);
}

std::vector<std::uint8_t> f32_bytes(std::initializer_list<float> v) {
  std::vector<std::uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.begin(), b.size());
  return b;
}

// A small valid file with metadata of several kinds and two tensors.
GgufWriter small_model() {
  GgufWriter w;
  w.add_string("general.architecture", "deepseek2");
  w.add_u32("deepseek2.block_count", 2);
  std::vector<std::string> toks = {"a", "b", "<s>"};
  w.add_string_array("tokenizer.ggml.tokens", toks);
  const float norm[] = {1.f, 2.f, 3.f, 4.f};
  w.add_tensor_f32("output_norm.weight", {4}, norm);
  w.add_tensor("token_embd.weight", GgmlType::Q8_0, {32, 2}, std::vector<std::uint8_t>(68, 7));
  return w;
}

// A writer whose checks are off, for broken files.
GgufWriter unchecked() {
  GgufWriter w;
  w.faults().unchecked = true;
  return w;
}

// ============================================================ round trips

TEST(GgufWriterRoundTrip, EveryScalarType) {
  GgufWriter w;
  w.add_u8("t.u8", 200);
  w.add_i8("t.i8", -100);
  w.add_u16("t.u16", 60000);
  w.add_i16("t.i16", -30000);
  w.add_u32("t.u32", 4000000000u);
  w.add_i32("t.i32", -2000000000);
  w.add_f32("t.f32", 1.5f);
  w.add_bool("t.bool", true);
  w.add_string("t.string", "héllo");
  w.add_u64("t.u64", 0xfedcba9876543210ull);
  w.add_i64("t.i64", -0x123456789abcll);
  w.add_f64("t.f64", -2.25);
  w.add_string("t.empty", "");
  std::vector<std::uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());

  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.kv_count(), 13u);
  EXPECT_EQ(f.tensor_count(), 0u);
  EXPECT_EQ(f.kv(0).key, "t.u8");  // file order kept
  EXPECT_EQ(f.kv(0).value.type, GgufValueType::u8);
  EXPECT_EQ(f.require_u32("t.u8"), 200u);
  EXPECT_EQ(f.require_i32("t.i8"), -100);
  EXPECT_EQ(f.require_u32("t.u16"), 60000u);
  EXPECT_EQ(f.require_i32("t.i16"), -30000);
  EXPECT_EQ(f.require_u32("t.u32"), 4000000000u);
  EXPECT_EQ(f.require_i32("t.i32"), -2000000000);
  EXPECT_EQ(f.require_f32("t.f32"), 1.5f);
  EXPECT_TRUE(f.require_bool("t.bool"));
  EXPECT_EQ(f.require_string("t.string"), "héllo");
  EXPECT_EQ(f.require_u64("t.u64"), 0xfedcba9876543210ull);
  EXPECT_EQ(f.require_i64("t.i64"), -0x123456789abcll);
  EXPECT_EQ(f.require_f32("t.f64"), -2.25f);
  EXPECT_EQ(*f.require("t.f64").as_f64(), -2.25);
  EXPECT_EQ(f.require_string("t.empty"), "");
  const char* types[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "u64", "i64", "f64"};
  for (int i = 0; i < 12; ++i)
    EXPECT_STREQ(gguf_value_type_name(f.kv(i).value.type), types[i]);
}

TEST(GgufWriterRoundTrip, IntegerAccessorsConvertWhatFits) {
  GgufWriter w;
  w.add_u8("small", 7);
  w.add_i64("i64_fits", 123456);
  w.add_u64("u64_big", 1ull << 40);
  w.add_i32("neg", -1);
  std::vector<std::uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  EXPECT_EQ(f.require_u64("small"), 7u);
  EXPECT_EQ(f.require_i64("small"), 7);
  EXPECT_EQ(f.require_u32("i64_fits"), 123456u);
  EXPECT_EQ(f.require_i64("u64_big"), 1ll << 40);
  EXPECT_EQ(f.require_i32("neg"), -1);
  EXPECT_EQ(f.require_i64("neg"), -1);
}

TEST(GgufWriterRoundTrip, DefaultsForAbsentKeys) {
  std::vector<std::uint8_t> bytes = small_model().to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  EXPECT_FALSE(f.has("nope"));
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(f.get_u32("nope", 5), 5u);
  EXPECT_EQ(f.get_u64("nope", 6), 6u);
  EXPECT_EQ(f.get_i32("nope", -7), -7);
  EXPECT_EQ(f.get_i64("nope", -8), -8);
  EXPECT_EQ(f.get_f32("nope", 0.5f), 0.5f);
  EXPECT_EQ(f.get_bool("nope", true), true);
  EXPECT_EQ(f.get_string("nope", "dflt"), "dflt");
  EXPECT_EQ(f.get_u32("deepseek2.block_count", 5), 2u);
  EXPECT_EQ(f.get_string("general.architecture", ""), "deepseek2");
}

TEST(GgufWriterRoundTrip, EveryArrayType) {
  GgufWriter w;
  const std::uint8_t u8s[] = {1, 2, 255};
  const std::int8_t i8s[] = {-1, 2, -128};
  const std::uint16_t u16s[] = {1, 65535};
  const std::int16_t i16s[] = {-32768, 5};
  const std::uint32_t u32s[] = {1, 4000000000u};
  const std::int32_t i32s[] = {-5, 6, 7};
  const float f32s[] = {0.5f, -1.25f};
  const bool bools[] = {true, false, true};
  const std::uint64_t u64s[] = {1ull << 50};
  const std::int64_t i64s[] = {-(1ll << 50), 3};
  const double f64s[] = {0.125, -8.0};
  const std::string strs[] = {"he", "", "llo wörld"};
  w.add("a.u8", V::array_u8(u8s));
  w.add("a.i8", V::array_i8(i8s));
  w.add("a.u16", V::array_u16(u16s));
  w.add("a.i16", V::array_i16(i16s));
  w.add("a.u32", V::array_u32(u32s));
  w.add("a.i32", V::array_i32(i32s));
  w.add("a.f32", V::array_f32(f32s));
  w.add("a.bool", V::array_bool(bools));
  w.add("a.u64", V::array_u64(u64s));
  w.add("a.i64", V::array_i64(i64s));
  w.add("a.f64", V::array_f64(f64s));
  w.add("a.string", V::array_string(strs));
  w.add("a.empty", V::array_i32({}));
  std::vector<std::uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());

  EXPECT_EQ(f.get_i32_array("a.u8"), (std::vector<std::int32_t>{1, 2, 255}));
  EXPECT_EQ(f.get_i32_array("a.i8"), (std::vector<std::int32_t>{-1, 2, -128}));
  EXPECT_EQ(f.get_u32_array("a.u16"), (std::vector<std::uint32_t>{1, 65535}));
  EXPECT_EQ(f.get_i32_array("a.i16"), (std::vector<std::int32_t>{-32768, 5}));
  EXPECT_EQ(f.get_u32_array("a.u32"), (std::vector<std::uint32_t>{1, 4000000000u}));
  EXPECT_EQ(f.get_i32_array("a.i32"), (std::vector<std::int32_t>{-5, 6, 7}));
  EXPECT_EQ(f.get_f32_array("a.f32"), (std::vector<float>{0.5f, -1.25f}));
  EXPECT_EQ(f.get_i64_array("a.u64"), (std::vector<std::int64_t>{1ll << 50}));
  EXPECT_EQ(f.get_i64_array("a.i64"), (std::vector<std::int64_t>{-(1ll << 50), 3}));
  EXPECT_EQ(f.get_f32_array("a.f64"), (std::vector<float>{0.125f, -8.f}));
  EXPECT_EQ(f.get_string_array("a.string"), (std::vector<std::string_view>{"he", "", "llo wörld"}));
  EXPECT_TRUE(f.get_i32_array("a.empty").empty());

  const GgufValue& b = f.require_array("a.bool");
  EXPECT_EQ(b.elem_type, GgufValueType::boolean);
  EXPECT_EQ(b.count, 3u);
  std::vector<bool> got;
  GgufArrayElements it = b.elements();
  GgufValue e;
  while (it.next(e)) got.push_back(*e.as_bool());
  EXPECT_EQ(got, (std::vector<bool>{true, false, true}));
}

TEST(GgufWriterRoundTrip, NestedArrays) {
  GgufWriter w;
  const std::int32_t r0[] = {1, 2};
  const std::int32_t r1[] = {3};
  const std::string s0[] = {"x", "yz"};
  std::vector<V> rows = {V::array_i32(r0), V::array_i32(r1), V::array_string(s0)};
  w.add("nested", V::array(GgufValueType::array, rows));
  std::vector<V> inner = {V::array(GgufValueType::array, rows)};
  w.add("nested2", V::array(GgufValueType::array, inner));
  w.add_u32("after", 9);  // parsing resumes correctly after nested arrays
  std::vector<std::uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());

  const GgufValue& a = f.require_array("nested");
  EXPECT_EQ(a.elem_type, GgufValueType::array);
  EXPECT_EQ(a.count, 3u);
  GgufArrayElements it = a.elements();
  GgufValue row;
  ASSERT_TRUE(it.next(row));
  EXPECT_EQ(row.elem_type, GgufValueType::i32);
  EXPECT_EQ(row.count, 2u);
  std::vector<std::int64_t> vals;
  GgufArrayElements rit = row.elements();
  GgufValue x;
  while (rit.next(x)) vals.push_back(*x.as_i64());
  EXPECT_EQ(vals, (std::vector<std::int64_t>{1, 2}));
  ASSERT_TRUE(it.next(row));
  EXPECT_EQ(row.count, 1u);
  ASSERT_TRUE(it.next(row));
  EXPECT_EQ(row.elem_type, GgufValueType::string);
  GgufArrayElements sit = row.elements();
  ASSERT_TRUE(sit.next(x));
  EXPECT_EQ(*x.as_string(), "x");
  ASSERT_TRUE(sit.next(x));
  EXPECT_EQ(*x.as_string(), "yz");
  EXPECT_FALSE(sit.next(x));
  EXPECT_FALSE(it.next(row));
  EXPECT_EQ(f.require_array("nested2").count, 1u);
  EXPECT_EQ(f.require_u32("after"), 9u);
}

TEST(GgufWriterRoundTrip, TensorsInPlace) {
  GgufWriter w;
  std::vector<float> emb(64 * 3);
  for (std::size_t i = 0; i < emb.size(); ++i) emb[i] = static_cast<float>(i) * 0.25f;
  w.add_tensor_f32("token_embd.weight", {64, 3}, emb);
  std::vector<std::uint8_t> q8(34 * 2 * 2 * 3);
  for (std::size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<std::uint8_t>(i * 13);
  w.add_tensor("blk.0.attn_k_b.weight", GgmlType::Q8_0, {64, 2, 3}, q8);
  std::vector<std::uint8_t> q4k(144 * 2);
  w.add_tensor("blk.0.ffn_down.weight", GgmlType::Q4_K, {256, 1, 1, 2}, q4k);
  w.add_tensor("f16.weight", GgmlType::F16, {3}, std::vector<std::uint8_t>(6, 1));
  std::vector<std::uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());

  ASSERT_EQ(f.tensor_count(), 4u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  const GgufTensor& e = f.require_tensor("token_embd.weight", {64, 3});
  EXPECT_EQ(e.type, GgmlType::F32);
  EXPECT_EQ(e.n_elements, 192u);
  EXPECT_EQ(e.n_bytes, 768u);
  EXPECT_EQ(e.row_bytes, 256u);
  EXPECT_EQ(e.data, bytes.data() + f.data_offset() + e.offset);  // in place, no copy
  EXPECT_EQ(std::memcmp(e.data, emb.data(), 768), 0);
  const GgufTensor& k = f.require_tensor("blk.0.attn_k_b.weight", {64, 2, 3});
  EXPECT_EQ(k.type, GgmlType::Q8_0);
  EXPECT_EQ(k.n_dims, 3u);
  EXPECT_EQ(k.n_bytes, q8.size());
  EXPECT_EQ(k.row_bytes, 68u);
  EXPECT_EQ(k.offset % 32, 0u);
  EXPECT_EQ(std::memcmp(k.data, q8.data(), q8.size()), 0);
  EXPECT_EQ(k.shape_string(), "[64, 2, 3]");
  const GgufTensor& d = f.require_tensor("blk.0.ffn_down.weight");
  EXPECT_EQ(d.type, GgmlType::Q4_K);
  EXPECT_EQ(d.n_dims, 4u);
  EXPECT_EQ(d.ne[3], 2u);
  EXPECT_EQ(d.n_bytes, 288u);
  EXPECT_EQ(f.require_tensor("f16.weight").n_bytes, 6u);
  EXPECT_EQ(f.tensor(0).name, "token_embd.weight");  // file order
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
}

TEST(GgufWriterRoundTrip, FileOnDiskWithAlignment) {
  GgufWriter w = small_model();
  w.set_alignment(64);
  const std::string path = temp_path("gguf_align");
  w.write_file(path);
  {
    GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.path(), path);
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.require_u32("general.alignment"), 64u);
    EXPECT_EQ(f.data_offset() % 64, 0u);
    for (const GgufTensor& t : f.tensors())
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % 64, 0u) << t.name;  // mmap is page aligned
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens"),
              (std::vector<std::string_view>{"a", "b", "<s>"}));
    // Same bytes as to_bytes().
    std::vector<std::uint8_t> mem = w.to_bytes();
    ASSERT_EQ(f.file_size(), mem.size());
    EXPECT_EQ(std::memcmp(f.file_data(), mem.data(), mem.size()), 0);

    // Moving keeps the mapping and the pointers.
    const std::uint8_t* p = f.require_tensor("output_norm.weight").data;
    GgufFile g = std::move(f);
    EXPECT_EQ(g.require_tensor("output_norm.weight").data, p);
    float v[4];
    std::memcpy(v, p, sizeof v);
    EXPECT_EQ(v[3], 4.f);
  }
  std::remove(path.c_str());
}

TEST(GgufWriterRoundTrip, OwnedBytesAndEmptyFile) {
  GgufFile f = GgufFile::from_bytes(small_model().to_bytes());
  EXPECT_EQ(f.require_tensor("token_embd.weight", {32, 2}).n_bytes, 68u);
  GgufFile e = GgufFile::from_bytes(GgufWriter().to_bytes());
  EXPECT_EQ(e.kv_count(), 0u);
  EXPECT_EQ(e.tensor_count(), 0u);
}

TEST(GgufWriterRoundTrip, Version2IsRead) {
  GgufWriter w = small_model();
  w.faults().version = 2;
  std::vector<std::uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.tensor_count(), 2u);
}

TEST(GgufWriterRoundTrip, WriterRefusesBadInput) {
  GgufWriter w;
  w.add_u32("k", 1);
  expect_error([&] { w.add_u32("k", 2); }, Status::invalid_argument, {"duplicate key 'k'"});
  expect_error([&] { w.add_tensor("t", GgmlType::F32, {4}, std::vector<std::uint8_t>(15)); },
               Status::invalid_argument, {"'t'", "15 bytes given, 16 needed"});
  expect_error([&] { w.add_tensor("q", GgmlType::Q8_0, {16}, std::vector<std::uint8_t>(17)); },
               Status::invalid_argument, {"'q'", "block size"});
  expect_error([&] { w.set_alignment(48); }, Status::invalid_argument, {"48"});
  expect_error([&] { w.add_tensor_raw("r", 0, {1}, {}); }, Status::invalid_argument, {"unchecked"});
  const std::int32_t one[] = {1};
  std::vector<V> mixed = {V::array_i32(one), V::u8(1)};
  expect_error([&] { V::array(GgufValueType::array, mixed); }, Status::invalid_argument, {"u8"});
}

// ============================================================ the Python writer

#if LATTE_TEST_POSIX  // runs python3 through a POSIX shell
// scripts/latte_gguf.py (which exports the shipped model) read by this
// reader, not by its own: scripts/check_gguf_py.py reads its output back
// with the Python reader, which shares the writer's format tables, so a
// wrong one (say, f32 metadata big-endian) passed there. Every scalar type,
// arrays, alignment 64, and F32, F16 and Q8_0 tensors from numpy arrays.
TEST(GgufPythonWriter, ItsFilesReadBackInTheCppReader) {
  const std::string py = ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  // A prerequisite, as ../shared/testdata is: a missing numpy fails the
  // test rather than passing it unseen (scripts/setup.sh installs it).
  if (std::system((py + " -c 'import numpy' 2>/dev/null").c_str()) != 0)
    FAIL() << py << " with numpy is needed (scripts/setup.sh installs python3-numpy)";
  const std::string script = temp_path("py_writer") + ".py", out = temp_path("py_writer");
  std::ofstream(script) << "import sys\n"
                           "sys.path.insert(0, '" LATTE_SOURCE_DIR "/scripts')\n"
                           "import numpy as np\n"
                           "import latte_gguf as g\n"
                           "VT = g.VT\n"
                           "w = g.GGUFWriter(sys.argv[1], arch='test', alignment=64)\n"
                           "w.add_uint8('u8', 250); w.add_int8('i8', -100); w.add_uint16('u16', 65000)\n"
                           "w.add_int16('i16', -30000); w.add_uint32('u32', 4000000000); w.add_int32('i32', -2000000000)\n"
                           "w.add_float32('f32', -1.625); w.add_bool('b', True); w.add_string('s', 'h\\u00e9llo')\n"
                           "w.add_uint64('u64', 2 ** 63 + 5); w.add_int64('i64', -2 ** 62); w.add_float64('f64', 1e-300)\n"
                           "w.add_array('as', ['a b', '', '\\u00e9'], VT.STRING)\n"
                           "w.add_array('ai', [1, -2, 3], VT.INT32)\n"
                           "w.add_array('af', [0.25, -1.5], VT.FLOAT32)\n"
                           "w.add_array('ab', [True, False], VT.BOOL)\n"
                           "w.add_array('au64', [2 ** 40, 7], VT.UINT64)\n"
                           "v = ((np.arange(320) * 73 % 255) - 127).astype(np.float32) / 16\n"
                           "w.add_tensor('t32', v[:192].reshape(3, 64))\n"
                           "w.add_tensor('t16', v[:64].reshape(2, 4, 8), g.GT.F16)\n"
                           "w.add_tensor('tq', v.reshape(5, 64) * np.float32(1.37), g.GT.Q8_0)\n"
                           "w.write()\n";
  ASSERT_EQ(std::system((py + " " + script + " " + out).c_str()), 0) << script;
  const GgufFile f = GgufFile::open(out);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.require_string("general.architecture"), "test");
  const struct { const char* key; GgufValueType type; } types[] = {
      {"u8", GgufValueType::u8},   {"i8", GgufValueType::i8},     {"u16", GgufValueType::u16},
      {"i16", GgufValueType::i16}, {"u32", GgufValueType::u32},   {"i32", GgufValueType::i32},
      {"f32", GgufValueType::f32}, {"b", GgufValueType::boolean}, {"s", GgufValueType::string},
      {"u64", GgufValueType::u64}, {"i64", GgufValueType::i64},   {"f64", GgufValueType::f64}};
  for (const auto& t : types) EXPECT_EQ(f.require(t.key).type, t.type) << t.key;
  EXPECT_EQ(f.require_u32("u8"), 250u);
  EXPECT_EQ(f.require_i32("i8"), -100);
  EXPECT_EQ(f.require_u32("u16"), 65000u);
  EXPECT_EQ(f.require_i32("i16"), -30000);
  EXPECT_EQ(f.require_u32("u32"), 4000000000u);
  EXPECT_EQ(f.require_i32("i32"), -2000000000);
  EXPECT_EQ(f.require_f32("f32"), -1.625f);
  EXPECT_TRUE(f.require_bool("b"));
  EXPECT_EQ(f.require_string("s"), "h\xC3\xA9llo");
  EXPECT_EQ(f.require_u64("u64"), (1ull << 63) + 5);
  EXPECT_EQ(f.require_i64("i64"), -(1ll << 62));
  EXPECT_EQ(*f.require("f64").as_f64(), 1e-300);
  EXPECT_EQ(f.get_string_array("as"), (std::vector<std::string_view>{"a b", "", "\xC3\xA9"}));
  EXPECT_EQ(f.get_i32_array("ai"), (std::vector<std::int32_t>{1, -2, 3}));
  EXPECT_EQ(f.get_f32_array("af"), (std::vector<float>{0.25f, -1.5f}));
  EXPECT_EQ(f.require_array("ab").elem_type, GgufValueType::boolean);
  EXPECT_EQ(f.require_array("ab").count, 2u);
  EXPECT_EQ(f.get_i64_array("au64"), (std::vector<std::int64_t>{1ll << 40, 7}));
  // The tensors: shapes as ggml's ne, the values the arrays held.
  std::vector<float> v(320);
  for (int i = 0; i < 320; ++i) v[i] = static_cast<float>((i * 73 % 255) - 127) / 16.f;
  const GgufTensor& t32 = f.require_tensor("t32", {64, 3});
  ASSERT_EQ(t32.type, GgmlType::F32);
  EXPECT_EQ(std::memcmp(t32.data, v.data(), 192 * 4), 0);
  const GgufTensor& t16 = f.require_tensor("t16", {8, 4, 2});
  ASSERT_EQ(t16.type, GgmlType::F16);
  for (int i = 0; i < 64; ++i) {
    std::uint16_t h;
    std::memcpy(&h, t16.data + 2 * i, 2);
    EXPECT_EQ(fp16_to_f32(h), v[i]) << i;
  }
  const GgufTensor& tq = f.require_tensor("tq", {64, 5});
  ASSERT_EQ(tq.type, GgmlType::Q8_0);
  std::vector<float> x(320);
  for (int i = 0; i < 320; ++i) x[i] = v[i] * 1.37f;
  std::vector<std::uint8_t> want(ggml_row_bytes(GgmlType::Q8_0, 320));
  quantize_row_ref(GgmlType::Q8_0, x.data(), want.data(), 320);  // llama.cpp's rounding, as the script's
  ASSERT_EQ(tq.n_bytes, want.size());
  EXPECT_EQ(std::memcmp(tq.data, want.data(), want.size()), 0);
  for (const GgufTensor& t : f.tensors()) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % 64, 0u) << t.name;
  std::remove(script.c_str());
  std::remove(out.c_str());
}
#endif

// ============================================================ llama.cpp files

TEST(GgufTestdata, TinyDense) {
  GgufFile f = GgufFile::open(testdata("tiny-dense.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.kv_count(), 36u);
  EXPECT_EQ(f.tensor_count(), 29u);
  EXPECT_EQ(f.require_string("general.architecture"), "deepseek2");
  EXPECT_EQ(f.require_u32("deepseek2.block_count"), 2u);
  EXPECT_EQ(f.require_u32("deepseek2.embedding_length"), 256u);
  EXPECT_EQ(f.require_u32("deepseek2.attention.head_count"), 8u);
  EXPECT_EQ(f.require_u32("deepseek2.attention.head_count_kv"), 1u);
  EXPECT_EQ(f.require_u32("deepseek2.attention.q_lora_rank"), 96u);
  EXPECT_EQ(f.require_u32("deepseek2.attention.kv_lora_rank"), 64u);
  EXPECT_EQ(f.require_u32("deepseek2.attention.key_length_mla"), 48u);
  EXPECT_EQ(f.require_u32("deepseek2.attention.value_length_mla"), 32u);
  EXPECT_EQ(f.require_u32("deepseek2.rope.dimension_count"), 16u);
  EXPECT_EQ(f.require_u32("deepseek2.feed_forward_length"), 512u);
  EXPECT_EQ(f.require_u32("deepseek2.rope.scaling.original_context_length"), 128u);
  EXPECT_EQ(f.require_string("deepseek2.rope.scaling.type"), "yarn");
  EXPECT_FLOAT_EQ(f.require_f32("deepseek2.rope.scaling.factor"), 4.f);
  EXPECT_FLOAT_EQ(f.require_f32("deepseek2.rope.scaling.yarn_log_multiplier"), 0.0707f);
  EXPECT_FLOAT_EQ(f.require_f32("deepseek2.rope.freq_base"), 10000.f);
  EXPECT_EQ(f.get_u32("deepseek2.expert_count", 0), 0u);
  EXPECT_EQ(f.require_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.require_string("tokenizer.ggml.pre"), "deepseek-llm");
  EXPECT_EQ(f.require_u32("tokenizer.ggml.bos_token_id"), 510u);
  EXPECT_EQ(f.require_u32("tokenizer.ggml.eos_token_id"), 511u);
  EXPECT_TRUE(f.require_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_eos_token", true));

  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "\xc4\x80");  // byte-level BPE: byte 0 is U+0100
  auto types = f.get_i32_array("tokenizer.ggml.token_type");
  EXPECT_EQ(types.size(), 512u);
  EXPECT_EQ(types[0], 1);
  auto merges = f.get_string_array("tokenizer.ggml.merges");
  EXPECT_EQ(merges.size(), 254u);
  EXPECT_EQ(merges[0], "h e");

  struct Want { const char* name; std::vector<std::uint64_t> ne; };
  const Want want[] = {
      {"token_embd.weight", {256, 512}},     {"output_norm.weight", {256}},
      {"output.weight", {256, 512}},         {"blk.0.attn_norm.weight", {256}},
      {"blk.0.attn_q_a.weight", {256, 96}},  {"blk.0.attn_q_a_norm.weight", {96}},
      {"blk.0.attn_q_b.weight", {96, 384}},  {"blk.0.attn_kv_a_mqa.weight", {256, 80}},
      {"blk.0.attn_kv_a_norm.weight", {64}}, {"blk.1.attn_k_b.weight", {32, 64, 8}},
      {"blk.1.attn_v_b.weight", {64, 32, 8}}, {"blk.1.attn_output.weight", {256, 256}},
      {"blk.1.ffn_gate.weight", {256, 512}}, {"blk.1.ffn_up.weight", {256, 512}},
      {"blk.1.ffn_down.weight", {512, 256}}, {"blk.1.ffn_norm.weight", {256}},
  };
  for (const Want& w : want) {
    const GgufTensor& t = f.require_tensor(w.name, w.ne);
    EXPECT_EQ(t.type, GgmlType::F32) << w.name;
    EXPECT_EQ(t.n_bytes, t.n_elements * 4) << w.name;
    EXPECT_GE(t.data, f.file_data() + f.data_offset());
    EXPECT_LE(t.data + t.n_bytes, f.file_data() + f.file_size());
  }
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.attn_kv_b.weight"), nullptr);
  // Weights are real numbers (read in place from the mapping).
  const GgufTensor& norm = f.require_tensor("output_norm.weight");
  for (std::uint64_t i = 0; i < norm.n_elements; ++i) {
    float v;
    std::memcpy(&v, norm.data + 4 * i, 4);
    ASSERT_TRUE(std::isfinite(v));
  }
  // The last tensor ends at the end of the file.
  const GgufTensor& last = f.tensor(f.tensor_count() - 1);
  EXPECT_EQ(f.data_offset() + last.offset + last.n_bytes, f.file_size());
}

TEST(GgufTestdata, TinyMoeV2Lite) {
  GgufFile f = GgufFile::open(testdata("tiny-moe-v2-lite.gguf"));
  EXPECT_EQ(f.tensor_count(), 44u);
  EXPECT_EQ(f.require_string("general.architecture"), "deepseek2");
  EXPECT_EQ(f.require_u32("deepseek2.block_count"), 3u);
  EXPECT_EQ(f.require_u32("deepseek2.leading_dense_block_count"), 1u);
  EXPECT_EQ(f.require_u32("deepseek2.expert_count"), 8u);
  EXPECT_EQ(f.require_u32("deepseek2.expert_used_count"), 3u);
  EXPECT_EQ(f.require_u32("deepseek2.expert_shared_count"), 2u);
  EXPECT_EQ(f.require_u32("deepseek2.expert_feed_forward_length"), 96u);
  EXPECT_EQ(f.require_u32("deepseek2.expert_gating_func"), 1u);
  EXPECT_FALSE(f.require_bool("deepseek2.expert_weights_norm"));
  EXPECT_FLOAT_EQ(f.require_f32("deepseek2.expert_weights_scale"), 1.f);
  EXPECT_EQ(f.get_u32("deepseek2.attention.q_lora_rank", 99), 0u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 512u);

  EXPECT_EQ(f.find_tensor("blk.0.attn_q_a.weight"), nullptr);
  f.require_tensor("blk.0.attn_q.weight", {256, 384});
  f.require_tensor("blk.0.ffn_gate.weight", {256, 512});
  for (int l = 1; l <= 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    f.require_tensor(b + "ffn_gate_inp.weight", {256, 8});
    f.require_tensor(b + "ffn_gate_exps.weight", {256, 96, 8});
    f.require_tensor(b + "ffn_up_exps.weight", {256, 96, 8});
    f.require_tensor(b + "ffn_down_exps.weight", {96, 256, 8});
    f.require_tensor(b + "ffn_gate_shexp.weight", {256, 192});
    f.require_tensor(b + "ffn_up_shexp.weight", {256, 192});
    f.require_tensor(b + "ffn_down_shexp.weight", {192, 256});
    EXPECT_EQ(f.find_tensor(b + "ffn_gate.weight"), nullptr);
  }
  for (const GgufTensor& t : f.tensors()) EXPECT_EQ(t.type, GgmlType::F32) << t.name;
}

// GgufLoad::read gives the same file as the mapping, in a private copy
// starting on a 2 MiB boundary (where huge pages can back it).
TEST(GgufTestdata, ReadIntoMemoryEqualsTheMapping) {
  GgufFile mapped = GgufFile::open(testdata("tiny-moe-v2-lite.gguf"));
  GgufFile read = GgufFile::open(testdata("tiny-moe-v2-lite.gguf"), GgufLoad::read);
  ASSERT_EQ(read.file_size(), mapped.file_size());
  EXPECT_NE(read.file_data(), mapped.file_data());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(read.file_data()) % (std::uintptr_t{2} << 20), 0u);
  EXPECT_EQ(std::memcmp(read.file_data(), mapped.file_data(), mapped.file_size()), 0);
  ASSERT_EQ(read.tensor_count(), mapped.tensor_count());
  for (std::size_t i = 0; i < read.tensor_count(); ++i) {
    EXPECT_EQ(read.tensor(i).name, mapped.tensor(i).name);
    EXPECT_EQ(read.tensor(i).data - read.file_data(), mapped.tensor(i).data - mapped.file_data());
  }
  expect_error([] { GgufFile::open("/nonexistent/dir/x.gguf", GgufLoad::read); }, Status::io_error,
               {"/nonexistent/dir/x.gguf", "cannot open"});
}

TEST(GgufTestdata, TruncatedRealFileIsRefused) {
  GgufFile f = GgufFile::open(testdata("tiny-dense.gguf"));
  // Cut inside the token array, inside the tensor infos, inside the data.
  for (std::size_t cut : {std::size_t{2000}, std::size_t{14000}, f.file_size() - 1})
    expect_error([&] { GgufFile::from_memory(f.file_data(), cut); }, Status::bad_file, {"<memory>"});
}

// ============================================================ validation

TEST(GgufValidation, OpenMissingFileIsIoError) {
  expect_error([] { GgufFile::open("/nonexistent/dir/x.gguf"); }, Status::io_error,
               {"/nonexistent/dir/x.gguf", "cannot open"});
  expect_error([] { GgufFile::open("/tmp"); }, Status::io_error, {"not a regular file"});
}

#if LATTE_TEST_POSIX  // a FIFO
// A FIFO (or a device) named as the model: refused, where open() without
// O_NONBLOCK waited for a writer forever and hung the caller's thread before
// the regular-file check. In a child: a hang there is an alarm, not a stuck
// test run.
TEST(GgufValidation, FifoIsRefusedWithoutBlocking) {
  const test::TempFifo fifo(temp_path("gguf_fifo"));
  for (GgufLoad how : {GgufLoad::map, GgufLoad::read}) {
    test::expect_child_exits_0_unblocked([&] {
      try {
        GgufFile::open(fifo.path(), how);
      } catch (const Error& e) {
        return e.status() == Status::io_error && std::string(e.what()).find("not a regular file") != std::string::npos
                   ? 0
                   : 2;
      }
      return 3;
    });
  }
}
#endif

TEST(GgufValidation, EmptyFile) {
  const std::string path = temp_path("gguf_empty");
  { std::FILE* fp = std::fopen(path.c_str(), "wb"); ASSERT_NE(fp, nullptr); std::fclose(fp); }
  expect_error([&] { GgufFile::open(path); }, Status::bad_file, {"too small"});
  expect_error([&] { GgufFile::open(path, GgufLoad::read); }, Status::bad_file, {"too small"});
  std::remove(path.c_str());
  expect_error([] { GgufFile::from_memory(nullptr, 0); }, Status::bad_file, {"too small"});
}

TEST(GgufValidation, BadMagic) {
  GgufWriter w = small_model();
  w.faults().magic = 0x46554746;  // "FGUF"
  expect_parse_error(w, Status::bad_file, {"bad magic"});
}

TEST(GgufValidation, Version1Refused) {
  GgufWriter w = small_model();
  w.faults().version = 1;
  expect_parse_error(w, Status::unsupported, {"version 1"});
}

TEST(GgufValidation, UnknownVersionAndBigEndianRefused) {
  GgufWriter w = small_model();
  w.faults().version = 4;
  expect_parse_error(w, Status::unsupported, {"version 4"});
  w.faults().version = 0x03000000;  // a big-endian v3 file read little-endian
  expect_parse_error(w, Status::unsupported, {"big-endian"});
}

TEST(GgufValidation, TruncatedAtEveryByte) {
  std::vector<std::uint8_t> bytes = small_model().to_bytes();
  GgufFile full = GgufFile::from_memory(bytes.data(), bytes.size());
  const GgufTensor& last = full.tensor(full.tensor_count() - 1);
  const std::size_t needed = full.data_offset() + last.offset + last.n_bytes;
  for (std::size_t n = 0; n < needed; ++n) {
    try {
      GgufFile::from_memory(bytes.data(), n);
      ADD_FAILURE() << "prefix of " << n << " bytes accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::bad_file) << n << ": " << e.what();
      const std::string m = e.what();
      EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("too small") != std::string::npos ||
                  m.find("past the end") != std::string::npos || m.find("absurd") != std::string::npos ||
                  m.find("exceeds") != std::string::npos)
          << n << ": " << m;
    }
  }
}

TEST(GgufValidation, TruncationNamesWhatWasBeingRead) {
  GgufWriter w;
  w.add_string("general.architecture", "deepseek2");
  std::vector<std::uint8_t> bytes = w.to_bytes();
  // Header 24 bytes; first key "general.architecture" (8+20), type (4), value length (8), value.
  expect_error([&] { GgufFile::from_memory(bytes.data(), 24 + 28 + 4 + 8 + 3); }, Status::bad_file,
               {"general.architecture"});
  expect_error([&] { GgufFile::from_memory(bytes.data(), 20); }, Status::bad_file,
               {"truncated", "header"});
}

TEST(GgufValidation, AbsurdKvCount) {
  GgufWriter w = small_model();
  w.faults().kv_count = 1ull << 62;
  expect_parse_error(w, Status::bad_file, {"kv_count", "absurd"});
}

TEST(GgufValidation, AbsurdTensorCount) {
  GgufWriter w = small_model();
  w.faults().tensor_count = ~0ull;
  expect_parse_error(w, Status::bad_file, {"tensor_count", "absurd"});
}

TEST(GgufValidation, AbsurdArrayCount) {
  GgufWriter w;
  V v;
  v.type = GgufValueType::array;
  const std::uint8_t payload[] = {4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};  // u32 x 2^60
  v.payload.assign(payload, payload + sizeof payload);
  w.add("tokenizer.ggml.scores", v);
  expect_parse_error(w, Status::bad_file, {"tokenizer.ggml.scores", "array count", "absurd"});
  // Strings need at least 8 bytes each.
  GgufWriter w2;
  const std::string s[] = {"a", "b"};
  V a = V::array_string(s);
  a.payload[4] = 200;  // count 200 strings in ~20 bytes
  w2.add("tokenizer.ggml.tokens", a);
  expect_parse_error(w2, Status::bad_file, {"tokenizer.ggml.tokens", "absurd"});
}

TEST(GgufValidation, AbsurdStringLength) {
  GgufWriter w;
  V v = V::string("abc");
  v.payload[7] = 0x7f;  // length ~2^63
  w.add("general.name", v);
  expect_parse_error(w, Status::bad_file, {"general.name", "string length"});
}

TEST(GgufValidation, AbsurdKeyLength) {
  std::vector<std::uint8_t> bytes = small_model().to_bytes();
  bytes[24 + 6] = 0xff;  // key length of entry 0
  expect_error([&] { GgufFile::from_memory(bytes.data(), bytes.size()); }, Status::bad_file,
               {"metadata entry #0", "key", "string length"});
}

TEST(GgufValidation, EmptyKeyAndEmptyTensorName) {
  GgufWriter w = unchecked();
  w.add_u32("", 1);
  expect_parse_error(w, Status::bad_file, {"metadata entry #0", "empty key"});
  GgufWriter t = unchecked();
  t.add_tensor_raw("", 0, {1}, f32_bytes({1}));
  expect_parse_error(t, Status::bad_file, {"tensor info #0", "empty name"});
}

TEST(GgufValidation, DuplicateKey) {
  GgufWriter w = unchecked();
  w.add_u32("deepseek2.block_count", 1);
  w.add_u32("a", 1);
  w.add_u32("deepseek2.block_count", 2);
  expect_parse_error(w, Status::bad_file, {"duplicate metadata key 'deepseek2.block_count'"});
}

TEST(GgufValidation, UnknownValueType) {
  GgufWriter w;
  V v = V::u32(1);
  v.type = static_cast<GgufValueType>(13);
  w.add("general.weird", v);
  expect_parse_error(w, Status::bad_file, {"general.weird", "unknown value type 13"});
  GgufWriter w2;
  V a = V::array_u8({});
  a.payload[0] = 77;
  w2.add("general.weird_array", a);
  expect_parse_error(w2, Status::bad_file, {"general.weird_array", "array element type 77"});
}

TEST(GgufValidation, ArraysNestedTooDeep) {
  V v = V::array_i32({});
  for (int i = 0; i < kGgufMaxArrayDepth; ++i) v = V::array(GgufValueType::array, std::span<const V>(&v, 1));
  GgufWriter w;
  w.add("deep", v);
  expect_parse_error(w, Status::bad_file, {"'deep'", "nested deeper"});
}

TEST(GgufValidation, TensorNameTooLong) {
  GgufWriter w = unchecked();
  const std::string name(64, 'n');
  w.add_tensor_raw(name, 0, {1}, f32_bytes({1}));
  expect_parse_error(w, Status::bad_file, {"nnnnnnnnnn", "64 bytes is too long"});
  GgufWriter ok;
  ok.add_tensor_f32(std::string(63, 'n'), {1}, std::vector<float>{1.f});
  std::vector<std::uint8_t> bytes = ok.to_bytes();
  EXPECT_NO_THROW(GgufFile::from_memory(bytes.data(), bytes.size()));
}

TEST(GgufValidation, DuplicateTensorName) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("blk.0.attn_norm.weight", 0, {1}, f32_bytes({1}));
  w.add_tensor_raw("blk.0.attn_norm.weight", 0, {1}, f32_bytes({2}));
  expect_parse_error(w, Status::bad_file, {"duplicate tensor name 'blk.0.attn_norm.weight'"});
}

TEST(GgufValidation, TooManyDims) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("t5", 0, {1, 1, 1, 1, 1}, f32_bytes({1}));
  expect_parse_error(w, Status::bad_file, {"'t5'", "n_dims 5"});
}

TEST(GgufValidation, ZeroDim) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("zero", 0, {4, 0}, {});
  expect_parse_error(w, Status::bad_file, {"'zero'", "ne[1] = 0"});
}

TEST(GgufValidation, NegativeDim) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("neg", 0, {~0ull}, {});
  expect_parse_error(w, Status::bad_file, {"'neg'", "ne[0] = -1"});
}

TEST(GgufValidation, ElementCountOverflow) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("huge", 0, {1ull << 32, 1ull << 32}, {});
  expect_parse_error(w, Status::bad_file, {"'huge'", "element count overflows"});
  GgufWriter w2 = unchecked();
  w2.add_tensor_raw("huge2", 0, {1ull << 40, 1ull << 30}, {});  // 2^70
  expect_parse_error(w2, Status::bad_file, {"'huge2'", "overflows"});
  // 2^62 F32 elements fit 64 bits, their 2^64 bytes do not (must not wrap to 0).
  GgufWriter w3 = unchecked();
  w3.add_tensor_raw("huge3", 0, {1ull << 31, 1ull << 31}, {});
  expect_parse_error(w3, Status::bad_file, {"'huge3'", "byte size overflows"});
}

TEST(GgufValidation, RowNotMultipleOfBlock) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("blk.0.ffn_down.weight", static_cast<std::uint32_t>(GgmlType::Q4_K), {1408, 2},
                   std::vector<std::uint8_t>(2000));
  expect_parse_error(w, Status::bad_file, {"'blk.0.ffn_down.weight'", "ne[0] = 1408", "Q4_K", "256"});
}

TEST(GgufValidation, UnknownTensorType) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("blk.3.attn_q.weight", 99, {32}, std::vector<std::uint8_t>(64));
  expect_parse_error(w, Status::unsupported, {"'blk.3.attn_q.weight'", "unknown ggml type id 99", "Latte reads F32"});
  GgufWriter w2 = unchecked();
  w2.add_tensor_raw("iq2", 16, {256}, std::vector<std::uint8_t>(66));  // IQ2_XXS: valid ggml, not read by Latte
  expect_parse_error(w2, Status::unsupported,
                     {"'iq2'", "ggml type IQ2_XXS (id 16), which Latte does not read", "IQ4_NL, IQ4_XS)"});
}

TEST(GgufValidation, UnalignedTensorOffset) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("a", 0, {1}, f32_bytes({1}));
  w.add_tensor_raw("b", 0, {1}, f32_bytes({2}), 36);
  expect_parse_error(w, Status::bad_file, {"'b'", "offset 36", "alignment 32"});
}

TEST(GgufValidation, TensorDataPastEndOfFile) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("a", 0, {1}, f32_bytes({1}));
  w.add_tensor_raw("b", 0, {16}, std::vector<std::uint8_t>(64), 1 << 20);
  expect_parse_error(w, Status::bad_file, {"'b'", "past the end"});
  // An offset that would wrap around 64 bits.
  GgufWriter w2 = unchecked();
  w2.add_tensor_raw("wrap", 0, {16}, std::vector<std::uint8_t>(64), ~0ull - 31);
  expect_parse_error(w2, Status::bad_file, {"'wrap'", "past the end"});
  // Data declared bigger than what is there.
  GgufWriter w3 = unchecked();
  w3.add_tensor_raw("short", 0, {1024}, std::vector<std::uint8_t>(64));
  expect_parse_error(w3, Status::bad_file, {"'short'", "past the end"});
}

TEST(GgufValidation, OverlappingTensors) {
  GgufWriter w = unchecked();
  w.add_tensor_raw("first", 0, {16}, std::vector<std::uint8_t>(64));
  w.add_tensor_raw("second", 0, {16}, std::vector<std::uint8_t>(64), 32);
  expect_parse_error(w, Status::bad_file, {"'first'", "'second'", "overlap"});
  GgufWriter same = unchecked();
  same.add_tensor_raw("x", 0, {8}, std::vector<std::uint8_t>(32));
  same.add_tensor_raw("y", 0, {8}, std::vector<std::uint8_t>(32), 0);
  expect_parse_error(same, Status::bad_file, {"overlap"});
}

TEST(GgufValidation, BadAlignment) {
  for (std::uint32_t a : {0u, 3u, 48u}) {
    GgufWriter w = unchecked();
    w.add_u32("general.alignment", a);
    expect_parse_error(w, Status::bad_file,
                       {"general.alignment", std::to_string(a).c_str(), "power of two"});
  }
  GgufWriter w = unchecked();
  w.add_string("general.alignment", "32");
  expect_parse_error(w, Status::bad_file, {"general.alignment", "expected", "found string"});
}

TEST(GgufValidation, WrongValueTypeNamesKeyAndTypes) {
  std::vector<std::uint8_t> bytes = small_model().to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  expect_error([&] { f.require_u32("general.architecture"); }, Status::bad_file,
               {"'general.architecture'", "expected u32", "found string"});
  expect_error([&] { f.get_string("deepseek2.block_count", ""); }, Status::bad_file,
               {"'deepseek2.block_count'", "expected string", "found u32"});
  expect_error([&] { f.require_f32("deepseek2.block_count"); }, Status::bad_file,
               {"'deepseek2.block_count'", "expected f32", "found u32"});
  expect_error([&] { f.get_bool("deepseek2.block_count", false); }, Status::bad_file,
               {"'deepseek2.block_count'", "expected bool", "found u32"});
  expect_error([&] { f.get_i32_array("tokenizer.ggml.tokens"); }, Status::bad_file,
               {"'tokenizer.ggml.tokens'", "found array of string"});
  expect_error([&] { f.get_f32_array("tokenizer.ggml.tokens"); }, Status::bad_file,
               {"'tokenizer.ggml.tokens'", "expected array of f32"});
  expect_error([&] { f.get_string_array("deepseek2.block_count"); }, Status::bad_file,
               {"'deepseek2.block_count'", "expected array", "found u32"});
}

TEST(GgufValidation, IntegerDoesNotFit) {
  GgufWriter w;
  w.add_i32("neg", -1);
  w.add_u64("big", 1ull << 40);
  const std::int64_t arr[] = {1, 1ll << 33};
  w.add("arr", V::array_i64(arr));
  std::vector<std::uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  expect_error([&] { f.require_u32("neg"); }, Status::bad_file, {"'neg'", "-1", "does not fit u32"});
  expect_error([&] { f.get_i32("big", 0); }, Status::bad_file, {"'big'", "does not fit i32"});
  expect_error([&] { f.get_i32_array("arr"); }, Status::bad_file, {"'arr'", "element 1", "does not fit i32"});
}

TEST(GgufValidation, MissingKeyAndTensorAndWrongShape) {
  std::vector<std::uint8_t> bytes = small_model().to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  expect_error([&] { f.require_u32("deepseek2.embedding_length"); }, Status::bad_file,
               {"missing metadata key 'deepseek2.embedding_length'"});
  expect_error([&] { f.get_string_array("tokenizer.ggml.merges"); }, Status::bad_file,
               {"'tokenizer.ggml.merges'"});
  expect_error([&] { f.require_tensor("output.weight"); }, Status::bad_file,
               {"missing tensor 'output.weight'"});
  expect_error([&] { f.require_tensor("token_embd.weight", {2, 32}); }, Status::bad_file,
               {"'token_embd.weight'", "expected shape [2, 32]", "found [32, 2]"});
  expect_error([&] { f.require_tensor("output_norm.weight", {4, 2}); }, Status::bad_file,
               {"'output_norm.weight'", "[4, 2]", "[4]"});
  // Trailing 1s are implied, as ggml writes shapes.
  EXPECT_NO_THROW(f.require_tensor("output_norm.weight", {4, 1}));
}

// Random byte corruptions of a valid file: only latte::Error may come out
// (the fuzzer does this at scale; this keeps a cheap version in the suite).
TEST(GgufValidation, RandomCorruptionNeverCrashes) {
  GgufWriter w = small_model();
  const std::int32_t r[] = {1, 2};
  std::vector<V> rows = {V::array_i32(r)};
  w.add("nested", V::array(GgufValueType::array, rows));
  const std::vector<std::uint8_t> good = w.to_bytes();
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::uint8_t> b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      std::size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0: b[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8)); break;
        case 1: b[at] = 0xff; break;
        default: b[at] = static_cast<std::uint8_t>(rng()); break;
      }
    }
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    try {
      GgufFile f = GgufFile::from_memory(b.data(), b.size());
      for (const GgufKv& kv : f.kvs()) (void)f.find(kv.key);
      for (const GgufTensor& t : f.tensors()) ASSERT_LE(t.data + t.n_bytes, b.data() + b.size());
      ++accepted;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(accepted, 0);  // some corruptions only touch values or data
}

// GgufLoad::automatic reads a file that fits with room to spare (1 GiB, or
// an eighth of the machine's memory), lets the page cache's copy go where
// both copies would not fit, and maps otherwise, saying why; a small file
// is read, and reads the same bytes as a mapping.
TEST(GgufLoadAutomatic, ReadsWhatFitsAndSaysWhyItMaps) {
  constexpr std::uint64_t G = std::uint64_t{1} << 30;
  AutomaticLoad c = choose_automatic_load(9 * G, 24 * G, 32 * G);  // spare 4 GiB
  EXPECT_TRUE(c.read);
  EXPECT_FALSE(c.drop_behind);
  EXPECT_TRUE(c.note.empty());
  c = choose_automatic_load(9 * G, 16 * G, 32 * G);  // fits once, not twice
  EXPECT_TRUE(c.read);
  EXPECT_TRUE(c.drop_behind);
  c = choose_automatic_load(9 * G, 12 * G, 32 * G);  // 9 + 4 > 12
  EXPECT_FALSE(c.read);
  EXPECT_NE(c.note.find("9.0 GiB and 4.0 GiB to spare need more than the 12.0 GiB available"), std::string::npos)
      << c.note;
  c = choose_automatic_load(9 * G, 10 * G, 8 * G);  // spare 1 GiB
  EXPECT_TRUE(c.read);
  c = choose_automatic_load(G / 2, G / 2, 2 * G);  // less than the spare available
  EXPECT_FALSE(c.read);
  c = choose_automatic_load(G, 0, 0);
  EXPECT_FALSE(c.read);
  EXPECT_NE(c.note.find("not known"), std::string::npos);

  const std::string path = testdata("tiny-dense.gguf");
  const GgufFile read = GgufFile::open(path, GgufLoad::automatic);
  ASSERT_NE(read.private_data(), nullptr) << read.load_note();
  EXPECT_TRUE(read.load_note().empty());
  const GgufFile mapped = GgufFile::open(path, GgufLoad::map);
  EXPECT_EQ(mapped.private_data(), nullptr);
  ASSERT_EQ(read.file_size(), mapped.file_size());
  EXPECT_EQ(std::memcmp(read.file_data(), mapped.file_data(), read.file_size()), 0);
}

}  // namespace
}  // namespace latte
