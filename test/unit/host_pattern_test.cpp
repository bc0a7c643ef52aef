// Host patterns: every accepted form and its canonical text, every rule a refused pattern
// breaks (named in one line), and matching at its boundaries.
#include "lib/host_pattern.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dsh {
namespace {

HostPattern parsed(const std::string& text) {
    const auto pattern = parse_host_pattern(text);
    EXPECT_TRUE(pattern.has_value()) << text << ": " << (pattern ? "" : pattern.reason());
    return pattern ? *pattern : HostPattern{};
}

std::string canonical(const std::string& text) { return to_string(parsed(text)); }

// The reason a pattern is refused (and a failure when it is accepted).
std::string refusal(const std::string& text) {
    const auto pattern = parse_host_pattern(text);
    if (pattern) {
        ADD_FAILURE() << "accepted: " << text << " as " << to_string(*pattern);
        return "";
    }
    EXPECT_EQ(pattern.reason().find('\n'), std::string::npos) << pattern.reason();
    return pattern.reason();
}

void expect_refused(const std::string& text, const std::string& rule_part) {
    const std::string reason = refusal(text);
    EXPECT_NE(reason.find(rule_part), std::string::npos) << text << ": " << reason;
}

TEST(HostPattern, NamesAreCanonicalLowerCaseWithoutTrailingDot) {
    EXPECT_EQ(parsed("example.org"), (HostPattern{HostKind::Name, "example.org", std::nullopt}));
    EXPECT_EQ(canonical("Example.ORG"), "example.org");
    EXPECT_EQ(canonical("example.org."), "example.org");
    EXPECT_EQ(canonical("localhost"), "localhost");
    EXPECT_EQ(canonical("xn--bcher-kva.example"), "xn--bcher-kva.example");
    EXPECT_EQ(canonical("a-b.c0.example"), "a-b.c0.example");
    EXPECT_EQ(canonical("0day.example"), "0day.example");  // only the last label must begin with a letter
}

TEST(HostPattern, Ports) {
    EXPECT_EQ(parsed("example.org:443"), (HostPattern{HostKind::Name, "example.org", 443}));
    EXPECT_EQ(canonical("example.org:1"), "example.org:1");
    EXPECT_EQ(canonical("example.org:65535"), "example.org:65535");
    EXPECT_EQ(canonical("EXAMPLE.org.:080"), "example.org:80");
    expect_refused("example.org:0", "a port is a number from 1 to 65535");
    expect_refused("example.org:65536", "a port is a number from 1 to 65535");
    expect_refused("example.org:99999999999999999999", "a port is a number from 1 to 65535");
    expect_refused("example.org:https", "a port is a number from 1 to 65535");
    expect_refused("example.org:-1", "a port is a number from 1 to 65535");
    expect_refused("example.org:+80", "a port is a number from 1 to 65535");
    expect_refused("example.org: 80", "a port is a number from 1 to 65535");
    expect_refused("example.org:", "the port after \":\" is empty");
}

TEST(HostPattern, Wildcards) {
    EXPECT_EQ(parsed("*.example.org"), (HostPattern{HostKind::Wildcard, "example.org", std::nullopt}));
    EXPECT_EQ(canonical("*.Example.Org.:8443"), "*.example.org:8443");
    EXPECT_EQ(canonical("*.co.uk"), "*.co.uk");  // no public-suffix list: documented as allowed
    expect_refused("*", "\"*\" alone would allow every host");
    expect_refused("*:443", "\"*\" alone would allow every host");
    expect_refused("*.org", "a wildcard needs at least two labels after \"*.\"");
    expect_refused("*.", "\"*\" alone would allow every host");  // the trailing dot is ignored
    expect_refused("exa*ple.org", "\"*\" is allowed only as the whole first label");
    expect_refused("*example.org", "\"*\" is allowed only as the whole first label");
    expect_refused("a.*.example.org", "\"*\" is allowed only as the whole first label");
    expect_refused("*.*.example.org", "\"*\" is allowed only as the whole first label");
    expect_refused("**.example.org", "\"*\" is allowed only as the whole first label");
    expect_refused("example.*", "\"*\" is allowed only as the whole first label");
}

TEST(HostPattern, IPv4) {
    EXPECT_EQ(parsed("192.0.2.1"), (HostPattern{HostKind::IPv4, "192.0.2.1", std::nullopt}));
    EXPECT_EQ(canonical("127.0.0.1:8080"), "127.0.0.1:8080");
    EXPECT_EQ(canonical("0.0.0.0"), "0.0.0.0");
    EXPECT_EQ(canonical("255.255.255.255"), "255.255.255.255");
    const std::string rule = "an IPv4 address is four decimal numbers from 0 to 255 without leading zeros";
    expect_refused("256.0.0.1", rule);
    expect_refused("127.1", rule);
    expect_refused("010.0.0.1", rule);
    expect_refused("1.2.3.4.5", rule);
    expect_refused("2130706433", rule);
    expect_refused("[127.0.0.1]:80", "brackets are only for IPv6 addresses");
    // Forms inet_aton would read as an address are no names either.
    expect_refused("0x7f.0.0.1", "the last label of a host name begins with a letter");
    expect_refused("0x7f000001", "the last label of a host name begins with a letter");
    expect_refused("example.123", "the last label of a host name begins with a letter");
}

TEST(HostPattern, IPv6) {
    EXPECT_EQ(parsed("::1"), (HostPattern{HostKind::IPv6, "::1", std::nullopt}));
    EXPECT_EQ(parsed("[::1]"), (HostPattern{HostKind::IPv6, "::1", std::nullopt}));
    EXPECT_EQ(parsed("[::1]:443"), (HostPattern{HostKind::IPv6, "::1", 443}));
    EXPECT_EQ(canonical("[::1]:443"), "[::1]:443");
    EXPECT_EQ(canonical("0:0:0:0:0:0:0:1"), "::1");
    EXPECT_EQ(canonical("2001:DB8:0:0:0:0:0:1"), "2001:db8::1");
    EXPECT_EQ(canonical("2001:0db8:0000:0000:0001:0000:0000:0001"), "2001:db8::1:0:0:1");  // the first of equal runs
    EXPECT_EQ(canonical("2001:db8:0:1:1:1:1:1"), "2001:db8:0:1:1:1:1:1");  // one zero group is not "::"
    EXPECT_EQ(canonical("::"), "::");
    EXPECT_EQ(canonical("1::"), "1::");
    EXPECT_EQ(canonical("::ffff:192.0.2.1"), "::ffff:192.0.2.1");
    EXPECT_EQ(canonical("::ffff:c000:0201"), "::ffff:192.0.2.1");
    EXPECT_EQ(canonical("64:ff9b::192.0.2.1"), "64:ff9b::c000:201");
    const std::string rule = "not a valid IPv6 address";
    expect_refused(":::", rule);
    expect_refused("1::2::3", rule);
    expect_refused("1:2:3:4:5:6:7:8:9", rule);
    expect_refused("1:2:3:4:5:6:7", rule);
    expect_refused("1:2:3:4:5:6:7::8", rule);
    expect_refused("12345::1", rule);
    expect_refused("g::1", rule);
    expect_refused(":1::", rule);
    expect_refused("::1.2.3.4:5", rule);
    expect_refused("::1.2.3", rule);
    expect_refused("example.org:443:1", rule);  // two colons: read as a bare IPv6 address
    expect_refused("fe80::1%eth0", "an IPv6 address has no zone index");
    expect_refused("[::1", "\"[\" without \"]\"");
    expect_refused("[::1]x", "only \":PORT\" may follow \"]\"");
    expect_refused("[::1]:0", "a port is a number from 1 to 65535");
}

TEST(HostPattern, NameRules) {
    expect_refused("", "the pattern is empty");
    expect_refused(".", "no empty labels");
    expect_refused(".example.org", "no empty labels");
    expect_refused("example..org", "no empty labels");
    expect_refused("example.org..", "no empty labels");
    expect_refused(std::string(64, 'a') + ".org", "a label of a host name is at most 63 characters");
    EXPECT_EQ(canonical(std::string(63, 'a') + ".org"), std::string(63, 'a') + ".org");
    std::string longest;  // 3 labels of 63 and one of 61: 253 characters
    for (int i = 0; i < 3; ++i) longest += std::string(63, 'a') + ".";
    longest += std::string(61, 'b');
    ASSERT_EQ(longest.size(), 253u);
    EXPECT_EQ(canonical(longest), longest);
    EXPECT_EQ(canonical(longest + "."), longest);
    expect_refused("a" + longest, "a host name is at most 253 characters");
    EXPECT_EQ(canonical("*." + longest.substr(2)), "*." + longest.substr(2));  // room for one label
    expect_refused("*." + longest.substr(1), "a host name is at most 253 characters");
    expect_refused("exa_mple.org", "only letters, digits, hyphens and dots");
    expect_refused("exa mple.org", "only letters, digits, hyphens and dots");
    expect_refused("-example.org", "does not begin or end with a hyphen");
    expect_refused("example-.org", "does not begin or end with a hyphen");
    expect_refused("example.-org", "does not begin or end with a hyphen");
}

TEST(HostPattern, UrlsAndNonAscii) {
    const std::string url = "not a URL";
    expect_refused("https://example.org", url);
    expect_refused("http://example.org/", url);
    expect_refused("example.org/path", url);
    expect_refused("user@example.org", url);
    expect_refused("example.org?x", url);
    expect_refused("b\xC3\xBC" "cher.example", "given in its ASCII (punycode) form");
}

TEST(HostPattern, ReasonNamesThePatternOnOneLine) {
    EXPECT_EQ(refusal("*.org"),
              "host pattern \"*.org\": a wildcard needs at least two labels after \"*.\", as in *.example.org");
    EXPECT_EQ(refusal("a\nb.org"), "host pattern \"a\\x0ab.org\": a host name holds only letters, digits, hyphens and dots");
}

TEST(HostPattern, CanonicalTextReadsBackAsTheSamePattern) {
    for (const char* text : {"example.org", "*.example.org:1", "192.0.2.1:65535", "::1", "[2001:db8::1]:443",
                             "::ffff:192.0.2.1", "xn--bcher-kva.example"}) {
        const HostPattern pattern = parsed(text);
        EXPECT_EQ(parsed(to_string(pattern)), pattern) << text;
    }
}

TEST(CanonicalHost, NamesAndLiterals) {
    EXPECT_EQ(*canonical_host("WWW.Example.org."), (RequestedHost{HostKind::Name, "www.example.org"}));
    EXPECT_EQ(*canonical_host("192.0.2.1"), (RequestedHost{HostKind::IPv4, "192.0.2.1"}));
    EXPECT_EQ(*canonical_host("[0:0::1]"), (RequestedHost{HostKind::IPv6, "::1"}));
    EXPECT_EQ(*canonical_host("0:0::1"), (RequestedHost{HostKind::IPv6, "::1"}));
    for (const char* bad : {"", "*.example.org", "a..b", "127.1", "[127.0.0.1]", "ex ample.org", "example.org:443",
                            "0x7f000001", "fe80::1%lo", "[::1]:80", "\xC3\xBC.example"})
        EXPECT_FALSE(canonical_host(bad).has_value()) << bad;
}

TEST(CanonicalHost, HostPortText) {
    EXPECT_EQ(host_port_text({HostKind::Name, "example.org"}, 443), "example.org:443");
    EXPECT_EQ(host_port_text({HostKind::IPv4, "192.0.2.1"}, 80), "192.0.2.1:80");
    EXPECT_EQ(host_port_text({HostKind::IPv6, "::1"}, 8080), "[::1]:8080");
}

TEST(Allows, NamesAreCaseInsensitiveAndExact) {
    const std::vector<HostPattern> list = {parsed("example.org")};
    EXPECT_TRUE(allows(list, "example.org", 443));
    EXPECT_TRUE(allows(list, "EXAMPLE.ORG.", 80));
    EXPECT_FALSE(allows(list, "www.example.org", 443));
    EXPECT_FALSE(allows(list, "badexample.org", 443));
    EXPECT_FALSE(allows(list, "example.org.evil", 443));
    EXPECT_FALSE(allows(list, "example.org", 0));
    EXPECT_FALSE(allows(list, "", 443));
}

TEST(Allows, WildcardBoundary) {
    const std::vector<HostPattern> list = {parsed("*.example.org")};
    EXPECT_TRUE(allows(list, "a.example.org", 443));
    EXPECT_TRUE(allows(list, "a.b.example.org", 443));
    EXPECT_TRUE(allows(list, "A.Example.Org.", 443));
    EXPECT_FALSE(allows(list, "example.org", 443));
    EXPECT_FALSE(allows(list, "badexample.org", 443));
    EXPECT_FALSE(allows(list, "a.badexample.org", 443));
    EXPECT_FALSE(allows(list, ".example.org", 443));
    EXPECT_FALSE(allows(list, "a.example.org.evil", 443));
    EXPECT_FALSE(allows(list, "a.example.organ", 443));
}

TEST(Allows, Ports) {
    const std::vector<HostPattern> list = {parsed("example.org:443"), parsed("*.example.net:8080")};
    EXPECT_TRUE(allows(list, "example.org", 443));
    EXPECT_FALSE(allows(list, "example.org", 80));
    EXPECT_TRUE(allows(list, "a.example.net", 8080));
    EXPECT_FALSE(allows(list, "a.example.net", 443));
    EXPECT_TRUE(allows({parsed("example.org")}, "example.org", 65535));
    EXPECT_TRUE(allows({parsed("example.org")}, "example.org", 1));
}

TEST(Allows, AddressLiteralsInAnyTextualForm) {
    const std::vector<HostPattern> list = {parsed("[2001:db8::1]:443"), parsed("192.0.2.1")};
    EXPECT_TRUE(allows(list, "2001:DB8:0:0:0:0:0:1", 443));
    EXPECT_TRUE(allows(list, "[2001:db8::0:1]", 443));
    EXPECT_FALSE(allows(list, "2001:db8::1", 80));
    EXPECT_FALSE(allows(list, "2001:db8::2", 443));
    EXPECT_TRUE(allows(list, "192.0.2.1", 22));
    EXPECT_FALSE(allows(list, "192.0.2.2", 22));
    // Matching is on the text asked for: another form of the same address is not the pattern.
    EXPECT_FALSE(allows(list, "::ffff:192.0.2.1", 22));
    EXPECT_FALSE(allows(list, "0300.0.2.1", 22));
    // A name does not match an address pattern, nor an address a name pattern.
    EXPECT_FALSE(allows({parsed("localhost")}, "127.0.0.1", 80));
    EXPECT_FALSE(allows({parsed("127.0.0.1")}, "localhost", 80));
}

TEST(Allows, EmptyListAllowsNothing) { EXPECT_FALSE(allows({}, "example.org", 443)); }

TEST(RefusedHost, IsTheHostAndPortAfterThePrefix) {
    EXPECT_EQ(refused_host("dsh-confine: network: refused example.org:443, not in allow_hosts (--allow-host ...)"),
              "example.org:443");
    EXPECT_EQ(refused_host("npm error: dsh-confine: network: refused [::1]:8080, not in allow_hosts"), "[::1]:8080");
    EXPECT_EQ(refused_host("dsh-confine: network: refused 192.0.2.1:80"), "192.0.2.1:80");
    EXPECT_EQ(refused_host("dsh-confine: network: refused Example.ORG.:443, x"), "example.org:443");  // canonical
}

TEST(RefusedHost, NothingWithoutAValidHostAndPort) {
    EXPECT_EQ(refused_host("not in allow_hosts"), std::nullopt);
    EXPECT_EQ(refused_host("dsh-confine: network: refused example.org, not in allow_hosts"), std::nullopt);  // no port
    EXPECT_EQ(refused_host("dsh-confine: network: refused exa*ple.org:443,"), std::nullopt);
    EXPECT_EQ(refused_host("dsh-confine: network: refused example.org:0,"), std::nullopt);
    EXPECT_EQ(refused_host("dsh-confine: network: refused "), std::nullopt);
}

}  // namespace
}  // namespace dsh
