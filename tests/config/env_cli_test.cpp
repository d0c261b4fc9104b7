// `topocoll env`: every TOPOCOLL_* variable with its value here, a bad value marked with what
// was expected and what is used instead, exit status 1 then; --all adds the other programs'.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "config/env.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/shell_run.h"

namespace topocoll::config {
namespace {

using testing_support::shell_run;

// The CLI with only the given variables of the table set (env -i keeps PATH out too).
testing_support::ShellResult topocoll_env(const std::string& assignments, const std::string& args = "") {
  return shell_run("env -i " + assignments + " " + std::string(TOPOCOLL_CLI) + " env " + args);
}

TEST(EnvCli, ListsEveryTopocollVariableWithItsValueHere) {
  const auto r = topocoll_env("TOPOCOLL_SCRATCH_MAX_BYTES=2GiB TOPOCOLL_RANK=' 0'");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const EnvVariable& v : env_variables()) {
    const bool listed = r.output.find("\n" + std::string(v.name) + " ") != std::string::npos;
    EXPECT_EQ(listed, v.owner == Owner::Topocoll) << v.name << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("TOPOCOLL_SCRATCH_MAX_BYTES       2GiB\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TOPOCOLL_RANK                    0\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TOPOCOLL_NET_RENDEZVOUS          1 (default)\n"), std::string::npos) << r.output;
}

TEST(EnvCli, ABadValueIsMarkedAndTheStatusIsOne) {
  const auto r = topocoll_env("TOPOCOLL_NET_RENDEZVOUS=maybe");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("TOPOCOLL_NET_RENDEZVOUS          BAD: TOPOCOLL_NET_RENDEZVOUS=\"maybe\": expected 1/0, "
                          "true/false, yes/no or on/off; using 1"),
            std::string::npos)
      << r.output;
  const auto pair = topocoll_env("TOPOCOLL_MIN_BYTES=1M TOPOCOLL_MAX_BYTES=4K");
  EXPECT_EQ(pair.status, 1) << pair.output;
  EXPECT_NE(pair.output.find("BAD: TOPOCOLL_MIN_BYTES (1M) is larger than TOPOCOLL_MAX_BYTES (4K)"),
            std::string::npos)
      << pair.output;
}

// What the environment leaves unset comes from NCCL's configuration files, as NCCL reads
// them (config/nccl_conf.h), and says so.
TEST(EnvCli, ValuesFromNcclsConfigurationFilesAreShownAndNamed) {
  const testing_support::ScratchDir dir("env_cli_nccl_conf");
  const std::string file = dir.file("nccl.conf");
  std::ofstream(file) << "TOPOCOLL_AUTO_MARGIN=1.5\nTOPOCOLL_ALGO=nccl-topo-ring\nTOPOCOLL_NET_RENDEZVOUS=maybe\n";
  const auto r = topocoll_env("NCCL_CONF_FILE=" + file + " TOPOCOLL_ALGO=nccl");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("TOPOCOLL_AUTO_MARGIN             1.5 (from NCCL's configuration files)\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("TOPOCOLL_ALGO                    nccl\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("BAD: TOPOCOLL_NET_RENDEZVOUS=\"maybe\": expected 1/0, true/false, yes/no or on/off; "
                          "using 1 (from NCCL's configuration files)"),
            std::string::npos)
      << r.output;
}

// What decides what root trusts, runs or builds comes from the environment alone: a
// configuration file another user may own (NCCL_CONF_FILE, ~/.nccl.conf) does not set it,
// and the file's line is named as ignored.
TEST(EnvCli, RootFacingSettingsInNcclsConfigurationFilesAreIgnoredAndNamed) {
  const testing_support::ScratchDir dir("env_cli_nccl_conf_root");
  const std::string file = dir.file("nccl.conf");
  std::ofstream(file) << "TOPOCOLL_FABRIC_IPROUTE2=/tmp/elsewhere\nTOPOCOLL_TRUSTED_UIDS=1000\n"
                         "TOPOCOLL_FABRIC_STATE_DIR=/tmp/state\nTOPOCOLL_FABRIC_MEMORY_LIMIT_MIB=999999\n"
                         "TOPOCOLL_AUTO_MARGIN=1.5\n";
  const auto r = topocoll_env("NCCL_CONF_FILE=" + file);
  EXPECT_EQ(r.status, 1) << r.output;
  for (const char* name : {"TOPOCOLL_FABRIC_IPROUTE2", "TOPOCOLL_TRUSTED_UIDS", "TOPOCOLL_FABRIC_STATE_DIR",
                           "TOPOCOLL_FABRIC_MEMORY_LIMIT_MIB"})
    EXPECT_NE(r.output.find(std::string(name) + " in NCCL's configuration files is ignored: it decides what root "
                                                "trusts or runs, so only the environment sets it"),
              std::string::npos)
        << name << ": " << r.output;
  EXPECT_EQ(r.output.find("/tmp/elsewhere"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("/tmp/state"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TOPOCOLL_AUTO_MARGIN             1.5 (from NCCL's configuration files)\n"),
            std::string::npos)
      << r.output;
  // The environment still sets them.
  const auto set = topocoll_env("NCCL_CONF_FILE=" + file + " TOPOCOLL_FABRIC_STATE_DIR=/run/tc-elsewhere");
  EXPECT_NE(set.output.find("/run/tc-elsewhere"), std::string::npos) << set.output;
}

TEST(EnvCli, AllAddsTheOtherProgramsVariables) {
  const auto r = topocoll_env("LOCAL_RANK=abc", "--all");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("\nLOCAL_RANK "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("BAD: LOCAL_RANK=\"abc\": expected an integer from 0 to 4095"), std::string::npos)
      << r.output;
  EXPECT_EQ(topocoll_env("", "--nonsense").status, 2);
}

}  // namespace
}  // namespace topocoll::config
