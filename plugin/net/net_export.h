// The library is built with hidden visibility; only the ncclNetPlugin_vN structs NCCL
// dlsym()s are exported (checked by tests/plugin/net_symbols_test.cpp with nm -D).
#pragma once

// Use inside an extern "C" block.
#define TOPOCOLL_NET_EXPORT __attribute__((visibility("default")))
