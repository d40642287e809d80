import Foundation
import Glibc

/// A bare HTTP/1.1 client on blocking sockets, for tests that must send what no polite client
/// sends (a head cut short, a huge Content-Length, nothing at all) and read exactly what came back.
/// What waits for the peer is `async` and waits off the pool: the server may be in this process.
public enum RawHTTP {
    public struct Answer: Sendable {
        public var status: Int
        /// Names lower-cased.
        public var headers: [String: String]
        public var body: String
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// A connected socket to 127.0.0.1:`port`; reads give up after `timeout`.
    public static func connect(port: UInt16, timeout: Duration = .seconds(10)) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(errno)") }
        var seconds = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure("connect: \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// Sends all of `bytes`; false when the peer is gone.
    @discardableResult
    public static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    @discardableResult
    public static func send(_ fd: Int32, _ text: String) -> Bool { send(fd, Array(text.utf8)) }

    /// Reads until the peer closes (or the read timeout); what arrived.
    public static func readAll(_ fd: Int32) async -> [UInt8] { await offThePool { blockingReadAll(fd) } }

    private static func blockingReadAll(_ fd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return bytes }
            bytes += chunk[..<count]
        }
    }

    /// Reads until `marker` has arrived (or the peer closed, or the read timed out).
    /// Reads until `marker` came, the peer closed, a read timed out, or `limit` passed (a
    /// stream that keeps sending, as an event stream's keep-alives, never times a read out).
    public static func read(_ fd: Int32, until marker: String, into bytes: inout [UInt8], upTo limit: Duration = .seconds(30)) async -> Bool {
        let (found, read) = await offThePool { [bytes] in
            var copy = bytes
            return (blockingRead(fd, until: marker, into: &copy, upTo: limit), copy)
        }
        bytes = read
        return found
    }

    private static func blockingRead(_ fd: Int32, until marker: String, into bytes: inout [UInt8], upTo limit: Duration) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let end = ContinuousClock.now + limit
        while !String(decoding: bytes, as: UTF8.self).contains(marker) {
            guard ContinuousClock.now < end else { return false }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            bytes += chunk[..<count]
        }
        return true
    }

    /// Whether the peer closed the connection within the read timeout (what it sent first is read and dropped).
    public static func closedByPeer(_ fd: Int32) async -> Bool { await offThePool { blockingClosedByPeer(fd) } }

    private static func blockingClosedByPeer(_ fd: Int32) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
        }
    }

    /// Parses a whole answer.
    public static func parse(_ bytes: [UInt8]) throws -> Answer {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw Failure("no whole head in: \(text.prefix(300))") }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let parts = lines[0].split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw Failure("no status line in: \(text.prefix(300))") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: status, headers: headers, body: String(text[split.upperBound...]))
    }

    /// One request (`head` without its blank line; Host and Content-Length added), its whole answer.
    public static func exchange(port: UInt16, _ head: String, body: [UInt8] = [], headers: [String] = []) async throws -> Answer {
        try await offThePool { () throws -> Answer in
            let fd = try connect(port: port)
            defer { close(fd) }
            var request = head + "\r\nHost: 127.0.0.1:\(port)\r\n"
            for header in headers { request += header + "\r\n" }
            if !body.isEmpty { request += "Content-Length: \(body.count)\r\n" }
            send(fd, Array((request + "\r\n").utf8) + body)
            return try parse(blockingReadAll(fd))
        }
    }
}
