// NCCL's configuration files as NCCL reads them (config/nccl_conf.h): topocoll's faces must
// see what a cluster put in /etc/nccl.conf even when they read before NCCL's init applies it.
#include "config/nccl_conf.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "config/env.h"
#include "config/warnings.h"
#include "tests/common/scratch_dir.h"

namespace topocoll::config {
namespace {

TEST(NcclConf, LinesAsNcclReadsThem) {
  std::istringstream file(
      "# comment=ignored\n"
      "NCCL_SOCKET_IFNAME=eth0\n"
      "no equals sign\n"
      "NCCL_SOCKET_IFNAME=eth1\n"   // not overwritten: NCCL's setenv(..., 0)
      "TOPOCOLL_ALGO= hd \n"        // nothing trimmed
      "EMPTY=\n"
      "A=b=c");
  NcclConf conf{{"NCCL_HOSTID", "from-before"}};
  add_nccl_conf(file, conf);
  EXPECT_EQ(conf.at("NCCL_SOCKET_IFNAME"), "eth0");
  EXPECT_EQ(conf.at("TOPOCOLL_ALGO"), " hd ");
  EXPECT_EQ(conf.at("EMPTY"), "");
  EXPECT_EQ(conf.at("A"), "b=c");
  EXPECT_EQ(conf.at("NCCL_HOSTID"), "from-before");
  EXPECT_FALSE(conf.count("# comment"));
  EXPECT_FALSE(conf.count("no equals sign"));
}

TEST(NcclConf, NcclConfFileReplacesTheUsersFileAndEtcComesLast) {
  EXPECT_EQ(nccl_conf_paths(std::string("/x/my.conf"), std::string("/home/u")),
            (std::vector<std::string>{"/x/my.conf", "/etc/nccl.conf"}));
  EXPECT_EQ(nccl_conf_paths(std::nullopt, std::string("/home/u")),
            (std::vector<std::string>{"/home/u/.nccl.conf", "/etc/nccl.conf"}));
  EXPECT_EQ(nccl_conf_paths(std::string(""), std::string("/home/u")),
            (std::vector<std::string>{"/home/u/.nccl.conf", "/etc/nccl.conf"}));
  EXPECT_EQ(nccl_conf_paths(std::nullopt, std::nullopt), (std::vector<std::string>{"/etc/nccl.conf"}));
}

TEST(NcclConf, TheFirstFileWinsAndAMissingOneIsSkipped) {
  const testing_support::ScratchDir dir("nccl_conf");
  const std::string user = dir.file("user.nccl.conf"), site = dir.file("nccl.conf");
  std::ofstream(user) << "NCCL_SOCKET_IFNAME=ib0\n";
  std::ofstream(site) << "NCCL_SOCKET_IFNAME=eth0\nNCCL_HOSTID=s3\n";
  const NcclConf conf = read_nccl_conf({user, dir.file("missing.conf"), site});
  EXPECT_EQ(conf.at("NCCL_SOCKET_IFNAME"), "ib0");
  EXPECT_EQ(conf.at("NCCL_HOSTID"), "s3");
}

TEST(NcclConf, APipeOrADeviceIsSkippedWithAWarningNeverWaitedOn) {
  // A FIFO blocked the read forever (inside NCCL's init, under LD_PRELOAD); /dev/zero grew
  // without end. Neither is read; each is named once.
  const testing_support::ScratchDir dir("nccl_conf_kinds");
  const std::string fifo = dir.file("fifo.conf"), site = dir.file("nccl.conf");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(site) << "NCCL_HOSTID=s3\n";
  static std::vector<std::string> warned;
  warned.clear();
  set_warning_sink([](const std::string& m) { warned.push_back(m); });
  const NcclConf conf = read_nccl_conf({fifo, "/dev/zero", site});
  set_warning_sink(nullptr);
  EXPECT_EQ(conf.at("NCCL_HOSTID"), "s3");
  ASSERT_EQ(warned.size(), 2u);
  EXPECT_NE(warned[0].find("is a pipe, not an NCCL configuration file"), std::string::npos) << warned[0];
  EXPECT_NE(warned[1].find("\"/dev/zero\" is a character device"), std::string::npos) << warned[1];
}

// The process's settings: what the environment leaves unset comes from NCCL_CONF_FILE, read
// through the same grammar and warnings as the environment's. A process of its own (the
// settings are read once per process).
TEST(NcclConfDeathTest, TheProcessReadsWhatTheEnvironmentDoesNotSet) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const testing_support::ScratchDir dir("nccl_conf_process");
  const std::string file = dir.file("nccl.conf");
  std::ofstream(file) << "TOPOCOLL_ALGO=nccl-topo-ring\nTOPOCOLL_AUTO_MARGIN=1.25\nNCCL_SOCKET_IFNAME=eth7\n"
                         "CUDA_VISIBLE_DEVICES=3\n";
  EXPECT_EXIT(
      {
        ::setenv("NCCL_CONF_FILE", file.c_str(), 1);
        ::setenv("TOPOCOLL_ALGO", "nccl", 1);  // the environment wins
        ::unsetenv("TOPOCOLL_AUTO_MARGIN");
        ::unsetenv("NCCL_SOCKET_IFNAME");
        ::unsetenv("TOPOCOLL_NET_IFNAME");
        ::unsetenv("CUDA_VISIBLE_DEVICES");
        const Env& e = env();
        // CUDA reads its own variable before NCCL's init could set it: not taken from there.
        const bool ok = e.algo == "nccl" && e.auto_margin > 1.24 && e.auto_margin < 1.26 &&
                        e.nccl_socket_ifname == "eth7" && e.cuda_visible_devices.empty();
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A bad value from there is warned about like one from the environment, saying where it is
// (the environment does not show it).
TEST(NcclConfDeathTest, ABadValueFromThereSaysWhereItIs) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const testing_support::ScratchDir dir("nccl_conf_bad");
  const std::string file = dir.file("nccl.conf");
  std::ofstream(file) << "TOPOCOLL_NET_RENDEZVOUS=maybe\n";
  EXPECT_EXIT(
      {
        ::setenv("NCCL_CONF_FILE", file.c_str(), 1);
        ::unsetenv("TOPOCOLL_NET_RENDEZVOUS");
        env();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "TOPOCOLL_NET_RENDEZVOUS=\"maybe\": expected .*; using 1 \\(from NCCL's configuration files\\)");
}

}  // namespace
}  // namespace topocoll::config
