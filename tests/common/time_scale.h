// Wall-clock deadlines in tests scale with the build: sanitized builds run every process
// several times slower (32 ranks starting under AddressSanitizer take most of a 25 s budget
// on two cores; eight ThreadSanitizer processes running every generator take minutes).
#pragma once

namespace topocoll::testing_support {

#if defined(__SANITIZE_THREAD__)
inline constexpr int kTimeScale = 8;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int kTimeScale = 4;
#else
inline constexpr int kTimeScale = 1;
#endif

}  // namespace topocoll::testing_support
