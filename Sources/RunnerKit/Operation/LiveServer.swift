import Foundation
import Glibc
import Synchronization

/// A small HTTP/1.1 server for a watcher's live page and API, on one thread of its own that polls
/// every socket, so no client (a slow one, a hostile one, ten thousand idle ones) can hold a
/// thread or grow memory past its limits, and jobs never wait for it.
///
/// Each request is answered by `handler` and the connection closed after the answer, except an
/// event stream (`Reply.events`), which stays open and gets every line given to `take(_:)` as a
/// server-sent event. Limits (`Limits`): connections (past them the oldest one still sending its
/// request is closed for the newcomer), request head size and header count, body size (bodies are
/// read only with a Content-Length), a budget for all bodies being read at once, a time for the
/// whole request to arrive and for an answer to be taken, and a buffer per event-stream reader
/// (a reader that falls behind it is disconnected).
///
/// With a token, every request must carry `Authorization: Bearer TOKEN` (401 otherwise), or the
/// page's session cookie that `/?token=TOKEN` sets (reading; writing only from the page itself). Without
/// one only GET and HEAD are served (anything else: 401), and only to requests whose Host is a
/// loopback name, so a web page the browser visits cannot read or change anything through it.
package final class LiveServer: EventLineSink, @unchecked Sendable {  // mutable state: the server thread's, or behind `inbox`
    package struct Limits: Sendable {
        package var connections = 256
        package var eventReaders = 32
        package var headBytes = 16 * 1024
        package var headers = 64
        package var bodyBytes = 1 << 20
        /// All bodies being read at once; past it a request is answered 503.
        package var bodyBudget = 16 << 20
        /// From accept to the whole request (head and body).
        package var requestTime: Duration = .seconds(10)
        /// For an answer (or an event) to be taken by the client.
        package var writeTime: Duration = .seconds(30)
        /// Bytes an event-stream reader may be behind: held here because its socket would take
        /// no more.
        package var readerBuffer = 512 * 1024
        /// Event lines waiting for the server thread.
        package var pendingLines = 10_000
        /// A comment line to every event-stream reader, so proxies and readers see it is alive.
        package var keepAlive: Duration = .seconds(15)
        /// Failed authentications one address may make in `failureWindow`; past them it is
        /// answered 429 until the window ends, so guessing the token goes at a crawl.
        package var failuresPerAddress = 10
        package var failureWindow: Duration = .seconds(10)
        /// Addresses whose failures are counted at once; when that many failed lately, the
        /// failures of any other address are answered 429 (not left uncounted).
        package var failureAddresses = 10_000

        package init() {}
    }

    package struct Request: Sendable {
        package var method: String
        /// The target's path, percent-decoded.
        package var path: String
        package var query: String
        /// Names lower-cased, in order.
        package var headers: [(name: String, value: String)]
        package var body: [UInt8]

        package func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
    }

    package struct Response: Sendable {
        package var status: Int
        package var contentType: String
        package var body: [UInt8]
        package var headers: [(name: String, value: String)]

        package init(status: Int, contentType: String = "text/plain; charset=utf-8", body: [UInt8], headers: [(name: String, value: String)] = []) {
            self.status = status
            self.contentType = contentType
            self.body = body
            self.headers = headers
        }

        package static func text(_ status: Int, _ text: String, headers: [(name: String, value: String)] = []) -> Response {
            Response(status: status, body: Array((text + "\n").utf8), headers: headers)
        }

        package static func json(_ status: Int, _ value: JSONValue) -> Response {
            var body: [UInt8] = []
            JSONWriter.write(value, into: &body)
            body.append(0x0A)
            return Response(status: status, contentType: "application/json", body: body)
        }
    }

    package enum Reply: Sendable {
        case response(Response)
        /// Server-sent events from now on; `first` is sent before them (e.g. a `retry:` line).
        case events(first: String)
        /// An answer that takes time (a database's): `start` begins the work off the server's
        /// thread and hands the response to its argument once, from any thread. The server
        /// serves the others meanwhile.
        case later(start: @Sendable (_ answer: @escaping @Sendable (Response) -> Void) -> Void)
    }

    package let limits: Limits
    /// Nil: served without a token (loopback only); else every request needs it. Changed only
    /// from one token to another (`setToken`, SIGHUP re-reading the file).
    private let tokenBytes: Mutex<[UInt8]?>
    private var token: [UInt8]? { tokenBytes.withLock { $0 } }
    private let handler: @Sendable (Request) -> Reply
    private let host: String
    private let requestedPort: UInt16

    private struct Inbox {
        var lines: [[UInt8]] = []
        /// Answers given later: for the connection with this number on `fd`.
        var answers: [(fd: Int32, number: UInt64, response: Response, head: Bool)] = []
        var dropped = 0
        var stopping = false
    }
    private let inbox = Mutex(Inbox())
    private let readers = Atomic<Int>(0)
    private var wakeRead: Int32 = -1
    private var wakeWrite: Int32 = -1
    private var listener: Int32 = -1
    private let done = DispatchSemaphore(value: 0)
    package private(set) var port: UInt16 = 0

    /// A server for `host` (an address) and `port` (0: the kernel picks one; see `port`).
    /// `pages`: the paths a browser may be sent on to after `/?token=T` (else `/`).
    package init(
        host: String, port: UInt16, token: String?, limits: Limits = Limits(), pages: Set<String> = ["/"],
        handler: @escaping @Sendable (Request) -> Reply
    ) {
        self.host = host
        self.redirectPaths = pages
        self.requestedPort = port
        self.tokenBytes = Mutex(token.map { Array($0.utf8) })
        self.limits = limits
        self.handler = handler
    }

    /// Replaces the token (a server started without one keeps serving without); true when it did.
    @discardableResult
    package func setToken(_ token: String) -> Bool {
        tokenBytes.withLock { current in
            guard current != nil else { return false }
            current = Array(token.utf8)
            return true
        }
    }

    // MARK: - Starting and stopping

    package struct StartError: Error, CustomStringConvertible {
        package var description: String
    }

    /// Binds and listens, then serves on a thread of its own until `stop()`.
    package func start() throws(StartError) {
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(requestedPort), &hints, &found) == 0, let info = found else {
            throw StartError(description: "\(host) is not an IP address")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw StartError(description: "cannot make a socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0, listen(fd, 1024) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw StartError(description: "cannot listen on \(Self.display(host: host, port: requestedPort)): \(reason)")
        }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        var pipe: [Int32] = [-1, -1]
        guard systemPipe2(&pipe, O_CLOEXEC | O_NONBLOCK) == 0 else {
            close(fd)
            throw StartError(description: "cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        listener = fd
        wakeRead = pipe[0]
        wakeWrite = pipe[1]
        let thread = Thread { [self] in
            serve()
            done.signal()
        }
        thread.name = "runner live page"
        thread.start()
    }

    /// Closes every connection and the listener; returns once the thread ended.
    package func stop() {
        let first = inbox.withLock { inbox in
            defer { inbox.stopping = true }
            return !inbox.stopping
        }
        guard first, listener >= 0 else { return }
        wake()
        done.wait()
        close(wakeRead)
        close(wakeWrite)
    }

    package static func display(host: String, port: UInt16) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Whether `host` (an address) is a loopback address: 127.0.0.0/8 or ::1.
    package static func isLoopback(_ host: String) -> Bool {
        if host == "::1" { return true }
        var v4 = in_addr()
        guard inet_pton(AF_INET, host, &v4) == 1 else { return false }
        return UInt32(bigEndian: v4.s_addr) >> 24 == 127
    }

    // MARK: - Event lines

    package var wantsLines: Bool { readers.load(ordering: .relaxed) > 0 }

    /// Event-stream readers connected now.
    package var eventReaders: Int { readers.load(ordering: .relaxed) }

    /// Queues one event line (a JSON object and a line feed) for every event-stream reader.
    package func take(_ line: [UInt8]) {
        let first = inbox.withLock { inbox -> Bool in
            guard inbox.lines.count < limits.pendingLines else {
                inbox.dropped += 1
                return false
            }
            inbox.lines.append(line)
            return inbox.lines.count == 1
        }
        if first { wake() }
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(wakeWrite, &byte, 1)
    }

    // MARK: - Connections

    private enum Phase {
        /// Reading the head, then (`body`) a body of the given length.
        case head
        case body(Request, length: Int)
        /// Waiting for an answer given later (`Reply.later`).
        case waiting
        /// Writing an answer, then closing.
        case answering
        /// Answer written, write side shut: reading what the client still sends, until it closes.
        case draining
        case events
    }

    private struct Client {
        let fd: Int32
        /// The peer's address (its counts of failed authentications are kept by it).
        let address: NetworkAddress?
        let accepted: ContinuousClock.Instant
        /// Which connection this is, in the order they came.
        let number: UInt64
        var phase = Phase.head
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        /// The last time output moved, or when output began.
        var progress: ContinuousClock.Instant
        var reserved = 0
        var drained = 0

        var pending: Int { output.count - written }

        /// Which connections make room for a newcomer first (nil: never).
        var evictionRank: Int? {
            switch phase {
            case .draining: 0
            case .head, .body: 1
            case .waiting, .answering: 2
            case .events: nil
            }
        }
    }

    private var clients: [Int32: Client] = [:]
    /// Failed authentications by address: how many, since when.
    private var failures: [NetworkAddress: (count: Int, since: ContinuousClock.Instant)] = [:]
    private var accepted: UInt64 = 0
    private var bodyBytesReserved = 0
    private var lastKeepAlive = ContinuousClock.now

    private func serve() {
        defer {
            for fd in clients.keys { close(fd) }
            clients.removeAll()
            close(listener)
        }
        var fds: [pollfd] = []
        while !inbox.withLock({ $0.stopping }) {
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
            fds.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0))
            for client in clients.values {
                var events: Int32 = 0
                switch client.phase {
                case .head, .body, .draining, .events: events |= POLLIN
                case .waiting, .answering: break
                }
                if client.pending > 0 { events |= POLLOUT }
                fds.append(pollfd(fd: client.fd, events: Int16(events), revents: 0))
            }
            _ = poll(&fds, nfds_t(fds.count), 1000)
            let now = ContinuousClock.now
            if fds[0].revents != 0 {
                deliverLines()
                deliverAnswers(now: now)
            }
            if fds[1].revents != 0 { acceptClients(now: now) }
            for entry in fds.dropFirst(2) where entry.revents != 0 {
                guard clients[entry.fd] != nil else { continue }
                if entry.revents & Int16(POLLOUT) != 0 { flush(entry.fd, now: now) }
                if entry.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0, clients[entry.fd] != nil { read(entry.fd, now: now) }
            }
            expire(now: now)
        }
    }

    private func acceptClients(now: ContinuousClock.Instant) {
        for _ in 0..<64 {
            // Close-on-exec from the start: a hook or a kind's program started meanwhile gets none.
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    systemAccept4(listener, $0, &length, Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
                }
            }
            guard fd >= 0 else { return }
            let address = withUnsafePointer(to: &storage) { NetworkAddress(sockaddr: UnsafeRawPointer($0)) }
            if clients.count >= limits.connections {
                // Room for the newcomer: the oldest of the connections already answered and
                // not yet closed goes, else the oldest still sending its request (head or
                // body), else the oldest still taking its answer. Event readers stay (there
                // are few, and each needed the token).
                if let oldest = clients.values.filter({ $0.evictionRank != nil })
                    .min(by: { ($0.evictionRank!, $0.number) < ($1.evictionRank!, $1.number) }) {
                    drop(oldest.fd)
                } else {
                    close(fd)
                    continue
                }
            }
            accepted += 1
            clients[fd] = Client(fd: fd, address: address, accepted: now, number: accepted, progress: now)
        }
    }

    private func drop(_ fd: Int32) {
        guard let client = clients.removeValue(forKey: fd) else { return }
        bodyBytesReserved -= client.reserved
        if case .events = client.phase { readers.subtract(1, ordering: .relaxed) }
        close(fd)
    }

    private func read(_ fd: Int32, now: ContinuousClock.Instant) {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count < 0 && (errno == EAGAIN || errno == EINTR) { return }
        guard count > 0 else {
            drop(fd)
            return
        }
        guard var client = clients[fd] else { return }
        switch client.phase {
        case .draining:
            // Not for long: a client still sending a body it was refused is closed past 8 MiB.
            // Closed earlier, the kernel's reset could reach a client that keeps sending before
            // it read the refusal (seen on a loaded machine at 256 KiB), and destroy the answer.
            client.drained += count
            if client.drained > 8 << 20 { return drop(fd) }
            clients[fd] = client
            return
        case .events, .waiting, .answering:
            return  // what a client sends after its request is not read
        case .head, .body:
            client.input.append(contentsOf: chunk[..<count])
        }
        clients[fd] = client
        advance(fd, now: now)
    }

    /// Parses what arrived: the head, then the body, then answers.
    private func advance(_ fd: Int32, now: ContinuousClock.Instant) {
        guard var client = clients[fd] else { return }
        if case .head = client.phase {
            guard let end = Self.endOfHead(client.input) else {
                if client.input.count > limits.headBytes { answer(fd, .text(431, "the request head is too long")) }
                return
            }
            guard end.head <= limits.headBytes else { return answer(fd, .text(431, "the request head is too long")) }
            let request: Request
            switch Self.parseHead(client.input[..<end.head], maxHeaders: limits.headers) {
            case .failure(let refusal): return answer(fd, refusal.response)
            case .success(let parsed): request = parsed
            }
            client.input.removeFirst(end.body)
            // Who asks is checked on the head alone, before anything is reserved for a body.
            if let refusal = refusal(of: request, from: client.address, now: now) { return answer(fd, refusal) }
            if request.header("transfer-encoding") != nil {
                return answer(fd, .text(411, "a body needs a Content-Length (chunked bodies are not taken)"))
            }
            let length: Int
            if let text = request.header("content-length") {
                guard let value = Int(text), value >= 0 else { return answer(fd, .text(400, "the Content-Length is not a number")) }
                length = value
            } else {
                length = 0
            }
            guard length <= limits.bodyBytes else {
                return answer(fd, .text(413, "the body is larger than \(limits.bodyBytes) bytes"))
            }
            guard bodyBytesReserved + length <= limits.bodyBudget else {
                return answer(fd, .text(503, "too many bodies being sent at once; try again", headers: [("Retry-After", "1")]))
            }
            bodyBytesReserved += length
            client.reserved = length
            client.phase = .body(request, length: length)
            clients[fd] = client
        }
        guard case .body(var request, let length) = client.phase, client.input.count >= length else { return }
        request.body = Array(client.input.prefix(length))
        client.input = []
        bodyBytesReserved -= client.reserved
        client.reserved = 0
        client.phase = .answering
        clients[fd] = client
        dispatch(fd, request, now: now)
    }

    /// Why `request` is not served, from its head. Nil: it is served.
    ///
    /// Without a token: a Host that is not loopback, or a method that writes. With one, the
    /// credentials are checked first, so the right ones are never refused: the bearer header
    /// (anything), `/?token=T` (a redirect that sets the page's cookie), the cookie (reading; a
    /// write only from the page itself: its own `Origin`, or `Sec-Fetch-Site: same-origin`, else
    /// 403). Only failures are limited: past `failuresPerAddress` in `failureWindow` an address's
    /// failures are answered 429, and so are those of an address the full table does not know.
    private func refusal(of request: Request, from address: NetworkAddress?, now: ContinuousClock.Instant) -> Response? {
        guard let token else {
            guard Self.isLoopbackHost(request.header("host")) else {
                return .text(403, "served only to a loopback Host (localhost, 127.0.0.1, [::1]) without --listen-token")
            }
            guard request.method == "GET" || request.method == "HEAD" else {
                return .text(401, "submitting and cancelling need a token: start the watcher with --listen-token FILE")
            }
            return nil
        }
        let session = Self.session(token: token, port: port)
        if let given = request.header("authorization") {
            if given.hasPrefix("Bearer "), Self.same(Array(given.utf8.dropFirst(7)), token) { return nil }
        } else if request.method == "GET", let given = Self.parameter("token", in: request.query) {
            if Self.same(Array(given.utf8), token) {
                return Response(
                    status: 303, body: [],
                    headers: [
                        ("Location", redirectTarget(request)),
                        ("Set-Cookie", "\(cookieName)=\(session); Path=/; HttpOnly; SameSite=Strict"),
                    ])
            }
        } else if let cookie = Self.cookie(cookieName, in: request.header("cookie")) {
            if Self.same(Array(cookie.utf8), Array(session.utf8)) {
                if request.method == "GET" || request.method == "HEAD" || isSameOrigin(request) { return nil }
                return .text(
                    403,
                    "the page's cookie lets a write in only from the page itself (its own Origin); another client sends Authorization: Bearer and the token; nothing was done")
            }
        } else {
            // No credentials at all are not a guess (a browser asks first without them): not counted.
            return .text(401, "this server needs Authorization: Bearer and its token (a browser: open /?token=TOKEN once)", headers: [("WWW-Authenticate", "Bearer")])
        }
        return failed(from: address, now: now)
    }

    /// Counts a failed authentication from `address`: 401, or 429 once it has failed too often
    /// lately, or when the table is full of other addresses failing and it is not among them.
    private func failed(from address: NetworkAddress?, now: ContinuousClock.Instant) -> Response {
        let refused = Response.text(401, "this server needs Authorization: Bearer and its token (a browser: open /?token=TOKEN once)", headers: [("WWW-Authenticate", "Bearer")])
        guard let address else { return refused }
        func slowed(_ wait: Duration) -> Response {
            let seconds = max(1, Int(wait.inSeconds.rounded(.up)))
            return .text(429, "too many failed authentications from this address; try again in \(seconds) s", headers: [("Retry-After", String(seconds))])
        }
        if var entry = failures[address], now - entry.since < limits.failureWindow {
            guard entry.count < limits.failuresPerAddress else { return slowed(limits.failureWindow - (now - entry.since)) }
            entry.count += 1
            failures[address] = entry
            return refused
        }
        failures[address] = nil
        if failures.count >= limits.failureAddresses {
            failures = failures.filter { now - $0.value.since < limits.failureWindow }
        }
        guard failures.count < limits.failureAddresses else {
            // Refused, not left uncounted: whoever fills the table gets no free guesses by it.
            let oldest = failures.values.map(\.since).min() ?? now
            return slowed(limits.failureWindow - (now - oldest))
        }
        failures[address] = (1, now)
        return refused
    }

    /// Whether a request comes from the page itself, as a browser says: `Sec-Fetch-Site:
    /// same-origin`, or an `Origin` of this server's own scheme, host and port (its Host).
    private func isSameOrigin(_ request: Request) -> Bool {
        if request.header("sec-fetch-site")?.lowercased() == "same-origin" { return true }
        guard let origin = request.header("origin")?.lowercased(), let host = request.header("host")?.lowercased() else { return false }
        guard origin == "http://" + host else { return false }
        // The Host's port (80 when it names none) must be the one served here.
        let named: Substring
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            named = host[host.index(after: close)...]
        } else {
            named = host.firstIndex(of: ":").map { host[$0...] } ?? ""
        }
        let hostPort = named.isEmpty ? 80 : UInt16(named.dropFirst()) ?? 0
        return hostPort == port
    }

    /// Where `/?token=T` sends the browser: the path asked for when the page serves it (else
    /// `/`), with the rest of the query when it is plain (letters, digits, `-._~%=&+`). Never a
    /// `//` (another site), never a control character (a header of its own).
    func redirectTarget(_ request: Request) -> String {
        let path = redirectPaths.contains(request.path) ? request.path : "/"
        let rest = request.query.split(separator: "&").filter { !$0.hasPrefix("token=") }.joined(separator: "&")
        guard !rest.isEmpty, rest.utf8.allSatisfy({ Self.isUnreserved($0) || "%=&+".utf8.contains($0) }) else { return path }
        return path + "?" + rest
    }

    /// The paths `/?token=T` may send the browser on to.
    private let redirectPaths: Set<String>

    /// The cookie a browser holds its session in: one per port, since cookies are not kept apart
    /// by port (two watchers on one host keep theirs apart by name).
    var cookieName: String { "runner_session_\(port)" }

    /// The session a cookie holds: HMAC-SHA256 of the port under the token, in hex. Not the token
    /// (every service on the host name is sent the cookie), checked without keeping anything,
    /// and another one once the token changes.
    static func session(token: [UInt8], port: UInt16) -> String {
        hmac(key: token, message: Array("runner live page session, port \(port)".utf8))
    }

    /// HMAC-SHA256 (RFC 2104) in hex.
    static func hmac(key: [UInt8], message: [UInt8]) -> String {
        var block = key.count > 64 ? bytes(hex: SHA256.hex(key)) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        let inner = SHA256.hex(block.map { $0 ^ 0x36 } + message)
        return SHA256.hex(block.map { $0 ^ 0x5C } + bytes(hex: inner))
    }

    private static func bytes(hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count - 1, by: 2).map { index in
            func value(_ digit: UInt8) -> UInt8 { digit >= 0x61 ? digit - 0x61 + 10 : digit - 0x30 }
            return value(digits[index]) << 4 | value(digits[index + 1])
        }
    }

    /// `name`'s value in a query string, percent-decoded.
    static func parameter(_ name: String, in query: String) -> String? {
        query.split(separator: "&").first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)).removingPercentEncoding ?? "" }
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || "-._~".utf8.contains(byte)
    }

    /// `name`'s value in a Cookie header, percent-decoded.
    static func cookie(_ name: String, in header: String?) -> String? {
        guard let header else { return nil }
        for pair in header.split(separator: ";") {
            let trimmed = pair.drop { $0 == " " }
            if trimmed.hasPrefix(name + "=") { return String(trimmed.dropFirst(name.count + 1)).removingPercentEncoding }
        }
        return nil
    }

    private func dispatch(_ fd: Int32, _ request: Request, now: ContinuousClock.Instant) {
        switch handler(request) {
        case .response(let response):
            answer(fd, response, head: request.method == "HEAD")
        case .events(let first):
            guard var client = clients[fd] else { return }
            guard readers.load(ordering: .relaxed) < limits.eventReaders else {
                return answer(fd, .text(503, "too many event-stream readers", headers: [("Retry-After", "5")]))
            }
            readers.add(1, ordering: .relaxed)
            client.phase = .events
            client.output = Array(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n\(first)".utf8)
            client.written = 0
            client.progress = now
            clients[fd] = client
            flush(fd, now: now)
        case .later(let start):
            guard var client = clients[fd] else { return }
            client.phase = .waiting
            client.input = []
            clients[fd] = client
            let (number, head) = (client.number, request.method == "HEAD")
            start { [self] response in
                inbox.withLock { $0.answers.append((fd, number, response, head)) }
                wake()
            }
        }
    }

    /// Writes the answers given later to connections still waiting for them (one closed and
    /// its number taken by another is left alone).
    private func deliverAnswers(now: ContinuousClock.Instant) {
        let answers = inbox.withLock { inbox in
            defer { inbox.answers.removeAll() }
            return inbox.answers
        }
        for given in answers {
            guard let client = clients[given.fd], client.number == given.number, case .waiting = client.phase else { continue }
            answer(given.fd, given.response, head: given.head)
        }
    }

    private func answer(_ fd: Int32, _ response: Response, head: Bool = false) {
        guard var client = clients[fd] else { return }
        bodyBytesReserved -= client.reserved
        client.reserved = 0
        var text = "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n"
        text += "Content-Type: \(response.contentType)\r\nContent-Length: \(response.body.count)\r\nConnection: close\r\n"
        text += "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n"
        // A header carrying a control character (a line break of its own) is left out.
        for header in response.headers where !(header.name + header.value).utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            text += "\(header.name): \(header.value)\r\n"
        }
        client.output = Array((text + "\r\n").utf8) + (head ? [] : response.body)
        client.written = 0
        client.input = []
        client.phase = .answering
        client.progress = .now
        clients[fd] = client
        flush(fd, now: .now)
    }

    private func flush(_ fd: Int32, now: ContinuousClock.Instant) {
        guard var client = clients[fd], client.pending > 0 else { return }
        let sent = client.output.withUnsafeBytes { send(fd, $0.baseAddress! + client.written, client.pending, Int32(MSG_NOSIGNAL)) }
        if sent < 0 {
            if errno == EAGAIN || errno == EINTR { return }
            return drop(fd)
        }
        client.written += sent
        client.progress = now
        if client.pending == 0 {
            client.output.removeAll(keepingCapacity: client.output.capacity <= 64 * 1024)
            client.written = 0
            if case .answering = client.phase {
                // Read what the client still sends before closing, so the kernel does not answer it
                // with a reset that would destroy the answer in flight.
                shutdown(fd, Int32(SHUT_WR))
                client.phase = .draining
                client.progress = now
            }
        } else if client.written > 64 * 1024 {
            client.output.removeFirst(client.written)
            client.written = 0
        }
        clients[fd] = client
    }

    /// Closes the connections past their time.
    private func expire(now: ContinuousClock.Instant) {
        var late: [Int32] = []
        for client in clients.values {
            switch client.phase {
            case .head, .body:
                if now - client.accepted > limits.requestTime { late.append(client.fd) }
            case .waiting:
                break
            case .answering, .events:
                if client.pending > 0 && now - client.progress > limits.writeTime { late.append(client.fd) }
            case .draining:
                if now - client.progress > .seconds(2) { late.append(client.fd) }
            }
        }
        for fd in late { drop(fd) }
        if now - lastKeepAlive >= limits.keepAlive {
            lastKeepAlive = now
            broadcast(Array(": keep-alive\n\n".utf8), now: now)
        }
    }

    /// Hands the queued event lines to every event-stream reader.
    private func deliverLines() {
        var buffer = [UInt8](repeating: 0, count: 256)
        while buffer.withUnsafeMutableBytes({ Glibc.read(wakeRead, $0.baseAddress, $0.count) }) > 0 {}
        let (lines, dropped) = inbox.withLock { inbox in
            defer {
                inbox.lines.removeAll(keepingCapacity: true)
                inbox.dropped = 0
            }
            return (inbox.lines, inbox.dropped)
        }
        guard !lines.isEmpty || dropped > 0 else { return }
        var bytes: [UInt8] = []
        for line in lines {
            bytes += Array("data: ".utf8)
            bytes += line.last == 0x0A ? line.dropLast() : line[...]
            bytes += [0x0A, 0x0A]
        }
        if dropped > 0 { bytes += Array("data: ".utf8) + EventLines.line("dropped", [("count", JSONValue(dropped))]) + [0x0A] }
        broadcast(bytes, now: .now)
    }

    private func broadcast(_ bytes: [UInt8], now: ContinuousClock.Instant) {
        for (fd, var client) in clients {
            guard case .events = client.phase else { continue }
            if client.pending == 0 { client.progress = now }
            client.output += bytes
            clients[fd] = client
            flush(fd, now: now)
            // Too far behind: what the kernel would not take is more than the reader's buffer
            // (it reconnects and starts over). Counted after the send, so a burst of lines that
            // a reader keeping up takes at once (a page's thread that ran late) drops nobody.
            if let after = clients[fd], after.pending > limits.readerBuffer { drop(fd) }
        }
    }

    // MARK: - Parsing

    /// Where the head ends (its bytes, without the blank line) and where the body starts.
    static func endOfHead(_ bytes: [UInt8]) -> (head: Int, body: Int)? {
        var index = 0
        while index + 1 < bytes.count {
            if bytes[index] == 0x0A {
                if bytes[index + 1] == 0x0A { return (index, index + 2) }
                if index + 2 < bytes.count, bytes[index + 1] == 0x0D, bytes[index + 2] == 0x0A { return (index, index + 3) }
            }
            index += 1
        }
        return nil
    }

    static func parseHead(_ bytes: ArraySlice<UInt8>, maxHeaders: Int) -> Result<Request, Response.Refusal> {
        // Split as bytes: to String, "\r\n" is one character.
        var lines: [Substring] = []
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            guard let text = String(validating: line.last == 0x0D ? line.dropLast() : line, as: UTF8.self) else {
                return .failure(.init(.text(400, "the request head is not UTF-8")))
            }
            lines.append(Substring(text))
        }
        while lines.first?.isEmpty == true { lines.removeFirst() }
        guard let requestLine = lines.first else { return .failure(.init(.text(400, "no request line"))) }
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else { return .failure(.init(.text(400, "a malformed request line"))) }
        guard lines.count - 1 <= maxHeaders else { return .failure(.init(.text(431, "more than \(maxHeaders) header lines"))) }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                return .failure(.init(.text(400, "a malformed header line")))
            }
            headers.append((line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let target = String(parts[1])
        let (rawPath, query) = target.split(separator: "?", maxSplits: 1).map(String.init).pairOrFirst
        guard rawPath.hasPrefix("/"), let path = rawPath.removingPercentEncoding else {
            return .failure(.init(.text(400, "the target is not a path")))
        }
        return .success(Request(method: String(parts[0]), path: path, query: query ?? "", headers: headers, body: []))
    }

    /// Whether a Host header names this machine's loopback: localhost, 127.x.y.z or [::1], with a port or not.
    static func isLoopbackHost(_ host: String?) -> Bool {
        guard let host = host?.lowercased() else { return false }
        var name = Substring(host)
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            name = name[name.index(after: name.startIndex)..<close]
        } else if let colon = name.firstIndex(of: ":") {
            name = name[..<colon]
        }
        return name == "localhost" || isLoopback(String(name))
    }

    /// Compares without stopping at the first difference, so the time taken tells nothing of the token.
    static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<min(a.count, b.count) { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 202: "Accepted"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}

extension LiveServer.Response {
    /// A request refused before its handler saw it.
    package struct Refusal: Error {
        package var response: LiveServer.Response
        init(_ response: LiveServer.Response) { self.response = response }
    }
}

extension Array where Element == String {
    fileprivate var pairOrFirst: (String, String?) { (self.first ?? "", count > 1 ? self[1] : nil) }
}

// Glibc's module leaves out what needs _GNU_SOURCE.
@_silgen_name("accept4")
private func systemAccept4(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?, _ flags: Int32) -> Int32

@_silgen_name("pipe2")
private func systemPipe2(_ fds: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32
