#include "tests/emu/nccl_emu_net_plugin.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "tests/emu/nccl_emu_failure.h"

namespace topocoll::emu {
namespace {

// NCCL_DEBUG as NCCL reads it: VERSION, WARN, INFO, ABORT, TRACE (case-insensitive).
ncclDebugLogLevel debug_level() {
  static const ncclDebugLogLevel level = [] {
    const char* text = std::getenv("NCCL_DEBUG");
    if (!text) return NCCL_LOG_NONE;
    if (!strcasecmp(text, "VERSION")) return NCCL_LOG_VERSION;
    if (!strcasecmp(text, "WARN")) return NCCL_LOG_WARN;
    if (!strcasecmp(text, "INFO")) return NCCL_LOG_INFO;
    if (!strcasecmp(text, "ABORT")) return NCCL_LOG_ABORT;
    if (!strcasecmp(text, "TRACE")) return NCCL_LOG_TRACE;
    return NCCL_LOG_NONE;
  }();
  return level;
}

std::string library_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) return map->l_name;
  return fallback;
}

NetPlugin load(const std::string& name) {
  // plugin_open.cc: the name as given, then "libnccl-net-<name>.so" for a bare name that is
  // not itself a lib*.so file name.
  std::vector<std::string> tries{name};
  const bool bare = name.find('/') == std::string::npos &&
                    (name.rfind("lib", 0) != 0 || name.size() < 3 ||
                     name.compare(name.size() - 3, 3, ".so") != 0);
  if (bare) tries.push_back("libnccl-net-" + name + ".so");
  std::string errors;
  for (const std::string& candidate : tries) {
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      errors += std::string(errors.empty() ? "" : "; ") + dlerror();
      continue;
    }
    NetPlugin plugin;
    plugin.path = library_path(handle, candidate);
    plugin.net = static_cast<const ncclNet_v11_t*>(dlsym(handle, "ncclNetPlugin_v11"));
    if (!plugin.net)
      throw Failure(ncclInvalidUsage, "NCCL_NET_PLUGIN=" + name + ": " + plugin.path +
                                          " has no ncclNetPlugin_v11 (NCCL 2.28's first choice; "
                                          "the emulation drives v11 only)");
    for (const auto* entry : {reinterpret_cast<const void*>(plugin.net->init),
                              reinterpret_cast<const void*>(plugin.net->devices),
                              reinterpret_cast<const void*>(plugin.net->getProperties),
                              reinterpret_cast<const void*>(plugin.net->listen),
                              reinterpret_cast<const void*>(plugin.net->connect),
                              reinterpret_cast<const void*>(plugin.net->accept),
                              reinterpret_cast<const void*>(plugin.net->regMr),
                              reinterpret_cast<const void*>(plugin.net->deregMr),
                              reinterpret_cast<const void*>(plugin.net->isend),
                              reinterpret_cast<const void*>(plugin.net->irecv),
                              reinterpret_cast<const void*>(plugin.net->test),
                              reinterpret_cast<const void*>(plugin.net->closeSend),
                              reinterpret_cast<const void*>(plugin.net->closeRecv),
                              reinterpret_cast<const void*>(plugin.net->closeListen),
                              reinterpret_cast<const void*>(plugin.net->finalize)})
      if (!entry)
        throw Failure(ncclInvalidUsage, "NCCL_NET_PLUGIN=" + name + ": " + plugin.path +
                                            ": a mandatory ncclNetPlugin_v11 entry is NULL");
    return plugin;
  }
  throw Failure(ncclInvalidUsage, "NCCL_NET_PLUGIN=" + name + " cannot be loaded: " + errors);
}

}  // namespace

const NetPlugin* net_plugin() {
  static std::once_flag once;
  static NetPlugin* plugin = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    const char* name = std::getenv("NCCL_NET_PLUGIN");
    if (!name || !*name || !strcasecmp(name, "none")) return;
    try {
      plugin = new NetPlugin(load(name));
    } catch (const Failure& f) {
      failure = f.what();
    }
  });
  if (!failure.empty()) throw Failure(ncclInvalidUsage, failure);
  return plugin;
}

void net_plugin_logger(ncclDebugLogLevel level, unsigned long /*flags*/, const char* file, int line,
                       const char* format, ...) {
  if (level == NCCL_LOG_NONE || level > debug_level()) return;
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  char message[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof message, format, args);
  va_end(args);
  const long tid = ::syscall(SYS_gettid);
  if (level == NCCL_LOG_WARN)
    std::printf("\n%s:%d:%ld [0] %s:%d NCCL WARN %s\n", host, int(::getpid()), tid, file, line, message);
  else
    std::printf("%s:%d:%ld [0] NCCL INFO %s\n", host, int(::getpid()), tid, message);
  std::fflush(stdout);
}

const char* result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "an unknown ncclResult_t";
  }
}

}  // namespace topocoll::emu
