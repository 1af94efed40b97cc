// Error: the kinds of failure callers branch on, and how errno values map onto them.
#include "common/error.hpp"

#include <cerrno>

#include <catch2/catch.hpp>

using mcpmqtt::Errc;
using mcpmqtt::Error;

TEST_CASE("error: errno values map onto the kinds callers branch on", "[error]") {
  using mcpmqtt::errc_from_errno;
  CHECK(errc_from_errno(ENOENT) == Errc::not_found);
  CHECK(errc_from_errno(ENOTDIR) == Errc::not_found);
  CHECK(errc_from_errno(EACCES) == Errc::permission_denied);
  CHECK(errc_from_errno(EPERM) == Errc::permission_denied);
  CHECK(errc_from_errno(ENOEXEC) == Errc::invalid_argument);
  CHECK(errc_from_errno(EADDRINUSE) == Errc::in_use);
  CHECK(errc_from_errno(ETXTBSY) == Errc::in_use);
  CHECK(errc_from_errno(EAGAIN) == Errc::resources_exhausted);
  CHECK(errc_from_errno(EMFILE) == Errc::resources_exhausted);
  CHECK(errc_from_errno(ENFILE) == Errc::resources_exhausted);
  CHECK(errc_from_errno(ENOMEM) == Errc::resources_exhausted);
  CHECK(errc_from_errno(EADDRNOTAVAIL) == Errc::failed);
  CHECK(errc_from_errno(EIO) == Errc::failed);
}

TEST_CASE("error: transient and permanent kinds, and `failed`, which is neither", "[error]") {
  for (auto kind : {Errc::in_use, Errc::resources_exhausted}) {
    const Error e(kind, "x");
    CHECK(e.transient());
    CHECK_FALSE(e.permanent());
  }
  for (auto kind : {Errc::invalid_argument, Errc::not_found, Errc::permission_denied}) {
    const Error e(kind, "x");
    CHECK(e.permanent());
    CHECK_FALSE(e.transient());
  }
  const Error other(Errc::failed, "x");
  CHECK_FALSE(other.transient());
  CHECK_FALSE(other.permanent());
  // Codes of other categories are neither: only the bridge's kinds say what to do.
  const std::error_code generic(ENOENT, std::generic_category());
  CHECK_FALSE(mcpmqtt::transient(generic));
  CHECK_FALSE(mcpmqtt::permanent(generic));
}

TEST_CASE("error: the kinds are error codes of the bridge's own category", "[error]") {
  const std::error_code code = Errc::permission_denied;
  CHECK(code.category().name() == std::string("mcp-mqtt-bridge"));
  CHECK(code.message() == "permission denied");
  CHECK(code == Errc::permission_denied);
  CHECK(code != Errc::not_found);
  CHECK(std::error_code(Errc::resources_exhausted).message() == "resources exhausted");
  const Error e(Errc::in_use, "cannot listen on 127.0.0.1:8080 (http.listen): in use");
  CHECK(e.code == Errc::in_use);
  CHECK(e.message == "cannot listen on 127.0.0.1:8080 (http.listen): in use");
}
