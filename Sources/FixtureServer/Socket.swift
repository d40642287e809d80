import Foundation
import Glibc

/// A connected TCP socket, used with blocking calls from the one thread that owns it.
///
/// It never closes its descriptor: the server does that, so that `stop()` can shut down every open
/// connection without racing a close (see `ServerCore`).
struct Socket {
    let fd: Int32

    /// How a wait ended.
    enum WaitResult {
        /// The time ran out.
        case elapsed
        /// The server is stopping.
        case stopped
        /// The client closed or reset its end.
        case peerClosed
    }

    // MARK: - Options

    /// Sends small writes (headers, trickled bytes) at once instead of batching them.
    func setNoDelay() {
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Makes the coming close send a reset (RST) instead of an orderly shutdown (FIN).
    func setResetOnClose() {
        var option = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
    }

    /// Ends the sending direction, so the client reads end-of-stream.
    func shutdownWrite() {
        shutdown(fd, Int32(SHUT_WR))
    }

    // MARK: - Reading and writing

    /// Reads what is available (blocking until something is) and appends it to `buffer`.
    /// Returns false at end of stream or on an error.
    func receive(appendingTo buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[0..<count])
                return true
            }
            if count < 0 && errno == EINTR {
                continue
            }
            return false
        }
    }

    /// Sends all the bytes. Returns false when the connection broke (never raises SIGPIPE).
    @discardableResult
    func send<Bytes: ContiguousBytes>(_ bytes: Bytes) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let sent = Glibc.send(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset, Int32(MSG_NOSIGNAL))
                if sent > 0 {
                    offset += sent
                } else if sent < 0 && errno == EINTR {
                    continue
                } else {
                    return false
                }
            }
            return true
        }
    }

    @discardableResult
    func send(_ text: String) -> Bool {
        send(Array(text.utf8))
    }

    // MARK: - Waiting

    /// Waits `milliseconds` (forever when nil), returning early when the server stops (`stopFD`
    /// becomes readable) or the client hangs up. Bytes the client sends meanwhile stay unread.
    func wait(milliseconds: Int?, stopFD: Int32) -> WaitResult {
        let deadline = milliseconds.map { Self.monotonicMilliseconds() + $0 }
        while true {
            var timeout: Int32 = -1
            if let deadline {
                let left = deadline - Self.monotonicMilliseconds()
                if left <= 0 {
                    return .elapsed
                }
                timeout = Int32(clamping: left)
            }
            var fds = [
                pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0),
                pollfd(fd: fd, events: Self.pollReadHangUp, revents: 0),
            ]
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 {
                if errno == EINTR {
                    continue
                }
                return .stopped
            }
            if fds[0].revents != 0 {
                return .stopped
            }
            if fds[1].revents != 0 {
                return .peerClosed
            }
        }
    }

    /// Reads and discards what the client sends until it closes, the server stops or `milliseconds` pass.
    func drain(milliseconds: Int, stopFD: Int32) {
        let deadline = Self.monotonicMilliseconds() + milliseconds
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let left = deadline - Self.monotonicMilliseconds()
            guard left > 0 else {
                return
            }
            var fds = [
                pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0),
                pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&fds, nfds_t(fds.count), Int32(clamping: left))
            if ready < 0 && errno == EINTR {
                continue
            }
            guard ready > 0, fds[0].revents == 0 else {
                return
            }
            let count = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 || (count < 0 && errno != EINTR) {
                return
            }
        }
    }

    /// Reads and discards what has already arrived, without waiting.
    func discardPending() {
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        while scratch.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
    }

    /// POLLRDHUP (the peer closed its end), which the Glibc module does not export; with POLLHUP
    /// and POLLERR, which poll reports anyway, it catches a client that gave up.
    private static let pollReadHangUp: Int16 = 0x2000

    static func monotonicMilliseconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now.tv_sec * 1000 + now.tv_nsec / 1_000_000
    }
}
