// .npy reading and writing: round trips keep every bit, files NumPy wrote load with the
// right values (and our writer reproduces NumPy's bytes), and every malformed file is an
// Error naming the file and the problem.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <string_view>

#include <unistd.h>

#include <cgr/npy.hpp>

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

// Written by NumPy 1.24 (np.save; numpy.lib.format.write_array for versions 2.0 and 3.0).
// 152 bytes
constexpr std::string_view kNumpyF32_2x3 =
    "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }       "
    "                                                   \012\000\000\300?\000\000\000\300\000"
    "\000\000\000\000\000\200\177\000\000\300\177\000\000\000\200"sv;
// 136 bytes
constexpr std::string_view kNumpyF16V2 =
    "\223NUMPY\002\000t\000\000\000{'descr': '<f2', 'fortran_order': False, 'shape': (4,), } "
    "                                                         \012\000<\000\301\000|\377{"sv;
// 132 bytes
constexpr std::string_view kNumpyScalarV3 =
    "\223NUMPY\003\000t\000\000\000{'descr': '<f4', 'fortran_order': False, 'shape': (), }   "
    "                                                         \012\000\000P@"sv;
// 160 bytes
constexpr std::string_view kNumpyF32_4d =
    "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 2, 2), } "
    "                                                   \012\000\000\000\000\000\000\000?\000"
    "\000\200?\000\000\300?\000\000\000@\000\000 @\000\000@@\000\000`@"sv;
// 152 bytes
constexpr std::string_view kNumpyFortran =
    "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }        "
    "                                                   \012\000\000\000\000\000\000@@\000"
    "\000\200?\000\000\200@\000\000\000@\000\000\240@"sv;
// 140 bytes
constexpr std::string_view kNumpyBigEndian =
    "\223NUMPY\001\000v\000{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }         "
    "                                                   \012\000\000\000\000?\200\000\000@"
    "\000\000\000"sv;
// 152 bytes
constexpr std::string_view kNumpyF64 =
    "\223NUMPY\001\000v\000{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }         "
    "                                                   \012\000\000\000\000\000\000\000\000"
    "\000\000\000\000\000\000\360?\000\000\000\000\000\000\000@"sv;

std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string as_string(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A version 1.0 file with the given header text (padded as NumPy pads it) and data.
std::string npy_file(std::string_view header, std::string_view data = {}) {
  std::string text(header);
  text.append(63 - (10 + text.size()) % 64, ' ');
  text.push_back('\n');
  std::string file = "\x93NUMPY\x01\x00"s;
  file.push_back(static_cast<char>(text.size() & 0xFF));
  file.push_back(static_cast<char>(text.size() >> 8));
  return file + text + std::string(data);
}

std::string parse_error(std::string_view file) {
  return error_message([&] { (void)parse_npy(as_bytes(file), "x.npy"); });
}

}  // namespace

TEST_CASE("npy: save then load keeps every bit (scalar, 1-D, 4-D, empty, f16, NaN and Inf)") {
  const TempDir dir;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<Tensor> tensors;
  tensors.emplace_back(Shape{}, std::vector<float>{-7.25f});
  tensors.emplace_back(Shape{6}, std::vector<float>{inf, -inf, std::bit_cast<float>(0x7FC00001u),
                                                    -0.0f, 1e-45f, 3.0f});
  tensors.push_back(cgr::test::random_tensor(Shape{2, 3, 4, 5}, 7));
  tensors.emplace_back(Shape{0, 3}, DType::f32);
  tensors.push_back(f16_tensor(Shape{2, 2}, {0x3C00, 0x7C00, 0x7E01, 0x8000}));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    CAPTURE(i);
    const auto path = dir.path / ("t" + std::to_string(i) + ".npy");
    save_npy(path, tensors[i]);
    const Tensor loaded = load_npy(path);
    CHECK(same_bits(loaded, tensors[i]));
    // The data starts on a 64-byte boundary, as NumPy lays it out.
    CHECK((std::filesystem::file_size(path) - tensors[i].bytes().size()) % 64 == 0);
  }
}

TEST_CASE("npy: files written by NumPy load with their values") {
  const Tensor a = parse_npy(as_bytes(kNumpyF32_2x3), "a.npy");
  CHECK(a.shape() == Shape{2, 3});
  CHECK(a.dtype() == DType::f32);
  const auto v = a.to_vector();
  CHECK(v[0] == 1.5f);
  CHECK(v[1] == -2.0f);
  CHECK(v[2] == 0.0f);
  CHECK((std::isinf(v[3]) && v[3] > 0));
  CHECK(std::isnan(v[4]));
  CHECK((v[5] == 0.0f && std::signbit(v[5])));

  const Tensor half = parse_npy(as_bytes(kNumpyF16V2), "half.npy");
  CHECK(half.shape() == Shape{4});
  CHECK(half.dtype() == DType::f16);
  // 1, -2.5, inf, 65504 (the largest half).
  CHECK(f16_bits(half) == std::vector<std::uint16_t>{0x3C00, 0xC100, 0x7C00, 0x7BFF});

  const Tensor scalar = parse_npy(as_bytes(kNumpyScalarV3), "scalar.npy");
  CHECK(scalar.shape().rank() == 0);
  CHECK(scalar.to_vector() == std::vector<float>{3.25f});

  const Tensor four = parse_npy(as_bytes(kNumpyF32_4d), "four.npy");
  CHECK(four.shape() == Shape{1, 2, 2, 2});
  CHECK(four.to_vector() == std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f});
}

TEST_CASE("npy: the writer produces the bytes np.save writes") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(as_string(serialize_npy(Tensor(Shape{2, 3}, {1.5f, -2, 0, inf, nan, -0.0f}))) ==
        kNumpyF32_2x3);
  CHECK(as_string(serialize_npy(Tensor(Shape{1, 2, 2, 2}, {0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f}))) ==
        kNumpyF32_4d);
}

TEST_CASE("npy: a header over 64 KiB is written as version 2.0 and read back") {
  const Shape many_axes(std::vector<std::int64_t>(22000, 1));
  const Tensor t(many_axes, std::vector<float>{42.0f});
  const auto bytes = serialize_npy(t);
  CHECK(static_cast<int>(bytes[6]) == 2);
  const std::size_t header = static_cast<std::size_t>(bytes[8]) |
                             static_cast<std::size_t>(bytes[9]) << 8 |
                             static_cast<std::size_t>(bytes[10]) << 16;
  CHECK(header > 0xFFFF);
  CHECK((12 + header) % 64 == 0);
  CHECK(same_bits(parse_npy(bytes, "big.npy"), t));
}

TEST_CASE("npy: headers are read however the dict is written") {
  const std::string data(24, '\0');
  for (std::string_view header : {
           "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}"sv,
           R"({"descr":"<f4","fortran_order":False,"shape":(2,3),})"sv,
           "{ 'descr' : '=f4' ,\t'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }"sv,
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), 'extra': [1, (2,)]}"sv,
       }) {
    CAPTURE(header);
    const Tensor t = parse_npy(as_bytes(npy_file(header, data)), "x.npy");
    CHECK(t.shape() == Shape{2, 3});
    CHECK(t.dtype() == DType::f32);
  }
  CHECK(parse_npy(as_bytes(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (5,)}",
                                    std::string(20, '\0'))),
                  "x.npy")
            .shape() == Shape{5});
}

TEST_CASE("npy: NaN and Inf load and propagate through a network") {
  const Tensor x = parse_npy(as_bytes(kNumpyF32_2x3), "a.npy");
  const auto y = cgr::test::run_network(
      {1, 1, 2, 3}, x.to_vector(), [](Network& net, Value v) { return net.add(v, v, "twice"); });
  REQUIRE(y.size() == 6);
  CHECK(y[0] == 3.0f);
  CHECK(y[1] == -4.0f);
  CHECK((std::isinf(y[3]) && y[3] > 0));
  CHECK(std::isnan(y[4]));
}

TEST_CASE("npy: malformed files are Errors that name the file and the problem") {
  const std::string good(kNumpyF32_2x3);
  const std::string_view dict = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
  CHECK(parse_error("") == "x.npy: not a .npy file (it is empty)");
  CHECK(parse_error("PK\x03\x04 not numpy at all") == "x.npy: not a .npy file (bad magic)");
  CHECK(parse_error("\x93NUM") == "x.npy: file ends inside the .npy header");
  CHECK(parse_error("\x93NUMPY\x04\x00\x10\x00"sv) ==
        "x.npy: unsupported .npy format version 4.0 (1.0, 2.0 and 3.0 are read)");
  CHECK(parse_error("\x93NUMPY\x02\x00\x10"sv) == "x.npy: file ends inside the .npy header");
  CHECK(parse_error(good.substr(0, 50)) ==
        "x.npy: header length 118 runs past the end of the file (50 bytes)");
  CHECK(parse_error(good.substr(0, good.size() - 4)) ==
        "x.npy: data is truncated: shape 2x3 f32 needs 24 bytes, the file holds 20");
  CHECK(parse_error(good + "abc") ==
        "x.npy: 3 unexpected bytes after the data (shape 2x3 f32 needs 24 bytes)");
  CHECK(parse_error(kNumpyFortran) ==
        "x.npy: Fortran-order arrays are not supported (C order only; save "
        "np.ascontiguousarray(arr))");
  CHECK(parse_error(kNumpyBigEndian) ==
        "x.npy: big-endian dtype '>f4' is not supported (save it little-endian, e.g. "
        "arr.astype('<f4'))");
  CHECK(parse_error(kNumpyF64) ==
        "x.npy: dtype '<f8' is not supported (only float32 '<f4' and float16 '<f2')");
  CHECK(parse_error(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}")) ==
        "x.npy: structured dtypes are not supported (only float32 '<f4' and float16 '<f2')");
  CHECK(parse_error(npy_file(std::string(dict) + "(-1, 2)}")) ==
        "x.npy: shape has a negative dimension (-1)");
  CHECK(parse_error(npy_file(std::string(dict) + "(1048576, 1048576, 2)}")) ==
        "x.npy: shape has more than 2^40 elements");
  CHECK(parse_error(npy_file(std::string(dict) + "(0, 4294967296, 4294967296)}")) ==
        "x.npy: shape has more than 2^40 elements");
  CHECK(parse_error(npy_file(std::string(dict) + "(99999999999999999999,)}")) ==
        "x.npy: malformed .npy header: integer too large at column 70");
  CHECK(parse_error(npy_file(std::string(dict) + "(5)}")) == "x.npy: 'shape' is not a tuple");
  CHECK(parse_error(npy_file(std::string(dict) + "(2.5,)}")) ==
        "x.npy: malformed .npy header: expected ',' after a sequence item at column 53");
  CHECK(parse_error(npy_file(std::string(dict) + "('a',)}")) ==
        "x.npy: 'shape' holds a non-integer");
  CHECK(parse_error(npy_file("{'descr': '<f4', 'fortran_order': False}")) ==
        "x.npy: header has no 'shape' key");
  CHECK(parse_error(npy_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                             "'shape': ()}")) == "x.npy: header has the key 'descr' twice");
  CHECK(parse_error(npy_file("{'descr': '<f4' 'fortran_order': False, 'shape': ()}")) ==
        "x.npy: malformed .npy header: expected ',' after a dict entry at column 17");
  CHECK(parse_error(npy_file("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}")) ==
        "x.npy: 'fortran_order' is not True or False");
  CHECK(parse_error(npy_file("{'descr' '<f4', 'fortran_order': False, 'shape': ()}")) ==
        "x.npy: malformed .npy header: expected ':' after key 'descr' at column 10");
  CHECK(parse_error(npy_file("{'descr': '<f4, 'fortran_order': False, 'shape': ()}")) ==
        "x.npy: malformed .npy header: expected ',' after a dict entry at column 18");
  CHECK(parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,),")) ==
        "x.npy: malformed .npy header: the header ends inside the dict at column 119");
  CHECK(parse_error(npy_file("{descr: '<f4', 'fortran_order': False, 'shape': ()}")) ==
        "x.npy: malformed .npy header: expected a quoted key or '}' at column 2");
  CHECK(parse_error(npy_file("{'descr': '<f4', 'fortran_order': Maybe, 'shape': ()}")) ==
        "x.npy: malformed .npy header: unexpected character 'M' at column 35");
  CHECK(parse_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x")) ==
        "x.npy: malformed .npy header: unexpected text after the header dict at column 55");
  CHECK(parse_error(
            npy_file(std::string(dict) + std::string(40, '(') + std::string(40, ')') + "}")) ==
        "x.npy: malformed .npy header: nesting too deep at column 67");
}

TEST_CASE("npy: files that cannot be opened or written") {
  const TempDir dir;
  const auto missing = dir.path / "missing.npy";
  CHECK(error_message([&] { (void)load_npy(missing); }) ==
        missing.string() + ": cannot open (No such file or directory)");
  CHECK(error_message([&] { (void)load_npy(dir.path); }) ==
        dir.path.string() + ": a folder, not a regular file");
  const auto nowhere = dir.path / "no" / "such" / "dir.npy";
  CHECK(error_message([&] {
          save_npy(nowhere, Tensor(Shape{1}, {1.0f}));
        }).starts_with(nowhere.string() + ": cannot create ("));
}
