// Whether the tests (and the bridge processes they start, which are the same build) run under a
// sanitizer that changes how memory behaves: ASan keeps freed memory resident in its quarantine
// and TSan its shadow, so a bound on RSS says nothing there and is checked in plain builds only.
#pragma once

namespace mcpmqtt::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kRssMeaningful = false;
#else
inline constexpr bool kRssMeaningful = true;
#endif

}  // namespace mcpmqtt::test
