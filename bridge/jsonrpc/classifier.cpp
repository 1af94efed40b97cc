#include "bridge/jsonrpc/classifier.hpp"

#include <bitset>
#include <cstdint>
#include <limits>
#include <vector>

#include "bridge/jsonrpc/wire.hpp"

namespace mcpmqtt::jsonrpc::detail {

namespace {

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
        if (key == "_meta") {
          ++metas_;
          return Field::meta;
        }
        // notifications/progress carries its token directly in params (003 §Progress Flow).
        if (key == "progressToken") return Field::progress_token;
        return Field::none;
      case Frame::meta:
        if (key == "progressToken") return Field::progress_token;
        // 000 §Receiving Notifications: the listen a notification belongs to.
        if (key == "io.modelcontextprotocol/subscriptionId") return Field::subscription_id;
        // In the first _meta only, as RapidJSON's FindMember (and so read_envelope) reads a
        // params with two: claims_modern and the envelope must agree (the fuzzer found them
        // apart).
        if (key == "io.modelcontextprotocol/protocolVersion" && metas_ == 1)
          out_.meta_protocol_version = true;
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
  unsigned metas_ = 0;  // "_meta" members of params met so far
};

}  // namespace

rapidjson::ParseResult classify(std::string_view text, unsigned max_depth, Classified& out) {
  Classifier handler(out, max_depth);
  return parse_wire<kWireFlags>(text, handler, /*terminated=*/true);
}

}  // namespace mcpmqtt::jsonrpc::detail
