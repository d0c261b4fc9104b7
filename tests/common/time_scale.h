// Wall-clock deadlines in tests scale with the build: sanitized builds run every process
// several times slower (32 NAP ranks starting under AddressSanitizer on two cores left one
// of 19 measuring rounds inside a 4 x 25 s budget; eight ThreadSanitizer processes running
// every generator take minutes).
#pragma once

namespace topocoll::testing_support {

#if defined(__SANITIZE_THREAD__)
inline constexpr int kTimeScale = 8;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int kTimeScale = 8;
#else
inline constexpr int kTimeScale = 1;
#endif

}  // namespace topocoll::testing_support
