// The library is built with hidden visibility; only the plugin structs NCCL dlsym()s are
// exported (checked by tests/plugin/tuner_dlopen_test.cpp with nm -D).
#pragma once

#define TOPOCOLL_TUNER_EXPORT extern "C" __attribute__((visibility("default")))
