#pragma once
// The JSON codec of the launcher contract (docs/contract.md, "Framing"), on
// RapidJSON. One generic field walk (Hana accessors) encodes and decodes
// every frame, so the JSON of a frame is exactly its members.
//
// Decoding is two steps:
//  1. detail::parse() (json_tree.hpp) runs RapidJSON's *iterative* SAX reader (no recursion:
//     a 10^6-deep "[[[[" cannot overflow the stack) in place over a copy of
//     the text, behind a checking handler that enforces the contract's rules
//     (depth, duplicate keys, finite numbers, UTF-8, nothing after the value)
//     and records a flat tree of nodes, each with its raw byte span.
//  2. A typed walk over that tree fills the C++ value. It recurses along the
//     C++ type, never along the input, so its depth is fixed at compile time.
//
// Decode rules, per C++ type:
//  - struct (BOOST_HANA_ADAPT_STRUCT): a JSON object keyed by member names.
//    Unknown members are ignored (a newer peer may add fields). An absent
//    member keeps its C++ default, unless the struct lists it in
//      static constexpr std::array<std::string_view, N> required_members{...};
//    in which case its absence is frame_missing_member. decode_json_strict()
//    refuses unknown members instead (frame_unknown_member, naming the
//    members there are), at every depth.
//  - bool: true/false. Integers: an integer literal that fits the type, else
//    frame_number_out_of_range (also for integer literals beyond 64 bits); a
//    fraction or exponent is frame_wrong_kind. double/float: any number,
//    integers included.
//  - std::string: a JSON string (always valid UTF-8 after decoding).
//  - named enum (names.hpp): its spelling, else frame_bad_enum.
//  - spelt (names.hpp; open_enum.hpp): any JSON string, a spelling the enum
//    does not have kept as it came (a peer of another version may send one).
//  - std::optional<T>, request<D,T>: absent or null -> nullopt. cap<D,T>: T.
//    omittable<T> (omittable.hpp) decodes as std::optional<T>; as a member it
//    is not written at all when it holds nothing.
//  - std::vector<T>: an array. std::array<T,N>: an array of exactly N.
//    std::map<std::string,T>, or a map keyed by a spelt type: an object.
//  - json_text: any JSON value, kept as its exact bytes (big integers and
//    number spellings survive). It works at any depth, not only at the top of
//    a frame, because every node keeps its raw span. Note that an
//    std::optional<json_text> decodes JSON null as nullopt, not as "null".
//
// Encoding is compact, "type" first for frames, doubles in RapidJSON's
// shortest round-trip form. Encoding a non-finite double, an enum value with
// no spelling, or a json_text that is not one valid JSON value is a bug in the
// caller and traps. Strings may come from untrusted output, so invalid UTF-8
// in them is not a bug: each maximal ill-formed subsequence is replaced by
// U+FFFD (Unicode's recommended practice), and the frame stays valid.
//
// Numbers: RapidJSON must represent every number as an int64, a uint64 or a
// finite double while parsing, so a literal beyond ~1.8e308 (1e999, or an
// integer of more than 308 digits) is json_non_finite even inside a json_text.
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <boost/hana/accessors.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/unpack.hpp>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "psych/json_text.hpp"
#include "psych/protocol/json_tree.hpp"
#include "psych/limits.hpp"
#include "psych/names.hpp"
#include "psych/omittable.hpp"
#include "psych/utf8.hpp"
#include "psych/result.hpp"

namespace psych::protocol {

using json_writer = rapidjson::Writer<rapidjson::StringBuffer>;

template <class T>
void write_json(json_writer& w, const T& value);

namespace detail {

namespace hana = boost::hana;

/// A contract violation by the caller of the codec: never an expected error.
[[noreturn]] inline void codec_bug(const char* what) noexcept {
  std::fputs("psych::protocol codec: ", stderr);
  std::fputs(what, stderr);
  std::fputc('\n', stderr);
  std::abort();
}

// ---- the types the codec knows ------------------------------------------------

template <class>
inline constexpr bool always_false = false;

template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type {};
template <class T> struct is_optional<omittable<T>> : std::true_type {};
template <class T> struct is_omittable : std::false_type {};
template <class T> struct is_omittable<omittable<T>> : std::true_type {};
template <class T> struct is_vector : std::false_type {};
template <class T, class A> struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T> struct is_std_array : std::false_type {};
template <class T, std::size_t N> struct is_std_array<std::array<T, N>> : std::true_type {};
template <class T> struct is_string_map : std::false_type {};
template <class T, class C, class A>
struct is_string_map<std::map<std::string, T, C, A>> : std::true_type {};
template <spelt K, class T, class C, class A>
struct is_string_map<std::map<K, T, C, A>> : std::true_type {};
template <class T> struct is_cap : std::false_type {};
template <auto D, class T> struct is_cap<cap<D, T>> : std::true_type {};
template <class T> struct is_request : std::false_type {};
template <auto D, class T> struct is_request<request<D, T>> : std::true_type {};

template <class T>
inline constexpr bool is_struct = hana::Struct<T>::value;

/// A value to decode into. cap<> has no default (a cap is always a value).
template <class T>
T blank() {
  if constexpr (is_cap<T>::value) return T{typename T::value_type{}};
  else return T{};
}

/// The spelling of a Hana member name (a hana::string) as a string_view.
template <class Name>
constexpr std::string_view member_name(Name) noexcept {
  return {hana::to<char const*>(Name{}), decltype(hana::length(Name{}))::value};
}

template <class T>
constexpr bool has_member_named(std::string_view name) {
  return hana::unpack(hana::accessors<T>(), [&](auto... field) {
    return ((member_name(hana::first(field)) == name) || ... || false);
  });
}

/// Every name in T::required_members must be a member of T.
template <class T>
constexpr bool required_members_exist() {
  if constexpr (requires { T::required_members; }) {
    for (std::string_view name : T::required_members)
      if (!has_member_named<T>(name)) return false;
  }
  return true;
}

/// A frame: a Hana struct with a `type` spelling and no member that would clash with it.
template <class F>
constexpr bool is_frame() {
  if constexpr (!is_struct<F> || !requires { std::string_view{F::type}; }) return false;
  else return !has_member_named<F>("type") && required_members_exist<F>();
}

template <class... Frames>
constexpr bool distinct_frame_types() {
  const std::array<std::string_view, sizeof...(Frames)> types{std::string_view{Frames::type}...};
  for (std::size_t i = 0; i < types.size(); ++i)
    for (std::size_t j = i + 1; j < types.size(); ++j)
      if (types[i] == types[j]) return false;
  return true;
}

// ---- encoding ---------------------------------------------------------------

inline rapidjson::SizeType json_size(std::size_t n) {
  if (n > std::numeric_limits<rapidjson::SizeType>::max()) codec_bug("a string longer than 4 GiB");
  return static_cast<rapidjson::SizeType>(n);
}

inline void write_string(json_writer& w, std::string_view s, bool as_key = false) {
  std::string repaired;
  if (utf8::first_invalid(s) != std::string_view::npos) {
    repaired = utf8::sanitize(s);
    s = repaired;
  }
  if (as_key) w.Key(s.data(), json_size(s.size()));
  else w.String(s.data(), json_size(s.size()));
}

template <class T>
void write_members(json_writer& w, const T& value) {
  hana::for_each(hana::accessors<T>(), [&](auto field) {
    constexpr std::string_view name = member_name(std::remove_cvref_t<decltype(hana::first(field))>{});
    const auto& member = hana::second(field)(value);
    if constexpr (is_omittable<std::remove_cvref_t<decltype(member)>>::value)
      if (!member) return;
    w.Key(name.data(), static_cast<rapidjson::SizeType>(name.size()));
    write_json(w, member);
  });
}

inline void write_json_text(json_writer& w, const json_text& value);  // below

inline void write_json_text(json_writer& w, const json_text& value) {
  // The text is spliced in verbatim, so it must be one valid JSON value: a
  // caller's json_text that is not is a bug, caught here rather than by the peer.
  json_tree tree;
  if (!parse(value.text, json_bounds{std::numeric_limits<std::size_t>::max(),
                                     std::numeric_limits<std::size_t>::max()},
             tree))
    codec_bug("json_text does not hold exactly one valid JSON value");
  // A raw newline in valid JSON can only be insignificant whitespace, but it
  // would split the NDJSON line: turn it into a space (no value changes).
  std::string_view text = value.text;
  std::string flattened;
  if (text.find_first_of("\r\n") != std::string_view::npos) {
    flattened.assign(text);
    for (char& c : flattened)
      if (c == '\n' || c == '\r') c = ' ';
    text = flattened;
  }
  w.RawValue(text.data(), json_size(text.size()), rapidjson::kObjectType);
}

// ---- decoding -----------------------------------------------------------------

template <class T>
std::string integer_type_name() {
  return std::string{std::is_signed_v<T> ? "a signed " : "an unsigned "} +
         std::to_string(sizeof(T) * 8) + "-bit integer";
}

/// The typed walk over a parsed tree. Members return false on failure, having
/// set `kind`/`what`; each enclosing level then adds its path segment, so the
/// error names e.g. "limits.wall_seconds" at no cost on success.
class decoder {
 public:
  explicit decoder(const json_tree& tree, bool refuse_unknown_members = false) noexcept
      : tree_(tree), refuse_unknown_members_(refuse_unknown_members) {}

  template <class T>
  bool decode(std::uint32_t i, T& out);

  template <class T>
  bool decode_struct(std::uint32_t i, T& out);

  [[nodiscard]] error failure_error() const {
    std::string path;
    for (auto segment = path_.rbegin(); segment != path_.rend(); ++segment) {
      if (!path.empty() && segment->front() != '[') path += '.';
      path += *segment;
    }
    return error{kind_, path.empty() ? what_ : path + ": " + what_};
  }

 private:
  bool fail(error_kind kind, std::string what) {
    kind_ = kind;
    what_ = std::move(what);
    return false;
  }
  bool wrong_kind(std::uint32_t i, const char* expected) {
    return fail(error_kind::frame_wrong_kind,
                std::string{"expected "} + expected + ", got " + describe(tree_.nodes[i].kind));
  }

  template <class T>
  bool decode_integer(std::uint32_t i, T& out);
  template <class T>
  bool decode_floating(std::uint32_t i, T& out);
  template <class T>
  bool decode_enum(std::uint32_t i, T& out);

  template <class T>
  static std::string member_names() {
    std::string known;
    hana::for_each(hana::accessors<T>(), [&](auto field) {
      known.append(known.empty() ? "" : ", ").append(member_name(std::remove_cvref_t<decltype(hana::first(field))>{}));
    });
    return known;
  }

  template <class T>
  bool unknown_member(std::string_view key) {
    path_.push_back(excerpt(key));
    return fail(error_kind::frame_unknown_member, "no such member (the members are: " + member_names<T>() + ")");
  }

  /// "; given instead: skus (the members are: sku, quantity)", or "" when object i holds only T's members.
  template <class T>
  std::string unknown_members_note(std::uint32_t i) const {
    std::string unknown;
    for (std::uint32_t k = tree_.first_child(i); k != no_node; k = tree_.nodes[k].next) {
      const std::string_view key = tree_.decoded(k);
      bool known = false;
      hana::for_each(hana::accessors<T>(), [&](auto field) {
        known = known || key == member_name(std::remove_cvref_t<decltype(hana::first(field))>{});
      });
      if (!known) unknown.append(unknown.empty() ? "" : ", ").append(excerpt(key));
    }
    return unknown.empty() ? "" : "; given instead: " + unknown + " (the members are: " + member_names<T>() + ")";
  }

  const json_tree& tree_;
  bool refuse_unknown_members_ = false;
  error_kind kind_ = error_kind::json_malformed;
  std::string what_;
  std::vector<std::string> path_;  ///< innermost segment first
};

template <class T>
bool decoder::decode_integer(std::uint32_t i, T& out) {
  const node& n = tree_.nodes[i];
  if (n.kind == node_kind::integer) {
    bool fits;
    if (n.flags & node::unsigned_payload) {
      fits = std::in_range<T>(n.payload);
      if (fits) out = static_cast<T>(n.payload);
    } else {
      const auto v = static_cast<std::int64_t>(n.payload);
      fits = std::in_range<T>(v);
      if (fits) out = static_cast<T>(v);
    }
    if (fits) return true;
    return fail(error_kind::frame_number_out_of_range,
                excerpt(tree_.raw(i)) + " does not fit " + integer_type_name<T>());
  }
  if (n.kind == node_kind::number && (n.flags & node::integer_literal))
    return fail(error_kind::frame_number_out_of_range,
                excerpt(tree_.raw(i)) + " is outside the 64-bit integer range");
  if (n.kind == node_kind::number)
    return fail(error_kind::frame_wrong_kind,
                "expected an integer, got the non-integral number " + excerpt(tree_.raw(i)));
  return wrong_kind(i, "an integer");
}

template <class T>
bool decoder::decode_floating(std::uint32_t i, T& out) {
  const node& n = tree_.nodes[i];
  double d;
  if (n.kind == node_kind::number) d = std::bit_cast<double>(n.payload);
  else if (n.kind == node_kind::integer && (n.flags & node::unsigned_payload)) d = static_cast<double>(n.payload);
  else if (n.kind == node_kind::integer) d = static_cast<double>(static_cast<std::int64_t>(n.payload));
  else return wrong_kind(i, "a number");
  if constexpr (sizeof(T) < sizeof(double)) {
    if (std::fabs(d) > static_cast<double>(std::numeric_limits<T>::max()))
      return fail(error_kind::frame_number_out_of_range,
                  excerpt(tree_.raw(i)) + " does not fit a " + std::to_string(sizeof(T) * 8) +
                      "-bit float");
  }
  out = static_cast<T>(d);
  return true;
}

template <class T>
bool decoder::decode_enum(std::uint32_t i, T& out) {
  if (tree_.nodes[i].kind != node_kind::string) return wrong_kind(i, "a string");
  const std::string_view spelling = tree_.decoded(i);
  if (const std::optional<T> parsed = parse_enum<T>(spelling)) {
    out = *parsed;
    return true;
  }
  std::string known;
  for (std::string_view s : enum_names<T>::spellings) {
    if (!known.empty()) known += ", ";
    known += s;
  }
  return fail(error_kind::frame_bad_enum,
              "unknown spelling \"" + excerpt(spelling) + "\" (expected one of: " + known + ")");
}

template <class T>
bool decoder::decode(std::uint32_t i, T& out) {
  const node& n = tree_.nodes[i];
  if constexpr (std::is_same_v<T, bool>) {
    if (n.kind != node_kind::boolean) return wrong_kind(i, "a boolean");
    out = n.payload != 0;
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    return decode_integer(i, out);
  } else if constexpr (std::is_floating_point_v<T>) {
    return decode_floating(i, out);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (n.kind != node_kind::string) return wrong_kind(i, "a string");
    out.assign(tree_.decoded(i));
    return true;
  } else if constexpr (std::is_same_v<T, json_text>) {
    out.text.assign(tree_.raw(i));  // any value: the parse already validated it
    return true;
  } else if constexpr (spelt<T>) {
    if (n.kind != node_kind::string) return wrong_kind(i, "a string");
    out = T::from_spelling(tree_.decoded(i));
    return true;
  } else if constexpr (named_enum<T>) {
    return decode_enum(i, out);
  } else if constexpr (is_optional<T>::value) {
    if (n.kind == node_kind::null) {
      out.reset();
      return true;
    }
    return decode(i, out.emplace(blank<typename T::value_type>()));
  } else if constexpr (is_cap<T>::value) {
    return decode(i, out.value);
  } else if constexpr (is_request<T>::value) {
    return decode(i, out.value);
  } else if constexpr (is_vector<T>::value) {
    if (n.kind != node_kind::array) return wrong_kind(i, "an array");
    out.clear();
    out.reserve(static_cast<std::size_t>(n.payload));
    std::size_t index = 0;
    for (std::uint32_t e = tree_.first_child(i); e != no_node; e = tree_.nodes[e].next, ++index) {
      auto element = blank<typename T::value_type>();  // not emplace_back: std::vector<bool> has no references
      if (!decode(e, element)) {
        path_.push_back("[" + std::to_string(index) + "]");
        return false;
      }
      out.push_back(std::move(element));
    }
    return true;
  } else if constexpr (is_std_array<T>::value) {
    if (n.kind != node_kind::array) return wrong_kind(i, "an array");
    if (n.payload != out.size())
      return fail(error_kind::frame_wrong_kind, "expected an array of " + std::to_string(out.size()) +
                                                    " elements, got " + std::to_string(n.payload));
    std::size_t index = 0;
    for (std::uint32_t e = tree_.first_child(i); e != no_node; e = tree_.nodes[e].next, ++index) {
      if (!decode(e, out[index])) {
        path_.push_back("[" + std::to_string(index) + "]");
        return false;
      }
    }
    return true;
  } else if constexpr (is_string_map<T>::value) {
    if (n.kind != node_kind::object) return wrong_kind(i, "an object");
    out.clear();
    for (std::uint32_t k = tree_.first_child(i); k != no_node; k = tree_.nodes[k].next) {
      auto element = blank<typename T::mapped_type>();
      if (!decode(k + 1, element)) {
        path_.push_back(excerpt(tree_.decoded(k)));
        return false;
      }
      using key = typename T::key_type;
      if constexpr (spelt<key>) out.emplace(key::from_spelling(tree_.decoded(k)), std::move(element));
      else out.emplace(tree_.decoded(k), std::move(element));
    }
    return true;
  } else if constexpr (is_struct<T>) {
    return decode_struct(i, out);
  } else {
    static_assert(always_false<T>, "psych::protocol: the JSON codec does not know this type");
    return false;
  }
}

template <class T>
bool decoder::decode_struct(std::uint32_t i, T& out) {
  static_assert(required_members_exist<T>(), "required_members names a member the struct lacks");
  if (tree_.nodes[i].kind != node_kind::object) return wrong_kind(i, "an object");
  if constexpr (requires { T::required_members; }) {
    for (std::string_view name : T::required_members) {
      if (tree_.member(i, name) == no_node) {
        path_.emplace_back(name);
        // A misspelt member (skus for sku) is why the right one is missing: name both.
        return fail(error_kind::frame_missing_member,
                    "required member is missing" + (refuse_unknown_members_ ? unknown_members_note<T>(i) : ""));
      }
    }
  }
  // One pass over the JSON members, each matched against the member names;
  // a name the struct does not have is skipped.
  for (std::uint32_t k = tree_.first_child(i); k != no_node; k = tree_.nodes[k].next) {
    const std::string_view key = tree_.decoded(k);
    bool ok = true;
    bool known = false;
    hana::for_each(hana::accessors<T>(), [&](auto field) {
      constexpr std::string_view name = member_name(std::remove_cvref_t<decltype(hana::first(field))>{});
      if (key != name) return;
      known = true;
      if (ok && !decode(k + 1, hana::second(field)(out))) {
        path_.emplace_back(name);
        ok = false;
      }
    });
    if (!ok) return false;
    if (!known && refuse_unknown_members_) return unknown_member<T>(key);
  }
  return true;
}

}  // namespace detail

// ---- the public codec -----------------------------------------------------------

/// Write `value` as JSON (see the rules at the top of this header).
template <class T>
void write_json(json_writer& w, const T& value) {
  using namespace detail;
  if constexpr (std::is_same_v<T, bool>) {
    w.Bool(value);
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    w.Int64(static_cast<std::int64_t>(value));
  } else if constexpr (std::is_integral_v<T>) {
    w.Uint64(static_cast<std::uint64_t>(value));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) codec_bug("encoding a NaN or an infinity: JSON cannot carry it");
    w.Double(static_cast<double>(value));
  } else if constexpr (std::is_same_v<T, std::string>) {
    write_string(w, value);
  } else if constexpr (std::is_same_v<T, json_text>) {
    write_json_text(w, value);
  } else if constexpr (spelt<T>) {
    write_string(w, value.spelling());
  } else if constexpr (named_enum<T>) {
    if (static_cast<std::size_t>(value) >= enum_names<T>::spellings.size())
      codec_bug("encoding an enum value that has no spelling");
    const std::string_view spelling = name_of(value);
    w.String(spelling.data(), json_size(spelling.size()));
  } else if constexpr (is_optional<T>::value) {
    if (value) write_json(w, *value);
    else w.Null();
  } else if constexpr (is_cap<T>::value || is_request<T>::value) {
    write_json(w, value.value);
  } else if constexpr (is_vector<T>::value || is_std_array<T>::value) {
    w.StartArray();
    for (const typename T::value_type& element : value) write_json(w, element);
    w.EndArray();
  } else if constexpr (is_string_map<T>::value) {
    w.StartObject();
    for (const auto& [key, element] : value) {
      if constexpr (spelt<typename T::key_type>) write_string(w, key.spelling(), /*as_key=*/true);
      else write_string(w, key, /*as_key=*/true);
      write_json(w, element);
    }
    w.EndObject();
  } else if constexpr (is_struct<T>) {
    w.StartObject();
    write_members(w, value);
    w.EndObject();
  } else {
    static_assert(always_false<T>, "psych::protocol: the JSON codec does not know this type");
  }
}

/// `value` as compact JSON, no newline.
template <class T>
std::string encode_json(const T& value) {
  rapidjson::StringBuffer buffer;
  json_writer writer{buffer};
  write_json(writer, value);
  return std::string{buffer.GetString(), buffer.GetSize()};
}

/// Parse `text` (one JSON value, surrounding whitespace allowed) into a T.
template <class T>
result<T> decode_json(std::string_view text, json_bounds bounds = {}) {
  detail::json_tree tree;
  PSYCH_TRY(detail::parse(text, bounds, tree));
  T value = detail::blank<T>();
  detail::decoder decoder{tree};
  if (!decoder.decode(0, value)) return boost::outcome_v2::failure(decoder.failure_error());
  return value;
}

/// The same, refusing a member that T (or a struct inside it) does not have: frame_unknown_member,
/// naming the members there are. For input written by a model, where a misspelt member must not be
/// silently dropped; the launcher contract keeps the tolerant decode_json (a newer peer may add
/// members).
template <class T>
result<T> decode_json_strict(std::string_view text, json_bounds bounds = {}) {
  detail::json_tree tree;
  PSYCH_TRY(detail::parse(text, bounds, tree));
  T value = detail::blank<T>();
  detail::decoder decoder{tree, /*refuse_unknown_members=*/true};
  if (!decoder.decode(0, value)) return boost::outcome_v2::failure(decoder.failure_error());
  return value;
}

/// One NDJSON line: {"type":"<Frame::type>", members...} and '\n'.
template <class Frame>
std::string encode_frame(const Frame& frame) {
  static_assert(detail::is_frame<Frame>(),
                "a frame is a Hana struct with a static `type` and no member named \"type\"");
  rapidjson::StringBuffer buffer;
  json_writer writer{buffer};
  const std::string_view type = Frame::type;
  writer.StartObject();
  writer.Key("type", 4);
  writer.String(type.data(), static_cast<rapidjson::SizeType>(type.size()));
  detail::write_members(writer, frame);
  writer.EndObject();
  std::string line;
  line.reserve(buffer.GetSize() + 1);
  line.append(buffer.GetString(), buffer.GetSize());
  line.push_back('\n');
  return line;
}

/// Decode one frame (a line without its '\n'; a trailing '\r' is whitespace)
/// as whichever of Frames its `type` names.
template <class... Frames>
result<std::variant<Frames...>> decode_frame(std::string_view line, json_bounds bounds = {}) {
  static_assert(sizeof...(Frames) > 0);
  static_assert((detail::is_frame<Frames>() && ...),
                "a frame is a Hana struct with a static `type` and no member named \"type\"");
  static_assert(detail::distinct_frame_types<Frames...>(), "two frames share one `type`");
  using detail::node_kind;

  detail::json_tree tree;
  PSYCH_TRY(detail::parse(line, bounds, tree));
  if (tree.nodes[0].kind != node_kind::object)
    return fail_with(error_kind::frame_missing_type,
                   std::string{"a frame is a JSON object, got "} + detail::describe(tree.nodes[0].kind));
  const std::uint32_t type_node = tree.member(0, "type");
  if (type_node == detail::no_node)
    return fail_with(error_kind::frame_missing_type, "the frame has no member \"type\"");
  if (tree.nodes[type_node].kind != node_kind::string)
    return fail_with(error_kind::frame_missing_type,
                   std::string{"\"type\" is "} + detail::describe(tree.nodes[type_node].kind) +
                       ", not a string");
  const std::string_view type = tree.decoded(type_node);

  std::variant<Frames...> frame;
  detail::decoder decoder{tree};
  bool found = false;
  bool ok = true;
  (
      [&] {
        if (!found && type == Frames::type) {
          found = true;
          ok = decoder.decode_struct(0, frame.template emplace<Frames>());
        }
      }(),
      ...);
  if (!found) {
    std::string known;
    ((known += (known.empty() ? "" : ", "), known += Frames::type), ...);
    return fail_with(error_kind::frame_unknown_type,
                   "\"" + detail::excerpt(type) + "\" is not carried here (expected one of: " +
                       known + ")");
  }
  if (!ok) return boost::outcome_v2::failure(decoder.failure_error());
  return frame;  // implicitly moved (C++20)
}

}  // namespace psych::protocol
