#if os(Linux)

// The parts of <linux/netlink.h> and <linux/rtnetlink.h> that the monitor needs.
// Glibc does not import these headers, so the constants and the layout of the
// messages are written out here. Netlink uses the host's byte order.

// MARK: - Constants

/// Netlink protocol numbers, message types, flags and attributes used by the monitor.
enum Netlink {
    /// `NETLINK_ROUTE`: the routing family (links, addresses, routes).
    static let routeProtocol: Int32 = 0

    /// Multicast groups (`RTMGRP_*`): the bit masks that `sockaddr_nl.nl_groups` takes.
    enum Group {
        static let link: UInt32 = 0x1
        static let ipv4Address: UInt32 = 0x10
        static let ipv4Route: UInt32 = 0x40
        static let ipv6Address: UInt32 = 0x100
        static let ipv6Route: UInt32 = 0x400

        /// Every group whose changes can alter whether a target is reachable.
        static let connectivity: UInt32 = link | ipv4Address | ipv4Route | ipv6Address | ipv6Route
    }

    /// Message types (`NLMSG_*`, `RTM_*`).
    enum MessageType {
        static let noop: UInt16 = 1
        static let error: UInt16 = 2
        static let done: UInt16 = 3
        static let overrun: UInt16 = 4
        static let newLink: UInt16 = 16
        static let getLink: UInt16 = 18
        static let newRoute: UInt16 = 24
        static let getRoute: UInt16 = 26
    }

    /// `NLM_F_REQUEST`.
    static let requestFlag: UInt16 = 0x1

    /// Size of `struct nlmsghdr`.
    static let headerSize = 16
    /// Size of `struct rtmsg`.
    static let routeMessageSize = 12
    /// Size of `struct ifinfomsg`.
    static let linkMessageSize = 16
    /// Size of `struct rtattr`.
    static let attributeHeaderSize = 4

    /// Route attributes (`RTA_*`).
    enum RouteAttribute {
        static let destination: UInt16 = 1
        static let outputInterface: UInt16 = 4
    }

    /// Route types (`RTN_*`).
    enum RouteType {
        static let unicast: UInt8 = 1
        static let local: UInt8 = 2
    }

    /// Next-hop flags that can appear in `rtm_flags` (`RTNH_F_*`).
    enum NextHopFlag {
        static let dead: UInt32 = 0x1
        static let linkDown: UInt32 = 0x10
    }

    /// Interface flags (`IFF_*`) in `ifi_flags`.
    enum InterfaceFlag {
        static let up: UInt32 = 0x1
        static let running: UInt32 = 0x40
        static let lowerUp: UInt32 = 0x10000
    }

    /// `NLMSG_ALIGN` and `RTA_ALIGN`: both round up to 4 bytes.
    static func align(_ length: Int) -> Int { (length + 3) & ~3 }
}

/// `struct sockaddr_nl`, laid out as the kernel expects it.
struct NetlinkAddress {
    var family: UInt16 = 16  // AF_NETLINK
    var padding: UInt16 = 0
    var portID: UInt32 = 0
    var groups: UInt32 = 0
}

// MARK: - Messages

/// One netlink message: the fields of its header that the monitor reads, and its payload.
struct NetlinkMessage {
    var type: UInt16
    var flags: UInt16
    var sequence: UInt32
    var payload: [UInt8]

    /// Splits a datagram into its messages (`NLMSG_OK` / `NLMSG_NEXT`); stops at the first
    /// malformed header.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> [NetlinkMessage] {
        var messages: [NetlinkMessage] = []
        var offset = 0
        while offset + Netlink.headerSize <= bytes.count {
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            guard length >= Netlink.headerSize, offset + length <= bytes.count else { break }
            let type = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self)
            let flags = bytes.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self)
            let sequence = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
            let payload = Array(bytes[(offset + Netlink.headerSize)..<(offset + length)])
            messages.append(NetlinkMessage(type: type, flags: flags, sequence: sequence, payload: payload))
            offset += Netlink.align(length)
        }
        return messages
    }

    /// The error code of an `NLMSG_ERROR` message: 0 for an acknowledgement, a negative errno
    /// otherwise.
    var errorCode: Int32? {
        guard type == Netlink.MessageType.error, payload.count >= 4 else { return nil }
        return payload.loadInteger(at: 0, as: Int32.self)
    }

    /// The attributes (`struct rtattr`) that follow a fixed header of `headerLength` bytes,
    /// by type; a later attribute of the same type wins.
    func attributes(after headerLength: Int) -> [UInt16: ArraySlice<UInt8>] {
        var attributes: [UInt16: ArraySlice<UInt8>] = [:]
        var offset = Netlink.align(headerLength)
        while offset + Netlink.attributeHeaderSize <= payload.count {
            let length = Int(payload.loadInteger(at: offset, as: UInt16.self))
            guard length >= Netlink.attributeHeaderSize, offset + length <= payload.count else { break }
            let type = payload.loadInteger(at: offset + 2, as: UInt16.self)
            attributes[type] = payload[(offset + Netlink.attributeHeaderSize)..<(offset + length)]
            offset += Netlink.align(length)
        }
        return attributes
    }
}

/// Builds one request: a header, a fixed part, attributes.
struct NetlinkRequest {
    private(set) var bytes: [UInt8] = []

    init(type: UInt16, flags: UInt16, sequence: UInt32) {
        append(UInt32(0))  // length, written by `finished()`
        append(type)
        append(flags)
        append(sequence)
        append(UInt32(0))  // port id: the kernel fills it in
    }

    mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value) { bytes.append(contentsOf: $0) }
    }

    mutating func appendAttribute(type: UInt16, payload: [UInt8]) {
        append(UInt16(Netlink.attributeHeaderSize + payload.count))
        append(type)
        bytes.append(contentsOf: payload)
        padToAlignment()
    }

    mutating func padToAlignment() {
        bytes.append(contentsOf: repeatElement(0, count: Netlink.align(bytes.count) - bytes.count))
    }

    /// The request with its length field set.
    func finished() -> [UInt8] {
        var result = bytes
        withUnsafeBytes(of: UInt32(result.count)) { length in
            for index in 0..<4 { result[index] = length[index] }
        }
        return result
    }
}

extension Collection<UInt8> where Index == Int {
    /// Reads a host-order integer at `offset` (relative to `startIndex`).
    func loadInteger<T: FixedWidthInteger>(at offset: Int, as type: T.Type) -> T {
        var value = T.zero
        withUnsafeMutableBytes(of: &value) { target in
            for index in 0..<MemoryLayout<T>.size {
                target[index] = self[startIndex + offset + index]
            }
        }
        return value
    }
}

#endif
