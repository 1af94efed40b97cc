#include "common/error.hpp"

#include <cerrno>

namespace mcpmqtt {
namespace {

class BridgeCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "mcp-mqtt-bridge"; }
  std::string message(int value) const override {
    switch (static_cast<Errc>(value)) {
      case Errc::invalid_argument:
        return "invalid argument";
      case Errc::not_found:
        return "not found";
      case Errc::permission_denied:
        return "permission denied";
      case Errc::in_use:
        return "in use";
      case Errc::resources_exhausted:
        return "resources exhausted";
      case Errc::failed:
        return "failed";
    }
    return "unknown error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& bridge_category() {
  static const BridgeCategory category;
  return category;
}

std::error_code make_error_code(Errc e) {
  return {static_cast<int>(e), bridge_category()};
}

Errc errc_from_errno(int err) {
  switch (err) {
    case EINVAL:
    case ENAMETOOLONG:
    case E2BIG:
    case ENOEXEC:
      return Errc::invalid_argument;
    case ENOENT:
    case ENOTDIR:
      return Errc::not_found;
    case EACCES:
    case EPERM:
    case EROFS:
      return Errc::permission_denied;
    case EADDRINUSE:
    case EBUSY:
    case ETXTBSY:
      return Errc::in_use;
    case EAGAIN:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOBUFS:
    case ENOSPC:
      return Errc::resources_exhausted;
    default:
      return Errc::failed;
  }
}

bool transient(std::error_code code) {
  if (code.category() != bridge_category()) return false;
  const auto kind = static_cast<Errc>(code.value());
  return kind == Errc::in_use || kind == Errc::resources_exhausted;
}

bool permanent(std::error_code code) {
  if (code.category() != bridge_category()) return false;
  const auto kind = static_cast<Errc>(code.value());
  return kind == Errc::invalid_argument || kind == Errc::not_found ||
         kind == Errc::permission_denied;
}

}  // namespace mcpmqtt
