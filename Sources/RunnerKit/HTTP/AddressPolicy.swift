import Foundation
import Glibc

/// Which addresses a job, a payload's child URL or a server's redirect may make the runner
/// connect to.
///
/// - Link-local (169.254.0.0/16, fe80::/10, where cloud metadata services answer) and unspecified
///   addresses (0.0.0.0/8, `::`) are refused unless an `--allow-host` pattern names them.
/// - `denyPrivate` also refuses loopback, RFC 1918, 100.64.0.0/10 and fc00::/7.
/// - With `allowedHosts`, only connections a pattern names go through (by the URL's host name or
///   by the address); a named connection goes through whatever its address.
/// - A redirect from a public address to any other kind is refused (as browsers' Private Network
///   Access does), and so is a redirect from https to http.
///
/// The HTTP clients apply it to the address each connection actually goes to; see `CurlFetcher`
/// and `URLSessionFetcher` for how each can.
public struct AddressPolicy: Sendable, Equatable {
    /// Whether loopback, RFC 1918, 100.64.0.0/10 and fc00::/7 addresses are refused too.
    public var denyPrivate: Bool
    package var allowedHosts: [HostPattern]

    /// Link-local and unspecified addresses refused; with `denyPrivate`, private ones too.
    public init(denyPrivate: Bool = false) {
        self.init(denyPrivate: denyPrivate, allowedHosts: [])
    }

    package init(denyPrivate: Bool = false, allowedHosts: [HostPattern]) {
        self.denyPrivate = denyPrivate
        self.allowedHosts = allowedHosts
    }

    /// Link-local and unspecified addresses refused, everything else allowed.
    public static let standard = AddressPolicy()

    /// Why a connection is refused; the message names the rule and the option that changes it.
    package struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        package var description: String
        package init(_ description: String) { self.description = description }
    }

    /// Resolves a host name to its addresses (an empty answer when it cannot).
    package typealias Resolver = @Sendable (String) -> [NetworkAddress]

    // MARK: - Rules

    /// Whether a connection to `host` (the URL's host) at `address` may be made.
    package func refusal(host: String, address: NetworkAddress) -> Refusal? {
        // Made only for a refusal's message: a connection that may be made describes nothing.
        var target: String { Self.describe(host: host, address: address) }
        if !allowedHosts.isEmpty {
            if isNamed(host: host, address: address) { return nil }
            return Refusal("refused to connect to \(target): not matched by any --allow-host")
        }
        switch address.scope {
        case .linkLocal, .unspecified:
            return Refusal("refused to connect to \(target): \(Self.article(address.scope)) address, refused unless allowed with --allow-host")
        case .loopback, .privateNetwork:
            return denyPrivate
                ? Refusal("refused to connect to \(target): \(Self.article(address.scope)) address, refused by --deny-private") : nil
        case .publicNetwork:
            return nil
        }
    }

    /// Whether a redirect hop may connect to `host` at `address` when the hop before it went to
    /// `previous`: the rules of `refusal(host:address:)`, and no step from a public address to
    /// another kind unless an `--allow-host` pattern names the target.
    package func refusal(host: String, address: NetworkAddress, after previous: NetworkAddress?) -> Refusal? {
        if let refusal = refusal(host: host, address: address) { return refusal }
        guard let previous, previous.scope == .publicNetwork, address.scope != .publicNetwork,
            !isNamed(host: host, address: address)
        else { return nil }
        return Refusal(
            "refused a redirect from a public address (\(previous)) to \(Self.article(address.scope)) address (\(Self.describe(host: host, address: address))): a public server may not send the runner into a private network; allow the target with --allow-host")
    }

    /// Whether a redirect from `source` to `target` may be followed, on their URLs alone: only to
    /// http and https, and never from https to http.
    package func refusal(redirectFrom source: URL, to target: URL) -> Refusal? {
        let from = source.scheme?.lowercased()
        let to = target.scheme?.lowercased()
        guard to == "http" || to == "https" else {
            return Refusal("refused a redirect to '\(target.absoluteString)': only http and https are followed")
        }
        if from == "https" && to == "http" {
            return Refusal("refused a redirect from https to http ('\(target.absoluteString)'): a redirect may not drop TLS")
        }
        return nil
    }

    /// The check a client makes before a request when it cannot see the address it will connect
    /// to: every address `resolver` gives for the URL's host must pass (`after` the previous
    /// hop's addresses, for a redirect). Answers nil when the name does not resolve: the client
    /// then reports that itself.
    package func refusal(url: URL, after previous: [NetworkAddress] = [], resolver: Resolver = AddressPolicy.systemResolver) -> (Refusal?, [NetworkAddress]) {
        guard let host = url.host, !host.isEmpty else { return (nil, []) }
        let addresses = NetworkAddress(host).map { [$0] } ?? resolver(host)
        for address in addresses {
            if previous.isEmpty {
                if let refusal = refusal(host: host, address: address) { return (refusal, addresses) }
            } else {
                for before in previous {
                    if let refusal = refusal(host: host, address: address, after: before) { return (refusal, addresses) }
                }
            }
        }
        return (nil, addresses)
    }

    /// `getaddrinfo`'s addresses for a host name.
    package static let systemResolver: Resolver = { host in
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0 else { return [] }
        defer { freeaddrinfo(list) }
        var addresses: [NetworkAddress] = []
        var entry = list
        while let current = entry {
            if let address = current.pointee.ai_addr, let parsed = NetworkAddress(sockaddr: UnsafeRawPointer(address)),
                !addresses.contains(parsed)
            {
                addresses.append(parsed)
            }
            entry = current.pointee.ai_next
        }
        return addresses
    }

    // MARK: - Helpers

    private func isNamed(host: String, address: NetworkAddress) -> Bool {
        allowedHosts.contains { $0.matches(host: host, address: address) }
    }

    private static func describe(host: String, address: NetworkAddress) -> String {
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        if let literal = NetworkAddress(bare), literal == address { return "\(address)" }
        return "\(host) (\(address))"
    }

    private static func article(_ scope: NetworkAddress.Scope) -> String {
        switch scope {
        case .unspecified: return "an unspecified"
        case .linkLocal: return "a link-local"
        case .loopback: return "a loopback"
        case .privateNetwork: return "a private"
        case .publicNetwork: return "a public"
        }
    }
}
