#if os(Linux)

import Glibc
import Synchronization

// Asks the kernel, as `ip route get ADDRESS` does, which route a packet to an address would
// take (RTM_GETROUTE with RTA_DST), then asks for the state of that route's output interface
// (RTM_GETLINK). A lookup sends no traffic.

// MARK: - Targets

/// An IPv4 or IPv6 address, as the bytes that RTA_DST carries.
struct IPAddress: Hashable, Sendable {
    enum Family: Hashable, Sendable { case v4, v6 }

    var family: Family
    var bytes: [UInt8]

    /// Parses a dotted IPv4 or a textual IPv6 address; `nil` for anything else.
    init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.family = .v4
            self.bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                self.family = .v4  // an IPv4-mapped address: routed as IPv4
                self.bytes = Array(bytes[12..<16])
            } else {
                self.family = .v6
                self.bytes = bytes
            }
            return
        }
        return nil
    }

    /// Loopback (127.0.0.0/8, ::1) or unspecified (0.0.0.0, ::), which also means this host.
    var isThisHost: Bool {
        switch family {
        case .v4: bytes[0] == 127 || bytes.allSatisfy { $0 == 0 }
        case .v6: bytes[0..<15].allSatisfy { $0 == 0 } && (bytes[15] == 1 || bytes[15] == 0)
        }
    }
}

/// What the monitor judges for a host string.
enum ReachabilityTarget: Hashable, Sendable {
    /// This host: always reachable.
    case loopback
    /// An IP literal: reachable when the kernel routes it through a usable interface.
    case address(IPAddress)
    /// A host name: reachable when there is a way out (see `RouteMonitor`).
    case name

    init(host: String) {
        var text = String(host.filter { !$0.isWhitespace }).lowercased()
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if text.hasSuffix(".") { text.removeLast() }
        if text == "localhost" || text.hasSuffix(".localhost") {
            self = .loopback
            return
        }
        if let percent = text.firstIndex(of: "%") { text = String(text[..<percent]) }  // IPv6 zone
        guard let address = IPAddress(text) else {
            self = .name
            return
        }
        self = address.isThisHost ? .loopback : .address(address)
    }
}

// MARK: - Route query

/// Route and link look-ups on one request socket, one exchange at a time.
final class NetlinkRouteQuery: Sendable {
    /// The kernel's answer to a route look-up.
    enum RouteAnswer: Equatable {
        /// No route (ENETUNREACH, EHOSTUNREACH, …): the errno.
        case noRoute(Int32)
        /// A route: its type (`RTN_*`), flags (`rtm_flags`) and output interface.
        case route(type: UInt8, flags: UInt32, outputInterface: Int32?)
    }

    private struct Channel: ~Copyable {
        var sequence: UInt32 = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 8)
        deinit { buffer.deallocate() }
    }

    private let socket: NetlinkSocket
    private let channel = Mutex(Channel())

    init() throws(NetlinkSocket.Failure) {
        socket = try NetlinkSocket(groups: 0, receiveTimeoutMilliseconds: 1000)
    }

    /// Whether packets to `address` would leave through a usable interface: a unicast route
    /// whose interface is up, running and has carrier, and is not flagged dead or link-down,
    /// or a local route (the address is this host's own). `nil` when the kernel could not be
    /// asked.
    func isUsable(_ address: IPAddress) -> Bool? {
        guard let answer = try? route(to: address) else { return nil }
        switch answer {
        case .noRoute:
            return false
        case .route(let type, let flags, let outputInterface):
            if type == Netlink.RouteType.local { return true }
            guard type == Netlink.RouteType.unicast else { return false }
            if flags & (Netlink.NextHopFlag.dead | Netlink.NextHopFlag.linkDown) != 0 { return false }
            guard let outputInterface else { return true }
            guard let linkFlags = try? interfaceFlags(index: outputInterface) else { return false }
            // IFF_RUNNING: operational (carrier, not dormant), as of the kernel's last link
            // event; IFF_LOWER_UP: the carrier bit itself, current even before that event.
            let needed = Netlink.InterfaceFlag.up | Netlink.InterfaceFlag.running | Netlink.InterfaceFlag.lowerUp
            return linkFlags & needed == needed
        }
    }

    /// RTM_GETROUTE for `address`, like `ip route get`.
    func route(to address: IPAddress) throws(NetlinkSocket.Failure) -> RouteAnswer {
        let reply = try exchange { sequence in
            var request = NetlinkRequest(type: Netlink.MessageType.getRoute, flags: Netlink.requestFlag, sequence: sequence)
            request.append(UInt8(address.family == .v4 ? AF_INET : AF_INET6))  // rtm_family
            request.append(UInt8(address.bytes.count * 8))  // rtm_dst_len
            request.append(UInt8(0))  // rtm_src_len
            request.append(UInt8(0))  // rtm_tos
            request.append(UInt8(0))  // rtm_table
            request.append(UInt8(0))  // rtm_protocol
            request.append(UInt8(0))  // rtm_scope
            request.append(UInt8(0))  // rtm_type
            request.append(UInt32(0))  // rtm_flags
            request.appendAttribute(type: Netlink.RouteAttribute.destination, payload: address.bytes)
            return request.finished()
        }
        if let code = reply.errorCode { return .noRoute(-code) }
        guard reply.type == Netlink.MessageType.newRoute, reply.payload.count >= Netlink.routeMessageSize else {
            throw NetlinkSocket.Failure(operation: "route reply", code: EBADMSG)
        }
        let type = reply.payload[7]
        let flags = reply.payload.loadInteger(at: 8, as: UInt32.self)
        let attributes = reply.attributes(after: Netlink.routeMessageSize)
        let outputInterface = attributes[Netlink.RouteAttribute.outputInterface].flatMap {
            $0.count >= 4 ? $0.loadInteger(at: 0, as: Int32.self) : nil
        }
        return .route(type: type, flags: flags, outputInterface: outputInterface)
    }

    /// RTM_GETLINK for one interface: its `ifi_flags`.
    func interfaceFlags(index: Int32) throws(NetlinkSocket.Failure) -> UInt32 {
        let reply = try exchange { sequence in
            var request = NetlinkRequest(type: Netlink.MessageType.getLink, flags: Netlink.requestFlag, sequence: sequence)
            request.append(UInt8(AF_UNSPEC))  // ifi_family
            request.append(UInt8(0))  // padding
            request.append(UInt16(0))  // ifi_type
            request.append(index)  // ifi_index
            request.append(UInt32(0))  // ifi_flags
            request.append(UInt32(0))  // ifi_change
            return request.finished()
        }
        if let code = reply.errorCode { throw NetlinkSocket.Failure(operation: "link query", code: -code) }
        guard reply.type == Netlink.MessageType.newLink, reply.payload.count >= Netlink.linkMessageSize else {
            throw NetlinkSocket.Failure(operation: "link reply", code: EBADMSG)
        }
        return reply.payload.loadInteger(at: 8, as: UInt32.self)
    }

    /// Sends the request that `build` makes for a fresh sequence number and returns the reply
    /// that carries that number, skipping stale replies to earlier requests that timed out.
    private func exchange(_ build: (UInt32) -> [UInt8]) throws(NetlinkSocket.Failure) -> NetlinkMessage {
        try channel.withLock { (channel: inout Channel) throws(NetlinkSocket.Failure) -> NetlinkMessage in
            channel.sequence &+= 1
            let sequence = channel.sequence
            try socket.send(build(sequence))
            while true {
                let count = socket.receive(into: channel.buffer)
                if count < 0 {
                    if errno == EINTR { continue }
                    throw NetlinkSocket.Failure(operation: "recv", code: errno)
                }
                let messages = NetlinkMessage.parse(UnsafeRawBufferPointer(rebasing: channel.buffer[0..<count]))
                if let reply = messages.first(where: { $0.sequence == sequence }) { return reply }
            }
        }
    }
}

#endif
