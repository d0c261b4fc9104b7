#include "plugin/net/nccl_topology_names.h"

#include <cctype>

namespace topocoll::plugin {
namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// The value of attribute `key` inside one tag's text (between "<net" and ">"), if any.
bool attribute(std::string_view tag, std::string_view key, std::string* value) {
  size_t at = 0;
  while ((at = tag.find(key, at)) != std::string_view::npos) {
    const bool starts = at > 0 && is_space(tag[at - 1]);
    size_t i = at + key.size();
    at = i;
    if (!starts) continue;
    while (i < tag.size() && is_space(tag[i])) ++i;
    if (i >= tag.size() || tag[i] != '=') continue;
    ++i;
    while (i < tag.size() && is_space(tag[i])) ++i;
    if (i >= tag.size() || (tag[i] != '"' && tag[i] != '\'')) continue;
    const char quote = tag[i++];
    const size_t end = tag.find(quote, i);
    if (end == std::string_view::npos) return false;
    *value = std::string(tag.substr(i, end - i));
    return true;
  }
  return false;
}

}  // namespace

std::set<std::string> net_names_in_nccl_topology(std::string_view xml) {
  std::set<std::string> names;
  size_t at = 0;
  while ((at = xml.find("<net", at)) != std::string_view::npos) {
    const size_t after = at + 4;
    at = after;
    if (after >= xml.size() || !(is_space(xml[after]) || xml[after] == '/' || xml[after] == '>')) continue;
    const size_t end = xml.find('>', after);
    const std::string_view tag = xml.substr(after, end == std::string_view::npos ? std::string_view::npos : end - after);
    std::string name;
    if (attribute(tag, "name", &name)) names.insert(name);
  }
  return names;
}

std::vector<std::string> names_apart_from(const std::vector<std::string>& names, const std::set<std::string>& taken) {
  std::set<std::string> used(taken);
  for (const std::string& n : names) used.insert(n);
  std::vector<std::string> result;
  for (const std::string& n : names) {
    if (!taken.count(n)) {
      result.push_back(n);
      continue;
    }
    std::string candidate = n + "-topocoll";
    for (int k = 2; used.count(candidate); ++k) candidate = n + "-topocoll" + std::to_string(k);
    used.insert(candidate);
    result.push_back(candidate);
  }
  return result;
}

}  // namespace topocoll::plugin
