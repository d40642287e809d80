/// One `--allow-host` pattern: a host name, `*.suffix` (any name below the suffix), an address,
/// or a CIDR block such as `10.0.0.0/8` or `fd00::/8`.
package enum HostPattern: Sendable, Hashable, CustomStringConvertible {
    /// A host name, in lower case, without a trailing dot.
    case host(String)
    /// Any name ending in `.` and this suffix (not the suffix itself).
    case suffix(String)
    /// Addresses whose first `prefixLength` bits equal `address`'s (a single address: 32 or 128).
    case network(NetworkAddress, prefixLength: Int)

    /// A pattern that cannot be read.
    package struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        package var text: String
        package var reason: String
        package var description: String { "invalid host pattern '\(text)': \(reason)" }
    }

    /// Reads `example.org`, `*.example.org`, `192.0.2.7`, `[fe80::1]`, `10.0.0.0/8` or `fc00::/7`.
    package init(parsing text: String) throws(Invalid) {
        let trimmed = text.trimmingSpaces
        guard !trimmed.isEmpty else { throw Invalid(text: text, reason: "it is empty") }
        if let slash = trimmed.firstIndex(of: "/") {
            let prefixText = trimmed[trimmed.index(after: slash)...]
            guard let address = NetworkAddress(String(trimmed[..<slash])) else {
                throw Invalid(text: text, reason: "the part before '/' is not an IP address")
            }
            let limit = address.isIPv4 && !trimmed.contains(":") ? 32 : 128
            guard let length = Int(prefixText), (0...limit).contains(length) else {
                throw Invalid(text: text, reason: "the prefix length must be a number from 0 to \(limit)")
            }
            // "::ffff:10.0.0.0/104" is written in IPv6 terms; keep IPv4 terms inside.
            let v4Length = limit == 128 && address.isIPv4 ? length - 96 : length
            guard v4Length >= 0 else { throw Invalid(text: text, reason: "the prefix is shorter than the IPv4-mapped part") }
            self = .network(address, prefixLength: address.isIPv4 ? v4Length : length)
            return
        }
        if let address = NetworkAddress(trimmed) {
            self = .network(address, prefixLength: address.isIPv4 ? 32 : 128)
            return
        }
        var name = trimmed.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        if name.hasPrefix("*.") {
            let suffix = String(name.dropFirst(2))
            guard Self.isHostName(suffix) else { throw Invalid(text: text, reason: "'\(suffix)' is not a host name") }
            self = .suffix(suffix)
            return
        }
        guard Self.isHostName(name) else {
            throw Invalid(text: text, reason: "use a host name, '*.suffix', an IP address or a CIDR block")
        }
        self = .host(name)
    }

    /// Whether a connection to `host` (the URL's host) at `address` is one this pattern names.
    package func matches(host: String, address: NetworkAddress?) -> Bool {
        switch self {
        case .host(let name): return Self.normalized(host) == name
        case .suffix(let suffix): return Self.normalized(host).hasSuffix("." + suffix)
        case .network(let network, let length):
            if let address { return address.isWithin(network, prefixLength: length) }
            return NetworkAddress(host).map { $0.isWithin(network, prefixLength: length) } ?? false
        }
    }

    package var description: String {
        switch self {
        case .host(let name): return name
        case .suffix(let suffix): return "*." + suffix
        case .network(let address, let length): return "\(address)/\(length)"
        }
    }

    static func normalized(_ host: String) -> String {
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        return name
    }

    private static func isHostName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 253 && !name.hasPrefix(".") && !name.contains("..")
            && name.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
            }
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
