// Reading JSON text as the wire carries it, for the message model: strict RFC 8259 parsing
// with numbers converted exactly, UTF-8 checks, and the parts of parse errors (positions,
// type names, failures). Internal to bridge/jsonrpc/.
//
// Free functions and stateless templates; safe from any thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <rapidjson/document.h>
#include <rapidjson/reader.h>

#include "bridge/jsonrpc/jsonrpc.hpp"

namespace mcpmqtt::jsonrpc::detail {

// Strict JSON (RFC 8259): UTF-8 validated, no comments or trailing commas, iterative so that
// deep nesting cannot exhaust the stack. Numbers come as their text and are converted here
// (read_number): RapidJSON 1.1 converts some exactly right only with kParseFullPrecisionFlag,
// which gets others badly wrong (0e308 as -6.06e-269, 9e308 as -2.78e-308, 1.8e308 as NaN).
inline constexpr unsigned kWireFlags = rapidjson::kParseValidateEncodingFlag |
                                       rapidjson::kParseIterativeFlag |
                                       rapidjson::kParseNumbersAsStringsFlag;
inline constexpr unsigned kDomFlags = kWireFlags;
inline constexpr unsigned kNoValidation =
    ~static_cast<unsigned>(rapidjson::kParseValidateEncodingFlag);

// True when no byte has its high bit set: such text is valid UTF-8 as it stands, and RapidJSON's
// validation, a table lookup per byte, can be skipped (it was a fifth of the bridge's CPU on
// 1 MiB tool results). Eight bytes at a time.
bool all_ascii(std::string_view s);

// A JSON number (already checked against the grammar) as RapidJSON's own DOM holds it: an
// integer literal as int64 or uint64 where it fits, anything else as the nearest double
// (std::from_chars rounds correctly). A magnitude beyond the largest double is out of range
// (RapidJSON refuses most such numbers itself, "Number too big to be stored in double", but
// lets 1.8e308 through); one too small for the smallest becomes zero.
struct Number {
  enum class Kind { int64, uint64, real, out_of_range };
  Kind kind = Kind::real;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double d = 0;
};

Number read_number(std::string_view s);

// Forwards a streaming parse to a document, numbers converted by read_number.
template <typename Handler>
class ExactNumbers {
 public:
  explicit ExactNumbers(Handler& h) : h_(h) {}
  bool Null() { return h_.Null(); }
  bool Bool(bool b) { return h_.Bool(b); }
  bool Int(int i) { return h_.Int(i); }
  bool Uint(unsigned u) { return h_.Uint(u); }
  bool Int64(std::int64_t i) { return h_.Int64(i); }
  bool Uint64(std::uint64_t u) { return h_.Uint64(u); }
  bool Double(double d) { return h_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
    const Number v = read_number(std::string_view(s, n));
    switch (v.kind) {
      case Number::Kind::int64:
        return h_.Int64(v.i);
      case Number::Kind::uint64:
        return h_.Uint64(v.u);
      case Number::Kind::real:
        return h_.Double(v.d);
      case Number::Kind::out_of_range:
        break;
    }
    return false;
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return h_.String(s, n, copy); }
  bool StartObject() { return h_.StartObject(); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return h_.Key(s, n, copy); }
  bool EndObject(rapidjson::SizeType n) { return h_.EndObject(n); }
  bool StartArray() { return h_.StartArray(); }
  bool EndArray(rapidjson::SizeType n) { return h_.EndArray(n); }

 private:
  Handler& h_;
};

// Parses `text` with `handler` (SAX), validating UTF-8 only where there can be something to
// validate. `terminated`: the byte after the text is readable and NUL (a std::string's), so
// that RapidJSON's StringStream may read it; with RAPIDJSON_SSE2 (CMakeLists.txt) it then scans
// strings sixteen bytes at a time, where a MemoryStream copies them byte by byte (a third of the
// bridge's CPU on 1 MiB tool results). Text holding a NUL of its own stays on the MemoryStream,
// which reports it where a StringStream would stop at it.
template <unsigned Flags, typename Handler>
rapidjson::ParseResult parse_wire(std::string_view text, Handler& handler,
                                  bool terminated = false) {
  rapidjson::Reader reader;
  const bool ascii = all_ascii(text);
  if (ascii && terminated && std::memchr(text.data(), '\0', text.size()) == nullptr) {
    rapidjson::StringStream ss(text.data());
    return reader.Parse<Flags & kNoValidation>(ss, handler);
  }
  rapidjson::MemoryStream ms(text.data(), text.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> is(ms);
  if (ascii) return reader.Parse<Flags & kNoValidation>(is, handler);
  return reader.Parse<Flags>(is, handler);
}

// At most `max` bytes of `s`, not cutting a UTF-8 sequence in two (for excerpts in messages).
std::string_view cut_utf8(std::string_view s, std::size_t max);

// RapidJSON decodes a JSON escape of a lone low surrogate (U+DC00 to U+DFFF) into the bytes
// ED B0..BF xx, which are not UTF-8 (a lone high surrogate is already a parse error). Raw text
// is validated, so in a decoded string these bytes can only come from such an escape.
bool holds_lone_surrogate(std::string_view s);

const char* json_type_name(rapidjson::Type t);

// Line and column (1-based) of a byte offset, for parse errors a person can find.
std::string position_of(std::string_view text, std::size_t offset);

// A scalar at the top level (`42`, `"x"`) never reaches start(); detect it here.
std::string_view first_token(std::string_view text);

ParseFailure failure(int c, std::string message, Id id = {});

// RFC 8259: a raw NUL is never part of JSON text (not whitespace, and escaped in strings). The
// parser would take it for the end of the text and accept what precedes it, passing on what
// follows.
std::optional<ParseFailure> nul_failure(std::string_view text);

}  // namespace mcpmqtt::jsonrpc::detail
