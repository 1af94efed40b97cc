#include "bridge/jsonrpc/jsonrpc.hpp"

#include <algorithm>
#include <bitset>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace mcpmqtt::jsonrpc {

namespace {

// Strict JSON (RFC 8259): UTF-8 validated, no comments or trailing commas, iterative so that
// deep nesting cannot exhaust the stack. Numbers come as their text and are converted here
// (read_number): RapidJSON 1.1 converts some exactly right only with kParseFullPrecisionFlag,
// which gets others badly wrong (0e308 as -6.06e-269, 9e308 as -2.78e-308, 1.8e308 as NaN).
constexpr unsigned kWireFlags = rapidjson::kParseValidateEncodingFlag |
                                rapidjson::kParseIterativeFlag |
                                rapidjson::kParseNumbersAsStringsFlag;
constexpr unsigned kDomFlags = kWireFlags;
constexpr unsigned kNoValidation = ~static_cast<unsigned>(rapidjson::kParseValidateEncodingFlag);

// True when no byte has its high bit set: such text is valid UTF-8 as it stands, and RapidJSON's
// validation, a table lookup per byte, can be skipped (it was a fifth of the bridge's CPU on
// 1 MiB tool results). Eight bytes at a time.
bool all_ascii(std::string_view s) {
  constexpr std::uint64_t kHigh = 0x8080808080808080ull;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (w & kHigh) return false;
  }
  for (; i < s.size(); ++i) {
    if (static_cast<unsigned char>(s[i]) & 0x80) return false;
  }
  return true;
}

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

Number read_number(std::string_view s) {
  Number n;
  const char* const end = s.data() + s.size();
  const bool negative = !s.empty() && s.front() == '-';
  if (s.find_first_of(".eE") == std::string_view::npos) {
    if (negative) {
      auto [p, ec] = std::from_chars(s.data(), end, n.i);
      if (ec == std::errc() && p == end) {
        n.kind = Number::Kind::int64;
        return n;
      }
    } else {
      auto [p, ec] = std::from_chars(s.data(), end, n.u);
      if (ec == std::errc() && p == end) {
        n.kind = Number::Kind::uint64;
        return n;
      }
    }
  }
  auto [p, ec] = std::from_chars(s.data(), end, n.d);
  if (ec == std::errc()) return n;
  // Out of range: too large, or too small. The decimal magnitude of the first significant
  // digit tells which (the grammar guarantees a digit, and a nonzero one: zero never overflows).
  const std::string_view digits = s.substr(negative ? 1 : 0);
  const auto e = digits.find_first_of("eE");
  const std::string_view mantissa = digits.substr(0, e);
  long long exponent = 0;
  if (e != std::string_view::npos) {
    std::string_view ex = digits.substr(e + 1);
    const bool ex_negative = !ex.empty() && ex.front() == '-';
    if (!ex.empty() && (ex.front() == '-' || ex.front() == '+')) ex.remove_prefix(1);
    for (char c : ex)
      exponent = std::min<long long>(exponent * 10 + (c - '0'), 1'000'000'000);
    if (ex_negative) exponent = -exponent;
  }
  const auto point = std::min(mantissa.find('.'), mantissa.size());
  const auto first = mantissa.find_first_of("123456789");
  const long long magnitude =
      exponent + (first < point ? static_cast<long long>(point - first)
                                : -static_cast<long long>(first - point - 1));
  if (magnitude > 0) {
    n.kind = Number::Kind::out_of_range;
  } else {
    n.d = negative ? -0.0 : 0.0;
  }
  return n;
}

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

// The length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0 when there is none.
std::size_t utf8_sequence(std::string_view s) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if ((b(i) & 0xC0) != 0x80) return 0;
  return n;
}

// `s` with every byte that is not part of well-formed UTF-8 replaced by U+FFFD, so that it can
// be written into JSON text: what the bridge quotes (a header value, a path, a method in an
// error message) may come from a peer, byte for byte.
std::string scrub_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  while (!s.empty()) {
    const std::size_t n = utf8_sequence(s);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      s.remove_prefix(1);
    } else {
      out.append(s.data(), n);
      s.remove_prefix(n);
    }
  }
  return out;
}

bool valid_utf8(std::string_view s) {
  while (!s.empty()) {
    const std::size_t n = utf8_sequence(s);
    if (n == 0) return false;
    s.remove_prefix(n);
  }
  return true;
}

// At most `max` bytes of `s`, not cutting a UTF-8 sequence in two (for excerpts in messages).
std::string_view cut_utf8(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return s.substr(0, cut);
}

// RapidJSON decodes a JSON escape of a lone low surrogate (U+DC00 to U+DFFF) into the bytes
// ED B0..BF xx, which are not UTF-8 (a lone high surrogate is already a parse error). Raw text
// is validated, so in a decoded string these bytes can only come from such an escape.
bool holds_lone_surrogate(std::string_view s) {
  for (auto p = s.find('\xED'); p != std::string_view::npos; p = s.find('\xED', p + 1))
    if (p + 1 < s.size() && static_cast<unsigned char>(s[p + 1]) >= 0xA0) return true;
  return false;
}

const char* json_type_name(rapidjson::Type t) {
  switch (t) {
    case rapidjson::kNullType:
      return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      return "a boolean";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kNumberType:
      return "a number";
  }
  return "a value";
}

// Line and column (1-based) of a byte offset, for parse errors a person can find.
std::string position_of(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + " column " + std::to_string(col);
}

}  // namespace

// ---- Id ----------------------------------------------------------------------------------------

std::string Id::to_json() const {
  switch (v_.index()) {
    case 1:
      return std::to_string(as_integer());
    case 2:
      return quote(as_string());
    default:
      return "null";
  }
}

std::size_t Id::hash() const {
  switch (v_.index()) {
    case 1:
      return std::hash<std::int64_t>{}(as_integer());
    case 2:
      return std::hash<std::string>{}(as_string()) ^ 0x9e3779b97f4a7c15ULL;
    default:
      return 0;
  }
}

const char* to_string(Kind k) {
  switch (k) {
    case Kind::request:
      return "request";
    case Kind::notification:
      return "notification";
    case Kind::result:
      return "result";
    case Kind::error:
      return "error";
  }
  return "?";
}

// ---- classification ----------------------------------------------------------------------------

namespace {

// What the streaming pass learned about one message.
struct Classified {
  enum class IdState { absent, null, integer, string, invalid };
  IdState id_state = IdState::absent;
  Id id;
  bool jsonrpc_seen = false;
  bool jsonrpc_ok = false;
  std::string method;
  bool method_ok = false;
  bool result_seen = false;
  bool error_seen = false;
  bool error_is_object = false;
  bool error_code_ok = false;
  bool error_code_seen = false;
  bool error_message_ok = false;
  bool error_data_seen = false;
  Error err;
  std::optional<Id> progress_token;
  std::optional<Id> subscription_id;
  std::string first_problem;  // a structural problem found while streaming
  bool depth_exceeded = false;
  bool lone_surrogate = false;  // a string escapes a lone UTF-16 surrogate
  bool number_too_big = false;  // a number beyond the largest double
};

// A RapidJSON SAX handler that classifies a message without building a document.
class Classifier {
 public:
  Classifier(Classified& out, unsigned max_depth) : out_(out), max_depth_(max_depth) {}

  bool Null() { return value(rapidjson::kNullType); }
  bool Bool(bool b) { return value(b ? rapidjson::kTrueType : rapidjson::kFalseType); }
  bool Int(int i) { return integer(i); }
  bool Uint(unsigned u) { return integer(u); }
  bool Int64(std::int64_t i) { return integer(i); }
  bool Uint64(std::uint64_t u) {
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      const Field f = take();
      if (f == Field::id) {
        out_.id_state = Classified::IdState::invalid;
        problem("\"id\" is an integer out of range (at most 9223372036854775807)");
        return true;
      }
      if (f == Field::error_code) {
        out_.error_code_seen = true;
        problem("\"error.code\" is out of range");
        return true;
      }
      type_checks(f, rapidjson::kNumberType, true);
      return true;
    }
    return integer(static_cast<std::int64_t>(u));
  }
  bool Double(double) { return value(rapidjson::kNumberType, /*integral=*/false); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
    const Number v = read_number(std::string_view(s, n));
    switch (v.kind) {
      case Number::Kind::int64:
        return integer(v.i);
      case Number::Kind::uint64:
        return Uint64(v.u);
      case Number::Kind::real:
        return Double(v.d);
      case Number::Kind::out_of_range:
        break;
    }
    out_.number_too_big = true;
    return false;
  }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    std::string_view sv(s, n);
    if (holds_lone_surrogate(sv)) return lone_surrogate();
    const Field f = take();
    switch (f) {
      case Field::jsonrpc:
        out_.jsonrpc_ok = (sv == "2.0");
        if (!out_.jsonrpc_ok)
          problem("\"jsonrpc\" must be \"2.0\", found \"" + std::string(cut_utf8(sv, 32)) + "\"");
        break;
      case Field::id:
        out_.id_state = Classified::IdState::string;
        out_.id = Id::string(std::string(sv));
        break;
      case Field::method:
        out_.method.assign(sv);
        out_.method_ok = true;
        break;
      case Field::error_message:
        out_.err.message.assign(sv);
        out_.error_message_ok = true;
        break;
      case Field::progress_token:
        out_.progress_token = Id::string(std::string(sv));
        break;
      case Field::subscription_id:
        out_.subscription_id = Id::string(std::string(sv));
        break;
      default:
        type_checks(f, rapidjson::kStringType, true);
        break;
    }
    return true;
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    if (holds_lone_surrogate(std::string_view(s, n))) return lone_surrogate();
    pending_ = field_for(std::string_view(s, n));
    return true;
  }
  bool StartObject() { return start(rapidjson::kObjectType); }
  bool EndObject(rapidjson::SizeType) { return end(); }
  bool StartArray() { return start(rapidjson::kArrayType); }
  bool EndArray(rapidjson::SizeType) { return end(); }

 private:
  enum class Frame { root, params, meta, error, other };
  enum class Field {
    none,
    jsonrpc,
    id,
    method,
    params,
    result,
    error,
    error_code,
    error_message,
    error_data,
    meta,
    progress_token,
    subscription_id,
  };

  Frame frame() const { return frames_.empty() ? Frame::other : frames_.back(); }

  Field field_for(std::string_view key) {
    switch (frame()) {
      case Frame::root: {
        Field f = Field::none;
        if (key == "jsonrpc")
          f = Field::jsonrpc;
        else if (key == "id")
          f = Field::id;
        else if (key == "method")
          f = Field::method;
        else if (key == "params")
          f = Field::params;
        else if (key == "result")
          f = Field::result;
        else if (key == "error")
          f = Field::error;
        if (f != Field::none) {
          const auto bit = static_cast<std::size_t>(f);
          if (seen_.test(bit))
            problem("member \"" + std::string(key) + "\" appears more than once");
          seen_.set(bit);
        }
        return f;
      }
      case Frame::params:
        if (key == "_meta") return Field::meta;
        // notifications/progress carries its token directly in params (003 §Progress Flow).
        if (key == "progressToken") return Field::progress_token;
        return Field::none;
      case Frame::meta:
        if (key == "progressToken") return Field::progress_token;
        // 000 §Receiving Notifications: the listen a notification belongs to.
        if (key == "io.modelcontextprotocol/subscriptionId") return Field::subscription_id;
        return Field::none;
      case Frame::error:
        if (key == "code") return Field::error_code;
        if (key == "message") return Field::error_message;
        if (key == "data") return Field::error_data;
        return Field::none;
      case Frame::other:
        return Field::none;
    }
    return Field::none;
  }

  Field take() {
    const Field f = pending_;
    pending_ = Field::none;
    return f;
  }

  void problem(std::string p) {
    if (out_.first_problem.empty()) out_.first_problem = std::move(p);
  }

  bool integer(std::int64_t v) {
    const Field f = take();
    switch (f) {
      case Field::id:
        out_.id_state = Classified::IdState::integer;
        out_.id = Id::integer(v);
        break;
      case Field::error_code:
        out_.error_code_seen = true;
        if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
          problem("\"error.code\" is out of range");
        } else {
          out_.err.code = static_cast<int>(v);
          out_.error_code_ok = true;
        }
        break;
      case Field::progress_token:
        out_.progress_token = Id::integer(v);
        break;
      case Field::subscription_id:
        out_.subscription_id = Id::integer(v);
        break;
      default:
        type_checks(f, rapidjson::kNumberType, true);
        break;
    }
    return true;
  }

  bool value(rapidjson::Type t, bool integral = true) {
    type_checks(take(), t, integral);
    return true;
  }

  // Records a problem when a member has the wrong type; `integral` tells integers apart.
  void type_checks(Field f, rapidjson::Type t, bool integral) {
    const char* found = json_type_name(t);
    switch (f) {
      case Field::jsonrpc:
        problem(std::string("\"jsonrpc\" must be the string \"2.0\", found ") + found);
        break;
      case Field::id:
        if (t == rapidjson::kNullType) {
          out_.id_state = Classified::IdState::null;
        } else {
          out_.id_state = Classified::IdState::invalid;
          problem(std::string("\"id\" must be a string or an integer, found ") +
                  (t == rapidjson::kNumberType && !integral ? "a non-integer number" : found));
        }
        break;
      case Field::method:
        problem(std::string("\"method\" must be a string, found ") + found);
        break;
      case Field::params:
        if (t != rapidjson::kObjectType && t != rapidjson::kArrayType) {
          problem(std::string("\"params\" must be an object or an array, found ") + found);
        }
        break;
      case Field::result:
        out_.result_seen = true;
        break;
      case Field::error:
        out_.error_seen = true;
        if (t == rapidjson::kObjectType) {
          out_.error_is_object = true;
        } else {
          problem(std::string("\"error\" must be an object, found ") + found);
        }
        break;
      case Field::error_code:
        out_.error_code_seen = true;
        problem(std::string("\"error.code\" must be an integer, found ") +
                (t == rapidjson::kNumberType && !integral ? "a non-integer number" : found));
        break;
      case Field::error_message:
        problem(std::string("\"error.message\" must be a string, found ") + found);
        break;
      case Field::error_data:
        out_.error_data_seen = true;
        break;
      default:
        break;
    }
  }

  // Stops the parse: the text holds no valid Unicode string there.
  bool lone_surrogate() {
    out_.lone_surrogate = true;
    return false;
  }

  bool start(rapidjson::Type t) {
    if (frames_.size() >= max_depth_) {
      out_.depth_exceeded = true;
      return false;
    }
    if (frames_.empty()) {
      frames_.push_back(t == rapidjson::kObjectType ? Frame::root : Frame::other);
      return true;
    }
    const Field f = take();
    type_checks(f, t, true);
    Frame next = Frame::other;
    if (t == rapidjson::kObjectType) {
      if (f == Field::params)
        next = Frame::params;
      else if (f == Field::meta)
        next = Frame::meta;
      else if (f == Field::error)
        next = Frame::error;
    }
    frames_.push_back(next);
    return true;
  }

  bool end() {
    frames_.pop_back();
    pending_ = Field::none;
    return true;
  }

  Classified& out_;
  unsigned max_depth_;
  std::vector<Frame> frames_;
  Field pending_ = Field::none;
  std::bitset<16> seen_;
};

// A scalar at the top level (`42`, `"x"`) never reaches start(); detect it here.
std::string_view first_token(std::string_view text) {
  const auto pos = text.find_first_not_of(" \t\r\n");
  return pos == std::string_view::npos ? std::string_view{} : text.substr(pos, 1);
}

ParseFailure failure(int c, std::string message, Id id = {}) {
  return ParseFailure{Error{c, std::move(message), {}}, std::move(id)};
}

// RFC 8259: a raw NUL is never part of JSON text (not whitespace, and escaped in strings). The
// parser would take it for the end of the text and accept what precedes it, passing on what
// follows.
std::optional<ParseFailure> nul_failure(std::string_view text) {
  const auto nul = text.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  return failure(code::parse_error, "invalid JSON at " + position_of(text, nul) +
                                        ": a NUL byte, which JSON text never holds");
}

}  // namespace

struct Message::State {
  std::shared_ptr<const std::string> text;
  Kind kind = Kind::notification;
  std::string method;
  Id id;
  std::optional<Id> progress_token;
  std::optional<Id> subscription_id;
  Error err;
  mutable std::once_flag dom_once;
  // The document's pool, sized to the text: RapidJSON's default first chunk is 64 KiB, and a
  // session keeps some parsed messages (its initialize result) for its whole life.
  mutable std::optional<rapidjson::MemoryPoolAllocator<>> dom_pool;
  mutable std::optional<rapidjson::Document> dom;
};

Expected<Message, ParseFailure> Message::parse(std::string text, const Limits& limits) {
  return parse(std::make_shared<const std::string>(std::move(text)), limits);
}

Expected<Message, ParseFailure> Message::parse(std::shared_ptr<const std::string> text,
                                               const Limits& limits) {
  const std::string_view sv = text ? std::string_view(*text) : std::string_view{};
  if (sv.size() > limits.max_bytes) {
    return unexpected(failure(code::invalid_request, "message of " + std::to_string(sv.size()) +
                                                         " bytes exceeds the limit of " +
                                                         std::to_string(limits.max_bytes) +
                                                         " bytes"));
  }
  const std::string_view tok = first_token(sv);
  if (tok.empty())
    return unexpected(failure(code::parse_error, "empty message: expected a JSON object"));
  if (auto nul = nul_failure(sv)) return unexpected(std::move(*nul));

  Classified c;
  Classifier handler(c, limits.max_depth);
  // A std::string's text is NUL-terminated.
  const rapidjson::ParseResult ok = parse_wire<kWireFlags>(sv, handler, /*terminated=*/true);
  if (!ok) {
    if (c.depth_exceeded) {
      return unexpected(
          failure(code::invalid_request,
                  "nesting deeper than " + std::to_string(limits.max_depth) + " levels"));
    }
    if (c.number_too_big) {
      // As RapidJSON says of the larger exponents it refuses itself.
      return unexpected(failure(
          code::parse_error, std::string("invalid JSON at ") + position_of(sv, ok.Offset()) + ": " +
                                 rapidjson::GetParseError_En(rapidjson::kParseErrorNumberTooBig)));
    }
    if (c.lone_surrogate) {
      // RFC 8259 §8.2: such a string is no Unicode text; RFC 7493 (I-JSON) forbids it.
      return unexpected(failure(code::parse_error,
                                std::string("invalid JSON at ") + position_of(sv, ok.Offset()) +
                                    ": a \\u escape names a lone UTF-16 surrogate, which is "
                                    "no Unicode character"));
    }
    return unexpected(failure(code::parse_error, std::string("invalid JSON at ") +
                                                     position_of(sv, ok.Offset()) + ": " +
                                                     rapidjson::GetParseError_En(ok.Code())));
  }
  if (tok != "{") {
    const char* found = tok == "["                 ? "an array (a batch is not allowed here)"
                        : tok == "\""              ? "a string"
                        : tok == "t" || tok == "f" ? "a boolean"
                        : tok == "n"               ? "null"
                                                   : "a number";
    return unexpected(failure(code::invalid_request,
                              std::string("a JSON-RPC message must be an object, found ") + found));
  }

  using IdState = Classified::IdState;
  const bool id_valid = c.id_state == IdState::integer || c.id_state == IdState::string;
  Id known_id = id_valid ? c.id : Id{};
  auto invalid = [&](std::string m) {
    return unexpected(failure(code::invalid_request, std::move(m), known_id));
  };
  if (!c.first_problem.empty()) return invalid(c.first_problem);
  if (!c.jsonrpc_ok) return invalid("missing member \"jsonrpc\": \"2.0\"");

  auto st = std::make_shared<State>();
  if (c.method_ok) {
    if (c.result_seen || c.error_seen) {
      return invalid("a message cannot have both \"method\" and \"" +
                     std::string(c.result_seen ? "result" : "error") + "\"");
    }
    if (c.id_state == IdState::null) {
      return invalid("a request \"id\" must be a string or an integer, not null");
    }
    if (c.method.empty()) return invalid("\"method\" must not be empty");
    st->kind = c.id_state == IdState::absent ? Kind::notification : Kind::request;
    st->method = std::move(c.method);
  } else if (c.result_seen && c.error_seen) {
    return invalid("a response must have exactly one of \"result\" and \"error\", found both");
  } else if (c.result_seen) {
    if (!id_valid) {
      return invalid(c.id_state == IdState::absent
                         ? "a response must have an \"id\""
                         : "a result's \"id\" must be a string or an integer, not null");
    }
    st->kind = Kind::result;
  } else if (c.error_seen) {
    if (c.id_state == IdState::absent)
      return invalid("an error response must have an \"id\" (null if unknown)");
    if (!c.error_code_seen) return invalid("\"error\" must have an integer \"code\"");
    if (!c.error_message_ok) return invalid("\"error\" must have a string \"message\"");
    st->kind = Kind::error;
    st->err = std::move(c.err);
  } else {
    return invalid(
        "a message must have \"method\" (request or notification) or \"result\"/\"error\" "
        "(response)");
  }
  st->id = std::move(c.id);
  st->progress_token = std::move(c.progress_token);
  if (st->kind == Kind::notification) st->subscription_id = std::move(c.subscription_id);

  // JSON strings cannot hold raw line breaks, so any CR/LF is whitespace between tokens; turning
  // them into spaces keeps the message identical and makes it one stdio line (002 §stdio).
  // (Two vectorised scans: find_first_of calls memchr once per byte of the message.)
  if (sv.find('\n') != std::string_view::npos || sv.find('\r') != std::string_view::npos) {
    auto copy = std::make_shared<std::string>(sv);
    std::replace_if(
        copy->begin(), copy->end(), [](char ch) { return ch == '\n' || ch == '\r'; }, ' ');
    text = std::move(copy);
  }
  st->text = std::move(text);
  State& state = *st;
  Message m(std::move(st));
  if (state.kind == Kind::error && c.error_data_seen) {
    // Rare: keep error.data as JSON text so it can be passed on verbatim.
    state.err.data_json = to_json(m.json()["error"]["data"]);
  }
  return m;
}

Kind Message::kind() const {
  return s_->kind;
}
const std::string& Message::method() const {
  return s_->method;
}
const Id& Message::id() const {
  return s_->id;
}
const std::optional<Id>& Message::progress_token() const {
  return s_->progress_token;
}
const std::optional<Id>& Message::subscription_id() const {
  return s_->subscription_id;
}
const Error& Message::error() const {
  return s_->err;
}
std::string_view Message::text() const {
  return *s_->text;
}
const std::shared_ptr<const std::string>& Message::shared_text() const {
  return s_->text;
}

const rapidjson::Document& Message::json() const {
  std::call_once(s_->dom_once, [this] {
    const std::string& t = *s_->text;
    // Values of 16 bytes and copies of the strings: about the text's size, rarely more.
    s_->dom_pool.emplace(std::min<std::size_t>(t.size() + 512, 64 * 1024));
    auto& d = s_->dom.emplace(&*s_->dom_pool);
    // The same reading as parse()'s, numbers converted alike; the text was accepted by it.
    auto build = [&t](rapidjson::Document& doc) {
      ExactNumbers<rapidjson::Document> exact(doc);
      return !parse_wire<kDomFlags>(t, exact, /*terminated=*/true).IsError();
    };
    d.Populate(build);
  });
  return *s_->dom;
}

const rapidjson::Value* Message::params() const {
  const auto& d = json();
  auto it = d.FindMember("params");
  return it == d.MemberEnd() ? nullptr : &it->value;
}

const rapidjson::Value* Message::result_value() const {
  const auto& d = json();
  auto it = d.FindMember("result");
  return it == d.MemberEnd() ? nullptr : &it->value;
}

Message Message::from_trusted_text(std::string text) {
  auto parsed = parse(std::move(text), Limits{std::numeric_limits<std::size_t>::max(), 1000});
  if (!parsed) {
    throw std::invalid_argument("internal error: built an invalid JSON-RPC message: " +
                                parsed.error().error.message);
  }
  return std::move(parsed).value();
}

Message Message::request(const Id& id, std::string_view method, std::string_view params_json) {
  std::string t = R"({"jsonrpc":"2.0","id":)" + id.to_json() + R"(,"method":)" + quote(method);
  if (!params_json.empty()) t.append(R"(,"params":)").append(params_json);
  t.push_back('}');
  return from_trusted_text(std::move(t));
}

Message Message::notification(std::string_view method, std::string_view params_json) {
  std::string t = R"({"jsonrpc":"2.0","method":)" + quote(method);
  if (!params_json.empty()) t.append(R"(,"params":)").append(params_json);
  t.push_back('}');
  return from_trusted_text(std::move(t));
}

Message Message::built_notification(std::string_view method, std::string_view params_json,
                                    std::optional<Id> subscription_id) {
  std::string t = R"({"jsonrpc":"2.0","method":)" + quote(method);
  t.append(R"(,"params":)").append(params_json);
  t.push_back('}');
#ifndef NDEBUG
  // Debug builds (the sanitizer tier) check the promise the callers make.
  auto check = from_trusted_text(t);
  if (check.kind() != Kind::notification || check.subscription_id() != subscription_id)
    throw std::invalid_argument("internal error: built_notification does not match its text");
#endif
  auto st = std::make_shared<State>();
  st->kind = Kind::notification;
  st->method = std::string(method);
  st->subscription_id = std::move(subscription_id);
  st->text = std::make_shared<const std::string>(std::move(t));
  return Message(std::move(st));
}

Message Message::result(const Id& id, std::string_view result_json) {
  return from_trusted_text(R"({"jsonrpc":"2.0","id":)" + id.to_json() + R"(,"result":)" +
                           std::string(result_json) + "}");
}

Message Message::error(const Id& id, const Error& err) {
  std::string t = R"({"jsonrpc":"2.0","id":)" + id.to_json() + R"(,"error":{"code":)" +
                  std::to_string(err.code) + R"(,"message":)" + quote(err.message);
  if (!err.data_json.empty()) t.append(R"(,"data":)").append(err.data_json);
  t.append("}}");
  return from_trusted_text(std::move(t));
}

Message Message::error(const Id& id, int c, std::string_view message) {
  return error(id, Error{c, std::string(message), {}});
}

Message Message::with_id(const Id& id) const {
  rapidjson::Document d;
  d.CopyFrom(json(), d.GetAllocator());
  rapidjson::Value v;
  if (id.is_integer())
    v.SetInt64(id.as_integer());
  else if (id.is_string())
    v.SetString(id.as_string().c_str(), static_cast<rapidjson::SizeType>(id.as_string().size()),
                d.GetAllocator());
  auto it = d.FindMember("id");
  if (it != d.MemberEnd())
    it->value = v;
  else
    d.AddMember("id", v, d.GetAllocator());
  return from_trusted_text(to_json(d));
}

// ---- bodies and batches ------------------------------------------------------------------------

namespace {

// Splits a syntactically valid JSON array into the texts of its elements.
std::vector<std::string_view> split_array(std::string_view text) {
  std::vector<std::string_view> out;
  int depth = 0;
  bool in_string = false, escaped = false;
  std::size_t start = std::string_view::npos;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth == 1) {
        start = i + 1;
        continue;
      }
    } else if (ch == ']' || ch == '}') {
      if (--depth == 0) {
        if (start != std::string_view::npos) out.push_back(text.substr(start, i - start));
        break;
      }
    } else if (ch == ',' && depth == 1) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
      continue;
    }
  }
  // Trim whitespace; an empty array yields one empty piece, removed here.
  for (auto& piece : out) {
    const auto b = piece.find_first_not_of(" \t\r\n");
    const auto e = piece.find_last_not_of(" \t\r\n");
    piece = b == std::string_view::npos ? std::string_view{} : piece.substr(b, e - b + 1);
  }
  if (out.size() == 1 && out[0].empty()) out.clear();
  return out;
}

// Validates syntax and nesting of a whole body without classifying it.
struct SyntaxOnly : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, SyntaxOnly> {
  unsigned depth = 0, max_depth = 0;
  bool too_deep = false;
  bool Default() { return true; }
  bool StartObject() { return push(); }
  bool StartArray() { return push(); }
  bool EndObject(rapidjson::SizeType) {
    --depth;
    return true;
  }
  bool EndArray(rapidjson::SizeType) {
    --depth;
    return true;
  }
  bool push() {
    if (++depth > max_depth) {
      too_deep = true;
      return false;
    }
    return true;
  }
};

}  // namespace

Expected<Body, ParseFailure> parse_body(std::shared_ptr<const std::string> text,
                                        const Limits& limits) {
  if (!text || first_token(*text) != "[") {
    auto m = Message::parse(std::move(text), limits);
    if (!m) return unexpected(std::move(m.error()));
    Body b;
    b.messages.push_back(std::move(m).value());
    return b;
  }
  return parse_body(std::string(*text), limits);
}

Expected<Body, ParseFailure> parse_lines(std::string_view text, const Limits& limits) {
  if (text.size() > limits.max_bytes) {
    return unexpected(failure(code::invalid_request, "body of " + std::to_string(text.size()) +
                                                         " bytes exceeds the limit of " +
                                                         std::to_string(limits.max_bytes) +
                                                         " bytes"));
  }
  Body out;
  std::size_t lines = 0, bodies = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++lines;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto body = parse_body(std::string(line), limits);
    if (!body) {
      auto f = std::move(body.error());
      f.error.message = "line " + std::to_string(lines) + ": " + f.error.message;
      return unexpected(std::move(f));
    }
    ++bodies;
    for (auto& m : body->messages)
      out.messages.push_back(std::move(m));
  }
  if (bodies < 2)
    return unexpected(failure(code::parse_error, "not several JSON-RPC messages, one per line"));
  return out;
}

Expected<Body, ParseFailure> parse_body(std::string text, const Limits& limits) {
  if (first_token(text) != "[") {
    auto m = Message::parse(std::move(text), limits);
    if (!m) return unexpected(std::move(m.error()));
    Body b;
    b.messages.push_back(std::move(m).value());
    return b;
  }
  if (text.size() > limits.max_bytes) {
    return unexpected(failure(code::invalid_request, "batch of " + std::to_string(text.size()) +
                                                         " bytes exceeds the limit of " +
                                                         std::to_string(limits.max_bytes) +
                                                         " bytes"));
  }
  if (auto nul = nul_failure(text)) return unexpected(std::move(*nul));
  SyntaxOnly syntax;
  syntax.max_depth = limits.max_depth;
  const rapidjson::ParseResult ok = parse_wire<kWireFlags>(text, syntax);
  if (!ok) {
    if (syntax.too_deep) {
      return unexpected(
          failure(code::invalid_request,
                  "nesting deeper than " + std::to_string(limits.max_depth) + " levels"));
    }
    return unexpected(failure(code::parse_error, std::string("invalid JSON at ") +
                                                     position_of(text, ok.Offset()) + ": " +
                                                     rapidjson::GetParseError_En(ok.Code())));
  }
  const auto pieces = split_array(text);
  if (pieces.empty())
    return unexpected(
        failure(code::invalid_request, "empty batch: a batch must hold at least one message"));
  Body b;
  b.batch = true;
  b.messages.reserve(pieces.size());
  Limits inner = limits;
  inner.max_depth = limits.max_depth > 0 ? limits.max_depth - 1 : 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    auto m = Message::parse(std::string(pieces[i]), inner);
    if (!m) {
      auto f = std::move(m.error());
      f.error.message = "batch element " + std::to_string(i) + ": " + f.error.message;
      return unexpected(std::move(f));
    }
    b.messages.push_back(std::move(m).value());
  }
  return b;
}

std::string serialize_batch(const std::vector<Message>& messages) {
  std::size_t n = 2;
  for (const auto& m : messages)
    n += m.size() + 1;
  std::string out;
  out.reserve(n);
  out.push_back('[');
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i) out.push_back(',');
    out.append(messages[i].text());
  }
  out.push_back(']');
  return out;
}

std::string quote(std::string_view s) {
  std::string scrubbed;
  if (!all_ascii(s) && !valid_utf8(s)) {
    scrubbed = scrub_utf8(s);
    s = scrubbed;
  }
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace mcpmqtt::jsonrpc
