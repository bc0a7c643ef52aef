// A scratch directory for unit tests that touch the file system, removed at the end.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace unit {

class TempDir {
public:
    TempDir() {
        static int counter = 0;
        std::random_device random;
        const std::filesystem::path made = std::filesystem::temp_directory_path() /
                                           ("dsh-unit-" + std::to_string(random()) + "-" + std::to_string(counter++));
        std::filesystem::create_directories(made);
        path_ = std::filesystem::canonical(made);  // the system temp directory may itself be a symlink
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    std::string path(const std::string& name) const { return (path_ / name).string(); }
    std::string root() const { return path_.string(); }
    std::string dir(const std::string& name) const {
        std::filesystem::create_directories(path_ / name);
        return path(name);
    }
    std::string file(const std::string& name, const std::string& content) const {
        std::ofstream(path_ / name, std::ios::binary) << content;
        return path(name);
    }

private:
    std::filesystem::path path_;
};

}  // namespace unit
