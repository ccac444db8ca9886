#pragma once
// The first step of decoding JSON (json.hpp): RapidJSON's *iterative* SAX reader (no recursion:
// a 10^6-deep "[[[[" cannot overflow the stack) runs in place over a copy of the text, behind a
// checking handler that enforces the contract's rules (depth, duplicate keys, finite numbers,
// UTF-8, nothing after the value) and records a flat tree of nodes, each with its raw byte span.
// json.hpp's typed walk reads that tree; nothing else should need this header.
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <vector>

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include "psych/result.hpp"
#include "psych/utf8.hpp"

namespace psych::protocol {

struct json_bounds {
  /// Bytes of the text, checked before any parsing (frame_too_large).
  std::size_t max_bytes = 16u << 20;
  /// Nested arrays/objects; the outermost container is depth 1 (json_too_deep).
  std::size_t max_depth = 64;
};

namespace detail {

/// A prefix of `s` of at most `limit` bytes, cut on a character boundary, for error details.
inline std::string excerpt(std::string_view s, std::size_t limit = 64) {
  if (s.size() <= limit) return std::string{s};
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string{s.substr(0, cut)} + "...";
}

// ---- the parsed tree ----------------------------------------------------------

enum class node_kind : std::uint8_t { null, boolean, integer, number, string, array, object, key };

inline const char* describe(node_kind kind) noexcept {
  switch (kind) {
    case node_kind::null: return "null";
    case node_kind::boolean: return "a boolean";
    case node_kind::integer: return "an integer";
    case node_kind::number: return "a number";
    case node_kind::string: return "a string";
    case node_kind::array: return "an array";
    case node_kind::object: return "an object";
    case node_kind::key: return "a key";
  }
  return "?";
}

inline constexpr std::uint32_t no_node = std::numeric_limits<std::uint32_t>::max();

/// One JSON value (or object key), 24 bytes. Children follow their parent in
/// document order; an object's children alternate key, value.
struct node {
  /// boolean: 0/1. integer: the int64 bits (uint64 when `unsigned_payload`).
  /// number: the double's bits. string/key: decoded length (the decoded bytes
  /// sit at begin + 1 in the in-situ buffer). array/object: count of elements/members.
  std::uint64_t payload = 0;
  std::uint32_t begin = 0;        ///< raw span [begin, end) in the text
  std::uint32_t end = 0;
  std::uint32_t next = no_node;   ///< next element of the array, or next key of the object
  node_kind kind = node_kind::null;
  std::uint8_t flags = 0;

  static constexpr std::uint8_t unsigned_payload = 1;  ///< integer above INT64_MAX
  static constexpr std::uint8_t integer_literal = 2;   ///< number spelled as an integer: beyond 64 bits
};
static_assert(sizeof(node) == 24, "a 16 MiB frame of tiny values must stay a bounded tree");

struct json_tree {
  std::string_view text;    ///< the original bytes: raw spans point here
  std::string buffer;       ///< the in-situ copy: decoded strings live here
  std::vector<node> nodes;  ///< nodes[0] is the root

  [[nodiscard]] std::string_view decoded(std::uint32_t i) const noexcept {
    return {buffer.data() + nodes[i].begin + 1, static_cast<std::size_t>(nodes[i].payload)};
  }
  [[nodiscard]] std::string_view raw(std::uint32_t i) const noexcept {
    return text.substr(nodes[i].begin, nodes[i].end - nodes[i].begin);
  }
  [[nodiscard]] std::uint32_t first_child(std::uint32_t i) const noexcept {
    return nodes[i].payload == 0 ? no_node : i + 1;
  }
  /// The value node of member `name` of object `i`, or no_node.
  [[nodiscard]] std::uint32_t member(std::uint32_t i, std::string_view name) const noexcept {
    for (std::uint32_t k = first_child(i); k != no_node; k = nodes[k].next)
      if (decoded(k) == name) return k + 1;
    return no_node;
  }
};

/// RapidJSON's in-situ string stream, minus its copy optimisation: the parser
/// then advances *this* object, so the handler can read the live position
/// (Tell) to record raw spans.
struct insitu_stream {
  using Ch = char;
  char* src;
  char* dst;
  char* head;

  [[nodiscard]] Ch Peek() const noexcept { return *src; }
  Ch Take() noexcept { return *src++; }
  [[nodiscard]] std::size_t Tell() const noexcept { return static_cast<std::size_t>(src - head); }
  Ch* PutBegin() noexcept { return dst = src; }
  void Put(Ch c) noexcept { *dst++ = c; }
  std::size_t PutEnd(Ch* begin) noexcept { return static_cast<std::size_t>(dst - begin); }
  void Flush() noexcept {}
  Ch* Push(std::size_t count) noexcept {
    Ch* begin = dst;
    dst += count;
    return begin;
  }
  void Pop(std::size_t count) noexcept { dst -= count; }
};

/// The checking SAX handler: enforces depth, duplicate keys, finite numbers
/// and escape-produced UTF-8 as the events arrive, and builds the tree.
/// Returning false stops RapidJSON at once; `failure` says why.
class tree_builder {
 public:
  tree_builder(json_tree& tree, const insitu_stream& stream, std::size_t max_depth)
      : tree_(tree), stream_(stream), max_depth_(max_depth) {}

  std::optional<error> failure;

  bool Null() { return scalar(node_kind::null, 0, 4); }
  bool Bool(bool b) { return scalar(node_kind::boolean, b ? 1 : 0, b ? 4 : 5); }
  bool Int(int v) { return integer(static_cast<std::int64_t>(v)); }
  bool Uint(unsigned v) { return integer(static_cast<std::int64_t>(v)); }
  bool Int64(std::int64_t v) { return integer(v); }
  bool Uint64(std::uint64_t v) {
    if (v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return integer(static_cast<std::int64_t>(v));
    return number(node_kind::integer, v, node::unsigned_payload);
  }
  bool Double(double d) {
    if (!std::isfinite(d))
      return fail(error_kind::json_non_finite,
                  "NaN or an infinity at byte " + std::to_string(number_begin()));
    // RapidJSON hands an integer literal beyond 64 bits over as a double;
    // remember its spelling so an integer member can say "out of range".
    const std::uint32_t begin = number_begin();
    const std::string_view spelling = tree_.text.substr(begin, stream_.Tell() - begin);
    const bool integral = spelling.find_first_of(".eE") == std::string_view::npos;
    // The value comes from the literal, correctly rounded by std::from_chars, not from RapidJSON:
    // its normal-precision conversion (what parse() asks for) is off by a few ULP, and the
    // full-precision one of Debian's 1.1.0 has undefined behaviour that returns garbage ("0e-324"
    // as -1.3e-141, "0.184467440737095516159" as -6.5e-201). RapidJSON still vets the syntax and
    // refuses what overflows; out of range here is therefore an underflow, which is a zero.
    const auto [end, ec] = std::from_chars(spelling.data(), spelling.data() + spelling.size(), d);
    if (ec == std::errc::result_out_of_range) d = spelling.starts_with('-') ? -0.0 : 0.0;
    else if (ec != std::errc{} || end != spelling.data() + spelling.size())
      return fail(error_kind::json_malformed, "an unreadable number at byte " + std::to_string(begin));
    if (!std::isfinite(d))
      return fail(error_kind::json_non_finite, "a number beyond a double at byte " + std::to_string(begin));
    return number(node_kind::number, std::bit_cast<std::uint64_t>(d),
                  integral ? node::integer_literal : std::uint8_t{0});
  }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return false; }  // not enabled
  bool String(const char* s, rapidjson::SizeType length, bool) {
    return string(node_kind::string, s, length);
  }
  bool Key(const char* s, rapidjson::SizeType length, bool) {
    if (!string(node_kind::key, s, length)) return false;
    return unique_key(static_cast<std::uint32_t>(tree_.nodes.size() - 1));
  }
  bool StartObject() { return open(node_kind::object); }
  bool StartArray() { return open(node_kind::array); }
  bool EndObject(rapidjson::SizeType) { return close(); }
  bool EndArray(rapidjson::SizeType) { return close(); }

 private:
  // Objects up to this many keys are checked for duplicates by a linear scan
  // (fast for frames); beyond it a hash set keeps huge objects linear overall.
  static constexpr std::uint64_t linear_key_limit = 32;

  struct open_container {
    std::uint32_t index;
    std::uint32_t last = no_node;  ///< last element, or last key
    std::unique_ptr<std::unordered_set<std::string_view>> keys;
  };

  bool fail(error_kind kind, std::string detail) {
    failure = error{kind, std::move(detail)};
    return false;
  }

  std::uint32_t append(node n) {
    const auto index = static_cast<std::uint32_t>(tree_.nodes.size());
    if (!open_.empty()) {
      open_container& parent = open_.back();
      node_kind parent_kind = tree_.nodes[parent.index].kind;
      // Array elements and object keys are chained; an object's value is
      // always its key's index + 1, so it needs no link.
      if (parent_kind == node_kind::array || n.kind == node_kind::key) {
        if (parent.last != no_node) tree_.nodes[parent.last].next = index;
        parent.last = index;
        ++tree_.nodes[parent.index].payload;
      }
    }
    tree_.nodes.push_back(n);
    return index;
  }

  bool scalar(node_kind kind, std::uint64_t payload, std::uint32_t length) {
    const auto end = static_cast<std::uint32_t>(stream_.Tell());
    append(node{payload, end - length, end, no_node, kind, 0});
    return true;
  }

  /// Numbers carry no length in their event: walk back over the characters a
  /// number (or NaN/Infinity) can hold. What precedes a number never is one.
  [[nodiscard]] std::uint32_t number_begin() const noexcept {
    std::size_t begin = stream_.Tell();
    while (begin > 0 && std::string_view{"0123456789+-.eEINafinty"}.find(tree_.text[begin - 1]) !=
                            std::string_view::npos)
      --begin;
    return static_cast<std::uint32_t>(begin);
  }

  bool number(node_kind kind, std::uint64_t payload, std::uint8_t flags) {
    append(node{payload, number_begin(), static_cast<std::uint32_t>(stream_.Tell()), no_node, kind,
                flags});
    return true;
  }
  bool integer(std::int64_t v) {
    return number(node_kind::integer, static_cast<std::uint64_t>(v), 0);
  }

  bool string(node_kind kind, const char* s, rapidjson::SizeType length) {
    // In situ, the decoded bytes start right after the opening quote.
    const auto begin = static_cast<std::uint32_t>(s - tree_.buffer.data() - 1);
    const auto end = static_cast<std::uint32_t>(stream_.Tell());
    // RapidJSON validates the raw bytes, but a \uDC00..\uDFFF escape on its
    // own decodes to an ill-formed surrogate. Only strings with escapes
    // (decoded shorter than raw) need the second look.
    if (length != end - begin - 2 &&
        utf8::first_invalid({s, length}) != std::string_view::npos)
      return fail(error_kind::json_invalid_utf8,
                  "a \\u escape encodes a lone surrogate in the string at byte " +
                      std::to_string(begin));
    append(node{length, begin, end, no_node, kind, 0});
    return true;
  }

  bool unique_key(std::uint32_t key_index) {
    open_container& object = open_.back();
    const std::string_view key = tree_.decoded(key_index);
    const std::uint64_t count = tree_.nodes[object.index].payload;  // includes this key
    bool duplicate = false;
    if (count <= linear_key_limit) {
      for (std::uint32_t k = tree_.first_child(object.index); k != key_index; k = tree_.nodes[k].next)
        if (tree_.decoded(k) == key) duplicate = true;
    } else {
      if (!object.keys) {
        object.keys = std::make_unique<std::unordered_set<std::string_view>>();
        for (std::uint32_t k = tree_.first_child(object.index); k != key_index; k = tree_.nodes[k].next)
          object.keys->insert(tree_.decoded(k));
      }
      duplicate = !object.keys->insert(key).second;
    }
    if (duplicate)
      return fail(error_kind::json_duplicate_key,
                  "key \"" + excerpt(key) + "\" appears twice in one object (at byte " +
                      std::to_string(tree_.nodes[key_index].begin) + ")");
    return true;
  }

  bool open(node_kind kind) {
    // The iterative reader calls this before it consumes '{' or '[', so Tell()
    // is the container's first byte.
    if (open_.size() >= max_depth_)
      return fail(error_kind::json_too_deep, "nesting deeper than " + std::to_string(max_depth_) +
                                                 " at byte " + std::to_string(stream_.Tell()));
    const auto begin = static_cast<std::uint32_t>(stream_.Tell());
    const std::uint32_t index = append(node{0, begin, begin, no_node, kind, 0});
    open_.push_back(open_container{index, no_node, nullptr});
    return true;
  }

  bool close() {
    // Called before the closing bracket is consumed.
    tree_.nodes[open_.back().index].end = static_cast<std::uint32_t>(stream_.Tell() + 1);
    open_.pop_back();
    return true;
  }

  json_tree& tree_;
  const insitu_stream& stream_;
  std::size_t max_depth_;
  std::vector<open_container> open_;
};

/// Parse `text` into `tree` under the contract's rules. `tree` keeps a view of
/// `text`, which must outlive it.
inline result<void> parse(std::string_view text, const json_bounds& bounds, json_tree& tree) {
  // Node spans are 32-bit; RapidJSON's string lengths are too.
  constexpr std::size_t hard_limit = std::numeric_limits<std::uint32_t>::max() - 8;
  if (text.size() > bounds.max_bytes || text.size() > hard_limit)
    return fail_with(error_kind::frame_too_large,
                   std::to_string(text.size()) + " bytes, more than " +
                       std::to_string(std::min(bounds.max_bytes, hard_limit)));

  tree.text = text;
  // The in-situ copy ends in NULs: RapidJSON stops at '\0', and its UTF-8
  // validation takes a multi-byte sequence's continuation bytes without
  // looking, so a truncated sequence at the very end reads (and, in situ,
  // writes) up to three bytes past the text.
  tree.buffer.reserve(text.size() + 4);
  tree.buffer.assign(text);
  tree.buffer.append(4, '\0');
  tree.nodes.clear();
  tree.nodes.reserve(text.size() / 8 + 4);

  insitu_stream stream{tree.buffer.data(), tree.buffer.data(), tree.buffer.data()};
  tree_builder builder{tree, stream, bounds.max_depth};
  constexpr unsigned flags = rapidjson::kParseInsituFlag | rapidjson::kParseValidateEncodingFlag |
                             rapidjson::kParseIterativeFlag | rapidjson::kParseStopWhenDoneFlag |
                             rapidjson::kParseNanAndInfFlag;
  rapidjson::Reader reader;
  const rapidjson::ParseResult parsed = reader.Parse<flags>(stream, builder);

  if (builder.failure) return fail_with(builder.failure->kind, std::move(builder.failure->detail));
  if (parsed.IsError()) {
    const auto code = parsed.Code();
    std::string detail = std::string{rapidjson::GetParseError_En(code)} + " (at byte " +
                         std::to_string(parsed.Offset()) + ")";
    switch (code) {
      case rapidjson::kParseErrorStringInvalidEncoding:
      case rapidjson::kParseErrorStringUnicodeSurrogateInvalid:
        return fail_with(error_kind::json_invalid_utf8, std::move(detail));
      case rapidjson::kParseErrorNumberTooBig:  // 1e999: not a finite double
        return fail_with(error_kind::json_non_finite, std::move(detail));
      default:
        return fail_with(error_kind::json_malformed, std::move(detail));
    }
  }
  // kParseStopWhenDoneFlag stopped right after the value: the rest may only be whitespace.
  for (std::size_t i = stream.Tell(); i < text.size(); ++i) {
    const char c = text[i];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
      return fail_with(error_kind::json_trailing_bytes,
                     "bytes after the JSON value (at byte " + std::to_string(i) + ")");
  }
  return success();
}

}  // namespace detail
}  // namespace psych::protocol
