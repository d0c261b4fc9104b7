// The per-communicator route cache: bounded by bytes, least recently used out, the newest
// route always kept, the first route per key kept when two threads decide one key.
#include <gtest/gtest.h>

#include <memory>

#include "plugin/interposer/call_route_cache.h"

namespace topocoll::plugin::interposer {
namespace {

// A route whose schedule holds `ops` ops on one rank.
std::shared_ptr<const Route> route_with_ops(std::size_t ops) {
  auto s = std::make_shared<sched::Schedule>();
  s->programs.resize(1);
  s->programs[0].ops.resize(ops);
  s->programs[0].step_begin = {0, uint32_t(ops)};
  auto p = std::make_shared<Route>();
  p->target = RouteTarget::Schedule;
  p->schedule = s;
  return p;
}

CallKey key(int64_t count) { return {sched::Collective::AllReduce, 7, count}; }

TEST(CallRouteCache, FootprintCountsTheSchedule) {
  EXPECT_GT(route_footprint_bytes(*route_with_ops(1000)), 1000 * sizeof(sched::Op));
  EXPECT_LT(route_footprint_bytes(*route_with_ops(0)), 1000u);
}

TEST(CallRouteCache, EvictsTheLeastRecentlyUsedBeyondItsCapacity) {
  const std::size_t one = route_footprint_bytes(*route_with_ops(1000));
  CallRouteCache cache(3 * one);
  cache.insert(key(1), route_with_ops(1000));
  cache.insert(key(2), route_with_ops(1000));
  cache.insert(key(3), route_with_ops(1000));
  EXPECT_EQ(cache.size(), 3u);
  ASSERT_NE(cache.find(key(1)), nullptr);  // 1 is now the most recent; 2 the least
  cache.insert(key(4), route_with_ops(1000));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find(key(2)), nullptr);
  EXPECT_NE(cache.find(key(1)), nullptr);
  EXPECT_NE(cache.find(key(3)), nullptr);
  EXPECT_NE(cache.find(key(4)), nullptr);
  EXPECT_LE(cache.bytes(), 3 * one);
  // Many sizes: memory stays bounded.
  for (int64_t c = 10; c < 1000; ++c) cache.insert(key(c), route_with_ops(1000));
  EXPECT_LE(cache.bytes(), 3 * one);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(CallRouteCache, KeepsTheNewestRouteHoweverLarge) {
  CallRouteCache cache(16);
  auto big = route_with_ops(5000);
  EXPECT_EQ(cache.insert(key(1), big), big);
  EXPECT_EQ(cache.find(key(1)), big);
  cache.insert(key(2), route_with_ops(5000));
  EXPECT_EQ(cache.find(key(1)), nullptr);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(CallRouteCache, KeepsTheFirstRoutePerKey) {
  CallRouteCache cache;
  auto first = route_with_ops(1), second = route_with_ops(1);
  EXPECT_EQ(cache.insert(key(1), first), first);
  EXPECT_EQ(cache.insert(key(1), second), first);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace topocoll::plugin::interposer
