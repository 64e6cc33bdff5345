// safetensors reading and writing: round trips with metadata, files written by the Python
// safetensors package (byte for byte the same as ours), dtypes cgr does not hold failing only
// when their tensor is loaded, and every malformed header an Error naming file and problem.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <string_view>

#include <unistd.h>

#include <cgr/safetensors.hpp>

#include "test_support.hpp"

using namespace cgr;
using namespace std::string_literals;
using namespace std::string_view_literals;
using cgr::test::error_message;
using cgr::test::f16_bits;
using cgr::test::f16_tensor;
using cgr::test::same_bits;
using cgr::test::TempDir;

namespace {

// Written by the Python safetensors package 0.8.0 (safetensors.numpy.save):
// conv.weight F32 2x1x1x2 {0.25, -1, inf, nan}, scale F32 scalar 2, conv.bias F16 {1, -0.5},
// metadata {"format": "pt"}.
// 256 bytes
constexpr std::string_view kPythonSafetensors =
    "\340\000\000\000\000\000\000\000{\"__metadata__\":{\"format\":\"pt\"},\"conv.weight\":{"
    "\"dtype\":\"F32\",\"shape\":[2,1,1,2],\"data_offsets\":[0,16]},\"scale\":{\"dtype\":\"F3"
    "2\",\"shape\":[],\"data_offsets\":[16,20]},\"conv.bias\":{\"dtype\":\"F16\",\"shape\":[2"
    "],\"data_offsets\":[20,24]}} \000\000\200>\000\000\200\277\000\000\200\177\000\000\300"
    "\177\000\000\000@\000<\000\270"sv;
// 208 bytes
constexpr std::string_view kPythonMixedDtypes =
    "\250\000\000\000\000\000\000\000{\"c\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\""
    ":[0,16]},\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[16,24]},\"a\":{\"dtype"
    "\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}   \007\000\000\000\000\000\000\000"
    "\377\377\377\377\377\377\377\377\000\000\000\000\000\000\340?\000\000\200?\000\000\000@"sv;

std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string as_string(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A file image: the 8-byte little-endian length of `header`, `header`, then `data`.
std::string st_file(std::string_view header, std::string_view data = {}) {
  std::string file;
  for (int i = 0; i < 8; ++i)
    file.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  return file + std::string(header) + std::string(data);
}

std::string parse_error(std::string_view file) {
  return error_message([&] { (void)parse_safetensors(as_bytes(file), "x.safetensors"); });
}

// The error for a file whose header has the single entry "a": `entry`, and 8 data bytes.
std::string entry_error(std::string_view entry) {
  return parse_error(st_file(R"({"a":)" + std::string(entry) + "}", std::string(8, '\0')));
}

Weights python_weights() {
  const float inf = std::numeric_limits<float>::infinity();
  Weights w;
  w.add("conv.weight",
        Tensor(Shape{2, 1, 1, 2}, {0.25f, -1.0f, inf, std::numeric_limits<float>::quiet_NaN()}));
  w.add("scale", Tensor(Shape{}, {2.0f}));
  w.add("conv.bias", f16_tensor(Shape{2}, {0x3C00, 0xB800}));
  return w;
}

}  // namespace

TEST_CASE("safetensors: save then load keeps every bit, the metadata and the layout") {
  const TempDir dir;
  Weights w;
  w.add("layer1.0.conv1.weight", cgr::test::random_tensor(Shape{4, 3, 3, 3}, 11));
  w.add("fc.bias", Tensor(Shape{3}, {std::numeric_limits<float>::infinity(), -0.0f,
                                     std::bit_cast<float>(0x7FC00001u)}));
  w.add("scalar", Tensor(Shape{}, {1.0f}));
  w.add("empty", Tensor(Shape{0, 4}, DType::f32));
  w.add("half", f16_tensor(Shape{3}, {0x3C00, 0x7C00, 0x7E00}));
  w.add("a_half", f16_tensor(Shape{1}, {0xC000}));
  const SafetensorsMetadata metadata{{"format", "pt"}, {"note", "grüße"}};
  const auto path = dir.path / "model.safetensors";
  save_safetensors(path, w, metadata);

  const Weights loaded = Weights::load_safetensors(path);
  CHECK(loaded.names() == w.names());
  for (const auto& [name, tensor] : w.tensors()) {
    CAPTURE(name);
    REQUIRE(loaded.find(name) != nullptr);
    CHECK(same_bits(*loaded.find(name), tensor));
  }

  const SafetensorsFile file = SafetensorsFile::open(path);
  CHECK(file.what() == path.string());
  CHECK(file.metadata() == metadata);
  CHECK(file.size() == 6);
  CHECK(file.names() == w.names());
  // f32 tensors come first, by name, then f16: every tensor is aligned to its element size.
  CHECK(file.info("empty").begin == 0);
  CHECK(file.info("fc.bias").begin == 0);
  CHECK(file.info("fc.bias").end == 12);
  CHECK(file.info("layer1.0.conv1.weight").begin == 12);
  CHECK(file.info("layer1.0.conv1.weight").end == 12 + 4 * 108);
  CHECK(file.info("scalar").begin == 444);
  CHECK(file.info("a_half").begin == 448);
  CHECK(file.info("half").end == 456);
  CHECK(file.info("half").dtype == "F16");
  CHECK(file.info("half").shape == Shape{3});
  CHECK(file.raw("half").size() == 6);
  // The header is padded so that the data starts 8-byte aligned.
  const auto bytes = serialize_safetensors(w, metadata);
  CHECK(bytes.size() == std::filesystem::file_size(path));
  CHECK((bytes.size() - 456) % 8 == 0);
}

TEST_CASE("safetensors: a file written by the Python package loads, and ours is identical") {
  const Weights w = parse_safetensors(as_bytes(kPythonSafetensors), "python.safetensors");
  CHECK(w.names() == std::vector<std::string>{"conv.bias", "conv.weight", "scale"});
  const auto weight = w.find("conv.weight")->to_vector();
  CHECK(w.find("conv.weight")->shape() == Shape{2, 1, 1, 2});
  CHECK(weight[0] == 0.25f);
  CHECK(weight[1] == -1.0f);
  CHECK((std::isinf(weight[2]) && weight[2] > 0));
  CHECK(std::isnan(weight[3]));
  CHECK(w.find("scale")->shape().rank() == 0);
  CHECK(w.find("scale")->to_vector() == std::vector<float>{2.0f});
  CHECK(w.find("conv.bias")->dtype() == DType::f16);
  CHECK(f16_bits(*w.find("conv.bias")) == std::vector<std::uint16_t>{0x3C00, 0xB800});
  CHECK(SafetensorsFile::view(as_bytes(kPythonSafetensors), "p").metadata() ==
        SafetensorsMetadata{{"format", "pt"}});

  CHECK(as_string(serialize_safetensors(python_weights(), {{"format", "pt"}})) ==
        kPythonSafetensors);
  // The reference's empty file: "{}" padded to 8 bytes.
  CHECK(as_string(serialize_safetensors(Weights{})) == "\x08\0\0\0\0\0\0\0{}      "sv);
}

TEST_CASE("safetensors: F64 and I64 tensors fail only when they are loaded") {
  const SafetensorsFile file =
      SafetensorsFile::view(as_bytes(kPythonMixedDtypes), "mixed.safetensors");
  CHECK(file.names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(file.info("b").dtype == "F64");
  CHECK(file.info("c").dtype == "I64");
  CHECK(file.tensor("a").to_vector() == std::vector<float>{1.0f, 2.0f});
  std::int64_t c[2];
  REQUIRE(file.raw("c").size() == sizeof c);
  std::memcpy(c, file.raw("c").data(), sizeof c);
  CHECK(c[0] == 7);
  CHECK(c[1] == -1);
  CHECK(error_message([&] { (void)file.tensor("b"); }) ==
        "mixed.safetensors: tensor 'b' has dtype F64, which cgr does not load (F32 and F16 only)");
  CHECK(error_message([&] { (void)file.tensor("zzz"); }) ==
        "mixed.safetensors: no tensor named 'zzz'");
  CHECK(error_message([&] { (void)file.weights(); }) ==
        "mixed.safetensors: tensor 'b' has dtype F64, which cgr does not load (F32 and F16 only)");
  CHECK(error_message(
            [&] { (void)parse_safetensors(as_bytes(kPythonMixedDtypes), "mixed.safetensors"); }) ==
        "mixed.safetensors: tensor 'b' has dtype F64, which cgr does not load (F32 and F16 only)");
  // Sub-byte types are sized in bits.
  const SafetensorsFile fp4 = SafetensorsFile::view(
      as_bytes(st_file(R"({"q":{"dtype":"F4","shape":[3,2],"data_offsets":[0,3]}})", "abc")), "q");
  CHECK(fp4.raw("q").size() == 3);
}

TEST_CASE("safetensors: gaps between tensors and bytes after them are tolerated") {
  const std::string data = "\0\0\x80?xxxx\0\0\0@yy"s;
  const Weights w = parse_safetensors(
      as_bytes(st_file(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("z":{"dtype":"F32","shape":[0],"data_offsets":[2,2]}})",
                       data)),
      "gaps");
  CHECK(w.find("a")->to_vector() == std::vector<float>{1.0f});
  CHECK(w.find("b")->to_vector() == std::vector<float>{2.0f});
  CHECK(w.find("z")->numel() == 0);
}

TEST_CASE("safetensors: malformed files are Errors that name the file and the problem") {
  CHECK(parse_error("abc") ==
        "x.safetensors: not a safetensors file (3 bytes; the header length alone takes 8)");
  CHECK(parse_error("\x00\xC2\xEB\x0B\0\0\0\0{}"sv) ==
        "x.safetensors: header length 200000000 is over the 100 MB limit (not a safetensors "
        "file?)");
  CHECK(parse_error("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF{}"sv) ==
        "x.safetensors: header length 18446744073709551615 is over the 100 MB limit (not a "
        "safetensors file?)");
  CHECK(parse_error("\x64\0\0\0\0\0\0\0{}      "sv) ==
        "x.safetensors: header length 100 runs past the end of the file (16 bytes)");
  CHECK(parse_error(st_file(R"({"a":)"))
            .starts_with("x.safetensors: header is not valid JSON "
                         "([json.exception.parse_error.101] parse error at "
                         "line 1, column 6: syntax error while parsing value"));
  CHECK(parse_error(st_file("{\"a\xFF\":1}"))
            .starts_with(
                "x.safetensors: header is not valid JSON ([json.exception.parse_error.101]"));
  CHECK(parse_error(st_file("[1, 2]")) == "x.safetensors: header is not a JSON object");
  CHECK(parse_error(st_file(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                            R"("a":{"dtype":"F32","shape":[],"data_offsets":[4,8]}})",
                            std::string(8, '\0'))) == "x.safetensors: header names 'a' twice");
  CHECK(entry_error("5") == "x.safetensors: entry 'a' is not an object");
  CHECK(entry_error(R"({"shape":[2],"data_offsets":[0,8]})") ==
        "x.safetensors: tensor 'a': 'dtype' is missing or not a string");
  CHECK(entry_error(R"({"dtype":"X7","shape":[2],"data_offsets":[0,8]})") ==
        "x.safetensors: tensor 'a' has unknown dtype 'X7'");
  CHECK(entry_error(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})") ==
        "x.safetensors: tensor 'a': 'shape' is missing or not an array");
  CHECK(entry_error(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})") ==
        "x.safetensors: tensor 'a': shape has a negative dimension (-2)");
  CHECK(entry_error(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})") ==
        "x.safetensors: tensor 'a': shape entry 2.5 is not an integer");
  CHECK(entry_error(R"({"dtype":"F32","shape":[1048576,1048576,2],"data_offsets":[0,8]})") ==
        "x.safetensors: tensor 'a': shape has more than 2^40 elements");
  CHECK(entry_error(R"({"dtype":"F32","shape":[0,18446744073709551615,2],"data_offsets":[0,0]})") ==
        "x.safetensors: tensor 'a': shape has more than 2^40 elements");
  for (std::string_view offsets : {"[0]"sv, "[0,8,8]"sv, "[-1,8]"sv, "[0,8.0]"sv, "\"0-8\""sv}) {
    CAPTURE(offsets);
    CHECK(
        entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":)" + std::string(offsets) + "}") ==
        "x.safetensors: tensor 'a': 'data_offsets' must be [begin, end] (two non-negative "
        "integers)");
  }
  CHECK(entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})") ==
        "x.safetensors: tensor 'a': data_offsets [8, 0] end before they begin");
  CHECK(entry_error(R"({"dtype":"F32","shape":[100],"data_offsets":[0,400]})") ==
        "x.safetensors: tensor 'a': data_offsets [0, 400] run past the end of the data (8 bytes)");
  CHECK(entry_error(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})") ==
        "x.safetensors: tensor 'a' is F32 3 (12 bytes) but its data_offsets [0, 8] span 8 bytes");
  CHECK(entry_error(R"({"dtype":"F4","shape":[3],"data_offsets":[0,2]})") ==
        "x.safetensors: tensor 'a': 3 elements of F4 do not fill whole bytes");
  CHECK(parse_error(st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                            std::string(12, '\0'))) ==
        "x.safetensors: tensors 'a' [0, 8] and 'b' [4, 12] overlap");
  CHECK(parse_error(st_file(R"({"__metadata__":{"k":1}})")) ==
        "x.safetensors: '__metadata__' value for 'k' is not a string");
  CHECK(parse_error(st_file(R"({"__metadata__":["k"]})")) ==
        "x.safetensors: '__metadata__' is not an object");
  CHECK(parse_error(st_file(R"({"":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", "abcd")) ==
        "x.safetensors: a tensor has an empty name");
  // An explicit null stands for no metadata, as in the reference reader.
  CHECK(
      SafetensorsFile::view(as_bytes(st_file(R"({"__metadata__":null})")), "n").metadata().empty());
}

TEST_CASE("safetensors: files that cannot be opened, and names the writer refuses") {
  const TempDir dir;
  const auto missing = dir.path / "missing.safetensors";
  CHECK(error_message([&] { (void)Weights::load_safetensors(missing); }) ==
        missing.string() + ": cannot open (No such file or directory)");
  CHECK(error_message([&] { (void)SafetensorsFile::open(dir.path); }) ==
        dir.path.string() + ": a folder, not a regular file");
  const auto empty = dir.path / "empty.safetensors";
  std::ofstream(empty).close();
  CHECK(error_message([&] { (void)load_safetensors(empty); }) ==
        empty.string() + ": not a safetensors file (0 bytes; the header length alone takes 8)");
  const auto truncated = dir.path / "truncated.safetensors";
  std::ofstream(truncated, std::ios::binary) << kPythonSafetensors.substr(0, 100);
  CHECK(error_message([&] { (void)load_safetensors(truncated); }) ==
        truncated.string() + ": header length 224 runs past the end of the file (100 bytes)");

  Weights reserved;
  reserved.add("__metadata__", Tensor(Shape{1}, {1.0f}));
  CHECK(error_message([&] { (void)serialize_safetensors(reserved); }) ==
        "a safetensors tensor cannot be named '__metadata__'");
  const auto nowhere = dir.path / "no" / "such" / "dir.safetensors";
  CHECK(error_message([&] {
          save_safetensors(nowhere, Weights{});
        }).starts_with(nowhere.string() + ": cannot create ("));
}
