import Foundation
import Glibc

/// A blocking HTTP/1.1 client on one TCP connection, for what URLSession hides: keep-alive on one
/// connection, exact fields, resets and silences. Every read gives up after `timeout`.
final class RawHTTPClient {
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    enum Failure: Error, Equatable {
        case connect(Int32)
        case timedOut
        case reset
        case closed
        case malformed(String)
    }

    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: UInt16, timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            throw Failure.connect(errno)  // deinit closes the socket
        }
        let seconds = Int(timeout)
        var limit = timeval(tv_sec: seconds, tv_usec: Int((timeout - Double(seconds)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
    }

    /// Why the last send failed (an errno), if one did.
    private(set) var sendError: Int32?

    /// Sends all of `text`; false when the connection broke (`sendError` says how).
    @discardableResult
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else {
                sendError = errno
                return false
            }
            offset += sent
        }
        return true
    }

    /// Sends a request for `path` (keep-alive, as HTTP/1.1 implies) with extra header lines.
    @discardableResult
    func request(_ path: String, method: String = "GET", headers: [String] = []) -> Bool {
        send((["\(method) \(path) HTTP/1.1", "Host: 127.0.0.1"] + headers).joined(separator: "\r\n") + "\r\n\r\n")
    }

    /// Whether the server sends something or closes within `seconds`.
    func hasData(within seconds: Double) -> Bool {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        return poll(&fds, 1, Int32(seconds * 1000)) > 0
    }

    /// Everything until the server closes the connection.
    func readToEnd() throws(Failure) -> [UInt8] {
        while try fill() {}
        defer { buffer.removeAll() }
        return buffer
    }

    /// One response; `head` says it answers a HEAD request (no body whatever the fields say).
    func readResponse(head: Bool = false) throws(Failure) -> Response {
        var headEnd = findHeadEnd()
        while headEnd == nil {
            guard try fill() else {
                throw buffer.isEmpty ? .closed : .malformed("end of stream inside the head")
            }
            headEnd = findHeadEnd()
        }
        guard let end = headEnd else { throw .closed }
        let headText = String(decoding: buffer[0..<end], as: UTF8.self)
        buffer.removeFirst(end + 4)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw .malformed(headText) }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw .malformed(line) }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                .trimmingCharacters(in: .whitespaces)
        }
        var body: [UInt8] = []
        if head || status == 304 || status == 204 {
            body = []
        } else if headers["transfer-encoding"] == "chunked" {
            while true {
                let line = try readLine()
                guard let size = Int(line, radix: 16) else { throw .malformed("chunk size \(line)") }
                if size == 0 {
                    _ = try readLine()
                    break
                }
                body += try readBytes(size)
                _ = try readLine()
            }
        } else if let length = headers["content-length"].flatMap({ Int($0) }) {
            body = try readBytes(length)
        } else {
            body = try readToEnd()
        }
        return Response(status: status, headers: headers, body: body)
    }

    // MARK: - Buffer

    /// Reads more bytes into the buffer; false at end of stream.
    private func fill() throws(Failure) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer += chunk[0..<count]
            return true
        }
        if count == 0 {
            return false
        }
        switch errno {
        case EAGAIN: throw .timedOut
        case ECONNRESET: throw .reset
        default: throw .malformed("recv failed with errno \(errno)")
        }
    }

    private func findHeadEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        return (0...(buffer.count - 4)).first {
            buffer[$0] == 13 && buffer[$0 + 1] == 10 && buffer[$0 + 2] == 13 && buffer[$0 + 3] == 10
        }
    }

    private func readLine() throws(Failure) -> String {
        while true {
            if let index = buffer.indices.dropLast().first(where: { buffer[$0] == 13 && buffer[$0 + 1] == 10 }) {
                let line = String(decoding: buffer[0..<index], as: UTF8.self)
                buffer.removeFirst(index + 2)
                return line
            }
            guard try fill() else { throw .closed }
        }
    }

    private func readBytes(_ count: Int) throws(Failure) -> [UInt8] {
        while buffer.count < count {
            guard try fill() else { throw .closed }
        }
        let bytes = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return bytes
    }
}
