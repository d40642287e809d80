import Foundation
import Glibc

/// A TCP socket bound to 127.0.0.1 on a port the kernel chose, not listening: while it is open a
/// connection to the port is refused and nobody else can take it; once closed, the port was free
/// a moment ago.
final class LoopbackPort: @unchecked Sendable {
    let fd: Int32
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Workspace.Missing(what: "a socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Workspace.Missing(what: "a loopback port: \(reason)")
        }
        self.fd = fd
        self.port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(fd) }

    /// A port that was free a moment ago and that nothing listens on now.
    static func unused() throws -> UInt16 { try LoopbackPort().port }

    /// `count` distinct ports that were free a moment ago (held together while chosen).
    static func unused(_ count: Int) throws -> [UInt16] {
        let held = try (0..<count).map { _ in try LoopbackPort() }
        return held.map(\.port)
    }
}
