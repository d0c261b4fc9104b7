// Becoming an endpoint's host (fabric/system_command.h, used by `fabric exec` and
// `fabric rank-exec`): a namespace that cannot be entered is named with the reason, and the
// process stays where it was.
#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <string>

#include "fabric/system_command.h"

namespace topocoll::fabric {
namespace {

std::string own_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

TEST(EndpointHost, ANamespaceThatCannotBeEnteredIsNamedWithItsReason) {
  const std::string before = own_host_name();
  try {
    become_endpoint_host("topocoll-test-no-such-namespace", "s9");
    FAIL() << "entered a namespace that does not exist";
  } catch (const FabricError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot enter namespace topocoll-test-no-such-namespace ("), std::string::npos) << what;
    EXPECT_NE(what.find("No such file or directory"), std::string::npos) << what;
  }
  EXPECT_EQ(own_host_name(), before);  // the host name is taken only once inside
}

}  // namespace
}  // namespace topocoll::fabric
