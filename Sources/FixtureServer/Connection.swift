/// Serves one client connection on its own thread: reads requests one after another (keep-alive,
/// pipelining), answers each through `FixtureRoutes` and `FaultOptions`, and returns when the
/// connection should close. A CONNECT turns the connection into a `Tunnel` for the rest of its
/// life. The server closes the socket afterwards.
struct Connection {
    let socket: Socket
    let core: ServerCore
    /// Readable once the server stops; every wait watches it.
    let stopFD: Int32

    /// Bytes received and not yet consumed.
    private var buffer: [UInt8] = []

    /// The largest request head accepted.
    static let maximumHeadLength = 64 * 1024

    init(socket: Socket, core: ServerCore, stopFD: Int32) {
        self.socket = socket
        self.core = core
        self.stopFD = stopFD
    }

    mutating func run() {
        socket.setNoDelay()
        while true {
            let request: HTTPRequest
            do {
                guard let next = try readRequest() else {
                    return
                }
                request = next
            } catch {
                write(.text(error.status, error.message), isHead: false, faults: nil, keepAlive: false)
                // The client may still be sending; reading it before the close keeps the kernel from
                // answering with a reset that would destroy the error response in flight.
                socket.drain(milliseconds: 500, stopFD: stopFD)
                return
            }
            core.record(path: request.path, proxied: request.proxiedAuthority != nil, header: request.header)
            if let authority = request.tunnelAuthority {
                openTunnel(to: authority)
                return
            }
            guard respond(to: request) else {
                return
            }
        }
    }

    // MARK: - Reading

    /// The next request with its body consumed; nil when the client closed the connection.
    private mutating func readRequest() throws(HTTPRequest.ParseError) -> HTTPRequest? {
        var searchFrom = 0
        while true {
            // Empty lines before a request line are ignored (RFC 9112 section 2.2).
            if let start = buffer.firstIndex(where: { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }) {
                if start > 0 {
                    buffer.removeFirst(start)
                    searchFrom = 0
                }
                if let (headEnd, nextStart) = Self.endOfHead(in: buffer, from: searchFrom) {
                    guard headEnd <= Self.maximumHeadLength else {
                        throw HTTPRequest.ParseError(status: 431, message: "the request head is too long")
                    }
                    let request = try HTTPRequest.parse(buffer[..<headEnd])
                    buffer.removeFirst(nextStart)
                    try consumeBody(length: request.bodyLength())
                    return request
                }
                searchFrom = max(0, buffer.count - 3)
            } else {
                buffer.removeAll(keepingCapacity: true)
                searchFrom = 0
            }
            if buffer.count > Self.maximumHeadLength {
                throw HTTPRequest.ParseError(status: 431, message: "the request head is too long")
            }
            guard socket.receive(appendingTo: &buffer) else {
                return nil
            }
        }
    }

    /// Where the head ends (the line feed that ends its last line, exclusive) and where the next
    /// message starts: after "\n\n" or "\n\r\n".
    private static func endOfHead(in bytes: [UInt8], from start: Int) -> (Int, Int)? {
        let lineFeed = UInt8(ascii: "\n")
        var index = start
        while index < bytes.count {
            if bytes[index] == lineFeed {
                if index + 1 < bytes.count, bytes[index + 1] == lineFeed {
                    return (index, index + 2)
                }
                if index + 2 < bytes.count, bytes[index + 1] == UInt8(ascii: "\r"), bytes[index + 2] == lineFeed {
                    return (index, index + 3)
                }
            }
            index += 1
        }
        return nil
    }

    /// Reads and discards a request body of `length` bytes.
    private mutating func consumeBody(length: Int) throws(HTTPRequest.ParseError) {
        var left = length
        while true {
            let taken = min(left, buffer.count)
            buffer.removeFirst(taken)
            left -= taken
            if left == 0 {
                return
            }
            guard socket.receive(appendingTo: &buffer) else {
                throw HTTPRequest.ParseError(status: 400, message: "the request body ended early")
            }
        }
    }

    // MARK: - Answering

    /// Answers one request; returns whether the connection stays open for the next.
    private func respond(to request: HTTPRequest) -> Bool {
        let faults: FaultOptions
        do {
            faults = try FaultOptions(query: request.query)
        } catch {
            return write(.text(error.status, error.message), isHead: false, faults: nil, keepAlive: request.keepAlive)
        }
        if faults.reset {
            socket.setResetOnClose()
            return false
        }
        if faults.hang {
            _ = socket.wait(milliseconds: nil, stopFD: stopFD)
            return false
        }
        if let delay = faults.delay, delay > 0, socket.wait(milliseconds: delay, stopFD: stopFD) != .elapsed {
            return false
        }
        let resource = FixtureRoutes.response(for: request, baseURL: core.baseURL)
        let response = faults.apply(to: resource) { FixtureRoutes.evaluateConditional($0, request: request) }
        let keepAlive = request.keepAlive && !faults.close && faults.truncate == nil && response.cutAfter == nil
        return write(response, isHead: request.method == "HEAD", faults: faults, keepAlive: keepAlive)
    }

    /// Answers a CONNECT: 200 and then the tunnel's bytes both ways until either end closes, or
    /// the reason there is no tunnel. The connection ends with the tunnel.
    private mutating func openTunnel(to authority: String) {
        switch Tunnel.open(to: authority) {
        case .failure(let refusal):
            write(.text(refusal.status, refusal.message), isHead: false, faults: nil, keepAlive: false)
        case .success(let tunnel):
            defer { tunnel.close() }
            guard socket.send("HTTP/1.1 200 Connection Established\r\n\r\n") else { return }
            core.recordTunnel()
            let pending = buffer
            buffer.removeAll()
            tunnel.relay(client: socket, pending: pending, stopFD: stopFD)
        }
    }

    /// Writes a response, applying the body faults (chunked, truncate, trickle); returns whether
    /// the connection stays open.
    @discardableResult
    private func write(_ response: HTTPResponse, isHead: Bool, faults: FaultOptions?, keepAlive: Bool) -> Bool {
        let chunked = faults?.chunked ?? false
        guard socket.send(response.head(chunked: chunked, keepAlive: keepAlive)) else {
            return false
        }
        if !isHead && !response.isBodiless {
            let limit = faults?.truncate ?? response.cutAfter
            guard writeBody(response.body, limit: limit, trickle: faults?.trickle, after: faults?.trickleAfter ?? 0, chunked: chunked) else {
                return false
            }
            if limit != nil {
                return false  // truncated: close with the body short of its length
            }
        }
        if !keepAlive {
            socket.shutdownWrite()
            socket.discardPending()
        }
        return keepAlive
    }

    /// Streams the body in pieces of at most 64 KiB, so a large `/bytes/N` never sits in memory
    /// whole; with `trickle`, the bytes from offset `after` on go one at a time.
    private func writeBody(_ body: HTTPResponse.Body, limit: Int?, trickle: Int?, after: Int, chunked: Bool) -> Bool {
        var left = min(body.count, limit ?? .max)
        var offset = 0
        while left > 0 {
            var length = min(left, Self.pattern.count)
            let piece: ArraySlice<UInt8>
            switch body {
            case .empty:
                return true
            case .bytes(let bytes):
                piece = bytes[offset..<(offset + length)]
            case .pattern:
                // The pattern's length is a multiple of 256, so every piece starts the cycle afresh.
                piece = Self.pattern[0..<length]
            case .ranged(let from, _, let version):
                length = min(length, RangedFile.period)
                piece = RangedFile.bytes(from: from + offset, count: length, version: version)
            case .headed(let head, _):
                if offset < head.count {
                    length = min(length, head.count - offset)
                    piece = head[offset..<(offset + length)]
                } else {
                    piece = Self.pattern[0..<length]
                }
            }
            let fast = piece.startIndex + max(0, min(length, after - offset))
            if fast > piece.startIndex {
                guard writePiece(piece[..<fast], trickle: nil, chunked: chunked) else { return false }
            }
            if fast < piece.endIndex {
                guard writePiece(piece[fast...], trickle: trickle, chunked: chunked) else { return false }
            }
            left -= length
            offset += length
        }
        if chunked && limit == nil {
            return socket.send("0\r\n\r\n")
        }
        return true
    }

    private func writePiece(_ piece: ArraySlice<UInt8>, trickle: Int?, chunked: Bool) -> Bool {
        if chunked && !socket.send(String(piece.count, radix: 16) + "\r\n") {
            return false
        }
        if let trickle, trickle > 0 {
            for index in piece.indices {
                guard socket.wait(milliseconds: trickle, stopFD: stopFD) == .elapsed,
                    socket.send(piece[index...index])
                else {
                    return false
                }
            }
        } else if !socket.send(piece) {
            return false
        }
        return !chunked || socket.send("\r\n")
    }

    /// 64 KiB where byte i is i % 256.
    private static let pattern: [UInt8] = (0..<(64 * 1024)).map { UInt8(truncatingIfNeeded: $0) }
}
