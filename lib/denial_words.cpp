#include "denial_words.hpp"

#include "host_pattern.hpp"

#include <algorithm>

namespace dsh {
namespace {

// Python's tempfile, when every candidate directory refuses a write (EACCES or EROFS alike),
// raises FileNotFoundError: "[Errno 2] No usable temporary directory found in [...]". pip
// and every Python program needing a temp file print it, and no errno text.
constexpr const char* kNoTempDir = "no usable temporary directory";

}  // namespace

const std::vector<std::string>& denial_words(DeniedErrno error) {
    static const std::vector<std::string> eacces = {
        "permission denied",
        "EACCES",
        // Java's NIO: the message is only the path ("java.nio.file.AccessDeniedException: /x").
        "java.nio.file.AccessDeniedException",
        // javac prints that message after its own words: "error: error while writing Hello: /x/Hello.class".
        "error: error while writing",
        kNoTempDir,
    };
    static const std::vector<std::string> erofs = {"read-only file system", "EROFS", kNoTempDir};
    // Node words EXDEV its own way ("cross-device link not permitted") after the name.
    static const std::vector<std::string> exdev = {"invalid cross-device link", "EXDEV"};
    static const std::vector<std::string> ebusy = {"device or resource busy", "EBUSY"};
    static const std::vector<std::string> eperm = {"operation not permitted", "EPERM"};
    static const std::vector<std::string> enetunreach = {"network is unreachable", "ENETUNREACH"};
    // The proxy's own line on the call's stderr, and its refusal page (which a client may print).
    static const std::vector<std::string> proxy_refused = {std::string(kRefusedHostPrefix), "not in allow_hosts"};
    switch (error) {
        case DeniedErrno::Eacces: return eacces;
        case DeniedErrno::Erofs: return erofs;
        case DeniedErrno::Exdev: return exdev;
        case DeniedErrno::Ebusy: return ebusy;
        case DeniedErrno::Eperm: return eperm;
        case DeniedErrno::Enetunreach: return enetunreach;
        case DeniedErrno::ProxyRefused: return proxy_refused;
    }
    return eacces;
}

void add_denial_words(std::vector<std::string>& signatures, DeniedErrno error) {
    for (const std::string& word : denial_words(error))
        if (std::find(signatures.begin(), signatures.end(), word) == signatures.end()) signatures.push_back(word);
}

}  // namespace dsh
