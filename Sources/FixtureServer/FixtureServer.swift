// A small HTTP/1.1 server for tests and the demo: the seeds' payloads, real images and fault modes,
// on real sockets.
//
// Threading model: one thread per connection, with blocking calls. One accept thread polls the
// listening socket; each accepted connection gets its own thread (256 KiB stack) that reads
// requests, answers them and sleeps where a fault mode says so. A thread per connection keeps every
// fault mode (delay, hang, trickle, truncate, streaming 300 MiB) a few straight lines, where an
// event loop would need a state machine per mode; and Linux holds a thousand such threads easily,
// their stacks reserved but committed only as touched, which is what the "1000 hanging
// connections" tests need. A connection the kernel will not give a thread within a second is
// closed, so its client sees it end instead of waiting for an answer.
//
// Every wait polls a stop socket besides the client, so `stop()` wakes them all at once: it makes
// the stop socket readable, shuts down every open connection (waking threads blocked in recv or
// send), then waits for the threads to end. A thread that waits also returns when its client
// hangs up, so connections that clients abandon do not pile up. The shared state (open
// connections, request counts) sits in one Mutex inside `ServerCore`.

/// An HTTP/1.1 server on a loopback port, serving the `FixtureCatalog` with fault modes.
///
/// ```swift
/// let server = FixtureServer()
/// try server.start()
/// defer { server.stop() }
/// let url = URL(string: server.baseURL + "/images/png.png?delay=200")!
/// ```
///
/// Routes are listed on `FixtureRoutes`, fault parameters (valid on any path) on `FaultOptions`.
/// Static resources carry a strong ETag and a fixed Last-Modified and answer conditional requests
/// with 304.
public final class FixtureServer: Sendable {
    private let core: ServerCore

    /// A server for `host` (an IP literal) and `port`; port 0 lets the system pick a free one.
    /// Nothing listens until `start()`.
    public init(host: String = "127.0.0.1", port: UInt16 = 0) {
        core = ServerCore(host: host, port: port)
    }

    deinit {
        core.stop()
    }

    // MARK: - Lifecycle

    /// Binds, listens and starts accepting connections. Also raises the process's soft limit on
    /// open files to its hard limit, since tests hold many connections at once.
    /// Throws when the address cannot be used, or when the server already ran.
    public func start() throws(FixtureServer.Error) {
        try core.start()
    }

    /// Closes the listener and every connection, waking handlers that delay, hang or trickle, and
    /// waits (up to five seconds) until their threads have ended. Idempotent.
    public func stop() {
        core.stop()
    }

    // MARK: - Address

    /// The bound port once started (the requested one before).
    public var port: UInt16 {
        core.port
    }

    /// "http://HOST:PORT" (IPv6 hosts in brackets).
    public var baseURL: String {
        core.baseURL
    }

    // MARK: - Observing

    /// How many requests arrived whose path (without query) is `path`, fault requests included.
    public func requestCount(path: String) -> Int {
        core.requestCount(path: path)
    }

    /// When each request whose path (without query) starts with `pathPrefix` arrived, on the
    /// monotonic clock, oldest first: the server's own view of a client's pace. Only the first
    /// 100,000 requests of a server are kept.
    public func arrivals(pathPrefix: String = "/") -> [ContinuousClock.Instant] {
        core.arrivals(pathPrefix: pathPrefix)
    }

    /// From now on, notes the value of the header `name` of every request (nil when absent):
    /// how a test sees what was sent without the response (and so the payload) holding it.
    public func recordHeader(named name: String) {
        core.recordHeader(named: name)
    }

    /// The values of the recorded header, by request path, in arrival order.
    public var recordedHeaderValues: [(path: String, value: String?)] {
        core.recordedHeaderValues
    }

    /// How many requests arrived in all.
    public var totalRequests: Int {
        core.totalRequests
    }

    /// How many of them came as a client sends them to a proxy: with an absolute-form target
    /// ("GET http://example.test/data.json HTTP/1.1"), served by their path as any other. A client
    /// told to use this server as its HTTP proxy (`http_proxy`) sends its requests so.
    public var proxiedRequests: Int {
        core.proxiedRequests
    }

    /// How many CONNECT tunnels it opened, as an HTTPS proxy does for a client told to use it
    /// (`https_proxy`): to loopback addresses only (127.0.0.1, ::1, localhost), and only while
    /// the server runs.
    public var tunnels: Int {
        core.tunnels
    }

    /// How many client connections are open now.
    public var openConnections: Int {
        core.openConnections
    }

    /// How many connections a thread has begun to serve, since the start: with `openConnections`
    /// and the request counts, where a connection that got no answer stopped.
    package var connectionsServed: Int {
        core.connectionsServed
    }
}
