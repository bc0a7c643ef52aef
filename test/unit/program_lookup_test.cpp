// platform/posix/process.cpp's PATH lookup: a call looks its program up when it plans and again
// when it prepares the runner in the same process; the second lookup is the first's answer,
// and only a lookup of the same name under the same PATH is.
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "../../platform/posix/process.hpp"
#include "temp_dir.hpp"

namespace {

using dsh::posix::Lookup;
using dsh::posix::resolve_program;

// Sets PATH for one test and puts the caller's back.
class PathFor {
public:
    explicit PathFor(const std::string& value) {
        if (const char* old = std::getenv("PATH")) old_ = old;
        setenv("PATH", value.c_str(), 1);
    }
    ~PathFor() {
        if (old_) setenv("PATH", old_->c_str(), 1);
        else unsetenv("PATH");
    }
    PathFor(const PathFor&) = delete;
    PathFor& operator=(const PathFor&) = delete;

private:
    std::optional<std::string> old_;
};

std::string executable(const unit::TempDir& dir, const std::string& name) {
    const std::string path = dir.file("bin/" + name, "#!/bin/sh\n");
    chmod(path.c_str(), 0755);
    return path;
}

TEST(ProgramLookup, TheSameNameUnderTheSamePathGetsThePreviousAnswer) {
    unit::TempDir dir;
    dir.dir("bin");
    const std::string program = executable(dir, "dsh-lookup-once");
    PathFor path(dir.path("bin"));
    const auto first = resolve_program("dsh-lookup-once");
    ASSERT_EQ(first.status, Lookup::Found);
    EXPECT_EQ(first.path, program);
    std::filesystem::remove(program);  // a second search would now find nothing
    const auto second = resolve_program("dsh-lookup-once");
    EXPECT_EQ(second.status, Lookup::Found);
    EXPECT_EQ(second.path, program);
}

TEST(ProgramLookup, AnotherPathOrAnotherNameIsSearchedAgain) {
    unit::TempDir dir;
    dir.dir("bin");
    const std::string program = executable(dir, "dsh-lookup-again");
    const std::string other = executable(dir, "dsh-lookup-other");
    {
        PathFor path(dir.path("bin"));
        ASSERT_EQ(resolve_program("dsh-lookup-again").status, Lookup::Found);
        std::filesystem::remove(program);
        EXPECT_EQ(resolve_program("dsh-lookup-other").path, other);  // another name: searched
        EXPECT_EQ(resolve_program("dsh-lookup-again").status, Lookup::NotFound);  // and this one again
    }
    executable(dir, "dsh-lookup-again");
    PathFor path("/nonexistent-dsh-confine:" + dir.path("bin"));  // another PATH: searched
    EXPECT_EQ(resolve_program("dsh-lookup-again").path, program);
    std::filesystem::remove(program);
    PathFor changed(dir.path("bin") + ":/nonexistent-dsh-confine");
    EXPECT_EQ(resolve_program("dsh-lookup-again").status, Lookup::NotFound);
}

}  // namespace
