#include "sched/generator.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sched/verifier.h"

namespace topocoll::sched {
namespace {

TEST(Generator, ListsWhatItGenerates) {
  const auto ar = algorithms_for(Collective::AllReduce);
  for (const char* a : {"ring", "hd", "fc", "fc-direct", "hier"})
    EXPECT_NE(std::find(ar.begin(), ar.end(), a), ar.end()) << a;
  EXPECT_TRUE(is_supported("hd", Collective::ReduceScatter));
  EXPECT_TRUE(is_supported("fc", Collective::AllGather));
  EXPECT_TRUE(is_supported("fc", Collective::AllToAll));
  EXPECT_FALSE(is_supported("fc", Collective::ReduceScatter));
  EXPECT_TRUE(is_supported("ring", Collective::AllToAll));
  EXPECT_FALSE(is_supported("hd", Collective::AllToAll));
  EXPECT_FALSE(is_supported("nonsense", Collective::AllReduce));
}

TEST(Generator, DispatchesAndNamesTheSchedule) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather, Collective::AllToAll})
    for (const std::string& a : algorithms_for(c)) {
      const Schedule s = generate(a, c, 6, 13);
      EXPECT_EQ(s.algo, a);
      EXPECT_EQ(s.collective, c);
      EXPECT_EQ(s.nranks, 6);
      const VerifyResult r = verify(s);
      EXPECT_TRUE(r.ok) << a << " " << to_string(c) << ": " << r.error;
    }
}

TEST(Generator, ClearErrors) {
  try {
    generate("fc", Collective::ReduceScatter, 4, 10);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no 'fc' schedule for reduce_scatter"), std::string::npos) << e.what();
  }
  EXPECT_THROW(generate("hd", Collective::AllReduce, 0, 10), std::invalid_argument);
  EXPECT_THROW(generate("hd", Collective::AllReduce, 4, -3), std::invalid_argument);
  GenerateRequest r;
  r.algo = "hier";
  r.nranks = 10;
  r.count = 5;
  r.hier.group_size = 4;
  EXPECT_THROW(generate(r), std::invalid_argument);
}

}  // namespace
}  // namespace topocoll::sched
