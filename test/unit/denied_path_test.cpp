// The path of a denial's evidence line, in each shape the programs of docs/classify.md print,
// and the lines that name none.
#include "lib/denied_path.hpp"

#include <gtest/gtest.h>

namespace dsh {
namespace {

struct Case {
    const char* line;
    const char* signature;
    const char* path;  // nullptr: none
};

void expect_path(const Case& c) {
    const std::optional<std::string> path = denied_path(c.line, c.signature);
    if (c.path) {
        EXPECT_EQ(path, std::optional<std::string>(c.path)) << c.line;
    } else {
        EXPECT_EQ(path, std::nullopt) << c.line;
    }
}

TEST(DeniedPath, BeforeTheErrorText) {
    for (const Case& c : {
             Case{"sh: 1: cannot create /etc/x: Read-only file system", "read-only file system", "/etc/x"},
             Case{"/bin/sh: 1: cannot create out.txt: Permission denied", "permission denied", "out.txt"},
             Case{"touch: cannot touch '/etc/x': Read-only file system", "read-only file system", "/etc/x"},
             Case{"mkdir: cannot create directory \xE2\x80\x98/etc/d\xE2\x80\x99: Permission denied", "permission denied", "/etc/d"},
             Case{"mkdir: cannot create directory `/etc/d': Permission denied", "permission denied", "/etc/d"},
             Case{"fatal: Unable to create '/ws/.git/index.lock': Read-only file system", "read-only file system",
                  "/ws/.git/index.lock"},
             Case{"fatal: cannot mkdir /ws/newrepo: Permission denied", "permission denied", "/ws/newrepo"},
             Case{"open /etc/x: read-only file system", "read-only file system", "/etc/x"},
             Case{"Exception in thread \"main\" java.nio.file.FileSystemException: /ws/out.txt: Read-only file system",
                  "read-only file system", "/ws/out.txt"},
             Case{"/ws/Hello.java:1: error: error while writing Hello: /ws/Hello.class: Read-only file system",
                  "read-only file system", "/ws/Hello.class"},
             Case{"ln: failed to create hard link '/ws/t' => '/ro/src': Invalid cross-device link",
                  "invalid cross-device link", "/ro/src"},
             Case{"java.io.FileNotFoundException: /ws/out.txt (Permission denied)", "permission denied", "/ws/out.txt"},
         })
        expect_path(c);
}

TEST(DeniedPath, AfterTheErrorText) {
    for (const Case& c : {
             Case{"OSError: [Errno 30] Read-only file system: '/etc/x'", "read-only file system", "/etc/x"},
             Case{"PermissionError: [Errno 13] Permission denied: '/root/.cache/pip'", "permission denied",
                  "/root/.cache/pip"},
             Case{"OSError: [Errno 18] Invalid cross-device link: '/ro/src' -> '/ws/t'", "invalid cross-device link",
                  "/ro/src"},
             Case{"error: couldn't create a temp dir: Read-only file system (os error 30) at path \"/ws/rmetaX\"",
                  "read-only file system", "/ws/rmetaX"},
             Case{"Exception in thread \"main\" java.nio.file.AccessDeniedException: /ws/out.txt",
                  "java.nio.file.AccessDeniedException", "/ws/out.txt"},
             Case{"/ws/Hello.java:1: error: error while writing Hello: /ws/Hello.class", "error: error while writing",
                  "/ws/Hello.class"},
         })
        expect_path(c);
}

TEST(DeniedPath, NodesSyscallForm) {
    for (const Case& c : {
             Case{"Error: EACCES: permission denied, mkdir '/root/.npm/_cacache'", "permission denied", "/root/.npm/_cacache"},
             Case{"Error: EACCES: permission denied, mkdir '/root/.npm/_cacache'", "EACCES", "/root/.npm/_cacache"},
             Case{"Error: EROFS: read-only file system, open '/ws/out.txt'", "EROFS", "/ws/out.txt"},
             Case{"Error: EXDEV: cross-device link not permitted, link '/ro/src' -> '/ws/t'", "EXDEV", "/ro/src"},
             Case{"npm error rofs EROFS: read-only file system, open '/root/.npm/_cacache/tmp/x'",
                  "read-only file system", "/root/.npm/_cacache/tmp/x"},
         })
        expect_path(c);
}

TEST(DeniedPath, NoneWhereTheLineNamesNone) {
    for (const Case& c : {
             Case{"npm error code EACCES", "EACCES", nullptr},
             Case{"  Read-only file system (os error 30)", "read-only file system", nullptr},
             Case{"PermissionError: [Errno 1] Operation not permitted", "operation not permitted", nullptr},
             Case{"Error: connect EPERM 127.0.0.1:80 - Local (undefined:undefined)", "EPERM", nullptr},
             Case{"error: couldn't create a temp dir: Read-only file system", "read-only file system", nullptr},
             Case{"Permission denied, see: https://example.org/help", "permission denied", nullptr},
             Case{"proxy 10.0.0.1: Permission denied", "permission denied", nullptr},
             Case{"cannot create '': Permission denied", "permission denied", nullptr},
             Case{"no signature here", "permission denied", nullptr},
             Case{"EACCESSIBLE: '/x'", "EACCES", nullptr},
         })
        expect_path(c);
}

TEST(DeniedPath, MatchesTheSignatureAsTheClassifierDoes) {
    expect_path({"X: PERMISSION DENIED: '/x'", "permission denied", "/x"});
    expect_path({"XEROFS here, EROFS: read-only file system, open '/y'", "EROFS", "/y"});
}

TEST(DeniedPath, AnUnclosedQuoteIsTakenAsAWord) {
    expect_path({"Permission denied: '/x", "permission denied", "'/x"});
}

}  // namespace
}  // namespace dsh
