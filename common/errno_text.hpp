// An errno value as messages and log lines say it ("No such file or directory"). Unlike
// std::strerror, safe on any thread.
#pragma once

#include <string>
#include <system_error>

namespace mcpmqtt {

inline std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

}  // namespace mcpmqtt
