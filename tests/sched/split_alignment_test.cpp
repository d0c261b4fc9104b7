// Planned allreduce schedules split the vector on 16-byte boundaries (in elements of the
// planned type), so every reduce of every block but the vector's tail starts where the CUDA
// kernels can use 16-byte packs; BlockSplit itself keeps its even split without alignment.
#include <gtest/gtest.h>

#include <string>

#include "sched/plan.h"
#include "sched/schedule_builder.h"
#include "topo/topology_json.h"

namespace topocoll::sched {
namespace {

TEST(SplitAlignment, BlockSplitRoundsSplitPointsAndCoversTheRange) {
  for (int64_t n : {0, 1, 7, 8, 9, 1001, 4096, 65549})
    for (int64_t parts : {1, 2, 3, 5, 8})
      for (int64_t align : {1, 2, 4, 8, 16}) {
        const BlockSplit s{n, parts, align};
        int64_t covered = 0;
        for (int64_t b = 0; b < parts; ++b) {
          EXPECT_EQ(s.begin(b), covered) << n << "/" << parts << "/" << align;
          if (s.begin(b) < n) {
            EXPECT_EQ(s.begin(b) % align, 0) << n << "/" << parts << "/" << align;
          }
          EXPECT_LE(s.size(b), s.max_size());
          covered += s.size(b);
        }
        EXPECT_EQ(covered, n);
      }
  // Without alignment: the plain even split.
  const BlockSplit even{10, 3, 1};
  EXPECT_EQ(even.size(0), 4);
  EXPECT_EQ(even.size(1), 3);
  EXPECT_EQ(even.size(2), 3);
}

TEST(SplitAlignment, PlannedAllreduceReducesOn16ByteBoundaries) {
  const topo::Topology t =
      topo::load_topology_file(TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json");
  for (const char* algo : {"ring-topo", "hd", "fc-direct"})
    for (int nranks : {3, 6, 8})
      for (std::size_t elem : {std::size_t{2}, std::size_t{4}}) {
        PlanRequest req;
        req.collective = Collective::AllReduce;
        req.algo = algo;
        req.nranks = nranks;
        req.elem_size = elem;
        req.bytes = int64_t(1001 * elem);
        req.keep_link_detail = false;
        const Plan plan = make_plan(t, req);
        const int64_t align = int64_t(16 / elem);
        for (const RankProgram& p : plan.schedule.programs)
          for (const Op& o : p.ops) {
            if (o.kind != OpKind::Reduce || o.count == 0) continue;
            const std::string what = std::string(algo) + " P=" + std::to_string(nranks) +
                                     " elem=" + std::to_string(elem);
            // Scratch regions are laid out by the generators; the user's buffers are split.
            if (o.dst.buf != Buf::Scratch) {
              EXPECT_EQ(o.dst.offset % align, 0) << what << " reduce at element " << o.dst.offset;
            }
            for (int k = 0; k < o.nsrc; ++k) {
              if (o.srcs[k].buf != Buf::Scratch) {
                EXPECT_EQ(o.srcs[k].offset % align, 0) << what << " source at " << o.srcs[k].offset;
              }
            }
          }
      }
}

}  // namespace
}  // namespace topocoll::sched
