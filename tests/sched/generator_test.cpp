#include "sched/generator.h"

#include <gtest/gtest.h>

#include "sched/algorithm_registry.h"
#include "sched/verifier.h"

namespace topocoll::sched {
namespace {

TEST(Generator, BuildsEveryRegisteredAlgorithmAndNamesTheSchedule) {
  for (const Algorithm& a : algorithms())
    for (Collective c : kCollectives) {
      if (!a.collectives.contains(c)) continue;
      const Schedule s = generate(a.name, c, 6, 13);
      EXPECT_EQ(s.algo, a.name);
      EXPECT_EQ(s.collective, c);
      EXPECT_EQ(s.nranks, 6);
      const VerifyResult r = verify(s);
      EXPECT_TRUE(r.ok) << a.name << " " << to_string(c) << ": " << r.error;
    }
}

TEST(Generator, ClearErrors) {
  try {
    generate("fc", Collective::ReduceScatter, 4, 10);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fc: no reduce_scatter schedule (reduce_scatter: ring, "),
              std::string::npos)
        << e.what();
  }
  try {
    generate("nonsense", Collective::AllReduce, 4, 10);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown algorithm \"nonsense\" (known: ring, ring-topo, hd"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(generate("hd", Collective::AllReduce, 0, 10), std::invalid_argument);
  EXPECT_THROW(generate("hd", Collective::AllReduce, 4, -3), std::invalid_argument);
  EXPECT_THROW(generate("hd", Collective::AllReduce, 4, 10, std::vector<int>{0, 1, 2}), std::invalid_argument);
}

}  // namespace
}  // namespace topocoll::sched
