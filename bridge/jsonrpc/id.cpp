#include <functional>

#include "bridge/jsonrpc/jsonrpc.hpp"

namespace mcpmqtt::jsonrpc {

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

}  // namespace mcpmqtt::jsonrpc
