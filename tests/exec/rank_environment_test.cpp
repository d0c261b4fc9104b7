// Rank and size from launcher variables: precedence, bootstrap address, and clear errors.
#include <gtest/gtest.h>

#include <cstdlib>

#include "exec/rank_environment.h"

namespace topocoll::exec {
namespace {

class RankEnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : {"TOPOCOLL_RANK", "TOPOCOLL_NRANKS", "TOPOCOLL_BOOTSTRAP",
                          "TOPOCOLL_BOOTSTRAP_SERVED", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
                          "SLURM_PROCID", "SLURM_NTASKS", "RANK", "WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT"})
      ::unsetenv(v);
  }
};

TEST_F(RankEnvironmentTest, NothingSetMeansNoGroup) {
  EXPECT_FALSE(rank_environment_from_env().has_value());
  ::setenv("PMI_RANK", "1", 1);  // rank without size
  EXPECT_FALSE(rank_environment_from_env().has_value());
}

TEST_F(RankEnvironmentTest, OpenMpiVariablesAndTopocollBootstrap) {
  ::setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "16", 1);
  ::setenv("TOPOCOLL_BOOTSTRAP", "node0:4000", 1);
  const auto env = rank_environment_from_env();
  ASSERT_TRUE(env);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->nranks, 16);
  EXPECT_EQ(env->bootstrap, "node0:4000");
  EXPECT_FALSE(env->root_served_externally);
}

TEST_F(RankEnvironmentTest, TopocollVariablesWinAndTorchrunAddressIsUsed) {
  ::setenv("TOPOCOLL_RANK", "0", 1);
  ::setenv("TOPOCOLL_NRANKS", "2", 1);
  ::setenv("PMI_RANK", "1", 1);
  ::setenv("PMI_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "10.0.0.1", 1);
  const auto env = rank_environment_from_env();
  ASSERT_TRUE(env);
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->rank_variable, "TOPOCOLL_RANK");
  EXPECT_EQ(env->bootstrap, "10.0.0.1:29500");
}

TEST_F(RankEnvironmentTest, MalformedValuesNameTheVariable) {
  ::setenv("SLURM_PROCID", "x1", 1);
  ::setenv("SLURM_NTASKS", "4", 1);
  try {
    rank_environment_from_env();
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_PROCID"), std::string::npos) << e.what();
  }
  ::setenv("SLURM_PROCID", "4", 1);
  EXPECT_THROW(rank_environment_from_env(), std::invalid_argument);  // rank >= size
  ::setenv("SLURM_PROCID", "0", 1);
  ::setenv("SLURM_NTASKS", "0", 1);
  EXPECT_THROW(rank_environment_from_env(), std::invalid_argument);
}

// A bootstrap address no rank can reach is an error naming the variable at once, not a
// 60 s wait for a root at port 0.
TEST_F(RankEnvironmentTest, BootstrapAtPortZeroOrMalformedNamesTheVariable) {
  ::setenv("TOPOCOLL_RANK", "1", 1);
  ::setenv("TOPOCOLL_NRANKS", "2", 1);
  ::setenv("TOPOCOLL_BOOTSTRAP", "127.0.0.1:0", 1);
  try {
    rank_environment_from_env();
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TOPOCOLL_BOOTSTRAP=127.0.0.1:0: port 0 names no root"),
              std::string::npos)
        << e.what();
  }
  ::setenv("TOPOCOLL_BOOTSTRAP", "node0", 1);
  try {
    rank_environment_from_env();
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TOPOCOLL_BOOTSTRAP=node0: "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace topocoll::exec
