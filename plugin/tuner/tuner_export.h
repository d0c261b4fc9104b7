// The library is built with hidden visibility; only the plugin structs NCCL dlsym()s are
// exported (checked by tests/plugin/tuner_dlopen_test.cpp with nm -D). Use inside an
// extern "C" block: the struct's name is the C symbol NCCL looks up.
#pragma once

#define TOPOCOLL_TUNER_EXPORT __attribute__((visibility("default")))
