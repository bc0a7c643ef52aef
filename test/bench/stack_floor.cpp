// The floor for the Landlock exec path on the project's own stack: what any runner built from
// CLI11, spdlog and libstdc++, linked the way dsh-confine is, pays before it does anything of
// its own. It sets up the logger as dsh-confine does, parses dsh-confine's main options with
// CLI11, then applies landlock_floor's ruleset and execs PROGRAM (landlock_floor.c, built without
// its main). The gap between this row and landlock_floor is the stack's start-up; the gap between
// dsh-confine and this row is dsh-confine's own work. run.sh prints both.
//
//   stack_floor [--mode M] [--backend B] [--workspace-root DIR] -- PROGRAM [ARG...]
#include <string>
#include <vector>

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
    app.add_option("--mode", mode);
    app.add_option("--backend", backend);
    app.add_option("--workspace-root", root);
    app.add_option("PROGRAM", program)->required();
    CLI11_PARSE(app, argc, argv);
    spdlog::debug("mode {} backend {}", mode, backend);

    std::vector<char*> words{argv[0]};
    for (std::string& word : program) words.push_back(word.data());
    words.push_back(nullptr);
    return landlock_floor_exec(static_cast<int>(words.size()) - 1, words.data());
}
