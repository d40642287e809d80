import Glibc

/// The service manager's notify protocol (`sd_notify`), for `runner watch` under systemd
/// `Type=notify`: one datagram per message to the Unix socket named by `NOTIFY_SOCKET` (a path,
/// or `@name` for the abstract namespace). `READY=1` once the watcher takes files, `STATUS=…`
/// lines, `WATCHDOG=1` every `watchdogInterval`, `STOPPING=1` when a stop begins.
///
/// Written here rather than linked from libsystemd: the protocol is a datagram of text.
package final class SystemdNotifier: Sendable {
    private let fd: Int32
    private let address: [UInt8]
    /// Half of `WATCHDOG_USEC` (when it is set and `WATCHDOG_PID`, if set, is this process):
    /// how often `WATCHDOG=1` is due.
    package let watchdogInterval: Duration?

    /// The notifier `environment` asks for, or nil when `NOTIFY_SOCKET` is not set (or names
    /// nothing usable: then there is no service manager to tell).
    package static func fromEnvironment(_ environment: [String: String]) -> SystemdNotifier? {
        guard let socketName = environment["NOTIFY_SOCKET"], !socketName.isEmpty else { return nil }
        var watchdog: Duration?
        if let text = environment["WATCHDOG_USEC"], let usec = Int64(text), usec > 0,
            environment["WATCHDOG_PID"].flatMap({ Int32($0) }).map({ $0 == getpid() }) ?? true
        {
            watchdog = .microseconds(usec / 2)
        }
        return SystemdNotifier(socket: socketName, watchdogInterval: watchdog)
    }

    init?(socket name: String, watchdogInterval: Duration?) {
        var path = Array(name.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }  // the abstract namespace
        let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        guard path.count < capacity, name.hasPrefix("/") || name.hasPrefix("@") else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.address = path
        self.watchdogInterval = watchdogInterval
    }

    deinit { close(fd) }

    /// Sends one message (lines such as `READY=1\nSTATUS=…`); failures are ignored, as sd_notify's are.
    package func send(_ message: String) {
        var storage = sockaddr_un()
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { raw in
            raw.copyBytes(from: address)
            if address.count < raw.count { raw[address.count] = 0 }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2
        // A path counts its terminating NUL; an abstract name does not.
        let length = socklen_t(pathOffset + address.count + (address.first == 0 ? 0 : 1))
        let bytes = Array(message.utf8)
        _ = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, length) }
            }
        }
    }
}
