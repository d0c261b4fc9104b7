// The external net plugin of the NCCL emulation, found and opened the way NCCL 2.28 does it
// (src/plugin/plugin_open.cc, src/plugin/net.cc): NCCL_NET_PLUGIN names a library, tried as
// given, then as libnccl-net-<name>.so; the library is opened RTLD_NOW | RTLD_LOCAL and its
// ncclNetPlugin_v11 is what 2.28 looks for first. Unlike NCCL, which falls back to its own
// transports, a plugin that is named but cannot be used is a Failure: the tests that set
// NCCL_NET_PLUGIN are there to drive it.
#pragma once

#include <cstdarg>
#include <string>

#include "plugin/nccl_api/net_v11.h"

namespace topocoll::emu {

struct NetPlugin {
  const ncclNet_v11_t* net = nullptr;
  std::string path;  // the library that was opened
  int devices = 0;   // devices() at first init
};

// The plugin NCCL_NET_PLUGIN names, opened on first use; null when the variable is unset,
// empty or "none". Throws Failure when it is named but cannot be loaded or has no v11 face.
const NetPlugin* net_plugin();

// The logger NCCL hands to init: NCCL_DEBUG=WARN shows WARN lines, INFO (or TRACE) both, in
// NCCL's format ("host:pid:tid [dev] NCCL WARN ..."), on stdout as NCCL prints them.
void net_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                       const char* format, ...);

// "ncclSuccess", "ncclInternalError", ... for messages.
const char* result_name(ncclResult_t result);

}  // namespace topocoll::emu
