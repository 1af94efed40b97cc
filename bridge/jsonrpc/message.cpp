#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>

#include <rapidjson/error/en.h>

#include "bridge/jsonrpc/classifier.hpp"
#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/jsonrpc/wire.hpp"

namespace mcpmqtt::jsonrpc {

using detail::Classified;
using detail::classify;
using detail::ExactNumbers;
using detail::failure;
using detail::first_token;
using detail::kDomFlags;
using detail::nul_failure;
using detail::parse_wire;
using detail::position_of;

struct Message::State {
  std::shared_ptr<const std::string> text;
  Kind kind = Kind::notification;
  std::string method;
  Id id;
  std::optional<Id> progress_token;
  std::optional<Id> subscription_id;
  Error err;
  // params._meta["io.modelcontextprotocol/protocolVersion"] present, as the classifying pass
  // found it; unknown for a message built without one.
  std::optional<bool> meta_protocol_version;
  // The document, built on first use: 0 not yet, 1 being built, 2 built. (Not std::call_once:
  // glibc's makes a futex call for every message that builds one.)
  mutable std::atomic<int> dom_state{0};
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
  // A std::string's text is NUL-terminated.
  const rapidjson::ParseResult ok = classify(sv, limits.max_depth, c);
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
  st->meta_protocol_version = c.meta_protocol_version;
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

std::optional<bool> Message::meta_has_protocol_version() const {
  return s_->meta_protocol_version;
}

const rapidjson::Document& Message::json() const {
  if (s_->dom_state.load(std::memory_order_acquire) == 2) return *s_->dom;
  int expected = 0;
  if (!s_->dom_state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
    // Another thread builds it (a message shared across strands, rarely): wait for it.
    while (s_->dom_state.load(std::memory_order_acquire) != 2)
      std::this_thread::yield();
    return *s_->dom;
  }
  try {
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
  } catch (...) {
    s_->dom_state.store(0, std::memory_order_release);  // out of memory: the next call tries again
    throw;
  }
  s_->dom_state.store(2, std::memory_order_release);
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
  // A notification given an id is a request, and a null id is not one a request may have: those
  // are read again in full. Otherwise everything but the id is this message's, already read,
  // and the copy is not parsed again (RapidJSON writes the text compactly, with no raw line
  // break, from a document parse() accepted).
  if (s_->kind == Kind::notification || !(id.is_integer() || id.is_string()))
    return from_trusted_text(to_json(d));
  auto st = std::make_shared<State>();
  st->text = std::make_shared<const std::string>(to_json(d));
  st->kind = s_->kind;
  st->method = s_->method;
  st->id = id;
  st->progress_token = s_->progress_token;
  st->subscription_id = s_->subscription_id;
  st->meta_protocol_version = s_->meta_protocol_version;
  st->err = s_->err;
#ifndef NDEBUG
  // Debug builds (the sanitizer tier) check that a full read agrees.
  auto check = from_trusted_text(*st->text);
  if (check.kind() != st->kind || check.id() != st->id || check.method() != st->method ||
      check.progress_token() != st->progress_token ||
      check.subscription_id() != st->subscription_id || !(check.error() == st->err))
    throw std::invalid_argument("internal error: with_id does not match its text");
#endif
  return Message(std::move(st));
}

}  // namespace mcpmqtt::jsonrpc
