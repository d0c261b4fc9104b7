// The docs list exactly the variables of config/env.cpp's table: every `TOPOCOLL_*` name in
// a table of docs/usage.md, net-plugin.md, engine.md or fabric.md is a variable topocoll
// reads, docs/usage.md's tables name every one of them, and its default column shows the
// table's default.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/env.h"

namespace topocoll::config {
namespace {

std::string doc(const std::string& name) {
  std::ifstream in(std::string(TOPOCOLL_SOURCE_DIR) + "/docs/" + name);
  EXPECT_TRUE(in) << "docs/" << name;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The cells of each table row of a markdown text (not the header separators).
std::vector<std::vector<std::string>> table_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() < 2 || line[0] != '|' || line.rfind("|---", 0) == 0) continue;
    std::vector<std::string> cells;
    std::size_t start = 1;
    for (std::size_t bar; (bar = line.find('|', start)) != std::string::npos; start = bar + 1)
      cells.push_back(line.substr(start, bar - start));
    rows.push_back(std::move(cells));
  }
  return rows;
}

// Backticked variable names in `text`: `TOPOCOLL_X` or `TOPOCOLL_X=...` (not a prefix such
// as `TOPOCOLL_NET_*`).
std::set<std::string> variables_in(const std::string& text) {
  static const std::regex name("`(TOPOCOLL_[A-Z0-9_]+)[`=]");
  std::set<std::string> found;
  for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) found.insert((*it)[1]);
  return found;
}

std::set<std::string> topocoll_variables() {
  std::set<std::string> names;
  for (const EnvVariable& v : env_variables())
    if (v.owner == Owner::Topocoll) names.insert(std::string(v.name));
  return names;
}

TEST(EnvDocs, EveryVariableInADocsTableIsOneTopocollReads) {
  const std::set<std::string> known = topocoll_variables();
  for (const char* name : {"usage.md", "net-plugin.md", "engine.md", "fabric.md"})
    for (const auto& row : table_rows(doc(name)))
      for (const auto& cell : row)
        for (const std::string& v : variables_in(cell))
          EXPECT_TRUE(known.count(v)) << "docs/" << name << " lists " << v << ", which config/env.cpp does not read";
}

TEST(EnvDocs, UsageListsExactlyTheTablesVariablesWithTheirDefaults) {
  std::map<std::string, std::string> listed;  // variable -> its default cell
  for (const auto& row : table_rows(doc("usage.md"))) {
    if (row.size() < 3) continue;
    const std::set<std::string> first = variables_in(row[0]);
    if (first.size() == 1) listed[*first.begin()] = row[1];
  }
  const std::set<std::string> known = topocoll_variables();
  for (const std::string& v : known) EXPECT_TRUE(listed.count(v)) << v << " has no row in docs/usage.md";
  for (const auto& [v, cell] : listed) EXPECT_TRUE(known.count(v)) << "docs/usage.md lists " << v;
  for (const EnvVariable& v : env_variables()) {
    const auto row = listed.find(std::string(v.name));
    if (row == listed.end() || v.default_value.empty()) continue;
    EXPECT_NE(row->second.find("`" + std::string(v.default_value) + "`"), std::string::npos)
        << v.name << ": docs/usage.md's default is" << row->second << ", config/env.cpp's " << v.default_value;
  }
}

}  // namespace
}  // namespace topocoll::config
