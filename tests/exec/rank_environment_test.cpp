// Rank and size from launcher variables: precedence, bootstrap address, and clear errors.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "exec/rank_environment.h"

namespace topocoll::exec {
namespace {

std::optional<RankEnvironment> from(const std::map<std::string, std::string, std::less<>>& values) {
  return rank_environment_from_env(config::read_env(values));
}

// The error a set of values gives, or "" when none.
std::string error_of(const std::map<std::string, std::string, std::less<>>& values) {
  try {
    from(values);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RankEnvironment, NothingSetMeansNoGroup) {
  EXPECT_FALSE(from({}).has_value());
  EXPECT_FALSE(from({{"PMI_RANK", "1"}}).has_value()) << "a rank without a size";
}

TEST(RankEnvironment, OpenMpiVariablesAndTopocollBootstrap) {
  const auto env = from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "16"}, {"TOPOCOLL_BOOTSTRAP", "node0:4000"}});
  ASSERT_TRUE(env);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->nranks, 16);
  EXPECT_EQ(env->bootstrap, "node0:4000");
  EXPECT_FALSE(env->root_served_externally);
}

TEST(RankEnvironment, TopocollVariablesWinAndTorchrunAddressIsUsed) {
  const auto env = from({{"TOPOCOLL_RANK", "0"},
                         {"TOPOCOLL_NRANKS", "2"},
                         {"PMI_RANK", "1"},
                         {"PMI_SIZE", "2"},
                         {"MASTER_ADDR", "10.0.0.1"}});
  ASSERT_TRUE(env);
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->rank_variable, "TOPOCOLL_RANK");
  EXPECT_EQ(env->bootstrap, "10.0.0.1:29500");
  const auto port = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "4000"}});
  ASSERT_TRUE(port);
  EXPECT_EQ(port->bootstrap, "10.0.0.1:4000");
}

// TOPOCOLL_RANK=" 0" was accepted and "0 " refused; whitespace around any value is
// one rule now.
TEST(RankEnvironment, WhitespaceAroundANumberIsIgnoredOnBothSides) {
  for (const char* rank : {" 0", "0 ", " 0\n"}) {
    const auto env = from({{"TOPOCOLL_RANK", rank}, {"TOPOCOLL_NRANKS", "2 "}});
    ASSERT_TRUE(env) << '"' << rank << '"';
    EXPECT_EQ(env->rank, 0);
    EXPECT_EQ(env->nranks, 2);
  }
}

TEST(RankEnvironment, MalformedValuesAreRefusedNamingTheVariable) {
  EXPECT_EQ(error_of({{"SLURM_PROCID", "x1"}, {"SLURM_NTASKS", "4"}}),
            "SLURM_PROCID=\"x1\": expected an integer from 0 to 2147483647");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}), "SLURM_PROCID=4 outside 0..3 (SLURM_NTASKS)");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}}),
            "SLURM_NTASKS=\"0\": expected an integer from 1 to 2147483647");
  EXPECT_EQ(error_of({{"TOPOCOLL_RANK", "-1"}, {"TOPOCOLL_NRANKS", "2"}}),
            "TOPOCOLL_RANK=\"-1\": expected an integer from 0 to 2147483647");
  // A bad variable later in the precedence list is not read.
  EXPECT_EQ(error_of({{"TOPOCOLL_RANK", "1"}, {"TOPOCOLL_NRANKS", "2"}, {"RANK", "x"}}), "");
}

// A TOPOCOLL_RANK left exported from an earlier job, under mpirun: taken first, it would give
// every rank the same number. Half a pair, or a size another launcher contradicts, is refused.
TEST(RankEnvironment, AStaleTopocollRankUnderAnotherLauncherIsRefused) {
  EXPECT_EQ(error_of({{"TOPOCOLL_RANK", "0"}, {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
            "TOPOCOLL_RANK=0 without TOPOCOLL_NRANKS: set both (topocoll's launchers do) or neither (left from "
            "another job?)");
  EXPECT_NE(error_of({{"TOPOCOLL_NRANKS", "4"}, {"PMI_RANK", "1"}, {"PMI_SIZE", "4"}}).find("TOPOCOLL_NRANKS=4 without "
                                                                                          "TOPOCOLL_RANK"),
            std::string::npos);
  EXPECT_EQ(error_of({{"TOPOCOLL_RANK", "0"}, {"TOPOCOLL_NRANKS", "2"}, {"OMPI_COMM_WORLD_RANK", "3"},
                      {"OMPI_COMM_WORLD_SIZE", "8"}}),
            "TOPOCOLL_NRANKS=2 but OMPI_COMM_WORLD_SIZE=8: TOPOCOLL_RANK/TOPOCOLL_NRANKS left from another job? unset "
            "them to take this launcher's rank");
  // Agreeing sizes: TOPOCOLL_RANK is an override on purpose (a wrapper renumbering ranks).
  const auto renumbered = from({{"TOPOCOLL_RANK", "3"}, {"TOPOCOLL_NRANKS", "4"}, {"OMPI_COMM_WORLD_RANK", "0"},
                                {"OMPI_COMM_WORLD_SIZE", "4"}});
  ASSERT_TRUE(renumbered);
  EXPECT_EQ(renumbered->rank, 3);
}

TEST(RankEnvironment, TheLauncherMayServeTheRendezvous) {
  for (const char* served : {"1", "yes", "true"}) {
    const auto env = from({{"TOPOCOLL_RANK", "1"}, {"TOPOCOLL_NRANKS", "2"}, {"TOPOCOLL_BOOTSTRAP", "node0:4000"},
                           {"TOPOCOLL_BOOTSTRAP_SERVED", served}});
    ASSERT_TRUE(env);
    EXPECT_TRUE(env->root_served_externally) << served;
  }
}

// A bootstrap address no rank can reach is an error naming the variable at once, not a
// 60 s wait for a root at port 0.
TEST(RankEnvironment, BootstrapAtPortZeroOrMalformedNamesTheVariable) {
  EXPECT_NE(error_of({{"TOPOCOLL_RANK", "1"}, {"TOPOCOLL_NRANKS", "2"}, {"TOPOCOLL_BOOTSTRAP", "127.0.0.1:0"}})
                .find("TOPOCOLL_BOOTSTRAP=127.0.0.1:0: port 0 names no root"),
            std::string::npos);
  EXPECT_NE(error_of({{"TOPOCOLL_RANK", "1"}, {"TOPOCOLL_NRANKS", "2"}, {"TOPOCOLL_BOOTSTRAP", "node0"}})
                .find("TOPOCOLL_BOOTSTRAP=node0: "),
            std::string::npos);
}

}  // namespace
}  // namespace topocoll::exec
