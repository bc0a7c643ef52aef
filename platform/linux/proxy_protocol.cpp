// Heads are parsed by Beast's parsers and written back by Beast's serializer; what is ours is
// the judgement on them (which forms pass, which fields go) and the SOCKS5 framing, which is a
// few fixed-size fields (RFC 1928). A head the parser refuses is refused, never repaired.
#include "proxy_protocol.hpp"

#include <algorithm>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/optional.hpp>

namespace dsh::proxy {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;

HeadInspection refused(unsigned status, std::string reason) {
    HeadInspection out;
    out.outcome = HeadInspection::Outcome::Refused;
    out.status = status;
    out.reason = std::move(reason);
    return out;
}

ResponseInspection bad_response(std::string reason) {
    ResponseInspection out;
    out.outcome = ResponseInspection::Outcome::Bad;
    out.reason = std::move(reason);
    return out;
}

std::string_view view(beast::string_view text) { return {text.data(), text.size()}; }
// ASCII case folding, not beast::iequals: Boost 1.74's (Debian 12's) reads one byte past its
// arguments when they differ in case (a request target of exactly "htTp://", found by .ci/fuzz's
// proxy_head target; the input is in its corpus now).
bool iequals(std::string_view a, std::string_view b) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [&lower](char x, char y) { return lower(x) == lower(y); });
}

template <bool isRequest>
std::string head_text(const http::header<isRequest>& head) {
    std::ostringstream out;
    out << head;
    return std::move(out).str();
}

// Transfer-Encoding, when present, must be exactly one field saying "chunked": any other coding
// would reach the other side undeclared, since the proxy writes the framing again.
template <class Message>
bool transfer_encoding_acceptable(const Message& message) {
    const auto range = message.equal_range(http::field::transfer_encoding);
    const auto count = std::distance(range.first, range.second);
    if (count == 0) return true;
    if (count > 1) return false;
    const http::token_list codings{range.first->value()};
    return std::distance(codings.begin(), codings.end()) == 1 && iequals(view(*codings.begin()), "chunked");
}

// Hop-by-hop fields belong to one connection (RFC 9110 7.6.1): the ones the standard names,
// and every field that Connection lists. The caller writes the framing and Connection again.
template <class Message>
void remove_hop_by_hop(Message& message) {
    std::vector<std::string> named;
    const auto range = message.equal_range(http::field::connection);
    for (auto it = range.first; it != range.second; ++it)
        for (const auto token : http::token_list{it->value()}) named.emplace_back(token);
    for (const auto& name : named) message.erase(name);
    for (const http::field field :
         {http::field::connection, http::field::keep_alive, http::field::proxy_connection,
          http::field::proxy_authorization, http::field::proxy_authenticate, http::field::te, http::field::trailer,
          http::field::transfer_encoding, http::field::upgrade})
        message.erase(field);
}

template <class Parser>
void limit(Parser& parser, std::size_t headerLimit) {
    parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(headerLimit, UINT32_MAX)));
    // Bodies are relayed as a stream, never held. Not boost::none: Boost 1.74's parser then
    // refuses every body of known length.
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    parser.eager(false);             // stop at the end of the head
}

// The Host field, when the client sent one, must name the target's host; and its port, when it
// names one, the target's port. Anything else could carry a second host through one connection.
std::optional<std::string> host_field_mismatch(const http::request<http::empty_body>& request,
                                               const RequestedHost& host, std::uint16_t port) {
    const auto range = request.equal_range(http::field::host);
    const auto count = std::distance(range.first, range.second);
    if (count == 0) return std::nullopt;
    if (count > 1) return "more than one Host field";
    const auto field = parse_authority(view(range.first->value()));
    if (!field) return "the Host field is no host[:port]: " + field.reason();
    if (field->host != host || (field->port && *field->port != port))
        return "the Host field names another host than the request target";
    return std::nullopt;
}

}  // namespace

HeadInspection inspect_request_head(std::string_view bytes, std::size_t headerLimit) {
    http::request_parser<http::empty_body> parser;
    limit(parser, headerLimit);
    beast::error_code ec;
    const std::size_t used = parser.put(boost::asio::const_buffer(bytes.data(), bytes.size()), ec);
    if (ec == http::error::need_more) return {};
    if (ec == http::error::header_limit)
        return refused(431, "the request head is larger than " + std::to_string(headerLimit) + " bytes");
    if (ec) return refused(400, "the request cannot be parsed: " + ec.message());
    if (!parser.is_header_done()) return {};

    auto& request = parser.get();
    if (request.version() != 10 && request.version() != 11) return refused(400, "only HTTP/1.0 and HTTP/1.1 are served");
    if (!transfer_encoding_acceptable(request)) return refused(400, "the only transfer coding accepted is chunked");

    HeadInspection out;
    out.outcome = HeadInspection::Outcome::Request;
    out.headBytes = used;
    HttpRequest& result = out.request;
    if (parser.chunked()) {
        result.body = BodyFraming::Chunked;
    } else if (const auto length = parser.content_length(); length && *length > 0) {
        result.body = BodyFraming::Length;
        result.contentLength = *length;
    }
    result.keepAlive = parser.keep_alive();
    result.headMethod = request.method() == http::verb::head;
    const std::string_view target = view(request.target());

    if (request.method() == http::verb::connect) {
        const auto authority = parse_authority(target);
        if (!authority) return refused(400, "CONNECT needs host:port: " + authority.reason());
        if (!authority->port) return refused(400, "CONNECT needs host:port, with the port");
        if (result.body != BodyFraming::None) return refused(400, "a CONNECT request has no body");
        result.form = RequestForm::Connect;
        result.host = authority->host;
        result.port = *authority->port;
        if (const auto mismatch = host_field_mismatch(request, result.host, result.port)) return refused(400, *mismatch);
        return out;
    }

    constexpr std::string_view kScheme = "http://";
    if (target.size() < kScheme.size() || !iequals(target.substr(0, kScheme.size()), kScheme)) {
        if (target.size() >= 8 && iequals(target.substr(0, 8), "https://"))
            return refused(400, "an https:// URL is asked for with CONNECT host:443, not as an absolute URL");
        return refused(400,
                       "this is a proxy: it serves CONNECT host:port and absolute http:// URLs only, not the target \"" +
                           std::string(target.substr(0, 200)) + "\"");
    }
    const std::string_view rest = target.substr(kScheme.size());
    const std::size_t authority_end = std::min(rest.find_first_of("/?#"), rest.size());
    const std::string_view authority_text = rest.substr(0, authority_end);
    std::string_view path = rest.substr(authority_end);
    if (path.find('#') != std::string_view::npos) return refused(400, "a request target has no fragment (\"#\")");
    if (authority_text.find('@') != std::string_view::npos)
        return refused(400, "a URL with user information (user@host) is not served");
    const auto authority = parse_authority(authority_text);
    if (!authority) return refused(400, "the URL's host is no host[:port]: " + authority.reason());
    result.form = RequestForm::AbsoluteUri;
    result.host = authority->host;
    result.port = authority->port.value_or(80);
    if (const auto mismatch = host_field_mismatch(request, result.host, result.port)) return refused(400, *mismatch);

    std::string origin_form(path);
    if (origin_form.empty() || origin_form.front() == '?') origin_form.insert(0, "/");
    remove_hop_by_hop(request);
    request.target(origin_form);
    request.set(http::field::host, authority->port && *authority->port != 80 ? host_port_text(result.host, result.port)
                                   : result.host.kind == HostKind::IPv6      ? "[" + result.host.host + "]"
                                                                             : result.host.host);
    if (result.body == BodyFraming::Chunked) request.chunked(true);
    if (result.body == BodyFraming::Length) request.content_length(result.contentLength);
    result.upstreamHead = head_text(request.base());
    return out;
}

ResponseInspection inspect_response_head(std::string_view bytes, std::size_t headerLimit, bool headRequest,
                                         bool clientKeepAlive) {
    http::response_parser<http::empty_body> parser;
    limit(parser, headerLimit);
    if (headRequest) parser.skip(true);
    beast::error_code ec;
    const std::size_t used = parser.put(boost::asio::const_buffer(bytes.data(), bytes.size()), ec);
    if (ec == http::error::need_more) return {};
    if (ec) return bad_response("the origin's response cannot be parsed: " + ec.message());
    if (!parser.is_header_done()) return {};

    auto& response = parser.get();
    const unsigned status = response.result_int();
    if (response.version() != 10 && response.version() != 11)
        return bad_response("the origin answered with an HTTP version other than 1.0 and 1.1");
    if (status == 101) return bad_response("the origin switched protocols, which the proxy does not relay");
    if (!transfer_encoding_acceptable(response))
        return bad_response("the origin used a transfer coding other than chunked");

    ResponseInspection out;
    out.outcome = ResponseInspection::Outcome::Response;
    out.headBytes = used;
    HttpResponse& result = out.response;
    result.status = status;
    const bool bodiless = headRequest || status < 200 || status == 204 || status == 304;
    if (bodiless) {
        result.body = BodyFraming::None;
    } else if (parser.chunked()) {
        result.body = BodyFraming::Chunked;
    } else if (const auto length = parser.content_length()) {
        result.body = *length > 0 ? BodyFraming::Length : BodyFraming::None;
        result.contentLength = *length;
    } else {
        result.body = BodyFraming::UntilClose;
    }
    result.upstreamKeepAlive = parser.keep_alive() && result.body != BodyFraming::UntilClose;
    result.keepAlive = clientKeepAlive && result.body != BodyFraming::UntilClose;

    const auto length = parser.content_length();
    remove_hop_by_hop(response);
    if (result.body == BodyFraming::Chunked) response.chunked(true);
    if (length && !parser.chunked()) response.content_length(*length);
    if (status >= 200) response.keep_alive(result.keepAlive);
    result.clientHead = head_text(response.base());
    return out;
}

HeadEnd find_head_end(std::string_view held, std::size_t searched, std::size_t headerLimit) {
    constexpr std::string_view kEnd = "\r\n\r\n";
    held = held.substr(0, headerLimit);
    const std::size_t from = searched < kEnd.size() ? 0 : searched - (kEnd.size() - 1);
    if (const std::size_t at = held.find(kEnd, from); at != std::string_view::npos)
        return {HeadEnd::Outcome::Found, at + kEnd.size()};
    if (held.size() == headerLimit) return {HeadEnd::Outcome::TooLong, 0};
    return {HeadEnd::Outcome::NeedMore, headerLimit - held.size()};
}

std::string error_response(unsigned status, std::string_view text) {
    http::response<http::string_body> response{static_cast<http::status>(status), 11};
    response.set(http::field::content_type, "text/plain; charset=utf-8");
    response.keep_alive(false);
    response.body() = std::string(text);
    response.prepare_payload();
    std::ostringstream out;
    out << response;
    return std::move(out).str();
}

std::string refusal_text(const RequestedHost& host, std::uint16_t port) {
    const HostPattern exact{host.kind, host.host, port};
    const HostPattern any_port{host.kind, host.host, std::nullopt};
    return std::string(kRefusedHostPrefix) + host_port_text(host, port) +
           ", not in allow_hosts\nAllow it with --allow-host " + to_string(exact) + " (or --allow-host " +
           to_string(any_port) + " for every port), or in the configuration's [network] allow_hosts.\n";
}

std::string connect_established() {
    http::response<http::empty_body> response{http::status::ok, 11};
    response.reason("Connection established");
    return head_text(response.base());
}

SocksGreeting parse_socks_greeting(std::string_view bytes) {
    SocksGreeting out;
    if (bytes.empty()) return out;
    if (static_cast<unsigned char>(bytes[0]) != 5) {
        out.outcome = SocksGreeting::Outcome::Malformed;
        return out;
    }
    if (bytes.size() < 2) return out;
    const std::size_t methods = static_cast<unsigned char>(bytes[1]);
    if (bytes.size() < 2 + methods) return out;
    const std::string_view offered = bytes.substr(2, methods);
    out.bytes = 2 + methods;
    out.outcome = offered.find('\0') != std::string_view::npos ? SocksGreeting::Outcome::Accepted
                                                               : SocksGreeting::Outcome::NoAcceptableMethod;
    return out;
}

std::string socks_method_reply(bool accepted) { return {'\x05', accepted ? '\x00' : '\xff'}; }

SocksRequest parse_socks_request(std::string_view bytes) {
    SocksRequest out;
    auto fail = [&](SocksReply reply) {
        out.outcome = SocksRequest::Outcome::Error;
        out.error = reply;
        return out;
    };
    auto byte = [&](std::size_t at) { return static_cast<unsigned char>(bytes[at]); };
    if (bytes.size() < 4) return out;
    if (byte(0) != 5 || byte(2) != 0) return fail(SocksReply::GeneralFailure);
    const bool connect = byte(1) == 1;
    std::size_t address_size = 0;
    std::size_t at = 4;
    switch (byte(3)) {
        case 1: address_size = 4; break;
        case 4: address_size = 16; break;
        case 3:
            if (bytes.size() < 5) return out;
            address_size = byte(4);
            at = 5;
            if (address_size == 0) return fail(SocksReply::GeneralFailure);
            break;
        default: return fail(SocksReply::AddressTypeNotSupported);
    }
    if (bytes.size() < at + address_size + 2) return out;
    // Only CONNECT is served; the request is read whole first so the reply follows all of it.
    if (!connect) return fail(SocksReply::CommandNotSupported);
    const std::string_view address = bytes.substr(at, address_size);
    std::string text;
    if (byte(3) == 1) {
        for (std::size_t i = 0; i < 4; ++i) text += (i ? "." : "") + std::to_string(static_cast<unsigned char>(address[i]));
    } else if (byte(3) == 4) {
        static constexpr char kHex[] = "0123456789abcdef";
        for (std::size_t i = 0; i < 16; ++i) {
            if (i > 0 && i % 2 == 0) text += ':';
            const auto b = static_cast<unsigned char>(address[i]);
            text += kHex[b >> 4];
            text += kHex[b & 0xf];
        }
    } else {
        text = address;
    }
    auto host = canonical_host(text);
    if (!host) return fail(SocksReply::GeneralFailure);
    const std::uint16_t port = static_cast<std::uint16_t>((byte(at + address_size) << 8) | byte(at + address_size + 1));
    if (port == 0) return fail(SocksReply::GeneralFailure);
    out.outcome = SocksRequest::Outcome::Target;
    out.host = std::move(host).value();
    out.port = port;
    out.bytes = at + address_size + 2;
    return out;
}

std::string socks_reply(SocksReply reply, std::string_view boundAddress, std::uint16_t boundPort) {
    std::string out{'\x05', static_cast<char>(reply), '\x00'};
    if (boundAddress.size() == 16) {
        out += '\x04';
        out += boundAddress;
    } else {
        out += '\x01';
        out += boundAddress.size() == 4 ? std::string(boundAddress) : std::string(4, '\0');
    }
    out += static_cast<char>(boundPort >> 8);
    out += static_cast<char>(boundPort & 0xff);
    return out;
}

}  // namespace dsh::proxy
