// The provider chain over fake backends: which candidates are checked, probed and confined,
// the rejections of a fail-closed end, and the probe cache keyed by identity.
#include "lib/provider.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fakes.hpp"

namespace dsh {
namespace {

using unit::FakeBackend;
using unit::FakeProbeCache;

const std::vector<std::string> kArgv = {"bash", "-c", "echo hi"};

SandboxPolicy sample_policy() {
    SandboxPolicy policy;
    policy.mode = ConfinedSandboxMode::WorkspaceWrite;
    policy.workspaceRoot = "/ws";
    return policy;
}

std::shared_ptr<FakeBackend> fake(const std::string& name) { return std::make_shared<FakeBackend>(name); }

SandboxProvider provider_of(const std::vector<std::shared_ptr<FakeBackend>>& chain, ProbeCache* cache = nullptr) {
    return SandboxProvider({chain.begin(), chain.end()}, cache, 1500);
}

TEST(SandboxProvider, SoleCandidateIsNeverProbed) {
    auto only = fake("bwrap");
    only->probeFailure = "would fail if asked";
    const ProviderResult result = provider_of({only}).confine(kArgv, sample_policy());
    ASSERT_TRUE(result.confined.has_value());
    EXPECT_EQ(result.confined->backend, "bwrap");
    EXPECT_EQ(only->probes, 0);
}

TEST(SandboxProvider, SoleCandidateIsStillChecked) {
    auto only = fake("bwrap");
    only->checkFailure = "bwrap not found on PATH";
    const ProviderResult result = provider_of({only}).confine(kArgv, sample_policy());
    EXPECT_FALSE(result.confined.has_value());
    ASSERT_EQ(result.rejected.size(), 1u);
    EXPECT_EQ(result.rejected[0].reason, "bwrap not found on PATH");
}

TEST(SandboxProvider, ConfinedArgvComesFromTheSelectedBackend) {
    auto only = fake("bwrap");
    const ProviderResult result = provider_of({only}).confine(kArgv, sample_policy());
    ASSERT_TRUE(result.confined.has_value());
    EXPECT_EQ(result.confined->argv, (std::vector<std::string>{"bwrap", "/ws", "--", "bash", "-c", "echo hi"}));
    EXPECT_TRUE(result.rejected.empty());
}

TEST(SandboxProvider, FirstUsableCandidateIsSelected) {
    auto first = fake("bwrap");
    auto second = fake("landlock");
    const ProviderResult result = provider_of({first, second}).confine(kArgv, sample_policy());
    ASSERT_TRUE(result.confined.has_value());
    EXPECT_EQ(result.confined->backend, "bwrap");
    EXPECT_EQ(first->probes, 1);
}

TEST(SandboxProvider, CandidatesAfterTheSelectedOneAreNotAsked) {
    auto first = fake("bwrap");
    auto second = fake("landlock");
    provider_of({first, second}).confine(kArgv, sample_policy());
    EXPECT_EQ(second->checks, 0);
    EXPECT_EQ(second->probes, 0);
    EXPECT_EQ(second->confines, 0);
}

TEST(SandboxProvider, ProbeGetsTheConfiguredTimeout) {
    auto first = fake("bwrap");
    auto second = fake("landlock");
    provider_of({first, second}).confine(kArgv, sample_policy());
    EXPECT_EQ(first->lastTimeoutMs, 1500);
}

TEST(SandboxProvider, CheckFailureSkipsToTheNextCandidateWithItsReason) {
    auto first = fake("bwrap");
    first->checkFailure = "bwrap not found on PATH";
    auto second = fake("landlock");
    const ProviderResult result = provider_of({first, second}).confine(kArgv, sample_policy());
    ASSERT_TRUE(result.confined.has_value());
    EXPECT_EQ(result.confined->backend, "landlock");
    ASSERT_EQ(result.rejected.size(), 1u);
    EXPECT_EQ(result.rejected[0].backend, "bwrap");
    EXPECT_EQ(result.rejected[0].reason, "bwrap not found on PATH");
}

TEST(SandboxProvider, FailedCheckSkipsTheProbe) {
    auto first = fake("bwrap");
    first->checkFailure = "absent";
    auto second = fake("landlock");
    provider_of({first, second}).confine(kArgv, sample_policy());
    EXPECT_EQ(first->probes, 0);
    EXPECT_EQ(first->confines, 0);
}

TEST(SandboxProvider, ProbeFailureIsRecordedAsProbeFailed) {
    auto first = fake("bwrap");
    first->probeFailure = "user namespaces are disabled";
    auto second = fake("landlock");
    const ProviderResult result = provider_of({first, second}).confine(kArgv, sample_policy());
    ASSERT_TRUE(result.confined.has_value());
    EXPECT_EQ(result.confined->backend, "landlock");
    ASSERT_EQ(result.rejected.size(), 1u);
    EXPECT_EQ(result.rejected[0].backend, "bwrap");
    EXPECT_EQ(result.rejected[0].reason, "probe failed: user namespaces are disabled");
    EXPECT_EQ(first->confines, 0);
}

TEST(SandboxProvider, ConfineFailureSkipsToTheNextCandidate) {
    auto first = fake("bwrap");
    first->confineFailure = "cannot resolve the runner";
    auto second = fake("landlock");
    const ProviderResult result = provider_of({first, second}).confine(kArgv, sample_policy());
    ASSERT_TRUE(result.confined.has_value());
    EXPECT_EQ(result.confined->backend, "landlock");
    ASSERT_EQ(result.rejected.size(), 1u);
    EXPECT_EQ(result.rejected[0].reason, "cannot resolve the runner");
}

TEST(SandboxProvider, AllUnusableGivesNoConfinedArgvAndEveryRejectionInOrder) {
    auto a = fake("bwrap");
    a->checkFailure = "not found";
    auto b = fake("landlock");
    b->probeFailure = "ABI 0";
    auto c = fake("seatbelt");
    c->confineFailure = "no profile";
    const ProviderResult result = provider_of({a, b, c}).confine(kArgv, sample_policy());
    EXPECT_FALSE(result.confined.has_value());
    ASSERT_EQ(result.rejected.size(), 3u);
    EXPECT_EQ(result.rejected[0].backend, "bwrap");
    EXPECT_EQ(result.rejected[0].reason, "not found");
    EXPECT_EQ(result.rejected[1].backend, "landlock");
    EXPECT_EQ(result.rejected[1].reason, "probe failed: ABI 0");
    EXPECT_EQ(result.rejected[2].backend, "seatbelt");
    EXPECT_EQ(result.rejected[2].reason, "no profile");
}

TEST(SandboxProvider, EmptyChainConfinesNothing) {
    const ProviderResult result = provider_of({}).confine(kArgv, sample_policy());
    EXPECT_FALSE(result.confined.has_value());
    EXPECT_TRUE(result.rejected.empty());
}

TEST(ProbeCacheUse, FirstProbeIsNotFromCache) {
    FakeProbeCache cache;
    auto backend = fake("bwrap");
    const ProbeOutcome outcome = provider_of({backend}, &cache).probe(*backend);
    EXPECT_TRUE(outcome.usable);
    EXPECT_FALSE(outcome.fromCache);
    EXPECT_EQ(backend->probes, 1);
    EXPECT_EQ(cache.entries.size(), 1u);
}

TEST(ProbeCacheUse, SecondProbeWithTheSameIdentityUsesTheCache) {
    FakeProbeCache cache;
    auto backend = fake("bwrap");
    const SandboxProvider provider = provider_of({backend}, &cache);
    provider.probe(*backend);
    const ProbeOutcome second = provider.probe(*backend);
    EXPECT_TRUE(second.usable);
    EXPECT_TRUE(second.fromCache);
    EXPECT_EQ(backend->probes, 1);
}

TEST(ProbeCacheUse, CacheIsSharedAcrossProviders) {
    FakeProbeCache cache;
    auto backend = fake("bwrap");
    provider_of({backend}, &cache).probe(*backend);
    EXPECT_TRUE(provider_of({backend}, &cache).probe(*backend).fromCache);
    EXPECT_EQ(backend->probes, 1);
}

TEST(ProbeCacheUse, CachedFailureKeepsItsReason) {
    FakeProbeCache cache;
    auto backend = fake("bwrap");
    backend->probeFailure = "setting up uid map: Permission denied";
    const SandboxProvider provider = provider_of({backend}, &cache);
    provider.probe(*backend);
    const ProbeOutcome second = provider.probe(*backend);
    EXPECT_FALSE(second.usable);
    EXPECT_TRUE(second.fromCache);
    EXPECT_EQ(second.reason, "setting up uid map: Permission denied");
    EXPECT_EQ(backend->probes, 1);
}

TEST(ProbeCacheUse, DifferentIdentityMissesTheCache) {
    FakeProbeCache cache;
    auto backend = fake("bwrap");
    const SandboxProvider provider = provider_of({backend}, &cache);
    provider.probe(*backend);
    backend->identity = "identity-2";  // e.g. the kernel was upgraded
    const ProbeOutcome second = provider.probe(*backend);
    EXPECT_FALSE(second.fromCache);
    EXPECT_EQ(backend->probes, 2);
}

TEST(ProbeCacheUse, SameIdentityOfAnotherBackendMissesTheCache) {
    FakeProbeCache cache;
    auto bwrap = fake("bwrap");
    auto landlock = fake("landlock");
    landlock->probeFailure = "unsupported";
    const SandboxProvider provider = provider_of({bwrap, landlock}, &cache);
    provider.probe(*bwrap);
    const ProbeOutcome other = provider.probe(*landlock);
    EXPECT_FALSE(other.fromCache);
    EXPECT_FALSE(other.usable);
    EXPECT_EQ(landlock->probes, 1);
}

TEST(ProbeCacheUse, EntryThatIsNotJsonIsIgnoredAndReprobed) {
    FakeProbeCache cache;
    auto backend = fake("bwrap");
    const SandboxProvider provider = provider_of({backend}, &cache);
    provider.probe(*backend);
    for (auto& [key, content] : cache.entries) content = "{not json";
    const ProbeOutcome second = provider.probe(*backend);
    EXPECT_FALSE(second.fromCache);
    EXPECT_TRUE(second.usable);
    EXPECT_EQ(backend->probes, 2);
    ASSERT_EQ(cache.discarded.size(), 1u);
    EXPECT_NE(cache.discarded[0].find("not a probe result"), std::string::npos);
}

TEST(ProbeCacheUse, EntryWithAnotherIdentityIsIgnoredAndReprobed) {
    FakeProbeCache cache;
    auto backend = fake("bwrap");
    backend->probeFailure = "really unusable";
    const SandboxProvider provider = provider_of({backend}, &cache);
    provider.probe(*backend);
    // A colliding (or planted) entry that claims usable for someone else's identity.
    for (auto& [key, content] : cache.entries)
        content = R"({"identity":"bwrap\nsomething else","usable":true,"reason":""})";
    const ProbeOutcome second = provider.probe(*backend);
    EXPECT_FALSE(second.fromCache);
    EXPECT_FALSE(second.usable);
    EXPECT_EQ(second.reason, "really unusable");
    EXPECT_EQ(backend->probes, 2);
}

TEST(ProbeCacheUse, EntryWithoutABooleanUsableIsIgnored) {
    FakeProbeCache cache;
    auto backend = fake("bwrap");
    backend->probeFailure = "really unusable";
    const SandboxProvider provider = provider_of({backend}, &cache);
    provider.probe(*backend);
    for (auto& [key, content] : cache.entries) content = R"({"identity":"bwrap\nidentity-1","usable":"yes"})";
    const ProbeOutcome second = provider.probe(*backend);
    EXPECT_FALSE(second.fromCache);
    EXPECT_FALSE(second.usable);
}

TEST(ProbeCacheUse, ReprobeRewritesTheCorruptedEntry) {
    FakeProbeCache cache;
    auto backend = fake("bwrap");
    const SandboxProvider provider = provider_of({backend}, &cache);
    provider.probe(*backend);
    for (auto& [key, content] : cache.entries) content = "garbage";
    provider.probe(*backend);
    EXPECT_TRUE(provider.probe(*backend).fromCache);
    EXPECT_EQ(backend->probes, 2);
}

TEST(ProbeCacheUse, WithoutACacheEveryProbeRuns) {
    auto backend = fake("bwrap");
    const SandboxProvider provider = provider_of({backend}, nullptr);
    provider.probe(*backend);
    EXPECT_FALSE(provider.probe(*backend).fromCache);
    EXPECT_EQ(backend->probes, 2);
}

TEST(ProbeCacheUse, ChainUsesTheCachedProbe) {
    FakeProbeCache cache;
    auto first = fake("bwrap");
    auto second = fake("landlock");
    const SandboxProvider provider = provider_of({first, second}, &cache);
    provider.confine(kArgv, sample_policy());
    provider.confine(kArgv, sample_policy());
    EXPECT_EQ(first->probes, 1);
    EXPECT_EQ(first->confines, 2);
}

TEST(DescribeRejections, ListsEveryCandidateAndReasonInOrder) {
    EXPECT_EQ(describe_rejections({{"bwrap", "not found"}, {"landlock", "probe failed: ABI 0"}}),
              "no usable backend: bwrap: not found; landlock: probe failed: ABI 0");
}

TEST(DescribeRejections, SaysSoWhenNothingIsConfigured) {
    EXPECT_EQ(describe_rejections({}), "no backend is configured");
}

// FNV-1a 64, written out independently of the implementation under test.
std::string reference_fnv1a64(const std::string& text) {
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    for (unsigned char c : text) {
        hash ^= c;
        hash *= 0x100000001b3ULL;
    }
    static const char digits[] = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 15; i >= 0; --i, hash >>= 4) out[static_cast<std::size_t>(i)] = digits[hash & 0xf];
    return out;
}

TEST(StableDigest, MatchesTheKnownFnv1aValueOfAbc) {
    EXPECT_EQ(reference_fnv1a64("abc"), "e71fa2190541574b");  // the reference itself
    EXPECT_EQ(stable_digest("abc"), "e71fa2190541574b");
}

TEST(StableDigest, OfTheEmptyStringIsTheOffsetBasis) { EXPECT_EQ(stable_digest(""), "cbf29ce484222325"); }

TEST(StableDigest, AgreesWithAnIndependentImplementation) {
    for (const std::string text : {"bwrap\n/usr/bin/bwrap 0.8.0 6.1.0 1000", "x", "\xff\x00\x80", "landlock\n7"})
        EXPECT_EQ(stable_digest(text), reference_fnv1a64(text)) << text;
}

TEST(StableDigest, IsSixteenLowercaseHexDigits) {
    const std::string digest = stable_digest("anything at all");
    EXPECT_EQ(digest.size(), 16u);
    EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos) << digest;
}

}  // namespace
}  // namespace dsh
