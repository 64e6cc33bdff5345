// .npy reader and writer. The header is a Python dict literal; instead of evaluating Python we
// parse the small literal subset NumPy writes (strings, True/False/None, integers, tuples,
// lists) with a depth-bounded recursive-descent parser, so any byte string either yields a
// tensor or an Error that names the file. Sizes are checked before anything is allocated, so a
// hostile header cannot make us allocate more than the file holds.
#include "cgr/npy.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "cgr/error.hpp"
#include "file_io.hpp"

namespace cgr {
namespace {

static_assert(std::endian::native == std::endian::little,
              "'<f4' data is copied as is: cgr assumes a little-endian host");

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kAlign = 64;  // NumPy aligns the data to 64 bytes
// A 1.0 header is limited by its u16 length; larger shapes need 2.0 (u32).
constexpr std::size_t kMaxHeaderV1 = 0xFFFF;
constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;
// NumPy leaves room to grow the first axis in place (GROWTH_AXIS_MAX_DIGITS in numpy.lib.format).
constexpr std::size_t kGrowthDigits = 21;
constexpr int kMaxDepth = 16;

// One value of the header's Python literal.
struct Literal {
  enum class Kind { string, integer, boolean, none, tuple, list };
  Kind kind = Kind::none;
  std::string text;
  std::int64_t integer = 0;
  bool boolean = false;
  std::vector<Literal> items;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  // Parses the whole header as a dict with string keys; only whitespace may follow it.
  std::vector<std::pair<std::string, Literal>> dict() {
    std::vector<std::pair<std::string, Literal>> entries;
    expect('{', "the header dict");
    while (true) {
      if (accept('}')) break;
      skip_space();
      if (pos_ >= text_.size()) error("the header ends inside the dict");
      if (text_[pos_] != '\'' && text_[pos_] != '"') {
        error("expected a quoted key or '}'");
      }
      std::string key = string();
      expect(':', fmt::format("key '{}'", key));
      Literal value = parse_value(1);
      entries.emplace_back(std::move(key), std::move(value));
      if (accept('}')) break;
      expect(',', "a dict entry");
    }
    skip_space();
    if (pos_ != text_.size()) error("unexpected text after the header dict");
    return entries;
  }

 private:
  [[noreturn]] void error(std::string_view problem) const {
    fail("{}: malformed .npy header: {} at column {}", what_, problem, pos_ + 1);
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c, std::string_view after) {
    if (!accept(c)) error(fmt::format("expected '{}' after {}", c, after));
  }

  // A Python string literal; a backslash takes the next character literally, which is all the
  // escaping a dtype string can need.
  std::string string() {
    const char quote = text_[pos_++];
    std::string result;
    while (true) {
      if (pos_ >= text_.size()) error("unterminated string");
      char c = text_[pos_++];
      if (c == quote) return result;
      if (c == '\n') error("unterminated string");
      if (c == '\\') {
        if (pos_ >= text_.size()) error("unterminated string");
        c = text_[pos_++];
      }
      result.push_back(c);
    }
  }

  Literal parse_value(int depth) {
    if (depth > kMaxDepth) error("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) error("unexpected end of header");
    const char c = text_[pos_];
    Literal v;
    if (c == '\'' || c == '"') {
      v.kind = Literal::Kind::string;
      v.text = string();
    } else if (c == '(' || c == '[') {
      ++pos_;
      const char close = c == '(' ? ')' : ']';
      bool comma = false;
      while (!accept(close)) {
        v.items.push_back(parse_value(depth + 1));
        if (accept(close)) break;
        expect(',', "a sequence item");
        comma = true;
      }
      // In Python "(5)" is the integer 5; only a comma makes a one-element tuple.
      if (c == '(' && v.items.size() == 1 && !comma) return std::move(v.items.front());
      v.kind = c == '(' ? Literal::Kind::tuple : Literal::Kind::list;
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v.kind = Literal::Kind::integer;
      v.integer = integer();
    } else {
      std::size_t end = pos_;
      while (end < text_.size() && std::isalpha(static_cast<unsigned char>(text_[end])))
        ++end;
      const std::string_view word = text_.substr(pos_, end - pos_);
      if (word == "True" || word == "False") {
        v.kind = Literal::Kind::boolean;
        v.boolean = word == "True";
      } else if (word == "None") {
        v.kind = Literal::Kind::none;
      } else {
        error(fmt::format("unexpected character '{}'", printable(c)));
      }
      pos_ = end;
    }
    return v;
  }

  std::int64_t integer() {
    const bool negative = text_[pos_] == '-';
    if (text_[pos_] == '-' || text_[pos_] == '+') ++pos_;
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') error("expected digits");
    std::int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (value > (std::numeric_limits<std::int64_t>::max() - 9) / 10) error("integer too large");
      value = value * 10 + (text_[pos_++] - '0');
    }
    // Python 2 NumPy wrote shapes as longs: (3L, 4L).
    if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
    return negative ? -value : value;
  }

  static std::string printable(char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte >= 0x20 && byte < 0x7F ? std::string(1, c) : fmt::format("\\x{:02x}", byte);
  }

  std::string_view text_;
  std::string_view what_;
  std::size_t pos_ = 0;
};

std::uint32_t read_le(std::span<const std::byte> bytes, std::size_t offset, std::size_t width) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < width; ++i) {
    value |= static_cast<std::uint32_t>(bytes[offset + i]) << (8 * i);
  }
  return value;
}

DType parse_descr(const Literal& descr, std::string_view what) {
  if (descr.kind == Literal::Kind::list) {
    fail("{}: structured dtypes are not supported (only float32 '<f4' and float16 '<f2')", what);
  }
  if (descr.kind != Literal::Kind::string) fail("{}: 'descr' is not a string", what);
  const std::string& s = descr.text;
  if (s == "<f4" || s == "=f4") return DType::f32;
  if (s == "<f2" || s == "=f2") return DType::f16;
  if (s == ">f4" || s == ">f2" || s == "!f4" || s == "!f2") {
    fail(
        "{}: big-endian dtype '{}' is not supported (save it little-endian, e.g. "
        "arr.astype('<{}'))",
        what, s, s.substr(1));
  }
  fail("{}: dtype '{}' is not supported (only float32 '<f4' and float16 '<f2')", what, s);
}

Shape parse_shape(const Literal& shape, std::string_view what) {
  if (shape.kind != Literal::Kind::tuple) fail("{}: 'shape' is not a tuple", what);
  std::vector<std::int64_t> dims;
  std::int64_t nonzero_product = 1;
  for (const Literal& item : shape.items) {
    if (item.kind != Literal::Kind::integer) fail("{}: 'shape' holds a non-integer", what);
    if (item.integer < 0) fail("{}: shape has a negative dimension ({})", what, item.integer);
    // Bounding the product of the non-zero dimensions keeps every partial product in range,
    // whatever order Shape::numel() multiplies them in.
    if (item.integer > 0) {
      if (nonzero_product > kMaxElements / item.integer) {
        fail("{}: shape has more than 2^40 elements", what);
      }
      nonzero_product *= item.integer;
    }
    dims.push_back(item.integer);
  }
  return Shape(std::move(dims));
}

std::string shape_repr(const Shape& shape) {
  if (shape.rank() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape.dims(), ", "));
}

}  // namespace

Tensor parse_npy(std::span<const std::byte> bytes, std::string_view what) {
  if (bytes.empty()) fail("{}: not a .npy file (it is empty)", what);
  const auto magic = std::as_bytes(std::span(kMagic.data(), kMagic.size()));
  const std::size_t compared = std::min(bytes.size(), magic.size());
  if (!std::equal(magic.begin(), magic.begin() + static_cast<std::ptrdiff_t>(compared),
                  bytes.begin())) {
    fail("{}: not a .npy file (bad magic)", what);
  }
  if (bytes.size() < 8) fail("{}: file ends inside the .npy header", what);
  const auto major = static_cast<unsigned>(bytes[6]);
  const auto minor = static_cast<unsigned>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    fail("{}: unsupported .npy format version {}.{} (1.0, 2.0 and 3.0 are read)", what, major,
         minor);
  }
  const std::size_t length_width = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + length_width;
  if (bytes.size() < prefix) fail("{}: file ends inside the .npy header", what);
  const std::size_t header_length = read_le(bytes, 8, length_width);
  if (header_length > bytes.size() - prefix) {
    fail("{}: header length {} runs past the end of the file ({} bytes)", what, header_length,
         bytes.size());
  }
  // 1.0 and 2.0 headers are latin-1, 3.0 is utf-8; the parts we read are ASCII either way.
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + prefix,
                                header_length);
  std::optional<Literal> descr, fortran_order, shape;
  for (auto& [key, value] : HeaderParser(header, what).dict()) {
    std::optional<Literal>* slot = key == "descr"           ? &descr
                                   : key == "fortran_order" ? &fortran_order
                                   : key == "shape"         ? &shape
                                                            : nullptr;
    if (slot == nullptr) continue;  // NumPy writes no other keys; extras carry nothing we need
    if (slot->has_value()) fail("{}: header has the key '{}' twice", what, key);
    *slot = std::move(value);
  }
  for (auto [slot, key] : {std::pair{&descr, "descr"}, std::pair{&fortran_order, "fortran_order"},
                           std::pair{&shape, "shape"}}) {
    if (!slot->has_value()) fail("{}: header has no '{}' key", what, key);
  }
  const DType dtype = parse_descr(*descr, what);
  if (fortran_order->kind != Literal::Kind::boolean) {
    fail("{}: 'fortran_order' is not True or False", what);
  }
  if (fortran_order->boolean) {
    fail(
        "{}: Fortran-order arrays are not supported (C order only; save "
        "np.ascontiguousarray(arr))",
        what);
  }
  Shape dims = parse_shape(*shape, what);

  const std::size_t data_offset = prefix + header_length;
  const std::size_t available = bytes.size() - data_offset;
  const std::size_t needed = static_cast<std::size_t>(dims.numel()) * dtype_size(dtype);
  if (available < needed) {
    fail("{}: data is truncated: shape {} {} needs {} bytes, the file holds {}", what,
         dims.to_string(), to_string(dtype), needed, available);
  }
  if (available > needed) {
    fail("{}: {} unexpected bytes after the data (shape {} {} needs {} bytes)", what,
         available - needed, dims.to_string(), to_string(dtype), needed);
  }
  Tensor tensor(std::move(dims), dtype);
  if (needed > 0) std::memcpy(tensor.bytes().data(), bytes.data() + data_offset, needed);
  return tensor;
}

Tensor load_npy(const std::filesystem::path& path) {
  // The largest .npy cgr reads: a 4 GiB header (version 2.0's limit) and 2^40 4-byte values.
  constexpr std::uint64_t kMaxBytes = (std::uint64_t{1} << 32) + (std::uint64_t{4} << 40);
  return parse_npy(read_file(path, kMaxBytes, "a .npy file"), path.string());
}

std::vector<std::byte> serialize_npy(const Tensor& tensor) {
  const char* descr = tensor.dtype() == DType::f32 ? "<f4" : "<f2";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   descr, shape_repr(tensor.shape()));
  if (tensor.shape().rank() > 0) {
    header.append(kGrowthDigits - fmt::formatted_size("{}", tensor.shape()[0]), ' ');
  }
  // Spaces, then '\n', so that magic + length + header end on a 64-byte boundary; like NumPy,
  // a full 64 spaces when it would already end on one.
  std::size_t prefix = 10;
  std::size_t padded = header.size() + 1 + (kAlign - (prefix + header.size() + 1) % kAlign);
  if (padded > kMaxHeaderV1) {
    prefix = 12;
    padded = header.size() + 1 + (kAlign - (prefix + header.size() + 1) % kAlign);
  }
  if (padded > std::numeric_limits<std::uint32_t>::max()) fail("npy header too large");
  header.append(padded - header.size() - 1, ' ');
  header.push_back('\n');

  const auto data = tensor.bytes();
  std::vector<std::byte> out(prefix + header.size() + data.size());
  std::memcpy(out.data(), kMagic.data(), kMagic.size());
  out[6] = std::byte{static_cast<unsigned char>(prefix == 10 ? 1 : 2)};
  out[7] = std::byte{0};
  for (std::size_t i = 0; i < prefix - 8; ++i) {
    out[8 + i] = std::byte{static_cast<unsigned char>((header.size() >> (8 * i)) & 0xFF)};
  }
  std::memcpy(out.data() + prefix, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + prefix + header.size(), data.data(), data.size());
  return out;
}

void save_npy(const std::filesystem::path& path, const Tensor& tensor) {
  write_file(path, serialize_npy(tensor));
}

}  // namespace cgr
