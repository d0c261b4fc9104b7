// docs/plan-format.md's "Algorithms" table lists exactly the registry
// (sched/algorithm_registry.h): every algorithm in list order, with the collectives it has
// and those `auto` weighs it for. A new algorithm without its row fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sched/algorithm_registry.h"

namespace topocoll::sched {
namespace {

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(' ') - first + 1);
}

// The cells of the rows of the first table after `heading` (not its header or separator).
std::vector<std::vector<std::string>> table_after(const std::string& path, const std::string& heading) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<std::vector<std::string>> rows;
  bool in_section = false, header_seen = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) {
      if (in_section) break;
      in_section = line == heading;
      continue;
    }
    if (!in_section) continue;
    if (line.empty() || line[0] != '|') {
      if (header_seen) break;
      continue;
    }
    if (!header_seen) {  // the header row
      header_seen = true;
      continue;
    }
    if (line.rfind("|---", 0) == 0) continue;
    std::vector<std::string> cells;
    std::size_t start = 1;
    for (std::size_t bar; (bar = line.find('|', start)) != std::string::npos; start = bar + 1)
      cells.push_back(trimmed(line.substr(start, bar - start)));
    rows.push_back(std::move(cells));
  }
  return rows;
}

TEST(AlgorithmDocs, PlanFormatListsExactlyTheRegistry) {
  const auto rows = table_after(TOPOCOLL_SOURCE_DIR "/docs/plan-format.md", "## Algorithms");
  std::vector<std::string> documented, registered;
  for (const auto& row : rows) {
    ASSERT_GE(row.size(), 3u);
    documented.push_back(row[0]);
    const Algorithm* a = row[0].size() > 2 ? find_algorithm(row[0].substr(1, row[0].size() - 2)) : nullptr;
    if (!a) continue;  // named below as not registered
    EXPECT_EQ(row[1], abbreviations(a->collectives)) << row[0] << ": the collectives it has";
    EXPECT_EQ(row[2], abbreviations(a->auto_collectives)) << row[0] << ": those auto weighs it for";
  }
  for (const Algorithm& a : algorithms()) registered.push_back("`" + std::string(a.name) + "`");
  EXPECT_EQ(documented, registered) << "docs/plan-format.md, \"Algorithms\": one row per registered algorithm, in list order";
}

}  // namespace
}  // namespace topocoll::sched
