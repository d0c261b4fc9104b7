// docs/topology.schema.json accepts every example and rejects the files whose problem a
// schema can see (types, missing or unknown fields, ranges). Needs python3 with jsonschema;
// skipped without it.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <string>

namespace {

int python(const std::string& script) {
  std::string command = "python3 -c '" + script + "' >/dev/null 2>&1";
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TopoSchema, MatchesExamplesAndRejectsSchemaLevelErrors) {
  if (python("import jsonschema") != 0) GTEST_SKIP() << "python3 jsonschema not installed";
  const std::string src = TOPOCOLL_SOURCE_DIR;
  const std::string script =
      "import json, glob, sys, jsonschema\n"
      "schema = json.load(open(\"" + src + "/docs/topology.schema.json\"))\n"
      "jsonschema.Draft202012Validator.check_schema(schema)\n"
      "v = jsonschema.Draft202012Validator(schema)\n"
      "for f in glob.glob(\"" + src + "/examples/*.json\"):\n"
      "    assert v.is_valid(json.load(open(f))), f\n"
      "for name in [\"bigraph_gpu_not_integer\", \"bigraph_missing_servers\", \"bigraph_misspelt_field\",\n"
      "             \"bigraph_zero_rate\", \"bigraph_absurd_rate\", \"bigraph_negative_latency\",\n"
      "             \"kind_not_string\", \"missing_kind\", \"unknown_kind\", \"nap_torus_not_array\",\n"
      "             \"nap_zero_inter_rate\", \"top_level_array\", \"bigraph_host_name_line_break\",\n"
      "             \"bigraph_endpoint_id_comma\", \"bigraph_host_name_too_long\", \"bigraph_switch_id_space\",\n"
      "             \"bigraph_name_tab\", \"nap_nic_comma\"]:\n"
      "    assert not v.is_valid(json.load(open(\"" + src + "/tests/data/topo/\" + name + \".json\"))), name\n";
  EXPECT_EQ(python(script), 0);
}

}  // namespace
