import Glibc

/// An IPv4 or IPv6 address, as the address policy sees it: IPv4 is held in its IPv4-mapped IPv6
/// form (`::ffff:a.b.c.d`), so that a mapped address is judged as the IPv4 address it stands for.
package struct NetworkAddress: Sendable, Hashable, CustomStringConvertible {
    /// The 128 bits, most significant first.
    package let high: UInt64
    package let low: UInt64

    /// Where an address leads, for the policy's rules.
    package enum Scope: String, Sendable {
        /// 0.0.0.0/8, `::`: on Linux a connection to it reaches the host itself.
        case unspecified
        /// 169.254.0.0/16, fe80::/10: where cloud metadata services answer.
        case linkLocal = "link-local"
        /// 127.0.0.0/8, `::1`.
        case loopback
        /// RFC 1918 (10/8, 172.16/12, 192.168/16), 100.64.0.0/10 (carrier-grade NAT), fc00::/7.
        case privateNetwork = "private"
        /// Anything else.
        case publicNetwork = "public"
    }

    package init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// An IPv4 address from its 32 bits.
    package init(ipv4 bits: UInt32) {
        self.init(high: 0, low: 0xFFFF_0000_0000 | UInt64(bits))
    }

    /// Parses dotted IPv4 ("192.0.2.1") or IPv6 ("fe80::1", "::ffff:10.0.0.1"; brackets allowed).
    package init?(_ text: String) {
        var bare = Substring(text)
        if bare.hasPrefix("["), bare.hasSuffix("]") { bare = bare.dropFirst().dropLast() }
        if let percent = bare.firstIndex(of: "%") { bare = bare[..<percent] }  // fe80::1%eth0
        // Through `withCString`, with no copy of a plain address: this runs for every request.
        let address = bare.utf8.count == text.utf8.count ? text : String(bare)
        var v4 = in_addr()
        if address.withCString({ inet_pton(AF_INET, $0, &v4) }) == 1 {
            self.init(ipv4: UInt32(bigEndian: v4.s_addr))
            return
        }
        var v6 = in6_addr()
        guard address.withCString({ inet_pton(AF_INET6, $0, &v6) }) == 1 else { return nil }
        self.init(bytes16: withUnsafeBytes(of: &v6) { Array($0) })
    }

    /// From a `struct sockaddr` of family AF_INET or AF_INET6.
    package init?(sockaddr pointer: UnsafeRawPointer) {
        let family = Int32(pointer.load(as: sa_family_t.self))
        switch family {
        case AF_INET:
            // sockaddr_in: family (2), port (2), address (4)
            let bits = pointer.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
            self.init(ipv4: UInt32(bigEndian: bits))
        case AF_INET6:
            // sockaddr_in6: family (2), port (2), flow info (4), address (16), scope (4)
            self.init(bytes16: Array(UnsafeRawBufferPointer(start: pointer + 8, count: 16)))
        default:
            return nil
        }
    }

    private init(bytes16 bytes: [UInt8]) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        for i in 0..<8 { high = high << 8 | UInt64(bytes[i]) }
        for i in 8..<16 { low = low << 8 | UInt64(bytes[i]) }
        self.init(high: high, low: low)
    }

    /// An IPv4 address, or an IPv6 address that maps one.
    package var isIPv4: Bool { high == 0 && low >> 32 == 0xFFFF }

    /// The IPv4 bits, when `isIPv4`.
    package var ipv4: UInt32? { isIPv4 ? UInt32(truncatingIfNeeded: low) : nil }

    package var scope: Scope {
        if let v4 = ipv4 {
            func within(_ network: UInt32, _ bits: Int) -> Bool { v4 >> (32 - bits) == network >> (32 - bits) }
            if within(0x0000_0000, 8) { return .unspecified }
            if within(0x7F00_0000, 8) { return .loopback }
            if within(0xA9FE_0000, 16) { return .linkLocal }
            if within(0x0A00_0000, 8) || within(0xAC10_0000, 12) || within(0xC0A8_0000, 16) || within(0x6440_0000, 10) {
                return .privateNetwork
            }
            return .publicNetwork
        }
        if high == 0 && low == 0 { return .unspecified }
        if high == 0 && low == 1 { return .loopback }
        if high >> 54 == 0xFE80 >> 6 { return .linkLocal }  // fe80::/10
        if high >> 57 == 0xFC00 >> 9 { return .privateNetwork }  // fc00::/7
        return .publicNetwork
    }

    /// Whether the first `prefixLength` bits equal those of `network` (IPv4 prefixes count from
    /// the IPv4 part: 10.0.0.0/8 is ::ffff:10.0.0.0/104).
    package func isWithin(_ network: NetworkAddress, prefixLength: Int) -> Bool {
        let length = network.isIPv4 ? prefixLength + 96 : prefixLength
        guard length > 0 else { return true }
        if length <= 64 {
            let shift = UInt64(64 - length)
            return length == 64 ? high == network.high : high >> shift == network.high >> shift
        }
        guard high == network.high else { return false }
        let rest = length - 64
        if rest >= 64 { return low == network.low }
        let shift = UInt64(64 - rest)
        return low >> shift == network.low >> shift
    }

    package var description: String {
        if let v4 = ipv4 {
            return "\(v4 >> 24).\(v4 >> 16 & 0xFF).\(v4 >> 8 & 0xFF).\(v4 & 0xFF)"
        }
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { raw in
            for i in 0..<8 {
                raw[i] = UInt8(truncatingIfNeeded: high >> UInt64(56 - 8 * i))
                raw[8 + i] = UInt8(truncatingIfNeeded: low >> UInt64(56 - 8 * i))
            }
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return "?" }
        return String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
