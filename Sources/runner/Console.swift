import Foundation
import Glibc
import RunnerKit

/// Writing to the terminal: whole lines, unbuffered, safe from any thread. Control characters
/// other than line breaks and tabs are shown escaped: a message may carry a key or a server's
/// words, which must not drive the terminal.
enum Console {
    /// "812 bytes", "96 KiB", "250 MiB": a size for people.
    static func size(_ bytes: Int) -> String {
        if bytes < 10 * 1024 { return "\(bytes) bytes" }
        if bytes < 10 * 1024 * 1024 { return "\(bytes / 1024) KiB" }
        return "\(bytes / (1024 * 1024)) MiB"
    }

    private static let lock = NSLock()

    static func out(_ text: String) {
        let text = Printable.escaped(text, keepingLineBreaks: true)
        write(1, text.hasSuffix("\n") ? text : text + "\n")
    }

    static func err(_ text: String) {
        let text = Printable.escaped(text, keepingLineBreaks: true)
        write(2, text.hasSuffix("\n") ? text : text + "\n")
    }

    /// One line about a job or from a server: line breaks are escaped too, so it stays one line.
    static func errLine(_ text: String) { err(Printable.escaped(text)) }

    /// Raw text to standard output, no newline added (progress lines).
    static func outRaw(_ text: String) { write(1, text) }

    static func error(_ message: String) { err("Error: \(message)") }

    static var stdoutIsTerminal: Bool { isatty(1) == 1 }

    /// Set once a write found its reader gone (EPIPE): nothing more is written there.
    nonisolated(unsafe) private static var closed: Set<Int32> = []  // guarded by `lock`

    private static func write(_ fd: Int32, _ text: String) {
        lock.lock()
        defer { lock.unlock() }
        if closed.contains(fd) { return }
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EPIPE { closed.insert(fd) }
            if n <= 0 { return }
            offset += n
        }
    }
}
