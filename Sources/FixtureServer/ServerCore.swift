import Dispatch
import Foundation
import Glibc
import Synchronization

/// The running part of a `FixtureServer`: the listening socket, the accept thread, the set of open
/// connections and the request counters. The accept thread and every connection thread hold it, so
/// it outlives the `FixtureServer` that owns it until they have all ended.
///
/// Descriptors: a connection's descriptor is in `connections` from accept until its thread closes
/// it, and both the insertion and the removal happen under the lock, as does `stop()`'s shutdown of
/// every descriptor in the set. So `stop()` never touches a descriptor that was closed and perhaps
/// reused by someone else.
final class ServerCore: Sendable {
    let host: String
    let requestedPort: UInt16

    private let state = Mutex(State())
    /// Entered by the accept thread and every connection thread; `stop()` waits for it.
    private let threads = DispatchGroup()

    private struct State {
        var phase = Phase.idle
        var port: UInt16 = 0
        /// A socket pair: one byte written to `stopWrite` makes `stopRead` readable for good.
        var stopRead: Int32 = -1
        var stopWrite: Int32 = -1
        var connections: Set<Int32> = []
        var connectionsServed = 0
        var requestsByPath: [String: Int] = [:]
        var totalRequests = 0
        var proxiedRequests = 0
        var tunnels = 0
        /// The header recorded (`recordHeader(named:)`), and the values it arrived with, in order.
        var recordedHeader: String?
        var recordedValues: [(path: String, value: String?)] = []
        /// When each request arrived, oldest first (the first `maxArrivals`).
        var arrivals: [(path: String, at: ContinuousClock.Instant)] = []
    }

    /// Arrivals kept: enough for any pacing test, bounded for the scale tests.
    static let maxArrivals = 100_000

    private enum Phase {
        case idle, running, stopped
    }

    /// The stack of a connection thread. A handler needs little, and a thousand threads with small
    /// stacks cost a thousand times that in address space, committed only as touched.
    static let threadStackSize = 256 * 1024

    init(host: String, port: UInt16) {
        self.host = host
        self.requestedPort = port
    }

    deinit {
        state.withLock { state in
            if state.stopRead >= 0 {
                close(state.stopRead)
                close(state.stopWrite)
            }
        }
    }

    // MARK: - Starting and stopping

    func start() throws(FixtureServer.Error) {
        try state.withLock { state throws(FixtureServer.Error) in
            switch state.phase {
            case .running: throw .alreadyStarted
            case .stopped: throw .stopped
            case .idle: break
            }
            Self.raiseOpenFileLimit()
            let address = try SocketAddress(host: host, port: requestedPort)
            let listener = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard listener >= 0 else {
                throw .system(operation: "create a socket for", address: address.description, code: errno)
            }
            var reuse: Int32 = 1
            setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
            guard address.bind(listener) == 0 else {
                let code = errno
                close(listener)
                throw .system(operation: "bind", address: address.description, code: code)
            }
            guard listen(listener, SOMAXCONN) == 0 else {
                let code = errno
                close(listener)
                throw .system(operation: "listen on", address: address.description, code: code)
            }
            // Non-blocking, so a connection that vanishes between poll and accept cannot block the loop.
            _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
            var pair: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0
            else {
                let code = errno
                close(listener)
                throw .system(operation: "create the stop signal for", address: address.description, code: code)
            }
            let stopRead = pair[0]
            guard spawn(stackSize: 64 * 1024, { [self] in acceptLoop(listener: listener, stopFD: stopRead) }) else {
                close(listener)
                close(pair[0])
                close(pair[1])
                throw .system(operation: "start the accept thread for", address: address.description, code: EAGAIN)
            }
            state.port = SocketAddress.boundPort(listener) ?? requestedPort
            state.stopRead = pair[0]
            state.stopWrite = pair[1]
            state.phase = .running
        }
    }

    /// Stops accepting, shuts down every open connection (which wakes every waiting handler), and
    /// waits up to five seconds for all threads to end. Idempotent.
    func stop() {
        let wasRunning = state.withLock { state in
            guard state.phase == .running else {
                state.phase = .stopped
                return false
            }
            state.phase = .stopped
            var byte: UInt8 = 1
            _ = Glibc.write(state.stopWrite, &byte, 1)
            for fd in state.connections {
                shutdown(fd, Int32(SHUT_RDWR))
            }
            return true
        }
        if wasRunning {
            _ = threads.wait(timeout: .now() + .seconds(5))
        }
    }

    // MARK: - Figures

    var port: UInt16 {
        state.withLock { $0.phase == .idle ? requestedPort : $0.port }
    }

    var baseURL: String {
        let port = self.port
        return host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)"
    }

    func record(path: String, proxied: Bool, header: (String) -> String? = { _ in nil }) {
        let now = ContinuousClock.now
        state.withLock { state in
            state.requestsByPath[path, default: 0] += 1
            state.totalRequests += 1
            if proxied {
                state.proxiedRequests += 1
            }
            if state.arrivals.count < Self.maxArrivals { state.arrivals.append((path, now)) }
            if let name = state.recordedHeader { state.recordedValues.append((path, header(name))) }
        }
    }

    func recordHeader(named name: String) {
        state.withLock { $0.recordedHeader = name.lowercased() }
    }

    var recordedHeaderValues: [(path: String, value: String?)] {
        state.withLock { $0.recordedValues }
    }

    func arrivals(pathPrefix: String) -> [ContinuousClock.Instant] {
        state.withLock { $0.arrivals.filter { $0.path.hasPrefix(pathPrefix) }.map(\.at) }
    }

    func requestCount(path: String) -> Int {
        state.withLock { $0.requestsByPath[path] ?? 0 }
    }

    var totalRequests: Int {
        state.withLock { $0.totalRequests }
    }

    var proxiedRequests: Int {
        state.withLock { $0.proxiedRequests }
    }

    func recordTunnel() {
        state.withLock { $0.tunnels += 1 }
    }

    var tunnels: Int {
        state.withLock { $0.tunnels }
    }

    var connectionsServed: Int {
        state.withLock { $0.connectionsServed }
    }

    var openConnections: Int {
        state.withLock { $0.connections.count }
    }

    // MARK: - Threads

    private func acceptLoop(listener: Int32, stopFD: Int32) {
        defer { close(listener) }
        while true {
            var fds = [
                pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0),
            ]
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR {
                    continue
                }
                return
            }
            if fds[1].revents != 0 {
                return
            }
            let fd = Self.accept(listener)
            if fd < 0 {
                switch errno {
                case EINTR, EAGAIN, ECONNABORTED, EPROTO:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    usleep(10_000)  // out of descriptors or memory: let some connections end first
                    continue
                default:
                    return
                }
            }
            let registered = state.withLock { state in
                guard state.phase == .running else {
                    return false
                }
                state.connections.insert(fd)
                return true
            }
            guard registered else {
                close(fd)
                return
            }
            let served = spawn(stackSize: Self.threadStackSize) { [self] in
                state.withLock { $0.connectionsServed += 1 }
                var connection = Connection(socket: Socket(fd: fd), core: self, stopFD: stopFD)
                connection.run()
                state.withLock { _ = $0.connections.remove(fd) }
                close(fd)
            }
            if !served {
                // No thread for it even after waiting: the client sees its connection close rather
                // than wait for an answer that would never come.
                state.withLock { _ = $0.connections.remove(fd) }
                close(fd)
            }
        }
    }

    /// Runs `body` on a thread of its own; false when none could be made. A thread that cannot be
    /// made yet (EAGAIN: the process, its user or the machine at a limit for a moment) is tried
    /// again for up to a second. Foundation's `Thread.start()` ignores pthread_create's failure, so
    /// a connection would be taken and never served.
    private func spawn(stackSize: Int, _ body: @escaping @Sendable () -> Void) -> Bool {
        let attributes = UnsafeMutablePointer<pthread_attr_t>.allocate(capacity: 1)
        pthread_attr_init(attributes)
        defer {
            pthread_attr_destroy(attributes)
            attributes.deallocate()
        }
        pthread_attr_setstacksize(attributes, stackSize)
        pthread_attr_setdetachstate(attributes, Int32(PTHREAD_CREATE_DETACHED))
        threads.enter()
        let group = threads
        let context = Unmanaged.passRetained(ThreadBody {
            body()
            group.leave()
        }).toOpaque()
        for attempt in 0..<100 {
            var thread = pthread_t()
            let result = pthread_create(&thread, attributes, { context in
                Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context)
            if result == 0 {
                return true
            }
            guard result == EAGAIN, attempt < 99 else { break }
            usleep(10_000)
        }
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        threads.leave()
        return false
    }

    private typealias Accept4 = @convention(c) (
        Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?, Int32
    ) -> Int32

    /// accept4(2), looked up at run time because the Glibc module does not export it.
    private static let accept4: Accept4? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "accept4") else {
            return nil
        }
        return unsafeBitCast(symbol, to: Accept4.self)
    }()

    /// Accepts a connection with close-on-exec set atomically, so a process that the test spawns
    /// meanwhile does not inherit it and keep it open after the server closes it.
    private static func accept(_ listener: Int32) -> Int32 {
        if let accept4 {
            return accept4(listener, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
        }
        let fd = Glibc.accept(listener, nil, nil)
        if fd >= 0 {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        return fd
    }

    /// Raises the soft limit on open descriptors to the hard limit: a test that holds a thousand
    /// connections needs two thousand descriptors in one process, client ends included.
    private static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else {
            return
        }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// What a thread of `ServerCore.spawn` runs, passed to pthread_create as its context.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
