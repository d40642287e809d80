import Foundation
import Glibc
import RunnerKit

/// Turns signals into a callback, instead of the default of dying.
///
/// The signal's handler is in place when `init` returns, so a signal sent from then on cannot be
/// lost: the handler (which may run on any thread) writes the signal's number to a pipe, and a
/// thread of its own reads the pipe and calls the watchers. A signal no watcher watches any more
/// is dropped, as if ignored. Programs the runner starts get the default dispositions back (a
/// caught signal is reset by exec; the spawn also resets the mask).
final class SignalWatcher: Sendable {
    private let signals: [Int32]
    private let id: UInt64
    private let received = Locked<Int32>(0)

    init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        self.signals = signals
        let received = self.received
        id = SignalRelay.shared.add(signals) { number in
            received.withLock { $0 = number }
            handler(number)
        }
    }

    /// Stops watching and returns the signal that arrived, if one did.
    func stop() -> Int32? {
        SignalRelay.shared.remove(id)
        let number = received.value
        return number == 0 ? nil : number
    }

    /// The signals as a stream, caught from now on (one that arrives before anyone reads the
    /// stream is kept for the reader); caught until the stream ends.
    static func stream(of signals: [Int32]) -> AsyncStream<Int32> {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        let watcher = SignalWatcher(signals: signals) { continuation.yield($0) }
        continuation.onTermination = { _ in _ = watcher.stop() }
        return stream
    }

    /// Waits until one of the signals arrives.
    static func wait(for signals: [Int32]) async -> Int32 {
        let stream = AsyncStream<Int32> { continuation in
            let watcher = SignalWatcher(signals: signals) { continuation.yield($0) }
            continuation.onTermination = { _ in _ = watcher.stop() }
        }
        for await number in stream { return number }
        return 0
    }
}

/// The write end of the relay's pipe, for the signal handler: a C function cannot capture it.
/// Set once, before the first handler is installed, and never changed.
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1

/// The process's one pipe from signal handlers to watchers.
private final class SignalRelay: Sendable {
    static let shared = SignalRelay()

    private struct Watchers {
        var next: UInt64 = 1
        var handlers: [UInt64: (signals: [Int32], handler: @Sendable (Int32) -> Void)] = [:]
        var installed: Set<Int32> = []
    }
    private let watchers = Locked(Watchers())

    private init() {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { fatalError("runner: no pipe for signals: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        // Never blocks the handler: a full pipe (signals far faster than they are read) drops one.
        _ = fcntl(ends[1], F_SETFL, O_NONBLOCK)
        signalPipeWriteEnd = ends[1]
        let readEnd = ends[0]
        let thread = Thread { [self] in relay(from: readEnd) }
        thread.name = "runner-signals"
        thread.start()
    }

    func add(_ signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) -> UInt64 {
        watchers.withLock { watchers in
            let id = watchers.next
            watchers.next += 1
            watchers.handlers[id] = (signals, handler)
            for number in signals where !watchers.installed.contains(number) {
                var action = sigaction()
                action.__sigaction_handler.sa_handler = { number in
                    let saved = errno
                    var byte = UInt8(truncatingIfNeeded: number)
                    _ = write(signalPipeWriteEnd, &byte, 1)
                    errno = saved
                }
                action.sa_flags = SA_RESTART
                sigemptyset(&action.sa_mask)
                sigaction(number, &action, nil)
                watchers.installed.insert(number)
            }
            return id
        }
    }

    func remove(_ id: UInt64) {
        _ = watchers.withLock { $0.handlers.removeValue(forKey: id) }
    }

    private func relay(from readEnd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16)
        while true {
            let count = read(readEnd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            for byte in buffer[..<count] {
                let number = Int32(byte)
                let handlers = watchers.withLock { watchers in
                    watchers.handlers.sorted { $0.key < $1.key }.compactMap { $0.value.signals.contains(number) ? $0.value.handler : nil }
                }
                for handler in handlers { handler(number) }
            }
        }
    }
}
