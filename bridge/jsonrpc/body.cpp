#include <rapidjson/error/en.h>

#include "bridge/jsonrpc/jsonrpc.hpp"
#include "bridge/jsonrpc/wire.hpp"

namespace mcpmqtt::jsonrpc {

using detail::failure;
using detail::first_token;
using detail::kWireFlags;
using detail::nul_failure;
using detail::parse_wire;
using detail::position_of;

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

}  // namespace mcpmqtt::jsonrpc
