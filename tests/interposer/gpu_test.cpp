// GPU (label gpu): two processes on one GPU, each its own NCCL "host" (NCCL_HOSTID) over
// sockets on lo, run the interposer's exact-result check (gpu_check.cpp) under
// LD_PRELOAD=libnccl-topocoll.so, once with the cost model choosing and once with HD forced.
// Skips cleanly without a device. perf/gpu/run_all.sh runs the full 2/4/8-process matrix.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

int run(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void run_ranks(int nranks, const std::string& algo) {
  const std::string dir = std::string(TOPOCOLL_BINARY_DIR) + "/interposer_gpu_" + algo + std::to_string(nranks);
  ASSERT_EQ(run("rm -rf " + dir + " && mkdir -p " + dir), 0);
  const std::string topo = dir + "/topology.json";
  ASSERT_EQ(run(std::string(TOPOCOLL_GPU_CHECK_PATH) + " topology --nranks " + std::to_string(nranks) +
                " --out " + topo + " > " + dir + "/hosts.txt"),
            0);
  std::string script;
  for (int r = 0; r < nranks; ++r) {
    script += "NCCL_HOSTID=s" + std::to_string(r) + " NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=INFO " +
              "NCCL_DEBUG_SUBSYS=INIT,COLL TOPOCOLL_TOPO_FILE=" + topo + " TOPOCOLL_ALGO=" + algo +
              " LD_PRELOAD=" + TOPOCOLL_PLUGIN_PATH + " timeout 600 " + TOPOCOLL_GPU_CHECK_PATH +
              " check --rank " + std::to_string(r) + " --nranks " + std::to_string(nranks) +
              " --id-file " + dir + "/id > " + dir + "/rank" + std::to_string(r) + ".log 2>&1 & ";
  }
  script += "fail=0; for p in $(jobs -p); do wait $p || fail=1; done; exit $fail";
  const int rc = run("bash -c '" + script + "'");
  EXPECT_EQ(rc, 0) << "see " << dir << "/rank*.log";
  // The communicator was served: rank 0 logged its placement.
  EXPECT_EQ(run("grep -q 'served on topology' " + dir + "/rank0.log"), 0) << dir << "/rank0.log";
}

TEST(InterposerGpu, TwoRanksAutoMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  run_ranks(2, "auto");
}

TEST(InterposerGpu, TwoRanksHdMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  run_ranks(2, "hd");
}

}  // namespace
