// `dsh-confine restricted-token-exec` on systems other than Windows: the mechanism (a
// write-restricted token and ACL grants) exists only there, so the runner refuses, with the
// runner's own failure code, and nothing runs.
#include <cstdio>

#include "../platform.hpp"

namespace dsh::platform {

int restricted_token_exec(const RestrictedTokenExecRequest& /*request*/, const std::vector<std::string>& /*argv*/) {
    std::fprintf(stderr, "dsh-confine: error: RESTRICTED_TOKEN: restricted-token-exec: the restricted-token runner "
                         "exists only on Windows, not on %s\n", system_name().c_str());
    return 125;
}

}  // namespace dsh::platform
