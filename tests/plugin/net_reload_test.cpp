// NCCL unloads its net plugin when the last communicator using it is gone (dlclose once the
// net's reference count drops to zero, NCCL 2.28 src/plugin/net.cc) and, for the next one,
// opens a plugin library again: this one when it is installed as libnccl-net.so (NCCL 2.28.9
// forgets a name given in NCCL_NET_PLUGIN on unload; docs/net-plugin.md). A framework that
// destroys every process group and makes new ones does this. The library must come back
// whole, and leave no thread behind running its unloaded code.
#include <dlfcn.h>
#include <pthread.h>
#include <gtest/gtest.h>

#include <dirent.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "tests/plugin/net_plugin_harness.h"

namespace topocoll::testing {
namespace {

// This process's threads, by name ("topocoll-net 3" and the like): what is left over, named.
std::multiset<std::string> threads() {
  std::multiset<std::string> names;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string name;
      std::getline(comm, name);
      names.insert(name);
    }
    ::closedir(d);
  }
  return names;
}

// A joined thread leaves /proc/self/task a moment after pthread_join returns (the joiner is
// woken as the thread exits, its entry goes when the kernel releases it): the threads are
// read again for up to two seconds before they count as left over.
std::multiset<std::string> threads_settled_to(const std::multiset<std::string>& want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::multiset<std::string> now = threads();
  while (now != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    now = threads();
  }
  return now;
}

std::string joined(const std::multiset<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

TEST(NetPluginReload, UnloadedAndLoadedAgainAsNcclDoes) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    // A thread started and joined first: a sanitizer runtime starts its own background
    // thread at the process's first pthread_create, which must not count as left over.
    std::thread([] { ::pthread_setname_np(::pthread_self(), "warm-up"); }).join();
    std::multiset<std::string> threads_before = threads();
    for (int i = 0; i < 400 && threads_before.count("warm-up"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      threads_before = threads();
    }
    for (int round = 0; round < 3; ++round) {
      void* lib = ::dlopen(TOPOCOLL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
      RANK_REQUIRE(lib, "round %d: dlopen: %s", round, ::dlerror());
      const auto* net = static_cast<const ncclNet_v11_t*>(::dlsym(lib, "ncclNetPlugin_v11"));
      RANK_REQUIRE(net && std::strcmp(net->name, "topocoll") == 0, "round %d: no ncclNetPlugin_v11", round);
      void* ctx = nullptr;
      RANK_REQUIRE(net->init(&ctx, 1, nullptr, test_logger, nullptr) == ncclSuccess, "round %d: init", round);
      int ndev = 0;
      RANK_REQUIRE(net->devices(&ndev) == ncclSuccess && ndev >= 1, "round %d: devices", round);
      ncclNetProperties_v11_t props;
      RANK_REQUIRE(net->getProperties(0, &props) == ncclSuccess && props.name, "round %d: properties", round);
      // A connection to itself, established and closed: the transport's threads come and go.
      char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
      void* listen = nullptr;
      RANK_REQUIRE(net->listen(ctx, 0, handle, &listen) == ncclSuccess && listen, "round %d: listen", round);
      void* send = nullptr;
      void* recv = nullptr;
      for (int spin = 0; spin < 200000 && (!send || !recv); ++spin) {
        if (!send) RANK_REQUIRE(net->connect(ctx, 0, handle, &send, nullptr) == ncclSuccess, "round %d: connect", round);
        if (!recv) RANK_REQUIRE(net->accept(listen, &recv, nullptr) == ncclSuccess, "round %d: accept", round);
      }
      RANK_REQUIRE(send && recv, "round %d: no connection", round);
      RANK_REQUIRE(net->closeSend(send) == ncclSuccess && net->closeRecv(recv) == ncclSuccess &&
                       net->closeListen(listen) == ncclSuccess,
                   "round %d: close", round);
      RANK_REQUIRE(net->finalize(ctx) == ncclSuccess, "round %d: finalize", round);
      RANK_REQUIRE(::dlclose(lib) == 0, "round %d: dlclose: %s", round, ::dlerror());
      const std::multiset<std::string> after = threads_settled_to(threads_before);
      RANK_REQUIRE(after == threads_before, "round %d: threads after unloading: %s; before: %s", round,
                   joined(after).c_str(), joined(threads_before).c_str());
    }
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

// A process that exits without closing its communicators: NCCL's proxy threads still ask the
// plugin for device properties, connect and send while exit() runs the library's static
// destructors. What they reach (the device catalog, the names NCCL keeps as char*) is kept
// for the process, so a call made after those destructors ran (here: from an exit handler
// registered before the plugin made them, which exit runs after them) still finds it whole.
// A sanitizer build reports the use of a destroyed catalog's memory; any build, a name changed.
const ncclNet_v11_t* g_exiting_net = nullptr;
char g_name_at_start[256];

TEST(NetPluginExit, WhatNcclsThreadsReachOutlivesTheStaticDestructors) {
  auto results = run_ranks(1, [](int, RankMesh&) {
    std::atexit([] {
      ncclNetProperties_v11_t props;
      const bool same = g_exiting_net->getProperties(0, &props) == ncclSuccess && props.name &&
                        std::strcmp(props.name, g_name_at_start) == 0;
      if (!same) std::fprintf(stderr, "after the static destructors: %s\n", props.name ? props.name : "(null)");
      std::fflush(stderr);
      ::_exit(same ? 0 : 3);
    });
    g_exiting_net = net_v11();
    void* ctx = nullptr;
    RANK_REQUIRE(g_exiting_net && g_exiting_net->init(&ctx, 1, nullptr, test_logger, nullptr) == ncclSuccess, "init");
    ncclNetProperties_v11_t props;
    RANK_REQUIRE(g_exiting_net->getProperties(0, &props) == ncclSuccess && props.name, "properties");
    std::snprintf(g_name_at_start, sizeof g_name_at_start, "%s", props.name);
    std::exit(0);  // the exit handler decides
    return 0;
  });
  EXPECT_TRUE(all_ok(results)) << describe(results);
}

}  // namespace
}  // namespace topocoll::testing
