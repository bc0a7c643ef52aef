// The floor for the Landlock exec path on the project's own stack: what any runner built from
// CLI11, spdlog and libstdc++, linked the way dsh-confine is, pays before it does anything of
// its own. It sets up the logger as dsh-confine does, parses dsh-confine's main options with
// CLI11, then applies landlock_floor's ruleset and execs PROGRAM (landlock_floor.c, built without
// its main). The gap between this row and landlock_floor is the stack's start-up; the gap between
// dsh-confine and this row is dsh-confine's own work. run.sh prints both.
// With --exec-only it applies no ruleset and only execs PROGRAM: run with the printed bwrap argv,
// it is the least a wrapper on this stack can cost in front of bwrap.
//
//   stack_floor [--exec-only] [--mode M] [--backend B] [--workspace-root DIR] -- PROGRAM [ARG...]
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

extern "C" int landlock_floor_exec(int argc, char** argv);

int main(int argc, char** argv) {
    auto logger = spdlog::stderr_color_mt("stack_floor");
    logger->set_pattern("stack_floor: %l: %v");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::warn);

    CLI::App app{"stack_floor", "stack_floor"};
    std::string mode, backend, root;
    std::vector<std::string> program;
    bool exec_only = false;
    app.add_flag("--exec-only", exec_only);
    app.add_option("--mode", mode);
    app.add_option("--backend", backend);
    app.add_option("--workspace-root", root);
    app.add_option("PROGRAM", program)->required();
    CLI11_PARSE(app, argc, argv);
    spdlog::debug("mode {} backend {}", mode, backend);

    std::vector<char*> words{argv[0]};
    for (std::string& word : program) words.push_back(word.data());
    words.push_back(nullptr);
    if (exec_only) {
        execv(words[1], words.data() + 1);
        std::fprintf(stderr, "stack_floor: %s: %s\n", words[1], std::strerror(errno));
        return 126;
    }
    return landlock_floor_exec(static_cast<int>(words.size()) - 1, words.data());
}
