// `topocoll algorithms`: the schedule algorithms of the registry (sched/algorithm_registry.h),
// the names `plan --algo`, `simulate`/`bench --algos`, `accept` and TOPOCOLL_ALGO all take,
// with the collectives each has, those `auto` weighs it for, and what it is.
#include <cstdio>
#include <string>

#include "sched/algorithm_registry.h"
#include "tools/command.h"

namespace topocoll::cli {
namespace {

constexpr const char* kUsage =
    "usage: topocoll algorithms\n"
    "\n"
    "Lists every schedule algorithm: its name (the same in plan, simulate, bench, accept and\n"
    "TOPOCOLL_ALGO), the collectives it has a schedule for, those `auto` weighs it for, and\n"
    "what it is (docs/plan-format.md, \"Algorithms\"). AR allreduce, RS reduce-scatter, AG\n"
    "allgather, A2A all-to-all.\n";

int run_algorithms(std::span<const std::string> args) {
  if (!args.empty()) {
    const bool help = args[0] == "--help" || args[0] == "-h";
    std::fputs(kUsage, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  std::printf("%-10s %-16s %-22s %s\n", "name", "collectives", "auto", "what");
  for (const sched::Algorithm& a : sched::algorithms()) {
    std::string weighed = sched::abbreviations(a.auto_collectives);
    if (!a.auto_collectives.empty() && a.auto_max_ranks != INT_MAX)
      weighed += " (<=" + std::to_string(a.auto_max_ranks) + ")";
    std::printf("%-10s %-16s %-22s %s\n", std::string(a.name).c_str(),
                sched::abbreviations(a.collectives).c_str(), weighed.c_str(), std::string(a.summary).c_str());
  }
  return 0;
}

}  // namespace

TOPOCOLL_COMMAND("algorithms", "the schedule algorithms every command and TOPOCOLL_ALGO name", run_algorithms);

}  // namespace topocoll::cli
