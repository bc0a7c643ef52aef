// Micro-benchmarks (Google Benchmark) for the two pure hot paths: classification of a run's
// stderr (throughput over build-log-like text, a single huge line, and text full of near
// misses; building the automaton) and plan building (the backends' argv, the plan's JSON,
// reading a dialect back). They print figures and assert nothing.
//   build/test/bench/micro_bench [--benchmark_filter=Classify]
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "lib/classify.hpp"
#include "lib/plan.hpp"
#include "lib/types.hpp"
#include "platform/linux/bwrap_argv.hpp"
#include "platform/linux/landlock_rules.hpp"

namespace {

template <class... Parts>
void put(std::string& out, const Parts&... parts) {
    (out += ... += parts);
}

// About `bytes` of what a C++ build prints on stderr (the same mix as build_log.awk): progress
// lines, compiler command lines, warnings with their excerpt and caret, include chains. No
// backend's signature occurs in it. Seeded: the same text every run.
std::string build_log(std::size_t bytes) {
    std::mt19937 random(42);
    auto pick = [&](const std::vector<std::string_view>& from) { return std::string(from[random() % from.size()]); };
    const std::vector<std::string_view> dirs = {"/work/src", "/home/builder/project", "/usr/include/c++/12", "../third_party"};
    const std::vector<std::string_view> parts = {"core", "net", "util", "io", "render", "parser", "codec", "storage", "detail"};
    const std::vector<std::string_view> files = {"engine.cpp", "buffer.hpp", "reader.cc", "stream.h", "tensor.cpp", "map.tcc"};
    const std::vector<std::string_view> words = {"value", "result", "buffer", "count", "index", "status", "offset", "length"};
    const std::vector<std::string_view> flags = {"-O2", "-g", "-Wall", "-Wextra", "-fPIC", "-std=c++20", "-DNDEBUG", "-I/work/include"};
    auto path = [&] {
        std::string p = pick(dirs);
        for (unsigned i = 0, n = 1 + random() % 3; i < n; ++i) put(p, "/", pick(parts));
        put(p, "/", pick(files));
        return p;
    };
    auto number = [&](unsigned below) { return std::to_string(1 + random() % below); };
    std::string out;
    out.reserve(bytes + 512);
    for (unsigned step = 1; out.size() < bytes; ++step) {
        switch (random() % 8) {
            case 0:
            case 1: put(out, "[", std::to_string(step), "/90000] Building CXX object src/CMakeFiles/core.dir", path(), ".o\n"); break;
            case 2:
                out += "/usr/bin/c++";
                for (unsigned i = 0, n = 3 + random() % 8; i < n; ++i) put(out, " ", pick(flags));
                put(out, " -c ", path(), " -o obj/", pick(words), ".o\n");
                break;
            case 3:
            case 4:
                put(out, path(), ":", number(3000), ":", number(80), ": warning: unused variable '", pick(words),
                    "' [-Wunused-variable]\n");
                break;
            case 5: put(out, "  ", number(3000), " |     auto ", pick(words), " = ", pick(words), "(", pick(words), ");\n"); break;
            case 6: out += "      |          ^~~~~~\n"; break;
            default: put(out, "In file included from ", path(), ":", number(400), ":\n"); break;
        }
    }
    return out;
}

const std::string& sample_log() {
    static const std::string text = build_log(16 << 20);
    return text;
}

void classify_chunks(benchmark::State& state, const dsh::Dialect& dialect, const std::string& text) {
    constexpr std::size_t kChunk = 1 << 20;  // what `dsh-confine classify` reads at a time
    for (auto _ : state) {
        dsh::StreamClassifier classifier(dialect);
        for (std::size_t at = 0; at < text.size(); at += kChunk)
            classifier.feed(std::string_view(text).substr(at, kChunk));
        benchmark::DoNotOptimize(classifier.finish(1));
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(text.size()));
}

void BM_ClassifyBuildLog_Bwrap(benchmark::State& state) { classify_chunks(state, dsh::bwrap::dialect({}), sample_log()); }
BENCHMARK(BM_ClassifyBuildLog_Bwrap)->Unit(benchmark::kMillisecond);

void BM_ClassifyBuildLog_Landlock(benchmark::State& state) {
    classify_chunks(state, dsh::landlock::dialect({}), sample_log());
}
BENCHMARK(BM_ClassifyBuildLog_Landlock)->Unit(benchmark::kMillisecond);

// One line of 16 MiB with no newline: the bounded-memory path for a line that never ends.
void BM_ClassifyOneHugeLine(benchmark::State& state) {
    static const std::string text(16 << 20, 'a');
    classify_chunks(state, dsh::bwrap::dialect({}), text);
}
BENCHMARK(BM_ClassifyOneHugeLine)->Unit(benchmark::kMillisecond);

// Every line begins like a bubblewrap message without being one of its fatal signatures: the
// skip finds a candidate on each line and the automaton has to reject it.
void BM_ClassifyNearMisses(benchmark::State& state) {
    static const std::string text = [] {
        std::string out;
        while (out.size() < (16 << 20)) put(out, "bwrap: note: pretend this is noise, read-only section ", std::to_string(out.size()), "\n");
        return out;
    }();
    classify_chunks(state, dsh::bwrap::dialect({}), text);
}
BENCHMARK(BM_ClassifyNearMisses)->Unit(benchmark::kMillisecond);

// What `classify` and `run` pay before reading anything: the automaton for bubblewrap's
// seventy-odd signatures.
void BM_BuildClassifier_Bwrap(benchmark::State& state) {
    const dsh::Dialect dialect = dsh::bwrap::dialect({});
    for (auto _ : state) {
        dsh::StreamClassifier classifier(dialect);
        benchmark::DoNotOptimize(&classifier);
    }
}
BENCHMARK(BM_BuildClassifier_Bwrap)->Unit(benchmark::kMicrosecond);

// A short stderr through the whole pipeline: build, feed, finish (what a typical `run` does).
void BM_ClassifyShortStderr(benchmark::State& state) {
    const dsh::Dialect dialect = dsh::bwrap::dialect({});
    const std::string text = "make: *** [Makefile:12: all] Error 1\ntouch: cannot touch 'x': Read-only file system\n";
    for (auto _ : state) benchmark::DoNotOptimize(dsh::classify(dialect, text, 2));
}
BENCHMARK(BM_ClassifyShortStderr)->Unit(benchmark::kMicrosecond);

dsh::SandboxPolicy workspace_policy() {
    return {dsh::ConfinedSandboxMode::WorkspaceWrite, "/home/user/project", std::string("s1"),
            std::string("/home/user/.local/state/dsh-confine/sessions/s1/tmp")};
}

const std::vector<std::string> kCommand = {"/usr/bin/make", "-j8", "test"};

void BM_BwrapArgv(benchmark::State& state) {
    const dsh::bwrap::Layout layout{"/usr/bin/bwrap", "/home/user/project",
                                    {"/home/user/project/.cache/dsh-confine", "/home/user/.local/state/dsh-confine"}};
    const dsh::SandboxPolicy policy = workspace_policy();
    for (auto _ : state) benchmark::DoNotOptimize(dsh::bwrap::build_argv(layout, kCommand, policy));
}
BENCHMARK(BM_BwrapArgv)->Unit(benchmark::kMicrosecond);

void BM_LandlockArgv(benchmark::State& state) {
    dsh::landlock::RunnerArgs args;
    args.mode = dsh::ConfinedSandboxMode::WorkspaceWrite;
    args.workspaceRoot = "/home/user/project";
    args.privateTempBase = "/tmp/dsh-confine-1000";
    for (auto _ : state) benchmark::DoNotOptimize(dsh::landlock::build_argv("/usr/bin/dsh-confine", args, kCommand));
}
BENCHMARK(BM_LandlockArgv)->Unit(benchmark::kMicrosecond);

dsh::ConfinedArgv bwrap_confined() {
    const dsh::SandboxPolicy policy = workspace_policy();
    dsh::ConfinedArgv out;
    dsh::bwrap::Layout layout;
    layout.runner = "/usr/bin/bwrap";
    layout.stage = "/usr/bin/dsh-confine";
    layout.cwd = "/home/user/project";
    layout.workspaceRootId = "2049:11";
    layout.tempDirId = "2049:22";
    layout.privateTemp = "/tmp/dsh-confine-1000";
    out.argv = dsh::bwrap::build_argv(layout, kCommand, policy);
    out.backend = "bwrap";
    const dsh::Dialect rules = dsh::bwrap::dialect({});
    out.denialSignatures = rules.denialSignatures;
    out.runnerFailureRules = rules.runnerFailureRules;
    out.writableRoots = dsh::bwrap::writable_roots(policy, layout);
    return out;
}

const dsh::SandboxExecutionPolicy kExecutionPolicy{dsh::SandboxMode::WorkspaceWrite, "/home/user/project", std::string("s1")};

// The pure part of `--print`: the plan from a backend's answer, rendered as JSON.
void BM_PlanJson_Bwrap(benchmark::State& state) {
    const dsh::ConfinedArgv confined = bwrap_confined();
    for (auto _ : state) benchmark::DoNotOptimize(dsh::render_plan_json(dsh::confined_plan(kExecutionPolicy, confined)));
}
BENCHMARK(BM_PlanJson_Bwrap)->Unit(benchmark::kMicrosecond);

void BM_PlanShell_Bwrap(benchmark::State& state) {
    const dsh::ConfinedArgv confined = bwrap_confined();
    for (auto _ : state) benchmark::DoNotOptimize(dsh::render_plan_shell(dsh::confined_plan(kExecutionPolicy, confined)));
}
BENCHMARK(BM_PlanShell_Bwrap)->Unit(benchmark::kMicrosecond);

// What `classify --plan FILE` pays to read its rules back.
void BM_ParseDialect_Bwrap(benchmark::State& state) {
    const std::string document = dsh::render_plan_json(dsh::confined_plan(kExecutionPolicy, bwrap_confined()));
    for (auto _ : state) benchmark::DoNotOptimize(dsh::parse_dialect(document, "plan.json"));
}
BENCHMARK(BM_ParseDialect_Bwrap)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
