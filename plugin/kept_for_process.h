// Objects a plugin keeps for the life of the process on purpose: never destroyed, since
// NCCL's threads (its proxy threads, a call on a thread still running at exit) may still use
// them while exit() runs the library's static destructors. Told to LeakSanitizer: NCCL
// unloads its net plugin with its last communicator and loads it again (src/plugin/net.cc),
// and what an unloaded copy kept is referenced from nowhere any more, without being a leak.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define TOPOCOLL_LEAK_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define TOPOCOLL_LEAK_SANITIZER 1
#endif
#endif
#if TOPOCOLL_LEAK_SANITIZER
#include <sanitizer/lsan_interface.h>
#endif

namespace topocoll::plugin {

// `object` (from new), kept: what it owns is reachable for LeakSanitizer as long as it is.
template <class T>
T* kept_for_process(T* object) {
#if TOPOCOLL_LEAK_SANITIZER
  __lsan_ignore_object(object);
#endif
  return object;
}

}  // namespace topocoll::plugin
